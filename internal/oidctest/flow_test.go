package oidctest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"
)

const testRedirect = "https://rp.example/callback"

// noFollow is a client that shows redirects instead of following them.
var noFollow = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// authorize sends an authorization request for the client with an S256
// challenge of verifier and the given more parameters, and returns the
// status and the query of the redirect (nil without one).
func authorize(t *testing.T, p *Provider, verifier string, more url.Values) (int, url.Values) {
	t.Helper()
	q := url.Values{
		"client_id": {p.ClientID}, "redirect_uri": {testRedirect}, "response_type": {"code"}, "state": {"st"},
		"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"},
	}
	for k, v := range more {
		q[k] = v
	}
	resp, err := noFollow.Get(p.Issuer() + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if loc == nil || resp.Header.Get("Location") == "" {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, loc.Query()
}

// post posts form to the provider's path with the client's credentials
// in the form, and returns the status and the JSON answer.
func post(t *testing.T, p *Provider, path string, form url.Values) (int, map[string]any) {
	t.Helper()
	form.Set("client_id", p.ClientID)
	form.Set("client_secret", p.ClientSecret)
	resp, err := http.Post(p.Issuer()+path, "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// signIn runs the code flow with the more authorization parameters and
// returns the token response.
func signIn(t *testing.T, p *Provider, more url.Values) map[string]any {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	status, q := authorize(t, p, verifier, more)
	if status != http.StatusFound || q.Get("code") == "" {
		t.Fatalf("authorize: %d %v", status, q)
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {q.Get("code")}, "redirect_uri": {testRedirect}, "code_verifier": {verifier}}
	if r := more["resource"]; len(r) == 1 {
		form.Set("resource", r[0])
	}
	status, tok := post(t, p, "/token", form)
	if status != http.StatusOK {
		t.Fatalf("token: %d %v", status, tok)
	}
	return tok
}

// payload returns the claims of a JWT, unverified, and its header's typ.
func payload(t *testing.T, jwt string) (map[string]any, string) {
	t.Helper()
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", jwt)
	}
	var hdr struct {
		Typ string `json:"typ"`
	}
	var claims map[string]any
	for i, v := range []any{&hdr, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatal(err)
		}
	}
	return claims, hdr.Typ
}

// TestSignInNext: queued people sign in in order, one per authorization,
// then SignInAs's person again.
func TestSignInNext(t *testing.T) {
	p := New(t, testRedirect)
	p.SignInAs(map[string]any{"sub": "default"})
	p.SignInNext(map[string]any{"sub": "ada"}, map[string]any{"sub": "bob"})
	// A refused request takes nobody from the queue.
	if status, _ := authorize(t, p, "v", url.Values{"code_challenge_method": {"plain"}}); status != http.StatusBadRequest {
		t.Fatalf("plain challenge: %d", status)
	}
	for _, want := range []string{"ada", "bob", "default", "default"} {
		tok := signIn(t, p, nil)
		claims, _ := payload(t, tok["id_token"].(string))
		if claims["sub"] != want {
			t.Errorf("signed in %v, want %s", claims["sub"], want)
		}
	}
	p.SignInAs(nil)
	p.SignInNext(map[string]any{"sub": "eve"})
	if tok := signIn(t, p, nil); tok == nil {
		t.Fatal("queue ignored without SignInAs")
	}
	if status, _ := authorize(t, p, "v", nil); status != http.StatusBadRequest {
		t.Errorf("nobody to sign in: %d", status)
	}
}

// TestResource: the authorization request's resource must be one
// absolute URI without a fragment, and the code redeems only with the
// same resource, if any; every resource requested is recorded.
func TestResource(t *testing.T) {
	p := New(t, testRedirect)
	p.SignInAs(map[string]any{"sub": "ada"})
	for name, res := range map[string][]string{
		"two":      {"https://a.example/mcp", "https://b.example/mcp"},
		"relative": {"/mcp"},
		"fragment": {"https://a.example/mcp#x"},
		"empty":    {""},
	} {
		status, q := authorize(t, p, "v", url.Values{"resource": res})
		if status != http.StatusFound || q.Get("error") != "invalid_target" || q.Get("state") != "st" || q.Get("code") != "" {
			t.Errorf("%s: %d %v", name, status, q)
		}
	}
	p.resources = nil
	const res = "https://a.example/mcp"
	signIn(t, p, url.Values{"resource": {res}})
	signIn(t, p, nil)
	signIn(t, p, url.Values{"resource": {"urn:example:b"}})
	if got := p.Resources(); !slices.Equal(got, []string{res, "urn:example:b"}) {
		t.Errorf("resources %q", got)
	}
	for name, tc := range map[string]struct{ auth, token []string }{
		"other":           {[]string{res}, []string{"https://b.example/mcp"}},
		"two":             {[]string{res}, []string{res, res}},
		"none authorized": {nil, []string{res}},
	} {
		verifier := oauth2.GenerateVerifier()
		_, q := authorize(t, p, verifier, url.Values{"resource": tc.auth})
		status, body := post(t, p, "/token", url.Values{"grant_type": {"authorization_code"}, "code": {q.Get("code")},
			"redirect_uri": {testRedirect}, "code_verifier": {verifier}, "resource": tc.token})
		if status != http.StatusBadRequest || body["error"] != "invalid_target" {
			t.Errorf("%s: %d %v", name, status, body)
		}
	}
}

// TestBounds: the provider keeps its newest codes and resources only.
func TestBounds(t *testing.T) {
	p := New(t, testRedirect)
	p.SignInAs(map[string]any{"sub": "ada"})
	p.limit = 3
	var codes []string
	for i := range 5 {
		_, q := authorize(t, p, "v", url.Values{"resource": {fmt.Sprintf("https://r%d.example", i)}})
		codes = append(codes, q.Get("code"))
	}
	if got := p.Codes(); !slices.Equal(got, codes[2:]) {
		t.Errorf("codes %q, want %q", got, codes[2:])
	}
	if got := p.Resources(); !slices.Equal(got, []string{"https://r2.example", "https://r3.example", "https://r4.example"}) {
		t.Errorf("resources %q", got)
	}
	if len(p.codes.m) != 3 {
		t.Errorf("%d codes kept", len(p.codes.m))
	}
	var tokens []map[string]any
	for range 4 {
		tokens = append(tokens, signIn(t, p, nil))
	}
	if len(p.refresh.m) != 3 || len(p.access.m) != 3 {
		t.Errorf("%d refresh and %d access tokens kept", len(p.refresh.m), len(p.access.m))
	}
	if status, _ := refresh(t, p, tokens[0]["refresh_token"].(string), nil); status != http.StatusBadRequest {
		t.Errorf("oldest refresh token: %d", status)
	}
	if status, _ := refresh(t, p, tokens[1]["refresh_token"].(string), nil); status != http.StatusOK {
		t.Errorf("a kept refresh token: %d", status)
	}
}

// TestAccessToken: the code flow answers an RFC 9068 access token for the
// resource, carrying the person's claims, signed by the provider's key.
func TestAccessToken(t *testing.T) {
	p := New(t, testRedirect)
	p.SignInAs(map[string]any{"sub": "ada", "tenant": "acme", "roles": []any{"editor"}, "aud": "not-this", "exp": 1})
	const res = "https://upstream.example/mcp"
	tok := signIn(t, p, url.Values{"resource": {res}, "scope": {"openid  files:read"}, "nonce": {"nn"}})
	if tok["token_type"] != "Bearer" || tok["expires_in"] != float64(3600) || tok["scope"] != "openid files:read" {
		t.Errorf("token response %v", tok)
	}
	raw := tok["access_token"].(string)
	jws, err := jose.ParseSigned(raw, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jws.Verify(p.Key().Priv.Public()); err != nil {
		t.Fatalf("signature: %v", err)
	}
	claims, typ := payload(t, raw)
	if typ != "at+jwt" {
		t.Errorf("typ %q", typ)
	}
	iat, _ := claims["iat"].(float64)
	if claims["iss"] != p.Issuer() || claims["sub"] != "ada" || claims["tenant"] != "acme" || claims["aud"] != res ||
		claims["client_id"] != p.ClientID || claims["scope"] != "openid files:read" || claims["exp"] != iat+3600 ||
		claims["jti"] == "" || claims["nonce"] != nil || fmt.Sprint(claims["roles"]) != "[editor]" {
		t.Errorf("claims %v", claims)
	}
	if time.Since(time.Unix(int64(iat), 0)) > time.Minute {
		t.Errorf("iat %v", iat)
	}

	// Without a resource the audience is the client; the TTL is the
	// test's; every token has its own jti.
	p.AccessTTL = 2 * time.Second
	tok2 := signIn(t, p, nil)
	claims2, _ := payload(t, tok2["access_token"].(string))
	if claims2["aud"] != p.ClientID || claims2["scope"] != nil || claims2["exp"] != claims2["iat"].(float64)+2 ||
		tok2["expires_in"] != float64(2) || claims2["jti"] == claims["jti"] {
		t.Errorf("claims %v, response %v", claims2, tok2)
	}
}

// refresh posts a refresh_token grant with the more parameters.
func refresh(t *testing.T, p *Provider, rt string, more url.Values) (int, map[string]any) {
	t.Helper()
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}}
	for k, v := range more {
		form[k] = v
	}
	return post(t, p, "/token", form)
}

