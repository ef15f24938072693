package auth

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcphandler/mcphandler/internal/oidctest"
)

// fakeProvider is an OpenID provider and OAuth authorization server for
// tests: the discovery and rotating JWKS of internal/oidctest, with an
// introspection endpoint and a token endpoint (client credentials and
// token exchange) added.
type fakeProvider struct {
	*oidctest.Provider
	t testing.TB

	clientID, clientSecret string
	serviceToken           string

	mu         sync.Mutex
	introspect map[string]any // token → introspection answer (a map, or json.RawMessage as is)
	forms      []url.Values   // token endpoint requests
	auths      []string       // their Authorization headers
	introAuths []string       // Authorization headers of introspection requests

	introspectHits, tokenHits, exchangeHits atomic.Int64
	jwksHits                                *atomic.Int64
}

type signKey = oidctest.Key

func newSignKey(t testing.TB, kid string) *signKey { return oidctest.NewKey(t, kid) }

func newFakeProvider(t testing.TB) *fakeProvider {
	t.Helper()
	p := &fakeProvider{
		Provider:     oidctest.New(t),
		t:            t,
		clientID:     "mcp-server",
		clientSecret: "s3cret:with/odd chars",
		serviceToken: "svc-token-1",
		introspect:   map[string]any{},
	}
	p.jwksHits = &p.JWKSHits
	p.SetDiscovery("introspection_endpoint", p.Issuer()+"/introspect")
	p.Handle("POST /introspect", p.introspectHandler)
	p.SetTokenHandler(p.token)
	return p
}

func (p *fakeProvider) issuer() string { return p.Issuer() }

func (p *fakeProvider) client() *http.Client { return p.Client() }

// rotate publishes only the given keys from now on.
func (p *fakeProvider) rotate(keys ...*signKey) { p.Rotate(keys...) }

func (p *fakeProvider) setJWKSFail(fail bool) { p.SetJWKSFail(fail) }

func (p *fakeProvider) key() *signKey { return p.Key() }

// setIntrospection sets the answer for tok: a map, or a json.RawMessage
// sent as is.
func (p *fakeProvider) setIntrospection(tok string, answer any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.introspect[tok] = answer
}

func (p *fakeProvider) basicOK(r *http.Request) bool {
	id, secret, ok := r.BasicAuth()
	if !ok {
		return false
	}
	id, err1 := url.QueryUnescape(id)
	secret, err2 := url.QueryUnescape(secret)
	return err1 == nil && err2 == nil && id == p.clientID && secret == p.clientSecret
}

func (p *fakeProvider) introspectHandler(w http.ResponseWriter, r *http.Request) {
	p.introspectHits.Add(1)
	p.mu.Lock()
	p.introAuths = append(p.introAuths, r.Header.Get("Authorization"))
	p.mu.Unlock()
	if !p.basicOK(r) && r.Header.Get("Authorization") != "Bearer "+p.serviceToken {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_client"})
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	answer, ok := p.introspect[r.PostForm.Get("token")]
	p.mu.Unlock()
	if !ok {
		answer = map[string]any{"active": false}
	}
	writeJSON(w, http.StatusOK, answer)
}

func (p *fakeProvider) token(w http.ResponseWriter, r *http.Request) {
	p.tokenHits.Add(1)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.forms = append(p.forms, maps.Clone(r.PostForm))
	p.auths = append(p.auths, r.Header.Get("Authorization"))
	p.mu.Unlock()
	authed := p.basicOK(r) || (r.PostForm.Get("client_id") == p.clientID && r.PostForm.Get("client_secret") == p.clientSecret)
	if !authed {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_client"})
		return
	}
	switch r.PostForm.Get("grant_type") {
	case "client_credentials":
		writeJSON(w, http.StatusOK, map[string]any{"access_token": p.serviceToken, "token_type": "Bearer", "expires_in": 3600})
	case GrantTypeTokenExchange:
		n := p.exchangeHits.Add(1)
		if r.PostForm.Get("subject_token") == "refused-subject-token" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_grant", "error_description": "subject token refused"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"access_token":      fmt.Sprintf("upstream-%d", n),
			"issued_token_type": TokenTypeAccessToken,
			"token_type":        "Bearer",
			"expires_in":        300,
			"scope":             r.PostForm.Get("scope"),
		})
	default:
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "unsupported_grant_type"})
	}
}

