package auth

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestIntrospectionActiveAndCache(t *testing.T) {
	p := newFakeProvider(t)
	in := newTestIntrospection(t, p, nil)
	clock := &fakeClock{t: time.Now()}
	in.now = clock.now
	p.setIntrospection("opaque-alice", activeAnswer(p, "alice", "acme", clock.now().Add(time.Hour)))

	for range 3 {
		id, err := in.Authenticate(bearerRequest("Bearer opaque-alice"))
		if err != nil {
			t.Fatal(err)
		}
		if id.Subject != "alice" || id.Tenant != "acme" || !slices.Equal(id.Scopes, []string{"mcp:tools"}) {
			t.Fatalf("identity %+v", id)
		}
		id.Scopes[0] = "corrupted" // must not reach the cache
	}
	if n := p.introspectHits.Load(); n != 1 {
		t.Fatalf("introspection endpoint hit %d times, want 1 (cached)", n)
	}
	// The cache holds the token's hash, not the token.
	if in.cache.len() != 1 {
		t.Fatalf("cache has %d entries", in.cache.len())
	}
	if _, ok := in.cache.m[tokenKey("opaque-alice")]; !ok {
		t.Fatal("cache not keyed by the token's SHA-256")
	}

	// After CacheTTL (30s by default), the server is asked again.
	clock.advance(31 * time.Second)
	if _, err := in.Authenticate(bearerRequest("Bearer opaque-alice")); err != nil {
		t.Fatal(err)
	}
	if n := p.introspectHits.Load(); n != 2 {
		t.Fatalf("introspection endpoint hit %d times, want 2", n)
	}

	// Revoked at the server: refused once the cached answer expires.
	p.setIntrospection("opaque-alice", map[string]any{"active": false})
	clock.advance(31 * time.Second)
	_, err := in.Authenticate(bearerRequest("Bearer opaque-alice"))
	assertReason(t, err, "inactive")
}

func TestIntrospectionCacheBoundedByExpiry(t *testing.T) {
	p := newFakeProvider(t)
	in := newTestIntrospection(t, p, nil)
	clock := &fakeClock{t: time.Now()}
	in.now = clock.now
	p.setIntrospection("short", activeAnswer(p, "alice", "acme", clock.now().Add(5*time.Second)))
	if _, err := in.Authenticate(bearerRequest("Bearer short")); err != nil {
		t.Fatal(err)
	}
	clock.advance(6 * time.Second) // past exp, within CacheTTL
	_, err := in.Authenticate(bearerRequest("Bearer short"))
	assertReason(t, err, "expired") // asked again; the answer's exp is past
	if n := p.introspectHits.Load(); n != 2 {
		t.Fatalf("hits = %d, want 2", n)
	}
}

func TestIntrospectionRefusals(t *testing.T) {
	p := newFakeProvider(t)
	in := newTestIntrospection(t, p, func(c *IntrospectionConfig) { c.Issuer = p.issuer() })
	exp := time.Now().Add(time.Hour)

	_, err := in.Authenticate(bearerRequest("Bearer unknown-token"))
	assertReason(t, err, "inactive")
	_, err = in.Authenticate(bearerRequest("Bearer unknown-token"))
	assertReason(t, err, "inactive")
	if n := p.introspectHits.Load(); n != 2 {
		t.Fatalf("inactive answers cached: hits = %d", n)
	}

	wrongAud := activeAnswer(p, "alice", "acme", exp)
	wrongAud["aud"] = "https://other.example.com"
	p.setIntrospection("wrong-aud", wrongAud)
	_, err = in.Authenticate(bearerRequest("Bearer wrong-aud"))
	assertReason(t, err, "audience")

	noAud := activeAnswer(p, "alice", "acme", exp)
	delete(noAud, "aud")
	p.setIntrospection("no-aud", noAud)
	_, err = in.Authenticate(bearerRequest("Bearer no-aud"))
	assertReason(t, err, "audience")

	wrongIss := activeAnswer(p, "alice", "acme", exp)
	wrongIss["iss"] = "https://evil.example.com"
	p.setIntrospection("wrong-iss", wrongIss)
	_, err = in.Authenticate(bearerRequest("Bearer wrong-iss"))
	assertReason(t, err, "issuer")

	expired := activeAnswer(p, "alice", "acme", time.Now().Add(-time.Second))
	p.setIntrospection("expired", expired)
	_, err = in.Authenticate(bearerRequest("Bearer expired"))
	assertReason(t, err, "expired")

	noTenant := activeAnswer(p, "alice", "", exp)
	delete(noTenant, "tenant")
	p.setIntrospection("no-tenant", noTenant)
	if _, err = in.Authenticate(bearerRequest("Bearer no-tenant")); !errors.Is(err, ErrNoTenant) {
		t.Fatalf("no tenant: %v", err)
	}

	if _, err := in.Authenticate(bearerRequest("")); !errors.Is(err, ErrNoToken) {
		t.Fatalf("no token: %v", err)
	}
}