// TestRefresh: a refresh token redeems once for a new access token of the
// same person and resource and a new refresh token; redeeming one twice
// revokes the whole grant.
func TestRefresh(t *testing.T) {
	p := New(t, testRedirect)
	p.SetTokenHandler(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "not this", http.StatusTeapot) })
	p.SignInAs(map[string]any{"sub": "ada", "tenant": "acme"})
	const res = "https://upstream.example/mcp"
	tok := signIn(t, p, url.Values{"resource": {res}, "scope": {"files:read files:write"}})
	first, _ := payload(t, tok["access_token"].(string))
	rt1, _ := tok["refresh_token"].(string)
	if rt1 == "" {
		t.Fatalf("no refresh token: %v", tok)
	}
	status, tok2 := refresh(t, p, rt1, url.Values{"resource": {res}})
	if status != http.StatusOK {
		t.Fatalf("refresh: %d %v", status, tok2)
	}
	rt2, _ := tok2["refresh_token"].(string)
	claims, typ := payload(t, tok2["access_token"].(string))
	if rt2 == "" || rt2 == rt1 || typ != "at+jwt" || tok2["token_type"] != "Bearer" || tok2["expires_in"] != float64(3600) {
		t.Errorf("refresh response %v", tok2)
	}
	if claims["sub"] != "ada" || claims["tenant"] != "acme" || claims["aud"] != res || claims["scope"] != "files:read files:write" ||
		claims["client_id"] != p.ClientID || claims["jti"] == first["jti"] {
		t.Errorf("refreshed claims %v", claims)
	}
	if p.RefreshHits.Load() != 1 {
		t.Errorf("%d refresh hits", p.RefreshHits.Load())
	}

	// The client authenticates with HTTP Basic too; a narrower scope
	// narrows the access token only; no resource is the grant's.
	req, _ := http.NewRequest(http.MethodPost, p.Issuer()+"/token", strings.NewReader(url.Values{
		"grant_type": {"refresh_token"}, "refresh_token": {rt2}, "scope": {"files:read"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(p.ClientID), url.QueryEscape(p.ClientSecret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tok3 map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&tok3)
	resp.Body.Close()
	claims, _ = payload(t, tok3["access_token"].(string))
	if resp.StatusCode != http.StatusOK || claims["scope"] != "files:read" || claims["aud"] != res {
		t.Fatalf("basic, narrower: %d %v %v", resp.StatusCode, tok3, claims)
	}
	rt3 := tok3["refresh_token"].(string)
	if status, body := refresh(t, p, rt3, url.Values{"scope": {"files:read admin"}}); status != http.StatusBadRequest || body["error"] != "invalid_scope" {
		t.Errorf("wider scope: %d %v", status, body)
	}
	status, body := refresh(t, p, rt3, nil)
	if status != http.StatusOK {
		t.Fatalf("refresh after a refused scope: %d %v", status, body)
	}
	rt4 := body["refresh_token"].(string)
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt4}, "client_id": {p.ClientID}, "client_secret": {"no"}}
	resp, err = http.PostForm(p.Issuer()+"/token", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong secret: %d", resp.StatusCode)
	}

	// Reuse of a rotated token revokes the grant: the newest token fails
	// too. Unknown tokens fail.
	if status, body := refresh(t, p, rt2, nil); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Errorf("reuse: %d %v", status, body)
	}
	if status, body := refresh(t, p, rt4, nil); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Errorf("after reuse: %d %v", status, body)
	}
	if status, body := refresh(t, p, "unknown", nil); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Errorf("unknown: %d %v", status, body)
	}
}

