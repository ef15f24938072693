package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
)

func TestOIDCValidToken(t *testing.T) {
	p := newFakeProvider(t)
	o := newTestOIDC(t, p, nil)
	tok := sign(t, p.key(), p.claims(testAudience, "alice", "acme"))
	id, err := o.Authenticate(bearerRequest("Bearer " + tok))
	if err != nil {
		t.Fatal(err)
	}
	want := mcphandler.Identity{Subject: "alice", Tenant: "acme", Role: "editor", Scopes: []string{"mcp:tools", "files:read"}}
	if id.Subject != want.Subject || id.Tenant != want.Tenant || id.Role != want.Role || !slices.Equal(id.Scopes, want.Scopes) || id.Attributes != nil {
		t.Fatalf("identity = %+v, want %+v", id, want)
	}
	if _, ok := SubjectTokenFrom(id); ok {
		t.Fatal("subject token kept without KeepSubjectToken")
	}
	// The scheme is case-insensitive; an audience array containing ours is fine.
	c := p.claims(testAudience, "alice", "acme")
	c["aud"] = []string{"https://other.example.com", testAudience}
	if _, err := o.Authenticate(bearerRequest("bearer " + sign(t, p.key(), c))); err != nil {
		t.Fatal(err)
	}
}

func TestOIDCClaimMapping(t *testing.T) {
	p := newFakeProvider(t)
	o := newTestOIDC(t, p, func(c *OIDCConfig) { c.TenantClaim = "org_id" })
	c := p.claims(testAudience, "bob", "")
	delete(c, "tenant")
	delete(c, "role")
	delete(c, "scope")
	c["org_id"] = "org_42"
	c["roles"] = []string{"admin"}
	c["scp"] = []string{"a", "b"}
	id, err := o.Authenticate(bearerRequest("Bearer " + sign(t, p.key(), c)))
	if err != nil {
		t.Fatal(err)
	}
	if id.Tenant != "org_42" || id.Role != "admin" || !slices.Equal(id.Scopes, []string{"a", "b"}) {
		t.Fatalf("identity = %+v", id)
	}
	// Without ClaimsMapping.Roles, two roles have no order: the default
	// mapping gives none rather than the one written first.
	for _, roles := range [][]string{{"admin", "viewer"}, {"viewer", "admin"}} {
		c["roles"] = roles
		id, err = o.Authenticate(bearerRequest("Bearer " + sign(t, p.key(), c)))
		if err != nil || id.Role != "" {
			t.Fatalf("roles %v: %+v, %v", roles, id, err)
		}
	}

	// A numeric tenant claim is kept exactly.
	c["org_id"] = 12345678901234567
	id, err = o.Authenticate(bearerRequest("Bearer " + sign(t, p.key(), c)))
	if err != nil || id.Tenant != "12345678901234567" {
		t.Fatalf("numeric tenant: %+v, %v", id, err)
	}

	// No tenant: 403 (ErrForbidden), not 401.
	delete(c, "org_id")
	_, err = o.Authenticate(bearerRequest("Bearer " + sign(t, p.key(), c)))
	if !errors.Is(err, ErrNoTenant) || !errors.Is(err, mcphandler.ErrForbidden) {
		t.Fatalf("no tenant: err = %v", err)
	}

	// No subject.
	c = p.claims(testAudience, "", "acme")
	c["org_id"] = "x"
	delete(c, "sub")
	_, err = o.Authenticate(bearerRequest("Bearer " + sign(t, p.key(), c)))
	assertReason(t, err, "claims")
}

func TestOIDCCustomMapper(t *testing.T) {
	p := newFakeProvider(t)
	var got Claims
	o := newTestOIDC(t, p, func(cfg *OIDCConfig) {
		cfg.Claims = func(ctx context.Context, c Claims) (mcphandler.Identity, error) {
			got = c
			var extra struct {
				Email string `json:"email"`
			}
			if err := c.Decode(&extra); err != nil {
				return mcphandler.Identity{}, err
			}
			return mcphandler.Identity{Subject: c.Subject, Tenant: "personal:" + extra.Email}, nil
		}
	})
	c := p.claims(testAudience, "carol", "")
	delete(c, "tenant")
	c["email"] = "carol@example.com"
	id, err := o.Authenticate(bearerRequest("Bearer " + sign(t, p.key(), c)))
	if err != nil {
		t.Fatal(err)
	}
	if id.Tenant != "personal:carol@example.com" || got.Issuer != p.issuer() || !slices.Equal(got.Audience, []string{testAudience}) ||
		got.Expiry.IsZero() || got.Raw["email"] != "carol@example.com" {
		t.Fatalf("identity %+v, claims %+v", id, got)
	}
}

