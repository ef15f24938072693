package gateway

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway/internal/authdisc"
	"github.com/mcphandler/mcphandler/internal/seal"
	"github.com/mcphandler/mcphandler/internal/sign"
	"github.com/mcphandler/mcphandler/session"
)

// OAuthClient is the gateway's client at an upstream's authorization
// server, for Upstream.OAuth: registered there as a confidential web
// client for the authorization code flow, with the redirect URI
// Config.AuthURL + "callback".
type OAuthClient struct {
	ClientID, ClientSecret string
	// Scopes are asked for. If nil, the scope the upstream's challenge
	// names, if any.
	Scopes []string
}

// Bounds, lifetimes and keys of the people's authorizations.
const (
	grantPrefix = "gw-oauth/" // + 32 hexadecimal digits: one person's tokens for one upstream
	grantLabel  = "mcphandler/gateway/oauth/v1 "
	grantMethod = "gateway/oauth"
	// refreshBefore is how long before its expiry an access token is
	// refreshed; one without a refresh token is sent until expiryLeeway
	// before it expires, then asked for again.
	refreshBefore = time.Minute
	expiryLeeway  = 30 * time.Second
	// grantLife is how long tokens that can be refreshed are kept after
	// they were last written (by the authorization or a refresh).
	grantLife = 90 * 24 * time.Hour
	// maxGrantToken bounds each token the authorization server gives.
	maxGrantToken = 16 << 10
	// maxTokenResponse bounds a token endpoint's answer.
	maxTokenResponse = 64 << 10
	// serverTTL is how long a replica reuses an upstream's discovered
	// authorization server; serverRetry, a failed discovery's answer.
	serverTTL   = time.Hour
	serverRetry = 30 * time.Second
	// maxServers bounds the discoveries a replica keeps (by upstream
	// URL and client).
	maxServers = 1024
	// linkTTL is how long an authorization link stays valid.
	linkTTL = 30 * time.Minute
	// refreshWait bounds how long a refresh is waited for when another
	// replica holds it.
	refreshWait = 10 * time.Second
)

// ErrAuthorizationRequired is what a call or list of an upstream with
// OAuth (Upstream.OAuth) fails with for a person who has not authorized
// it, or whose authorization expired, was revoked, or was refused by the
// upstream: it wraps ErrNoCredentials, and an *AuthorizationRequiredError
// names the URL where the person authorizes.
var ErrAuthorizationRequired = fmt.Errorf("gateway: this person has not authorized the upstream: %w", ErrNoCredentials)

// AuthorizationRequiredError names where one person authorizes one
// upstream: URL, a link to the authorization page (Gateway.AuthPage)
// signed for that person and upstream, valid for 30 minutes, which the
// page refuses to anyone else signed in.
type AuthorizationRequiredError struct {
	Upstream string
	URL      string
}

func (e *AuthorizationRequiredError) Error() string {
	return "gateway: upstream " + e.Upstream + ": this person must authorize it first at " + e.URL
}

func (e *AuthorizationRequiredError) Unwrap() error { return ErrAuthorizationRequired }

// grant is one person's tokens for one upstream, as kept (sealed) in
// the store.
type grant struct {
	Access    string `json:"a"`
	Refresh   string `json:"r,omitempty"`
	Expiry    int64  `json:"e,omitempty"` // unix ms; 0: unknown
	Issuer    string `json:"i"`           // the authorization server's
	TokenURL  string `json:"t"`
	RevokeURL string `json:"v,omitempty"`
	Client    string `json:"c"` // the client it was issued to
	Written   int64  `json:"w"` // unix ms
}

// authServer is an upstream's authorization server, as discovered.
type authServer struct {
	issuer, authURL, tokenURL, revokeURL, scope string
}

type serverEntry struct {
	srv authServer
	err error
	at  time.Time
}

