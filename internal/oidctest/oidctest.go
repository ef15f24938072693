// Package oidctest is an OpenID provider and OAuth 2.1 authorization
// server for tests, the way net/http/httptest is a server: discovery (OpenID
// and RFC 8414), a JWKS that can rotate, the authorization code flow with
// PKCE (S256) issuing signed ID tokens and JWT access tokens (RFC 9068)
// for a resource (RFC 8707), refresh tokens that rotate, and revocation
// (RFC 7009).
//
// Its authorization endpoint signs in whoever the test chose with
// [Provider.SignInAs] or [Provider.SignInNext] at once, without a page,
// and redirects back with a code; the token endpoint checks the client,
// the code (single use, bound to the client, redirect URI, PKCE challenge
// and resource), and answers an ID token carrying the nonce of the
// authorization request, an access token for the resource (the client
// without one) and a refresh token. A refresh token redeems once for a
// new pair; redeemed again, it revokes every token of its grant.
// Everything a relying party must refuse can be produced: [Provider.Sign]
// signs any claims, [Provider.Codes] lists issued codes so a test can
// replay one, [Provider.SetRefreshFail] and [Provider.RevokeAll] end
// sessions from the provider's side. It keeps the newest 10,000 codes and
// tokens only.
package oidctest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Key is a signing key of the provider.
type Key struct {
	ID   string
	Alg  jose.SignatureAlgorithm
	Priv crypto.Signer
}

// NewKey returns a new ES256 key with id kid.
func NewKey(t testing.TB, kid string) *Key {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &Key{ID: kid, Alg: jose.ES256, Priv: priv}
}

// Provider is a running fake OpenID provider. Its methods are safe for
// concurrent use.
type Provider struct {
	t   testing.TB
	srv *httptest.Server
	mux *http.ServeMux

	// ClientID and ClientSecret are the one registered client's.
	ClientID, ClientSecret string

	// AccessTTL is the lifetime of the access tokens issued (one hour
	// unless a test sets it, before the requests it applies to).
	AccessTTL time.Duration
	// RefreshTokens makes the code flow issue a refresh token even when
	// the scope has no offline_access (true unless a test sets it).
	RefreshTokens bool

	mu        sync.Mutex // guards the fields below
	keys      []*Key
	redirects []string
	user      map[string]any
	next      []map[string]any // SignInNext's queue
	codes     bounded[*grant]  // code → what it was issued for
	resources []string         // of authorization requests
	limit     int              // of codes, resources, tokens kept
	extra     map[string]any   // more discovery members, nil removes
	no8414    bool
	jwksFail  bool
	tokenNext http.HandlerFunc
	access    bounded[*accessToken]  // jti → its grant
	refresh   bounded[*refreshToken] // token → its grant
	refFail   bool

	// TokenHits, JWKSHits and RevokeHits count requests to the token
	// endpoint, the JWKS and the revocation endpoint; RefreshHits the
	// token requests of the refresh_token grant.
	TokenHits, JWKSHits, RevokeHits, RefreshHits atomic.Int64
}

type grant struct {
	redirect, challenge, nonce string
	resource, scope            string
	claims                     map[string]any
	used                       bool
}

// keep is how many codes, resources and tokens a provider keeps, dropping
// the oldest beyond.
const keep = 10_000

// bounded is a map that keeps its newest entries only.
type bounded[V any] struct {
	m     map[string]V
	order []string // keys, oldest first
}

// put adds k, dropping the oldest entries beyond limit.
func (b *bounded[V]) put(limit int, k string, v V) {
	if b.m == nil {
		b.m = map[string]V{}
	}
	b.m[k] = v
	b.order = append(b.order, k)
	for len(b.order) > limit {
		delete(b.m, b.order[0])
		b.order = b.order[1:]
	}
}

