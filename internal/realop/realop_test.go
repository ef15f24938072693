package realop_test

import (
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/auth"
	"github.com/mcphandler/mcphandler/internal/realop"
)

const redirect = "https://client.example.test/cb" // never reached: the Go flow stops at it

// TestCodeFlowIDToken: the authorization code flow with PKCE, signed in
// on the provider's own login page, gives an ID token that go-oidc
// verifies, with the nonce of the request and the user's extra claims.
func TestCodeFlowIDToken(t *testing.T) {
	p := realop.Start(t, realop.Config{Users: []realop.User{alice}, Clients: []realop.Client{webClient(redirect)}})
	r := newRP(t, p, webClient(redirect), oidc.ScopeOpenID)

	g := r.start()
	tok := r.exchange(t, g, r.code(t, g, "alice", "alice-password"))
	raw, _ := tok.Extra("id_token").(string)
	idt, err := r.provider.Verifier(&oidc.Config{ClientID: "web"}).Verify(t.Context(), raw)
	if err != nil {
		t.Fatalf("ID token: %v", err)
	}
	if idt.Subject != "u-alice" || idt.Nonce != g.nonce {
		t.Errorf("ID token sub %q nonce %q, want u-alice and %q", idt.Subject, idt.Nonce, g.nonce)
	}
	var c struct{ Tenant, Role string }
	if err := idt.Claims(&c); err != nil {
		t.Fatal(err)
	}
	if c.Tenant != "acme" || c.Role != "admin" {
		t.Errorf("ID token tenant %q role %q, want acme and admin", c.Tenant, c.Role)
	}
	if got := audience(claims(t, raw)); !reflect.DeepEqual(got, []string{"web"}) {
		t.Errorf("ID token aud %q, want [web]: no resource was asked for", got)
	}
}

// TestPKCE: a code is redeemed only with the verifier of its challenge.
func TestPKCE(t *testing.T) {
	p := realop.Start(t, realop.Config{Users: []realop.User{alice}, Clients: []realop.Client{webClient(redirect)}})
	r := newRP(t, p, webClient(redirect), oidc.ScopeOpenID)
	g := r.start()
	code := r.code(t, g, "alice", "alice-password")
	for name, opts := range map[string][]oauth2.AuthCodeOption{
		"no verifier":    nil,
		"wrong verifier": {oauth2.VerifierOption(oauth2.GenerateVerifier())},
	} {
		_, err := r.oauth.Exchange(r.ctx(t), code, opts...)
		if re := (*oauth2.RetrieveError)(nil); !errors.As(err, &re) || re.Response.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %v, want a 400", name, err)
		}
	}
}

// TestLoginRefused: a wrong password gets the login form again, with the
// provider's message, and no redirect.
func TestLoginRefused(t *testing.T) {
	p := realop.Start(t, realop.Config{Users: []realop.User{alice}, Clients: []realop.Client{webClient(redirect)}})
	r := newRP(t, p, webClient(redirect), oidc.ScopeOpenID)
	back, page := r.login(t, r.start().url, "alice", "not-her-password")
	if back != nil || !strings.Contains(page, "username or password wrong") {
		t.Fatalf("wrong password: redirect %v, page:\n%s", back, page)
	}
}

