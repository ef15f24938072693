package auth

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler"
)

func TestAPIKeys(t *testing.T) {
	src := map[string]mcphandler.Identity{
		"key-ci-0123456789abcdef": {Subject: "svc:ci", Tenant: "acme", Role: "editor", Scopes: []string{"mcp:tools"}},
		"key-bi-0123456789abcdef": {Subject: "svc:bi", Tenant: "globex", Role: "viewer"},
		"":                        {Subject: "nobody"},
	}
	keys := NewAPIKeys(src)
	delete(src, "key-ci-0123456789abcdef") // copied

	id, err := keys.Authenticate(bearerRequest("Bearer key-ci-0123456789abcdef"))
	if err != nil || id.Subject != "svc:ci" || id.Tenant != "acme" {
		t.Fatalf("id %+v, err %v", id, err)
	}
	id.Scopes[0] = "corrupted"
	id, _ = keys.Authenticate(bearerRequest("Bearer key-ci-0123456789abcdef"))
	if id.Scopes[0] != "mcp:tools" {
		t.Fatal("a caller changed the stored identity")
	}
	if id, err := keys.Authenticate(bearerRequest("Bearer key-bi-0123456789abcdef")); err != nil || id.Subject != "svc:bi" {
		t.Fatalf("id %+v, err %v", id, err)
	}
	_, err = keys.Authenticate(bearerRequest("Bearer key-ci-0123456789abcdeF"))
	assertReason(t, err, "unrecognized")
	if strings.Contains(err.Error(), "key-ci") {
		t.Fatal("error contains the key")
	}
	if _, err := keys.Authenticate(bearerRequest("")); !errors.Is(err, ErrNoToken) {
		t.Fatalf("no token: %v", err)
	}
	if _, err := keys.Authenticate(bearerRequest("Bearer ")); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("empty: %v", err)
	}
	for _, e := range keys.entries {
		if e.id.Subject == "nobody" {
			t.Fatal("the empty key was kept")
		}
	}
}

func TestFirst(t *testing.T) {
	p := newFakeProvider(t)
	o := newTestOIDC(t, p, nil)
	keys := NewAPIKeys(map[string]mcphandler.Identity{"svc-key-0123456789": {Subject: "svc", Tenant: "acme"}})
	jwt := sign(t, p.key(), p.claims(testAudience, "alice", "acme"))
	c := p.claims(testAudience, "alice", "acme")
	c["exp"] = 1
	expired := sign(t, p.key(), c)

	for _, auth := range []mcphandler.AuthenticateFunc{First(keys.Authenticate, o.Authenticate), First(o.Authenticate, nil, keys.Authenticate)} {
		if id, err := auth(bearerRequest("Bearer svc-key-0123456789")); err != nil || id.Subject != "svc" {
			t.Fatalf("API key: %+v %v", id, err)
		}
		if id, err := auth(bearerRequest("Bearer " + jwt)); err != nil || id.Subject != "alice" {
			t.Fatalf("JWT: %+v %v", id, err)
		}
		// The OIDC verdict ("expired") tells more than "unrecognized".
		_, err := auth(bearerRequest("Bearer " + expired))
		assertReason(t, err, "expired")
		if _, err := auth(bearerRequest("")); !errors.Is(err, ErrNoToken) {
			t.Fatalf("no token: %v", err)
		}
	}

	// Forbidden wins; an error quoting the token is redacted but keeps its kind.
	leaky := func(r *http.Request) (mcphandler.Identity, error) {
		return mcphandler.Identity{}, errors.New("bad token " + r.Header.Get("Authorization"))
	}
	forbidden := func(r *http.Request) (mcphandler.Identity, error) {
		return mcphandler.Identity{}, errorWrap("auth: forbidden for "+r.Header.Get("Authorization"), mcphandler.ErrForbidden)
	}
	_, err := First(keys.Authenticate, leaky)(bearerRequest("Bearer secret-token-xyz"))
	assertReason(t, err, "redacted")
	if strings.Contains(err.Error(), "secret-token-xyz") {
		t.Fatal("token leaked")
	}
	_, err = First(leaky, forbidden, keys.Authenticate)(bearerRequest("Bearer secret-token-xyz"))
	if !errors.Is(err, mcphandler.ErrForbidden) || strings.Contains(err.Error(), "secret-token-xyz") {
		t.Fatalf("err = %v", err)
	}
	if _, err := First()(bearerRequest("Bearer x")); !errors.Is(err, ErrNoToken) {
		t.Fatalf("no authenticators: %v", err)
	}
}