// authorizations keeps each person's authorization of the upstreams with
// OAuth in Config.Store: the tokens of one person (tenant and subject)
// for one upstream (ID and URL) at one authorization server (its issuer),
// under grantPrefix + an HMAC of all of them, sealed (AES-256-GCM under
// keys derived from StateKeys) and bound to that key and tenant, so that
// what can write the store but holds no StateKeys can neither read a
// token nor make the gateway send one for another person. No key of one
// person is another's; there is no shared token and no fallback. It is
// safe for concurrent use.
type authorizations struct {
	g     *Gateway
	recs  session.Records
	keys  *seal.Keys
	names []byte
	// older are the names of StateKeys after the first: tokens kept under
	// one of them are moved to the first's key when read (rotation).
	older [][]byte
	links *sign.Signer // the authorization links
	hc    *http.Client // Config.HTTPClient, never following a redirect
	now   func() time.Time
	// discover finds an upstream's authorization server (authdisc).
	discover func(ctx context.Context, u *Upstream) (authServer, error)

	mu         sync.Mutex
	servers    map[string]*serverEntry  // by URL and client
	refreshing map[string]chan struct{} // by store key: a refresh of this replica under way
}

func newAuthorizations(g *Gateway, secrets [][]byte) (*authorizations, error) {
	keys, names, err := deriveKeys(secrets, grantLabel)
	if err != nil {
		return nil, err
	}
	links, err := sign.NewSigner("gateway-authorize-link", secrets...)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	if g.cfg.HTTPClient != nil {
		c := *g.cfg.HTTPClient
		hc = &c
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	var older [][]byte
	for _, sec := range secrets[1:] {
		n, err := hkdf.Key(sha256.New, sec, nil, grantLabel+"names", 32)
		if err != nil {
			return nil, err
		}
		older = append(older, n)
	}
	a := &authorizations{g: g, recs: g.cfg.Store, keys: keys, names: names, older: older, links: links, hc: hc,
		now: func() time.Time { return g.now() }, servers: map[string]*serverEntry{}, refreshing: map[string]chan struct{}{}}
	a.discover = a.discoverServer
	return a, nil
}

// discoverServer finds u's authorization server the way the MCP
// authorization spec says: u's 401 challenge, its protected resource
// metadata (RFC 9728), then the server's metadata (RFC 8414, then OpenID
// discovery).
func (a *authorizations) discoverServer(ctx context.Context, u *Upstream) (authServer, error) {
	ctx, cancel := context.WithTimeout(ctx, min(a.g.cfg.Timeout, 30*time.Second))
	defer cancel()
	r, err := authdisc.Discover(ctx, authdisc.Config{URL: u.URL, Legacy: u.Era == EraLegacy, HTTPClient: a.g.cfg.HTTPClient})
	if err != nil {
		return authServer{}, err
	}
	return authServer{issuer: r.Server.Issuer, authURL: r.Server.AuthorizationEndpoint, tokenURL: r.Server.TokenEndpoint,
		revokeURL: r.Server.RevocationEndpoint, scope: r.Scope}, nil
}

// server returns u's authorization server, discovered at most serverTTL
// ago (a failure, serverRetry ago).
func (a *authorizations) server(ctx context.Context, u *Upstream) (authServer, error) {
	k := u.URL + "\x00" + u.OAuth.ClientID
	a.mu.Lock()
	e, ok := a.servers[k]
	a.mu.Unlock()
	if ok && (e.err == nil && a.now().Sub(e.at) < serverTTL || e.err != nil && a.now().Sub(e.at) < serverRetry) {
		return e.srv, e.err
	}
	srv, err := a.discover(ctx, u)
	if err != nil && ctx.Err() != nil {
		return srv, err // the caller went away: nothing learnt
	}
	if err != nil {
		err = fmt.Errorf("gateway: upstream %s: discovering its authorization server: %w", u.ID, err)
	}
	a.mu.Lock()
	if len(a.servers) >= maxServers {
		clear(a.servers) // a bound, not a policy: they are discovered again
	}
	a.servers[k] = &serverEntry{srv: srv, err: err, at: a.now()}
	a.mu.Unlock()
	return srv, err
}

// key is the store key of the person id's tokens for u at the
// authorization server issuer.
func (a *authorizations) key(id mcphandler.Identity, issuer string, u *Upstream) string {
	return a.keyUnder(a.names, id, issuer, u)
}

// keyUnder is key under the names of one of StateKeys.
func (a *authorizations) keyUnder(names []byte, id mcphandler.Identity, issuer string, u *Upstream) string {
	m := hmac.New(sha256.New, names)
	writeString(m, id.Tenant)
	writeString(m, issuer)
	writeString(m, id.Subject)
	writeString(m, u.ID)
	writeString(m, u.URL)
	return grantPrefix + hex.EncodeToString(m.Sum(nil)[:16])
}

func grantBinding(tenant, key string) seal.Binding {
	return seal.Binding{Tenant: tenant, Method: grantMethod, Name: key}
}

// load reads the tokens under key for tenant, and the bytes read: none
// (nil, nil) for a missing key, a revoked one (written empty), or a
// value that does not open (forged, another's, an old key's: logged);
// an error only when the store fails.
func (a *authorizations) load(ctx context.Context, tenant, key string) (*grant, []byte, error) {
	raw, err := a.recs.Load(ctx, key)
	if errors.Is(err, session.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil || len(raw) == 0 {
		return nil, raw, err
	}
	b, err := a.keys.Open(string(raw), grantBinding(tenant, key), a.now())
	var gr grant
	if err == nil {
		err = json.Unmarshal(b, &gr)
	}
	if err != nil || gr.Access == "" {
		if !errors.Is(err, seal.ErrExpired) {
			a.g.cfg.Logger.Warn("gateway: a person's upstream tokens in the store do not open: taken as none", "err", err)
		}
		return nil, raw, nil
	}
	return &gr, raw, nil
}

// moved looks for the person id's tokens for u under the keys of the
// older StateKeys, after a rotation put a new key first: tokens found
// there are written under key (the new key's) and forgotten there, so
// that a rotation asks nobody to authorize again. What it returns is as
// load's of key.
func (a *authorizations) moved(ctx context.Context, id mcphandler.Identity, issuer string, u *Upstream, key string) (*grant, []byte, error) {
	for _, names := range a.older {
		oldKey := a.keyUnder(names, id, issuer, u)
		gr, raw, err := a.load(ctx, id.Tenant, oldKey)
		if err != nil || gr == nil {
			continue
		}
		if _, err := a.save(ctx, id.Tenant, key, nil, gr); err != nil {
			return nil, nil, err
		}
		_ = a.drop(ctx, oldKey, raw)
		return a.load(ctx, id.Tenant, key)
	}
	return nil, nil, nil
}

// save writes gr under key, in place of old (nil: none there).
func (a *authorizations) save(ctx context.Context, tenant, key string, old []byte, gr *grant) (bool, error) {
	gr.Written = a.now().UnixMilli()
	life := grantLife
	if gr.Refresh == "" && gr.Expiry > 0 {
		life = max(time.UnixMilli(gr.Expiry).Sub(a.now()), time.Second)
	}
	b, _ := json.Marshal(gr)
	tok, err := a.keys.Seal(grantBinding(tenant, key), b, a.now().Add(life))
	if err != nil {
		return false, err
	}
	if old == nil {
		return a.recs.PutIfAbsent(ctx, key, []byte(tok), life)
	}
	return a.recs.CompareAndSwap(ctx, key, old, []byte(tok), life)
}

// put keeps gr as the person id's tokens for u, whatever was there.
func (a *authorizations) put(ctx context.Context, id mcphandler.Identity, u *Upstream, gr *grant) error {
	key := a.key(id, gr.Issuer, u)
	for range 8 {
		_, old, err := a.load(ctx, id.Tenant, key)
		if err != nil {
			return err
		}
		if ok, err := a.save(ctx, id.Tenant, key, old, gr); ok || err != nil {
			return err
		}
	}
	return errors.New("gateway: the person's tokens kept changing; try again")
}

// drop forgets the tokens under key if they are still old (a revocation,
// a 401 of the upstream, a refused refresh): they are written empty, for
// a moment, as Records cannot delete.
func (a *authorizations) drop(ctx context.Context, key string, old []byte) error {
	if old == nil {
		return nil
	}
	_, err := a.recs.CompareAndSwap(ctx, key, old, []byte{}, time.Second)
	return err
}

// credentials are the headers that carry the person id's own token to
// u: "Authorization: Bearer <access token>", refreshed first when it
// expires within refreshBefore. A person without tokens there (or whose
// tokens expired without a refresh token, or whose refresh was refused)
// gets an *AuthorizationRequiredError; a store, discovery or token
// endpoint that fails, a plain error (the upstream is not contacted
// either way).
func (a *authorizations) credentials(ctx context.Context, id mcphandler.Identity, u *Upstream) (http.Header, error) {
	if id.Subject == "" {
		return nil, fmt.Errorf("gateway: upstream %s: a caller without a subject has no authorization of its own: %w", u.ID, ErrNoCredentials)
	}
	srv, err := a.server(ctx, u)
	if err != nil {
		return nil, err
	}
	key := a.key(id, srv.issuer, u)
	gr, raw, err := a.load(ctx, id.Tenant, key)
	if err == nil && gr == nil && raw == nil && len(a.older) > 0 {
		gr, raw, err = a.moved(ctx, id, srv.issuer, u, key)
	}
	if err != nil {
		return nil, err
	}
	if gr == nil || gr.Client != u.OAuth.ClientID || gr.TokenURL != srv.tokenURL {
		return nil, a.required(id, u)
	}
	if gr.Expiry > 0 && a.now().Add(refreshBefore).After(time.UnixMilli(gr.Expiry)) {
		if gr.Refresh != "" {
			if gr, err = a.refresh(ctx, id, u, srv, key, raw, gr); err != nil {
				return nil, err
			}
		} else if a.now().Add(expiryLeeway).After(time.UnixMilli(gr.Expiry)) {
			return nil, a.required(id, u)
		}
	}
	return http.Header{"Authorization": {"Bearer " + gr.Access}}, nil
}

// required is the error of a person who must authorize u first.
func (a *authorizations) required(id mcphandler.Identity, u *Upstream) error {
	return &AuthorizationRequiredError{Upstream: u.ID, URL: a.link(id, u)}
}

// refresh gets new tokens for the person id at u with gr's refresh
// token, once for every replica: this replica's concurrent callers wait
// for one refresh, and a replica that finds another's under way (a mark
// in the store) waits for its result. A refused refresh (invalid_grant,
// a 4xx) forgets the tokens: the person is asked again.
func (a *authorizations) refresh(ctx context.Context, id mcphandler.Identity, u *Upstream, srv authServer, key string, raw []byte, gr *grant) (*grant, error) {
	a.mu.Lock()
	if ch, ok := a.refreshing[key]; ok {
		a.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return a.refreshed(ctx, id, u, key, raw)
	}
	ch := make(chan struct{})
	a.refreshing[key] = ch
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.refreshing, key)
		a.mu.Unlock()
		close(ch)
	}()
	// One replica refreshes the tokens read (raw): the mark names them.
	sum := sha256.Sum256(raw)
	mine, err := a.recs.PutIfAbsent(ctx, key+"/refresh/"+hex.EncodeToString(sum[:8]), []byte{1}, refreshWait)
	if err != nil {
		return nil, err
	}
	if !mine {
		return a.refreshed(ctx, id, u, key, raw)
	}
	next, err := a.redeemRefresh(ctx, u, srv, gr)
	var refused *tokenError
	if errors.As(err, &refused) && refused.status >= 400 && refused.status < 500 && refused.status != http.StatusTooManyRequests {
		a.g.cfg.Logger.Info("gateway: a person's refresh token was refused: asking them again", "upstream", u.ID, "err", err)
		if err := a.drop(ctx, key, raw); err != nil {
			return nil, err
		}
		return nil, a.required(id, u)
	}
	if err != nil {
		return nil, fmt.Errorf("gateway: upstream %s: refreshing the person's token: %w", u.ID, err)
	}
	if ok, err := a.save(ctx, id.Tenant, key, raw, next); err != nil || !ok {
		// Another wrote first (a new authorization, a revocation): theirs stands.
		return a.refreshed(ctx, id, u, key, raw)
	}
	return next, nil
}