// TestAccessTokenAuthOIDC: the JWT access token of a flow that asked for
// the resource is taken by auth.OIDC configured with that resource as its
// audience, and ClaimsMapping maps the user's tenant and role; an OIDC
// for another resource refuses it.
func TestAccessTokenAuthOIDC(t *testing.T) {
	p := realop.Start(t, realop.Config{
		Users: []realop.User{alice}, Clients: []realop.Client{webClient(redirect)},
		AccessTTL: 90 * time.Second,
	})
	r := newRP(t, p, webClient(redirect), oidc.ScopeOpenID)
	g := r.start(oauth2.SetAuthURLParam("resource", resource))
	tok := r.exchange(t, g, r.code(t, g, "alice", "alice-password"))

	c := claims(t, tok.AccessToken)
	if got := audience(c); !reflect.DeepEqual(got, []string{"web", resource}) {
		t.Errorf("access token aud %q, want [web %s]", got, resource)
	}
	if c["sub"] != "u-alice" || c["tenant"] != "acme" || c["role"] != "admin" || c["client_id"] != "web" {
		t.Errorf("access token claims %v", c)
	}
	if ttl := c["exp"].(float64) - c["iat"].(float64); ttl < 88 || ttl > 91 {
		t.Errorf("access token lives %vs, want AccessTTL 90s", ttl)
	}
	// zitadel takes both tokens' "aud" from one value: the ID token names
	// the resource too, beside its azp.
	idc := claims(t, tok.Extra("id_token").(string))
	if got := audience(idc); !reflect.DeepEqual(got, []string{"web", resource}) || idc["azp"] != "web" {
		t.Errorf("ID token aud %q azp %v, want [web %s] and web", got, idc["azp"], resource)
	}

	mapping := auth.ClaimsMapping{Roles: []string{"viewer", "admin"}, DefaultRole: "viewer"}
	o, err := auth.NewOIDC(t.Context(), auth.OIDCConfig{Issuer: p.Issuer(), Audience: resource, Claims: mapping.Map})
	if err != nil {
		t.Fatal(err)
	}
	id, err := o.Authenticate(bearer(t, tok.AccessToken))
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	want := mcphandler.Identity{Subject: "u-alice", Tenant: "acme", Role: "admin"}
	if id.Subject != want.Subject || id.Tenant != want.Tenant || id.Role != want.Role {
		t.Errorf("identity %+v, want %+v", id, want)
	}
	if d := time.Until(id.Expires); d < 80*time.Second || d > 91*time.Second {
		t.Errorf("identity expires in %v, want about 90s", d)
	}

	other, err := auth.NewOIDC(t.Context(), auth.OIDCConfig{Issuer: p.Issuer(), Audience: "https://other.example.test/mcp", Claims: mapping.Map})
	if err != nil {
		t.Fatal(err)
	}
	var te *auth.TokenError
	if _, err := other.Authenticate(bearer(t, tok.AccessToken)); !errors.As(err, &te) || te.Reason != "audience" {
		t.Errorf("OIDC of another resource: %v, want a TokenError audience", err)
	}
}

// TestAudienceWithoutResource: without a resource parameter, "aud" is the
// client ID alone, as in zitadel's example.
func TestAudienceWithoutResource(t *testing.T) {
	p := realop.Start(t, realop.Config{Users: []realop.User{alice}, Clients: []realop.Client{webClient(redirect)}})
	r := newRP(t, p, webClient(redirect), oidc.ScopeOpenID)
	g := r.start()
	tok := r.exchange(t, g, r.code(t, g, "alice", "alice-password"))
	if got := audience(claims(t, tok.AccessToken)); !reflect.DeepEqual(got, []string{"web"}) {
		t.Errorf("access token aud %q, want [web]", got)
	}
}

func bearer(t *testing.T, tok string) *http.Request {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, resource, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	return req
}