func TestOIDCRefusals(t *testing.T) {
	p := newFakeProvider(t)
	o := newTestOIDC(t, p, nil)
	good := func() map[string]any { return p.claims(testAudience, "alice", "acme") }
	with := func(k string, v any) map[string]any {
		c := good()
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	now := time.Now()
	other := newSignKey(t, "key-1") // same kid, other key
	stranger := newSignKey(t, "key-unknown")
	cases := []struct {
		name, tok, reason string
	}{
		{"expired", sign(t, p.key(), with("exp", now.Add(-time.Minute).Unix())), "expired"},
		{"no exp", sign(t, p.key(), with("exp", nil)), "expired"},
		{"not yet valid", sign(t, p.key(), with("nbf", now.Add(time.Hour).Unix())), "not_yet_valid"},
		{"wrong issuer", sign(t, p.key(), with("iss", "https://evil.example.com")), "issuer"},
		{"wrong audience", sign(t, p.key(), with("aud", "https://other.example.com/mcp")), "audience"},
		{"no audience", sign(t, p.key(), with("aud", nil)), "audience"},
		{"bad signature", tamper(sign(t, p.key(), good())), "signature"},
		{"other key same kid", sign(t, other, good()), "signature"},
		{"unknown kid", sign(t, stranger, good()), "signature"},
		{"alg none", unsigned(t, "key-1", good()), "algorithm"},
		{"alg HS256", hs256(t, "key-1", []byte("0123456789abcdef0123456789abcdef"), good()), "algorithm"},
		{"not a JWT", "opaque-token-value", "malformed"},
		{"garbage JWT", "a.b.c", "malformed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := o.Authenticate(bearerRequest("Bearer " + tc.tok))
			assertReason(t, err, tc.reason)
			if strings.Contains(err.Error(), tc.tok) || !strings.HasPrefix(err.Error(), "auth: ") {
				t.Fatalf("error text %q", err)
			}
		})
	}
}

func TestOIDCNoToken(t *testing.T) {
	p := newFakeProvider(t)
	o := newTestOIDC(t, p, nil)
	tok := sign(t, p.key(), p.claims(testAudience, "alice", "acme"))

	// The query string is never read.
	r := bearerRequest("")
	r.URL.RawQuery = "access_token=" + tok
	if _, err := o.Authenticate(r); !errors.Is(err, ErrNoToken) {
		t.Fatalf("query token: err = %v", err)
	}
	if _, err := o.Authenticate(bearerRequest("Basic dXNlcjpwYXNz")); !errors.Is(err, ErrNoToken) {
		t.Fatalf("basic: err = %v", err)
	}
	for _, h := range []string{"Bearer", "Bearer ", "Bearer a b", "Bearer \"x\""} {
		if _, err := o.Authenticate(bearerRequest(h)); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("%q: err = %v", h, err)
		}
	}
	r = bearerRequest("Bearer " + tok)
	r.Header.Add("Authorization", "Bearer "+tok)
	_, err := o.Authenticate(r)
	assertReason(t, err, "malformed")
}