// New starts a provider whose client may redirect to the given URIs, and
// closes it when the test ends.
func New(t testing.TB, redirects ...string) *Provider {
	t.Helper()
	p := &Provider{
		t: t, ClientID: "approvals", ClientSecret: "s3cret:with/odd chars",
		AccessTTL: time.Hour, RefreshTokens: true,
		keys: []*Key{NewKey(t, "key-1")}, redirects: redirects,
		extra: map[string]any{}, limit: keep,
	}
	p.mux = http.NewServeMux()
	mux := p.mux
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", p.metadata8414)
	mux.HandleFunc("GET /jwks", p.jwks)
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	mux.HandleFunc("POST /revoke", p.revoke)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

// Handle serves more endpoints on the provider (e.g. introspection).
func (p *Provider) Handle(pattern string, h http.HandlerFunc) { p.mux.HandleFunc(pattern, h) }

// SetDiscovery sets a member of the metadata, in the OpenID discovery
// document and the RFC 8414 one alike (e.g. "introspection_endpoint");
// a nil value removes the member (e.g. "code_challenge_methods_supported",
// to see a client refuse a server that may not do PKCE).
func (p *Provider) SetDiscovery(key string, value any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.extra[key] = value
}

// SetMetadata8414 serves the RFC 8414 metadata document
// (/.well-known/oauth-authorization-server) while enabled is true, as from
// the start, and answers it 404 while false, so a client's fallback to
// OpenID discovery can be seen.
func (p *Provider) SetMetadata8414(enabled bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.no8414 = !enabled
}

// SetTokenHandler makes h answer the token requests whose grant_type is
// neither authorization_code nor refresh_token (client credentials, token
// exchange, …), before any check of the provider's own; nil answers them
// unsupported_grant_type.
func (p *Provider) SetTokenHandler(h http.HandlerFunc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tokenNext = h
}

// SetJWKSFail makes the JWKS answer 500 while fail is true.
func (p *Provider) SetJWKSFail(fail bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.jwksFail = fail
}

// Key returns the key that signs now.
func (p *Provider) Key() *Key {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keys[0]
}

// Issuer is the provider's issuer URL.
func (p *Provider) Issuer() string { return p.srv.URL }

// Client is an HTTP client for the provider.
func (p *Provider) Client() *http.Client { return p.srv.Client() }

// AddRedirect registers another redirect URI of the client.
func (p *Provider) AddRedirect(uri string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.redirects = append(p.redirects, uri)
}

// SignInAs makes the authorization endpoint sign in a person with these
// claims from now on, whenever SignInNext's queue is empty: they are merged into the ID token over the
// standard ones (so a test may set another "aud", "iss", "exp" or
// "nonce"). With nil, it signs nobody in and answers 400.
func (p *Provider) SignInAs(claims map[string]any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.user = maps.Clone(claims)
}

// SignInNext queues people to sign in: each authorization request that
// would issue a code takes the first of the queue (a nil one answers 400),
// and with the queue empty the endpoint signs in SignInAs's person. Two
// browsers of one test can so sign in as two people without racing.
func (p *Provider) SignInNext(claims ...map[string]any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range claims {
		p.next = append(p.next, maps.Clone(c))
	}
}

// Rotate publishes only the given keys from now on; the first signs.
func (p *Provider) Rotate(keys ...*Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = keys
}

// Codes returns the codes issued so far (the newest 10,000), oldest
// first.
func (p *Provider) Codes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.codes.order)
}

// Resources returns the resource parameters (RFC 8707) of the
// authorization requests so far (the newest 10,000), oldest first,
// refused ones included.
func (p *Provider) Resources() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.resources)
}

// metadata returns the provider's metadata, the same for OpenID discovery
// and RFC 8414. p.mu is held.
func (p *Provider) metadata() map[string]any {
	doc := map[string]any{
		"issuer":                                p.srv.URL,
		"authorization_endpoint":                p.srv.URL + "/authorize",
		"token_endpoint":                        p.srv.URL + "/token",
		"revocation_endpoint":                   p.srv.URL + "/revoke",
		"jwks_uri":                              p.srv.URL + "/jwks",
		"id_token_signing_alg_values_supported": []string{"ES256", "RS256"},
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"code_challenge_methods_supported":      []string{"S256"},
		"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
	}
	for k, v := range p.extra {
		if v == nil {
			delete(doc, k)
		} else {
			doc[k] = v
		}
	}
	return doc
}

func (p *Provider) discovery(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	doc := p.metadata()
	p.mu.Unlock()
	writeJSON(w, http.StatusOK, doc)
}

func (p *Provider) metadata8414(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	doc, off := p.metadata(), p.no8414
	p.mu.Unlock()
	if off {
		http.NotFound(w, r)
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

func (p *Provider) jwks(w http.ResponseWriter, _ *http.Request) {
	p.JWKSHits.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.jwksFail {
		http.Error(w, "down", http.StatusInternalServerError)
		return
	}
	var set jose.JSONWebKeySet
	for _, k := range p.keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Priv.Public(), KeyID: k.ID, Algorithm: string(k.Alg), Use: "sig"})
	}
	writeJSON(w, http.StatusOK, set)
}