// refreshed waits, up to refreshWait, for the tokens under key to be
// other than old, and returns them.
func (a *authorizations) refreshed(ctx context.Context, id mcphandler.Identity, u *Upstream, key string, old []byte) (*grant, error) {
	ctx, cancel := context.WithTimeout(ctx, refreshWait)
	defer cancel()
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		gr, raw, err := a.load(ctx, id.Tenant, key)
		switch {
		case err != nil:
			return nil, err
		case gr == nil:
			return nil, a.required(id, u)
		case string(raw) != string(old):
			return gr, nil
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, fmt.Errorf("gateway: upstream %s: the person's token is being refreshed elsewhere: %w", u.ID, ctx.Err())
		}
	}
}

// tokenError is a token endpoint's refusal.
type tokenError struct {
	status int
	code   string // the OAuth error code, cut
}

func (e *tokenError) Error() string {
	return fmt.Sprintf("the token endpoint answered %d %s", e.status, e.code)
}

// tokenResponse is a token endpoint's answer (RFC 6749 §5.1).
type tokenResponse struct {
	AccessToken  string          `json:"access_token"`
	TokenType    string          `json:"token_type"`
	ExpiresIn    json.RawMessage `json:"expires_in"`
	RefreshToken string          `json:"refresh_token"`
	Error        string          `json:"error"`
}