func (p *fakeProvider) lastTokenRequest() (url.Values, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.forms) == 0 {
		return nil, ""
	}
	return p.forms[len(p.forms)-1], p.auths[len(p.auths)-1]
}

func (p *fakeProvider) lastIntrospectionAuth() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.introAuths) == 0 {
		return ""
	}
	return p.introAuths[len(p.introAuths)-1]
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// claims returns valid claims for subject in tenant, for audience.
func (p *fakeProvider) claims(audience, subject, tenant string) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss":    p.issuer(),
		"aud":    audience,
		"sub":    subject,
		"tenant": tenant,
		"role":   "editor",
		"scope":  "mcp:tools files:read",
		"iat":    now.Unix(),
		"exp":    now.Add(time.Hour).Unix(),
	}
}

// sign signs claims with k, as an access token (typ at+jwt).
func sign(t testing.TB, k *signKey, claims map[string]any) string {
	t.Helper()
	return oidctest.SignWith(t, k, "at+jwt", claims)
}

// unsigned returns an "alg: none" JWT of claims.
func unsigned(t testing.TB, kid string, claims map[string]any) string {
	t.Helper()
	hdr, _ := json.Marshal(map[string]any{"alg": "none", "typ": "JWT", "kid": kid})
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc(hdr) + "." + enc(payload) + "."
}

// hs256 returns a JWT of claims signed with HMAC-SHA256 and secret.
func hs256(t testing.TB, kid string, secret []byte, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: jose.JSONWebKey{Key: secret, KeyID: kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := jws.CompactSerialize()
	return s
}

// tamper flips one character of the token's signature.
func tamper(tok string) string {
	i := strings.LastIndexByte(tok, '.') + 5
	b := []byte(tok)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// bearerRequest returns a GET request with the given Authorization value
// ("" for none).
func bearerRequest(authz string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "https://api.example.com/mcp", nil)
	if authz != "" {
		r.Header.Set("Authorization", authz)
	}
	return r
}

const testAudience = "https://api.example.com/mcp"

func newTestOIDC(t *testing.T, p *fakeProvider, mod func(*OIDCConfig)) *OIDC {
	t.Helper()
	cfg := OIDCConfig{Issuer: p.issuer(), Audience: testAudience, HTTPClient: p.client()}
	if mod != nil {
		mod(&cfg)
	}
	o, err := NewOIDC(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func assertReason(t *testing.T, err error, reason string) {
	t.Helper()
	var te *TokenError
	if !errors.As(err, &te) || te.Reason != reason || !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("err = %v, want a TokenError %q", err, reason)
	}
}

func newTestIntrospection(t *testing.T, p *fakeProvider, mod func(*IntrospectionConfig)) *Introspection {
	t.Helper()
	cfg := IntrospectionConfig{
		Endpoint:     p.issuer() + "/introspect",
		ClientID:     p.clientID,
		ClientSecret: p.clientSecret,
		Audience:     testAudience,
		HTTPClient:   p.client(),
	}
	if mod != nil {
		mod(&cfg)
	}
	in, err := NewIntrospection(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func activeAnswer(p *fakeProvider, sub, tenant string, exp time.Time) map[string]any {
	return map[string]any{
		"active":    true,
		"sub":       sub,
		"tenant":    tenant,
		"scope":     "mcp:tools",
		"aud":       []string{testAudience},
		"iss":       p.issuer(),
		"client_id": "some-client",
		"exp":       exp.Unix(),
	}
}