// authorize signs in the chosen person and redirects back with a code,
// bound to the request's resource (RFC 8707) and scope. Requests it must
// refuse (unknown client or redirect URI, no S256 challenge) get 400
// without a redirect; more than one resource, or one that is not an
// absolute URI without a fragment, is redirected back with error
// invalid_target.
func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resources = append(p.resources, q["resource"]...)
	if n := len(p.resources) - p.limit; n > 0 {
		p.resources = slices.Delete(p.resources, 0, n)
	}
	redirect := q.Get("redirect_uri")
	switch {
	case q.Get("client_id") != p.ClientID, !slices.Contains(p.redirects, redirect):
		http.Error(w, "unknown client or redirect_uri", http.StatusBadRequest)
		return
	case q.Get("response_type") != "code", q.Get("code_challenge_method") != "S256", q.Get("code_challenge") == "":
		http.Error(w, "authorization code with PKCE S256 only", http.StatusBadRequest)
		return
	}
	u, _ := url.Parse(redirect)
	back := u.Query()
	back.Set("state", q.Get("state"))
	if res := q["resource"]; len(res) > 1 || len(res) == 1 && !resourceOK(res[0]) {
		back.Set("error", "invalid_target")
		u.RawQuery = back.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound)
		return
	}
	user := p.user
	if len(p.next) > 0 {
		user, p.next = p.next[0], p.next[1:]
	}
	if user == nil {
		http.Error(w, "nobody to sign in (SignInAs, SignInNext)", http.StatusBadRequest)
		return
	}
	code := rand.Text()
	p.codes.put(p.limit, code, &grant{
		redirect: redirect, challenge: q.Get("code_challenge"), nonce: q.Get("nonce"),
		resource: q.Get("resource"), scope: strings.Join(strings.Fields(q.Get("scope")), " "),
		claims: maps.Clone(user),
	})
	back.Set("code", code)
	u.RawQuery = back.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

// resourceOK reports whether res is a resource indicator: an absolute URI
// without a fragment (RFC 8707).
func resourceOK(res string) bool {
	u, err := url.Parse(res)
	return err == nil && u.IsAbs() && !strings.Contains(res, "#")
}

func (p *Provider) clientOK(r *http.Request) bool {
	id, secret, ok := r.BasicAuth()
	if ok {
		id, err1 := url.QueryUnescape(id)
		secret, err2 := url.QueryUnescape(secret)
		return err1 == nil && err2 == nil && id == p.ClientID && secret == p.ClientSecret
	}
	return r.PostForm.Get("client_id") == p.ClientID && r.PostForm.Get("client_secret") == p.ClientSecret
}

// token redeems a code, once, for an access token (RFC 9068), an ID
// token and, with RefreshTokens or the scope offline_access, a refresh
// token; or a refresh token (see refreshGrant).
func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	p.TokenHits.Add(1)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	next := p.tokenNext
	p.mu.Unlock()
	grantType := r.PostForm.Get("grant_type")
	if next != nil && grantType != "authorization_code" && grantType != "refresh_token" {
		next(w, r)
		return
	}
	if !p.clientOK(r) {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_client"})
		return
	}
	switch grantType {
	case "authorization_code":
	case "refresh_token":
		p.refreshGrant(w, r)
		return
	default:
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "unsupported_grant_type"})
		return
	}
	p.mu.Lock()
	g := p.codes.m[r.PostForm.Get("code")]
	ok := g != nil && !g.used && g.redirect == r.PostForm.Get("redirect_uri") && g.challenge == s256(r.PostForm.Get("code_verifier"))
	if g != nil {
		g.used = true // a failed redemption burns the code too
	}
	p.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_grant"})
		return
	}
	if res := r.PostForm["resource"]; len(res) > 1 || len(res) == 1 && res[0] != g.resource {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_target"})
		return
	}
	now := time.Now()
	claims := map[string]any{"iss": p.Issuer(), "aud": p.ClientID, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	if g.nonce != "" {
		claims["nonce"] = g.nonce
	}
	maps.Copy(claims, g.claims)
	fam := &family{client: p.ClientID, claims: g.claims, resource: g.resource, scope: g.scope}
	offline := slices.Contains(strings.Fields(g.scope), "offline_access")
	resp := p.issue(fam, g.scope, offline || p.RefreshTokens)
	resp["id_token"] = p.Sign(claims)
	writeJSON(w, http.StatusOK, resp)
}

func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// Sign returns a JWT of claims signed with the provider's current key.
func (p *Provider) Sign(claims map[string]any) string {
	p.mu.Lock()
	k := p.keys[0]
	p.mu.Unlock()
	return SignWith(p.t, k, "JWT", claims)
}

// SignWith returns a JWT of claims signed with k, with header typ.
func SignWith(t testing.TB, k *Key, typ string, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	return SignPayload(t, k, typ, payload)
}

// SignPayload returns a JWT of payload, as is (it may repeat a member),
// signed with k, with header typ.
func SignPayload(t testing.TB, k *Key, typ string, payload []byte) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.Alg, Key: jose.JSONWebKey{Key: k.Priv, KeyID: k.ID}},
		(&jose.SignerOptions{}).WithType(jose.ContentType(typ)))
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