// redeemRefresh asks srv's token endpoint for new tokens with gr's
// refresh token (RFC 6749 §6), naming the upstream as the resource (RFC
// 8707). A refresh token not renewed in the answer is kept.
func (a *authorizations) redeemRefresh(ctx context.Context, u *Upstream, srv authServer, gr *grant) (*grant, error) {
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {gr.Refresh}, "resource": {u.URL}}
	next, err := a.tokenRequest(ctx, u.OAuth, srv.tokenURL, form)
	if err != nil {
		return nil, err
	}
	if next.Refresh == "" {
		next.Refresh = gr.Refresh
	}
	next.Issuer, next.TokenURL, next.RevokeURL, next.Client = gr.Issuer, gr.TokenURL, gr.RevokeURL, gr.Client
	return next, nil
}

// tokenRequest posts form to tokenURL as the client c and reads the
// tokens answered.
func (a *authorizations) tokenRequest(ctx context.Context, c *OAuthClient, tokenURL string, form url.Values) (*grant, error) {
	status, body, err := a.post(ctx, c, tokenURL, form)
	if err != nil {
		return nil, err
	}
	var tr tokenResponse
	decodeErr := json.Unmarshal(body, &tr)
	if status != http.StatusOK {
		return nil, &tokenError{status: status, code: clip(tr.Error)}
	}
	return tokens(&tr, decodeErr, a.now())
}