func TestIntrospectionClientAuth(t *testing.T) {
	p := newFakeProvider(t)
	p.setIntrospection("opaque", activeAnswer(p, "alice", "acme", time.Now().Add(time.Hour)))

	// Basic authentication (no TokenURL).
	in := newTestIntrospection(t, p, nil)
	if _, err := in.Authenticate(bearerRequest("Bearer opaque")); err != nil {
		t.Fatal(err)
	}
	if a := p.lastIntrospectionAuth(); !strings.HasPrefix(a, "Basic ") {
		t.Fatalf("introspection Authorization = %q, want Basic", a)
	}

	// Client credentials (TokenURL): a bearer token from the token
	// endpoint, fetched once and reused.
	in = newTestIntrospection(t, p, func(c *IntrospectionConfig) {
		c.TokenURL = p.issuer() + "/token"
		c.CacheTTL = -1
	})
	for range 3 {
		if _, err := in.Authenticate(bearerRequest("Bearer opaque")); err != nil {
			t.Fatal(err)
		}
	}
	if a := p.lastIntrospectionAuth(); a != "Bearer "+p.serviceToken {
		t.Fatalf("introspection Authorization = %q", a)
	}
	if n := p.tokenHits.Load(); n != 1 {
		t.Fatalf("token endpoint hit %d times, want 1", n)
	}
	if n := p.introspectHits.Load(); n != 4 {
		t.Fatalf("introspection hit %d times, want 4 (cache off)", n)
	}
	form, _ := p.lastTokenRequest()
	if form.Get("grant_type") != "client_credentials" {
		t.Fatalf("token request %v", form)
	}

	// Wrong client secret: the endpoint says 401; the token is not judged.
	in = newTestIntrospection(t, p, func(c *IntrospectionConfig) { c.ClientSecret = "wrong" })
	_, err := in.Authenticate(bearerRequest("Bearer opaque"))
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInvalidToken) || strings.Contains(err.Error(), "opaque") {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

func TestIntrospectionKeepSubjectToken(t *testing.T) {
	p := newFakeProvider(t)
	p.setIntrospection("opaque-keep", activeAnswer(p, "alice", "acme", time.Now().Add(time.Hour)))
	in := newTestIntrospection(t, p, func(c *IntrospectionConfig) { c.KeepSubjectToken = true })
	for range 2 {
		id, err := in.Authenticate(bearerRequest("Bearer opaque-keep"))
		if err != nil {
			t.Fatal(err)
		}
		if tok, ok := SubjectTokenFrom(id); !ok || tok != "opaque-keep" {
			t.Fatalf("SubjectTokenFrom = %q, %v", tok, ok)
		}
	}
	for _, e := range in.cache.m {
		if _, ok := SubjectTokenFrom(e.v); ok {
			t.Fatal("the raw token is stored in the cache")
		}
	}
}

func TestNewIntrospectionErrors(t *testing.T) {
	for name, cfg := range map[string]IntrospectionConfig{
		"no endpoint":       {ClientID: "x"},
		"relative endpoint": {Endpoint: "/introspect", ClientID: "x"},
		"no client id":      {Endpoint: "https://as.example.com/introspect"},
	} {
		if _, err := NewIntrospection(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