// TestRefreshAndRevocation: with offline_access, the code exchange gives
// a refresh token; a refresh rotates it and gives an access token for the
// same resource and claims; the used one is refused; a revoked one is
// refused.
func TestRefreshAndRevocation(t *testing.T) {
	p := realop.Start(t, realop.Config{Users: []realop.User{alice}, Clients: []realop.Client{webClient(redirect)}})
	r := newRP(t, p, webClient(redirect), oidc.ScopeOpenID, oidc.ScopeOfflineAccess)
	g := r.start(oauth2.SetAuthURLParam("resource", resource))
	tok := r.exchange(t, g, r.code(t, g, "alice", "alice-password"))
	if tok.RefreshToken == "" {
		t.Fatal("no refresh token with offline_access")
	}

	tokenURL := r.oauth.Endpoint.TokenURL
	refresh := func(rt string) (int, map[string]any) {
		return r.post(t, tokenURL, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}})
	}
	status, answer := refresh(tok.RefreshToken)
	if status != http.StatusOK {
		t.Fatalf("refresh: %d %v", status, answer)
	}
	rt2, _ := answer["refresh_token"].(string)
	at2, _ := answer["access_token"].(string)
	if rt2 == "" || rt2 == tok.RefreshToken || at2 == "" || at2 == tok.AccessToken {
		t.Fatalf("refresh answered %v, want a new access token and a new refresh token", answer)
	}
	o, err := auth.NewOIDC(t.Context(), auth.OIDCConfig{Issuer: p.Issuer(), Audience: resource,
		Claims: auth.ClaimsMapping{Roles: []string{"viewer", "admin"}}.Map})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := o.Authenticate(bearer(t, at2)); err != nil || id.Tenant != "acme" || id.Role != "admin" {
		t.Errorf("refreshed access token: %+v, %v", id, err)
	}

	if status, answer := refresh(tok.RefreshToken); status != http.StatusBadRequest || answer["error"] != "invalid_grant" {
		t.Errorf("used refresh token: %d %v, want 400 invalid_grant", status, answer)
	}

	revocation, _ := r.discovery(t, "revocation_endpoint").(string)
	if status, answer := r.post(t, revocation, url.Values{"token": {rt2}, "token_type_hint": {"refresh_token"}}); status != http.StatusOK {
		t.Fatalf("revocation: %d %v", status, answer)
	}
	if status, answer := refresh(rt2); status != http.StatusBadRequest || answer["error"] != "invalid_grant" {
		t.Errorf("revoked refresh token: %d %v, want 400 invalid_grant", status, answer)
	}
}

// TestNoRefreshToken: no refresh token without offline_access, nor for a
// client without the refresh grant.
func TestNoRefreshToken(t *testing.T) {
	noRefresh := realop.Client{ID: "plain", Secret: "plain-secret", RedirectURIs: []string{redirect}}
	p := realop.Start(t, realop.Config{Users: []realop.User{alice}, Clients: []realop.Client{webClient(redirect), noRefresh}})
	for name, r := range map[string]*rp{
		"without offline_access": newRP(t, p, webClient(redirect), oidc.ScopeOpenID),
		"client without Refresh": newRP(t, p, noRefresh, oidc.ScopeOpenID, oidc.ScopeOfflineAccess),
	} {
		g := r.start()
		if tok := r.exchange(t, g, r.code(t, g, "alice", "alice-password")); tok.RefreshToken != "" {
			t.Errorf("%s: a refresh token", name)
		}
	}
}

// TestDiscovery: the OpenID discovery document names what the tests use;
// RFC 8414's well-known path is not served.
func TestDiscovery(t *testing.T) {
	p := realop.Start(t, realop.Config{Clients: []realop.Client{webClient(redirect)}})
	r := newRP(t, p, webClient(redirect))
	for member, want := range map[string]string{
		"authorization_endpoint": p.Issuer() + "/auth",
		"token_endpoint":         p.Issuer() + "/oauth/token",
		"revocation_endpoint":    p.Issuer() + "/revoke",
	} {
		if got := r.discovery(t, member); got != want {
			t.Errorf("%s %v, want %s", member, got, want)
		}
	}
	for member, want := range map[string]string{
		"code_challenge_methods_supported":      "S256",
		"grant_types_supported":                 "refresh_token",
		"token_endpoint_auth_methods_supported": "client_secret_basic",
	} {
		got, _ := r.discovery(t, member).([]any)
		if !slices.Contains(got, any(want)) {
			t.Errorf("%s %v, want %s in it", member, got, want)
		}
	}
	resp, err := r.hc.Get(p.Issuer() + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("RFC 8414 metadata: %s, want 404", resp.Status)
	}
}