// post posts form to u as the client c (HTTP Basic, RFC 6749 §2.3.1),
// and returns the answer's status and body, at most maxTokenResponse
// bytes; no redirect is followed.
func (a *authorizations) post(ctx context.Context, c *OAuthClient, u string, form url.Values) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, min(a.g.cfg.Timeout, 30*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(c.ClientID), url.QueryEscape(c.ClientSecret))
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse+1))
	if err != nil {
		return 0, nil, err
	}
	if len(body) > maxTokenResponse {
		return 0, nil, errors.New("the answer of " + clip(u) + " is over 64 KiB")
	}
	return resp.StatusCode, body, nil
}

// tokens checks a token endpoint's answer: a bearer access token of at
// most maxGrantToken bytes (a refresh token too), and its expiry.
func tokens(tr *tokenResponse, decodeErr error, now time.Time) (*grant, error) {
	switch {
	case decodeErr != nil:
		return nil, errors.New("the token endpoint's answer does not decode")
	case tr.AccessToken == "" || len(tr.AccessToken) > maxGrantToken || len(tr.RefreshToken) > maxGrantToken:
		return nil, errors.New("the token endpoint's answer has no access token, or one over 16 KiB")
	case !strings.EqualFold(tr.TokenType, "bearer"):
		return nil, errors.New("the token endpoint's answer is not a bearer token")
	case !headerSafe(tr.AccessToken):
		return nil, errors.New("the access token cannot be sent in a header")
	}
	gr := &grant{Access: tr.AccessToken, Refresh: tr.RefreshToken}
	if len(tr.ExpiresIn) > 0 && string(tr.ExpiresIn) != "null" {
		var s int64
		if len(tr.ExpiresIn) > 12 || json.Unmarshal(tr.ExpiresIn, &s) != nil || s <= 0 {
			return nil, errors.New("the token endpoint's expires_in is not a positive integer of seconds")
		}
		gr.Expiry = now.Add(time.Duration(min(s, 10*365*24*3600)) * time.Second).UnixMilli()
	}
	return gr, nil
}