// TestRefreshRefused: SetRefreshFail and another resource refuse a
// refresh without spending the token.
func TestRefreshRefused(t *testing.T) {
	p := New(t, testRedirect)
	p.SignInAs(map[string]any{"sub": "ada"})
	const res = "https://upstream.example/mcp"
	rt := signIn(t, p, url.Values{"resource": {res}})["refresh_token"].(string)
	p.SetRefreshFail(true)
	if status, body := refresh(t, p, rt, nil); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Errorf("refresh fail: %d %v", status, body)
	}
	p.SetRefreshFail(false)
	for name, res := range map[string][]string{"other": {"https://other.example/mcp"}, "two": {res, res}, "empty": {""}} {
		if status, body := refresh(t, p, rt, url.Values{"resource": res}); status != http.StatusBadRequest || body["error"] != "invalid_target" {
			t.Errorf("%s resource: %d %v", name, status, body)
		}
	}
	if status, body := refresh(t, p, rt, url.Values{"resource": {res}}); status != http.StatusOK {
		t.Errorf("refresh after refusals: %d %v", status, body)
	}
	if n := p.RefreshHits.Load(); n != 5 {
		t.Errorf("%d refresh hits", n)
	}
}

// TestRefreshOffline: without RefreshTokens, only the scope
// offline_access gets a refresh token.
func TestRefreshOffline(t *testing.T) {
	p := New(t, testRedirect)
	p.SignInAs(map[string]any{"sub": "ada"})
	p.RefreshTokens = false
	if tok := signIn(t, p, url.Values{"scope": {"openid"}}); tok["refresh_token"] != nil {
		t.Errorf("refresh token without offline_access: %v", tok)
	}
	if tok := signIn(t, p, url.Values{"scope": {"openid offline_access"}}); tok["refresh_token"] == nil {
		t.Errorf("no refresh token with offline_access: %v", tok)
	}
}