func TestOIDCKeyRotation(t *testing.T) {
	p := newFakeProvider(t)
	o := newTestOIDC(t, p, nil)
	old := p.key()
	c := p.claims(testAudience, "alice", "acme")
	if _, err := o.Authenticate(bearerRequest("Bearer " + sign(t, old, c))); err != nil {
		t.Fatal(err)
	}
	for range 5 { // cached: no more fetches
		if _, err := o.Authenticate(bearerRequest("Bearer " + sign(t, old, c))); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.jwksHits.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times, want 1", n)
	}

	// The provider rotates to a new key: picked up without a restart.
	fresh := newSignKey(t, "key-2")
	p.rotate(fresh)
	if _, err := o.Authenticate(bearerRequest("Bearer " + sign(t, fresh, c))); err != nil {
		t.Fatalf("token of the new key: %v", err)
	}
	if n := p.jwksHits.Load(); n != 2 {
		t.Fatalf("JWKS fetched %d times, want 2", n)
	}
	// The retired key no longer verifies. go-oidc wakes the request that
	// fetched the new set a moment before it replaces its cache, so for
	// that moment the old set still answers: give it a second.
	var err error
	for deadline := time.Now().Add(time.Second); ; time.Sleep(time.Millisecond) {
		_, err = o.Authenticate(bearerRequest("Bearer " + sign(t, old, c)))
		if err != nil || time.Now().After(deadline) {
			break
		}
	}
	assertReason(t, err, "signature")
}

func TestOIDCKeysUnavailable(t *testing.T) {
	p := newFakeProvider(t)
	o := newTestOIDC(t, p, nil)
	p.setJWKSFail(true)
	_, err := o.Authenticate(bearerRequest("Bearer " + sign(t, p.key(), p.claims(testAudience, "alice", "acme"))))
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInvalidToken) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	p.setJWKSFail(false)
	if _, err := o.Authenticate(bearerRequest("Bearer " + sign(t, p.key(), p.claims(testAudience, "alice", "acme")))); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
}

func TestOIDCKeepSubjectToken(t *testing.T) {
	p := newFakeProvider(t)
	o := newTestOIDC(t, p, func(c *OIDCConfig) { c.KeepSubjectToken = true })
	tok := sign(t, p.key(), p.claims(testAudience, "alice", "acme"))
	id, err := o.Authenticate(bearerRequest("Bearer " + tok))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := SubjectTokenFrom(id)
	if !ok || got != tok {
		t.Fatalf("SubjectTokenFrom = %q, %v", got, ok)
	}
	// The token does not show when the identity is printed, encoded or logged.
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "attrs", id.Attributes["github.com/mcphandler/mcphandler/auth.subjectToken"], "id", id)
	js, _ := json.Marshal(id)
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s", id, id, id, id.Attributes), string(js), logged.String()} {
		if strings.Contains(s, tok) {
			t.Fatalf("token leaked in %q", s)
		}
	}
}

func TestNewOIDCConfigErrors(t *testing.T) {
	p := newFakeProvider(t)
	ctx := t.Context()
	for name, cfg := range map[string]OIDCConfig{
		"no issuer":    {Audience: testAudience},
		"no audience":  {Issuer: p.issuer(), HTTPClient: p.client()},
		"alg none":     {Issuer: p.issuer(), Audience: testAudience, SupportedSigningAlgs: []string{"none"}, HTTPClient: p.client()},
		"alg HS256":    {Issuer: p.issuer(), Audience: testAudience, SupportedSigningAlgs: []string{"HS256"}, HTTPClient: p.client()},
		"wrong issuer": {Issuer: p.issuer() + "/", Audience: testAudience, HTTPClient: p.client()},
		"no discovery": {Issuer: p.issuer() + "/nowhere", Audience: testAudience, HTTPClient: p.client()},
	} {
		if _, err := NewOIDC(ctx, cfg); err == nil || !strings.HasPrefix(err.Error(), "auth: ") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	// An explicit algorithm list is enforced: ES256 tokens are refused
	// when only RS256 is accepted.
	o := newTestOIDC(t, p, func(c *OIDCConfig) { c.SupportedSigningAlgs = []string{"RS256"} })
	_, err := o.Authenticate(bearerRequest("Bearer " + sign(t, p.key(), p.claims(testAudience, "a", "b"))))
	assertReason(t, err, "algorithm")
}

func TestOIDCConcurrent(t *testing.T) {
	p := newFakeProvider(t)
	o := newTestOIDC(t, p, nil)
	fresh := newSignKey(t, "key-2")
	p.rotate(p.key(), fresh)
	toks := []string{
		sign(t, p.key(), p.claims(testAudience, "alice", "acme")),
		sign(t, fresh, p.claims(testAudience, "bob", "globex")),
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			if _, err := o.Authenticate(bearerRequest("Bearer " + toks[i%2])); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