// headerSafe reports whether s can be sent as a bearer token: visible
// ASCII, no spaces.
func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// revoke forgets the person id's tokens for u and asks the authorization
// server to revoke them (RFC 7009: the refresh token, else the access
// token), which does not hold the forgetting up: a server that fails is
// logged.
func (a *authorizations) revoke(ctx context.Context, id mcphandler.Identity, u *Upstream) (bool, error) {
	srv, err := a.server(ctx, u)
	if err != nil {
		return false, err
	}
	key := a.key(id, srv.issuer, u)
	gr, raw, err := a.load(ctx, id.Tenant, key)
	if err != nil || gr == nil {
		return false, err
	}
	if err := a.drop(ctx, key, raw); err != nil {
		return false, err
	}
	if gr.RevokeURL != "" {
		tok, hint := gr.Refresh, "refresh_token"
		if tok == "" {
			tok, hint = gr.Access, "access_token"
		}
		status, _, err := a.post(ctx, u.OAuth, gr.RevokeURL, url.Values{"token": {tok}, "token_type_hint": {hint}})
		if err != nil || status != http.StatusOK {
			a.g.cfg.Logger.Warn("gateway: revoking a person's upstream token at its authorization server failed", "upstream", u.ID, "status", status, "err", err)
		}
	}
	return true, nil
}

// refused drops the person id's tokens for u that the upstream refused
// (401), if they are still those sent (sent: the Authorization header),
// so that the person is asked again.
func (a *authorizations) refused(ctx context.Context, id mcphandler.Identity, u *Upstream, sent string) {
	srv, err := a.server(ctx, u)
	if err != nil {
		return
	}
	key := a.key(id, srv.issuer, u)
	gr, raw, err := a.load(ctx, id.Tenant, key)
	if err == nil && gr != nil && "Bearer "+gr.Access == sent {
		a.g.cfg.Logger.Info("gateway: an upstream refused a person's token: asking them again", "upstream", u.ID)
		_ = a.drop(ctx, key, raw)
	}
}

// linkClaims is what an authorization link is signed for.
type linkClaims struct {
	Tenant   string `json:"t,omitempty"`
	Subject  string `json:"s"`
	Upstream string `json:"u"`
	Exp      int64  `json:"e"` // unix s
}

// link is the URL where the person id authorizes u: the page's start,
// with a token signed for them and u.
func (a *authorizations) link(id mcphandler.Identity, u *Upstream) string {
	b, _ := json.Marshal(linkClaims{Tenant: id.Tenant, Subject: id.Subject, Upstream: u.ID, Exp: a.now().Add(linkTTL).Unix()})
	return a.g.cfg.AuthURL + "start?l=" + base64.RawURLEncoding.EncodeToString(a.links.Sign("link", b))
}

// openLink returns the claims of the link token l, if it is one of ours
// and unexpired.
func (a *authorizations) openLink(l string) (linkClaims, bool) {
	var c linkClaims
	if len(l) > 2048 {
		return c, false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(l)
	if err != nil {
		return c, false
	}
	p, err := a.links.Open("link", b)
	if err != nil || json.Unmarshal(p, &c) != nil || c.Subject == "" || !validID(c.Upstream) {
		return c, false
	}
	return c, a.now().Unix() < c.Exp
}