// TestRevoke: revoking a refresh token revokes its grant, an access
// token itself only; RevokeAll revokes a person's grants; the endpoint
// wants the client and answers 200 for any token.
func TestRevoke(t *testing.T) {
	p := New(t, testRedirect)
	p.SignInNext(map[string]any{"sub": "ada"}, map[string]any{"sub": "ada"}, map[string]any{"sub": "bob"})
	ada1, ada2, bob := signIn(t, p, nil), signIn(t, p, nil), signIn(t, p, nil)
	str := func(tok map[string]any, k string) string { return tok[k].(string) }

	// A rotated refresh token is not revoked.
	status, ada1b := refresh(t, p, str(ada1, "refresh_token"), nil)
	if status != http.StatusOK || p.Revoked(str(ada1, "refresh_token")) {
		t.Fatalf("rotation: %d %v", status, ada1b)
	}
	if status, _ := post(t, p, "/revoke", url.Values{"token": {str(ada1b, "refresh_token")}, "token_type_hint": {"refresh_token"}}); status != http.StatusOK {
		t.Fatalf("revoke: %d", status)
	}
	for _, tok := range []string{str(ada1, "refresh_token"), str(ada1, "access_token"), str(ada1b, "refresh_token"), str(ada1b, "access_token")} {
		if !p.Revoked(tok) {
			t.Errorf("not revoked with its grant: %.20s", tok)
		}
	}
	if status, body := refresh(t, p, str(ada1b, "refresh_token"), nil); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Errorf("revoked refresh: %d %v", status, body)
	}

	// An access token alone.
	if status, _ := post(t, p, "/revoke", url.Values{"token": {str(ada2, "access_token")}}); status != http.StatusOK {
		t.Fatalf("revoke: %d", status)
	}
	if !p.Revoked(str(ada2, "access_token")) || p.Revoked(str(ada2, "refresh_token")) {
		t.Error("access token revocation")
	}
	for name, form := range map[string]url.Values{"unknown": {"token": {"nope"}}, "unknown JWT": {"token": {"a.b.c"}}} {
		if status, _ := post(t, p, "/revoke", form); status != http.StatusOK {
			t.Errorf("%s: %d", name, status)
		}
	}
	if status, body := post(t, p, "/revoke", url.Values{}); status != http.StatusBadRequest || body["error"] != "invalid_request" {
		t.Errorf("no token: %d %v", status, body)
	}
	resp, err := http.PostForm(p.Issuer()+"/revoke", url.Values{"token": {str(bob, "refresh_token")}, "client_id": {p.ClientID}, "client_secret": {"no"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || p.Revoked(str(bob, "refresh_token")) {
		t.Errorf("wrong secret: %d", resp.StatusCode)
	}
	if p.RevokeHits.Load() != 6 {
		t.Errorf("%d revoke hits", p.RevokeHits.Load())
	}

	// From the provider's side: ada's grants and codes go, bob's stay.
	p.SignInNext(map[string]any{"sub": "ada"})
	verifier := oauth2.GenerateVerifier()
	_, q := authorize(t, p, verifier, nil)
	p.RevokeAll("ada")
	status, body := post(t, p, "/token", url.Values{"grant_type": {"authorization_code"}, "code": {q.Get("code")},
		"redirect_uri": {testRedirect}, "code_verifier": {verifier}})
	if status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Errorf("code after RevokeAll: %d %v", status, body)
	}
	if !p.Revoked(str(ada2, "refresh_token")) || p.Revoked(str(bob, "refresh_token")) || p.Revoked(str(bob, "access_token")) || p.Revoked("nope") {
		t.Error("RevokeAll")
	}
	if status, _ := refresh(t, p, str(ada2, "refresh_token"), nil); status != http.StatusBadRequest {
		t.Errorf("refresh after RevokeAll: %d", status)
	}
	if status, _ := refresh(t, p, str(bob, "refresh_token"), nil); status != http.StatusOK {
		t.Errorf("another person's refresh after RevokeAll: %d", status)
	}
}

// TestMetadata: the RFC 8414 document and OpenID discovery name the same
// endpoints and PKCE, grant and revocation support; a test can remove a
// member from both, or the RFC 8414 document.
func TestMetadata(t *testing.T) {
	p := New(t)
	get := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Get(p.Issuer() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&doc)
		return resp.StatusCode, doc
	}
	const as, oidc = "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"
	for _, path := range []string{as, oidc} {
		status, doc := get(path)
		if status != http.StatusOK || doc["issuer"] != p.Issuer() || doc["authorization_endpoint"] != p.Issuer()+"/authorize" ||
			doc["token_endpoint"] != p.Issuer()+"/token" || doc["revocation_endpoint"] != p.Issuer()+"/revoke" ||
			doc["jwks_uri"] != p.Issuer()+"/jwks" || fmt.Sprint(doc["code_challenge_methods_supported"]) != "[S256]" ||
			fmt.Sprint(doc["grant_types_supported"]) != "[authorization_code refresh_token]" {
			t.Errorf("%s: %d %v", path, status, doc)
		}
	}
	p.SetDiscovery("code_challenge_methods_supported", nil)
	p.SetDiscovery("introspection_endpoint", p.Issuer()+"/introspect")
	for _, path := range []string{as, oidc} {
		if _, doc := get(path); doc["code_challenge_methods_supported"] != nil || doc["introspection_endpoint"] != p.Issuer()+"/introspect" {
			t.Errorf("%s after SetDiscovery: %v", path, doc)
		}
	}
	p.SetMetadata8414(false)
	if status, _ := get(as); status != http.StatusNotFound {
		t.Errorf("RFC 8414 off: %d", status)
	}
	if status, _ := get(oidc); status != http.StatusOK {
		t.Errorf("discovery with RFC 8414 off: %d", status)
	}
	p.SetMetadata8414(true)
	if status, _ := get(as); status != http.StatusOK {
		t.Errorf("RFC 8414 on again: %d", status)
	}
}
