package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/auth"
	"github.com/mcphandler/mcphandler/internal/ownerindex"
	"github.com/mcphandler/mcphandler/internal/sign"
)

// AuthPageConfig configures [Gateway.AuthPage]: the gateway's own
// sign-in (OpenID Connect), which binds each authorization of an upstream
// to the person signed in.
type AuthPageConfig struct {
	// Issuer is the OpenID provider's issuer URL; its discovery document
	// is read by AuthPage. Required.
	Issuer string
	// ClientID and ClientSecret are the client registered at the provider
	// for the authorization code flow, with the redirect URI
	// Config.AuthURL + "login/callback". ClientID is required.
	ClientID, ClientSecret string
	// Scopes are requested besides "openid". If nil, {"profile", "email"}.
	Scopes []string
	// Claims maps the verified ID token's claims to the person: set it to
	// the mapping the MCP callers' tokens are read with (the Map of one
	// auth.ClaimsMapping), so that a person signs in here as the tenant
	// and subject they call tools as. If nil, auth.DefaultClaims("").
	Claims auth.ClaimsMapper
	// SessionTTL is how long a sign-in lasts; 0 means 30 min.
	SessionTTL time.Duration
	// LoginTTL is how long a sign-in or an authorization may take, from
	// the redirect to the provider to its callback; 0 means 10 min.
	LoginTTL time.Duration
	// InsecureCookies drops the Secure attribute and the __Host- prefix
	// of the cookies, for plain HTTP. It MUST NOT be set in production:
	// only for tests and localhost.
	InsecureCookies bool
	// HTTPClient reaches the provider; nil means a client with a 10 s
	// timeout.
	HTTPClient *http.Client
}

// Bounds of the page's input.
const (
	maxCookieBytes = 4 << 10
	maxParamBytes  = 4 << 10
	maxFormBytes   = 4 << 10
	// maxMarksPerPerson bounds the single-use marks of one person's
	// sign-ins and authorizations kept at once (each for LoginTTL), across
	// replicas: past it, the page answers 429 until the oldest lapses.
	maxMarksPerPerson = 20
	markLen           = 2 * sha256.Size // a mark: the hex SHA-256 of its state
)

//go:embed templates/auth.html
var authFS embed.FS

var authTemplate = template.Must(template.ParseFS(authFS, "templates/auth.html"))

// authPage serves Gateway.AuthPage.
type authPage struct {
	g        *Gateway
	a        *authorizations
	cfg      AuthPageConfig
	oauth    oauth2.Config // the sign-in
	verifier *oidc.IDTokenVerifier
	mac      *sign.Signer // cookies
	csrf     *sign.Signer
	marks    *ownerindex.Index // each person's single-use marks (useState)
	cop      *http.CrossOriginProtection
	base     string // the mount's path, ending in "/"
	name     string // the session cookie's name; "-login" and "-auth" are added for the others
	path     string // the cookies' path
}

// AuthPage returns the page where people authorize the upstreams with
// OAuth (Upstream.OAuth), to mount at Config.AuthURL. It reads the
// provider's discovery document with ctx, and fails if Config.AuthURL or
// a required field is missing, or the provider cannot be discovered.
//
//	GET  <mount>/                 the signed-in person's upstreams with OAuth: authorized
//	                              or not, with a button to revoke or a link to authorize
//	GET  <mount>/start?l=LINK     an authorization link (AuthorizationRequiredError.URL):
//	                              the person signs in first, and must be the one the link
//	                              was made for; then to the upstream's authorization server
//	                              (code flow, PKCE S256, state, resource = the upstream's URL)
//	GET  <mount>/callback         the authorization server's redirect: state (this browser's
//	                              cookie, once across replicas), the same person signed in,
//	                              the code redeemed with the PKCE verifier; the tokens kept
//	GET  <mount>/login/callback   the sign-in's redirect (code flow, PKCE, nonce, go-oidc)
//	POST <mount>/revoke           revoke one upstream: same origin, CSRF token of the session
//
// The session is a cookie signed with HMAC-SHA256 under keys derived from
// Config.StateKeys, lasting SessionTTL; the cookies are HttpOnly,
// SameSite=Lax, and named __Host- (Secure, Path=/) unless
// InsecureCookies. Pages need no JavaScript and are served with a
// Content-Security-Policy that allows none. Whatever the input — a link
// of another person, a forged or replayed state, a code of another
// browser, a cross-site POST — nothing is stored for anyone but the
// person signed in, and only for an upstream their Upstreams gives them.
// It is safe for concurrent use, on any number of replicas sharing
// Config.Store and StateKeys.
func (g *Gateway) AuthPage(ctx context.Context, cfg AuthPageConfig) (http.Handler, error) {
	if g.cfg.AuthURL == "" || cfg.Issuer == "" || cfg.ClientID == "" {
		return nil, errors.New("gateway: AuthPage needs Config.AuthURL, an Issuer and a ClientID")
	}
	au, _ := url.Parse(g.cfg.AuthURL)
	p := &authPage{g: g, a: g.auths, cfg: cfg, cop: http.NewCrossOriginProtection(), base: au.Path}
	if err := p.cop.AddTrustedOrigin(au.Scheme + "://" + au.Host); err != nil {
		return nil, fmt.Errorf("gateway: AuthPage: %w", err)
	}
	secrets, err := stateSecrets(&g.cfg)
	if err != nil {
		return nil, err
	}
	p.mac, _ = sign.NewSigner("gateway-auth-page-cookie", secrets...)
	p.csrf, _ = sign.NewSigner("gateway-auth-page-csrf", secrets...)
	marks, _ := sign.NewSigner("gateway-auth-page-marks", secrets...)
	if p.cfg.Scopes == nil {
		p.cfg.Scopes = []string{"profile", "email"}
	}
	p.cfg.Scopes = slices.DeleteFunc(slices.Clone(p.cfg.Scopes), func(s string) bool { return s == oidc.ScopeOpenID })
	if p.cfg.Claims == nil {
		p.cfg.Claims = auth.DefaultClaims("")
	}
	if p.cfg.SessionTTL <= 0 {
		p.cfg.SessionTTL = 30 * time.Minute
	}
	if p.cfg.LoginTTL <= 0 {
		p.cfg.LoginTTL = 10 * time.Minute
	}
	if p.cfg.HTTPClient == nil {
		p.cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	p.marks = ownerindex.New(ownerindex.Config{Store: g.cfg.Store, Signer: marks, Max: maxMarksPerPerson,
		ValidID: validMark, MaxIDLen: markLen})
	prov, err := oidc.NewProvider(p.clientContext(ctx), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("gateway: AuthPage: discovery of %s: %w", cfg.Issuer, err)
	}
	p.verifier = prov.Verifier(&oidc.Config{ClientID: cfg.ClientID})
	p.oauth = oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, Endpoint: prov.Endpoint(),
		RedirectURL: g.cfg.AuthURL + "login/callback", Scopes: append([]string{oidc.ScopeOpenID}, p.cfg.Scopes...)}
	p.name, p.path = "mcphandler-gateway", p.base
	if !cfg.InsecureCookies {
		p.name, p.path = "__Host-mcphandler-gateway", "/"
	}
	return p, nil
}

func (p *authPage) clientContext(ctx context.Context) context.Context {
	return oidc.ClientContext(context.WithValue(ctx, oauth2.HTTPClient, p.cfg.HTTPClient), p.cfg.HTTPClient)
}

// ServeHTTP routes on the path below the mount.
func (p *authPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	rest, ok := strings.CutPrefix(r.URL.Path, p.base)
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch {
	case !ok && r.URL.Path+"/" != p.base:
		p.fail(w, http.StatusNotFound, "Not found", "There is nothing at this address.")
	case (rest == "" || !ok) && get:
		p.index(w, r)
	case rest == "start" && get:
		p.start(w, r)
	case rest == "callback" && get:
		p.callback(w, r)
	case rest == "login/callback" && get:
		p.loginCallback(w, r)
	case rest == "revoke" && r.Method == http.MethodPost:
		p.revoke(w, r)
	case rest == "" || rest == "start" || rest == "callback" || rest == "login/callback" || rest == "revoke":
		p.fail(w, http.StatusMethodNotAllowed, "Method not allowed", "")
	default:
		p.fail(w, http.StatusNotFound, "Not found", "There is nothing at this address.")
	}
}

// Cookies.

// sessionCookie is the person signed in.
type sessionCookie struct {
	Tenant  string `json:"t,omitempty"`
	Subject string `json:"s"`
	Role    string `json:"r,omitempty"`
	Nonce   string `json:"n"` // random: the CSRF token derives from it
	Exp     int64  `json:"e"` // unix s
}

func (s *sessionCookie) identity() mcphandler.Identity {
	return mcphandler.Identity{Tenant: s.Tenant, Subject: s.Subject, Role: s.Role}
}

// loginCookie is a sign-in under way in this browser.
type loginCookie struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Return   string `json:"r,omitempty"` // the link to go on with ("" the index)
	Exp      int64  `json:"e"`
}

// authCookie is an authorization under way in this browser: for whom,
// of which upstream.
type authCookie struct {
	State    string `json:"s"`
	Verifier string `json:"v"`
	Upstream string `json:"u"`
	Tenant   string `json:"t,omitempty"`
	Subject  string `json:"p"`
	Exp      int64  `json:"e"`
}

func (p *authPage) setCookie(w http.ResponseWriter, name string, v any, ttl time.Duration) {
	value := ""
	if v != nil {
		b, _ := json.Marshal(v)
		value = base64.RawURLEncoding.EncodeToString(p.mac.Sign(name, b))
	}
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: p.path, MaxAge: int(ttl / time.Second),
		HttpOnly: true, Secure: !p.cfg.InsecureCookies, SameSite: http.SameSiteLaxMode})
}

// cookie reads the cookie name into v, and reports whether it is there,
// signed for name and unexpired (exp gives v's expiry).
func (p *authPage) cookie(r *http.Request, name string, v any, exp func() int64) bool {
	c, err := r.Cookie(name)
	if err != nil || len(c.Value) > maxCookieBytes {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(c.Value)
	if err != nil {
		return false
	}
	pl, err := p.mac.Open(name, b)
	return err == nil && json.Unmarshal(pl, v) == nil && time.Now().Unix() < exp()
}

func (p *authPage) session(r *http.Request) (*sessionCookie, bool) {
	var s sessionCookie
	if !p.cookie(r, p.name, &s, func() int64 { return s.Exp }) || s.Subject == "" {
		return nil, false
	}
	return &s, true
}

func randText() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// query returns the one value of the query parameter name, at most
// maxParamBytes; false when absent, repeated or longer.
func query(r *http.Request, name string) (string, bool) {
	v := r.URL.Query()[name]
	if len(v) != 1 || v[0] == "" || len(v[0]) > maxParamBytes {
		return "", false
	}
	return v[0], true
}

// Sign-in.

// login sends the browser to the provider to sign in, to come back to
// ret (a "start?l=…" link, or "" for the index).
func (p *authPage) login(w http.ResponseWriter, r *http.Request, ret string) {
	lc := loginCookie{State: randText(), Nonce: randText(), Verifier: oauth2.GenerateVerifier(), Return: ret,
		Exp: time.Now().Add(p.cfg.LoginTTL).Unix()}
	p.setCookie(w, p.name+"-login", &lc, p.cfg.LoginTTL)
	u := p.oauth.AuthCodeURL(lc.State, oauth2.S256ChallengeOption(lc.Verifier), oauth2.SetAuthURLParam("nonce", lc.Nonce))
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// loginCallback answers the provider's redirect: the state of this
// browser's sign-in, the code redeemed with its PKCE verifier, the ID
// token verified with its nonce and mapped to the person (Claims), the
// state used up once for every replica; then the session is set.
func (p *authPage) loginCallback(w http.ResponseWriter, r *http.Request) {
	state, code, ok := p.redirected(w, r, "Sign-in failed", "The identity provider did not sign you in.")
	if !ok {
		return
	}
	var lc loginCookie
	switch {
	case !p.cookie(r, p.name+"-login", &lc, func() int64 { return lc.Exp }) || !hmac.Equal([]byte(lc.State), []byte(state)):
		p.fail(w, http.StatusBadRequest, "Sign-in not recognised", "This sign-in was not started in this browser, or it took too long: start again.")
		return
	}
	who, err := p.redeemSignIn(r.Context(), code, &lc)
	if err != nil {
		p.g.cfg.Logger.Info("gateway: sign-in failed", "err", err)
		p.fail(w, http.StatusBadRequest, "Sign-in failed", "The sign-in could not be verified: start again.")
		return
	}
	if !p.useState(w, r.Context(), who, "gw-login/", state) {
		return
	}
	p.setCookie(w, p.name+"-login", nil, -time.Second)
	p.setCookie(w, p.name, &sessionCookie{Tenant: who.Tenant, Subject: who.Subject, Role: who.Role, Nonce: randText(),
		Exp: time.Now().Add(p.cfg.SessionTTL).Unix()}, p.cfg.SessionTTL)
	http.Redirect(w, r, p.base+lc.Return, http.StatusSeeOther)
}

// redirected reads an authorization response (RFC 6749 §4.1.2): its one
// state and one code, each at most 4 KiB; false, with the page written,
// for an error the server redirected with (refused, as title and
// detail) or a malformed response.
func (p *authPage) redirected(w http.ResponseWriter, r *http.Request, title, detail string) (state, code string, ok bool) {
	if e := r.URL.Query().Get("error"); e != "" {
		p.g.cfg.Logger.Info("gateway: auth page: refused by "+r.URL.Path, "error", clip(e))
		p.fail(w, http.StatusForbidden, title, detail)
		return "", "", false
	}
	state, ok1 := query(r, "state")
	code, ok2 := query(r, "code")
	if !ok1 || !ok2 {
		p.fail(w, http.StatusBadRequest, "Bad response", "The response is malformed: start again. Nothing was kept.")
		return "", "", false
	}
	return state, code, true
}

// redeemSignIn redeems the sign-in's code and maps its ID token.
func (p *authPage) redeemSignIn(ctx context.Context, code string, lc *loginCookie) (mcphandler.Identity, error) {
	ctx = p.clientContext(ctx)
	tok, err := p.oauth.Exchange(ctx, code, oauth2.VerifierOption(lc.Verifier))
	if err != nil {
		return mcphandler.Identity{}, err
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok || raw == "" {
		return mcphandler.Identity{}, errors.New("no id_token in the token response")
	}
	idt, err := p.verifier.Verify(ctx, raw)
	if err != nil {
		return mcphandler.Identity{}, err
	}
	if !hmac.Equal([]byte(idt.Nonce), []byte(lc.Nonce)) {
		return mcphandler.Identity{}, errors.New("the ID token's nonce is not the sign-in's")
	}
	var payload json.RawMessage
	if err := idt.Claims(&payload); err != nil {
		return mcphandler.Identity{}, err
	}
	c, err := auth.ParseClaims(payload)
	if err != nil {
		return mcphandler.Identity{}, err
	}
	who, err := p.cfg.Claims(ctx, c)
	if err == nil && (who.Subject == "" || len(who.Subject) > auth.MaxNameBytes || len(who.Tenant) > auth.MaxNameBytes || len(who.Role) > auth.MaxNameBytes) {
		err = errors.New("the person's subject is empty, or a claim is too long")
	}
	return who, err
}

// useState marks state used, once for every replica sharing the store,
// for LoginTTL; false (with the page written) when it was used before,
// the person who just proved who they are (who) holds
// maxMarksPerPerson marks already (429), or the store failed. It is
// marked once the code it came with was redeemed: a mark costs a sign-in,
// and each person's marks are counted in a signed index of theirs
// (internal/ownerindex), so that no one piles them up.
func (p *authPage) useState(w http.ResponseWriter, ctx context.Context, who mcphandler.Identity, prefix, state string) bool {
	sum := sha256.Sum256([]byte(state))
	mark := hex.EncodeToString(sum[:])
	owner := sha256.Sum256(appendString(appendString(nil, who.Tenant), who.Subject))
	err := p.marks.Admit(ctx, "gw-auth-marks/"+hex.EncodeToString(owner[:16]), mark, time.Now().Add(p.cfg.LoginTTL).UnixMilli(), nil)
	if _, full := errors.AsType[*ownerindex.FullError](err); full {
		p.fail(w, http.StatusTooManyRequests, "Too many sign-ins", "You signed in or authorized too often in the last "+
			p.cfg.LoginTTL.String()+": try again later. Nothing was kept.")
		return false
	}
	ok := false
	if err == nil {
		ok, err = p.g.cfg.Store.PutIfAbsent(ctx, prefix+mark, []byte{1}, p.cfg.LoginTTL)
	}
	switch {
	case err != nil:
		p.g.cfg.Logger.Error("gateway: auth page: store", "err", err)
		p.fail(w, http.StatusServiceUnavailable, "Unavailable", "This cannot be checked right now; try again in a moment.")
		return false
	case !ok:
		p.fail(w, http.StatusBadRequest, "Already used", "This response was used before: start again.")
		return false
	}
	return true
}

// validMark reports whether id has the shape of a mark: lower-case hex
// of markLen digits.
func validMark(id string) bool {
	if len(id) != markLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Authorizing an upstream.

// upstream returns the upstream id as the person who reaches it: one
// with OAuth that their Upstreams gives them, checked as for a call.
func (p *authPage) upstream(ctx context.Context, who mcphandler.Identity, id string) (*Upstream, error) {
	ups, err := p.g.cfg.Upstreams(ctx, who)
	if err != nil {
		return nil, err
	}
	for _, u := range p.g.checkUpstreams(ups) {
		if u.ID == id && u.OAuth != nil {
			return &u, nil
		}
	}
	return nil, nil
}

// start answers an authorization link: the person signs in first; the
// link must have been made for them; then the browser goes to the
// upstream's authorization server.
func (p *authPage) start(w http.ResponseWriter, r *http.Request) {
	l, ok := query(r, "l")
	lk, valid := p.a.openLink(l)
	if !ok || !valid {
		p.fail(w, http.StatusBadRequest, "Link not valid", "This authorization link is malformed or expired: call the tool again for a new one.")
		return
	}
	sess, ok := p.session(r)
	if !ok {
		p.login(w, r, "start?l="+l)
		return
	}
	if sess.Tenant != lk.Tenant || sess.Subject != lk.Subject {
		p.g.cfg.Logger.Warn("gateway: an authorization link opened by someone else was refused", "upstream", lk.Upstream)
		p.fail(w, http.StatusForbidden, "Not your link", "This authorization link was made for someone else. Nothing was authorized. "+
			"Sign in as yourself and call the tool from your own client to get your own link.")
		return
	}
	p.authorize(w, r, sess, lk.Upstream)
}

// authorize sends the signed-in person's browser to u's authorization
// server.
func (p *authPage) authorize(w http.ResponseWriter, r *http.Request, sess *sessionCookie, id string) {
	who := sess.identity()
	u, err := p.upstream(r.Context(), who, id)
	if err != nil || u == nil {
		if err != nil {
			p.g.cfg.Logger.Error("gateway: auth page: Upstreams", "err", err)
		}
		p.fail(w, http.StatusNotFound, "No such upstream", "There is no upstream "+id+" for you to authorize.")
		return
	}
	srv, err := p.a.server(r.Context(), u)
	if err != nil {
		p.g.cfg.Logger.Warn("gateway: auth page: discovery", "upstream", u.ID, "err", err)
		p.fail(w, http.StatusBadGateway, "Upstream unavailable", "Where to authorize upstream "+u.ID+" cannot be found right now; try again later.")
		return
	}
	ac := authCookie{State: randText(), Verifier: oauth2.GenerateVerifier(), Upstream: u.ID, Tenant: who.Tenant, Subject: who.Subject,
		Exp: time.Now().Add(p.cfg.LoginTTL).Unix()}
	p.setCookie(w, p.name+"-auth", &ac, p.cfg.LoginTTL)
	http.Redirect(w, r, p.authCodeURL(u, srv, &ac), http.StatusSeeOther)
}

// authCodeURL is the authorization request for u at srv (RFC 6749 §4.1.1
// with PKCE, RFC 7636, and the upstream as the resource, RFC 8707).
func (p *authPage) authCodeURL(u *Upstream, srv authServer, ac *authCookie) string {
	scopes := u.OAuth.Scopes
	if scopes == nil && srv.scope != "" {
		scopes = strings.Fields(srv.scope)
	}
	c := oauth2.Config{ClientID: u.OAuth.ClientID, Endpoint: oauth2.Endpoint{AuthURL: srv.authURL},
		RedirectURL: p.g.cfg.AuthURL + "callback", Scopes: scopes}
	return c.AuthCodeURL(ac.State, oauth2.S256ChallengeOption(ac.Verifier), oauth2.SetAuthURLParam("resource", u.URL))
}

// callback answers the upstream's authorization server: the state of
// this browser's authorization, made for the person still signed in,
// the code redeemed with its verifier at the server discovered now, the
// state used up once for every replica; then the tokens are kept for the
// person.
func (p *authPage) callback(w http.ResponseWriter, r *http.Request) {
	state, code, ok := p.redirected(w, r, "Not authorized", "The upstream's authorization server did not authorize it. Nothing was kept.")
	if !ok {
		return
	}
	var ac authCookie
	sess, signedIn := p.session(r)
	switch {
	case !p.cookie(r, p.name+"-auth", &ac, func() int64 { return ac.Exp }) || !hmac.Equal([]byte(ac.State), []byte(state)):
		p.fail(w, http.StatusBadRequest, "Authorization not recognised", "This authorization was not started in this browser, or it took too long: start again. Nothing was kept.")
		return
	case !signedIn || sess.Tenant != ac.Tenant || sess.Subject != ac.Subject:
		p.fail(w, http.StatusForbidden, "Signed in as someone else", "The person signed in is not the one who started this authorization. Nothing was kept.")
		return
	}
	who := sess.identity()
	u, err := p.upstream(r.Context(), who, ac.Upstream)
	if err != nil || u == nil {
		p.fail(w, http.StatusNotFound, "No such upstream", "There is no upstream "+ac.Upstream+" for you to authorize. Nothing was kept.")
		return
	}
	gr, err := p.redeem(r.Context(), u, code, &ac)
	if err != nil {
		p.g.cfg.Logger.Info("gateway: an upstream authorization failed", "upstream", u.ID, "err", err)
		p.fail(w, http.StatusBadGateway, "Authorization failed", "The authorization could not be completed: start again. Nothing was kept.")
		return
	}
	if !p.useState(w, r.Context(), who, "gw-authz/", state) {
		return
	}
	if err := p.a.put(r.Context(), who, u, gr); err != nil {
		p.g.cfg.Logger.Error("gateway: auth page: keeping tokens", "upstream", u.ID, "err", err)
		p.fail(w, http.StatusServiceUnavailable, "Unavailable", "The authorization cannot be kept right now; try again in a moment.")
		return
	}
	p.g.cfg.Logger.Info("gateway: upstream authorized", "upstream", u.ID, "tenant", who.Tenant, "subject", who.Subject)
	p.setCookie(w, p.name+"-auth", nil, -time.Second)
	p.render(w, http.StatusOK, &authView{Status: "authorized", Upstream: u.ID, Person: who, Base: p.base})
}

// redeem redeems the code at u's authorization server, as discovered
// now, with the verifier, for the upstream as the resource.
func (p *authPage) redeem(ctx context.Context, u *Upstream, code string, ac *authCookie) (*grant, error) {
	srv, err := p.a.server(ctx, u)
	if err != nil {
		return nil, err
	}
	gr, err := p.a.tokenRequest(ctx, u.OAuth, srv.tokenURL, url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {p.g.cfg.AuthURL + "callback"}, "code_verifier": {ac.Verifier}, "resource": {u.URL}})
	if err != nil {
		return nil, err
	}
	gr.Issuer, gr.TokenURL, gr.RevokeURL, gr.Client = srv.issuer, srv.tokenURL, srv.revokeURL, u.OAuth.ClientID
	return gr, nil
}

// The index and revocation.

// authView is what the template is executed with.
type authView struct {
	Status        string // "index", "authorized", "revoked", "error"
	Title, Detail string
	Upstream      string
	Person        mcphandler.Identity
	Upstreams     []upstreamView
	CSRF, Base    string
}

type upstreamView struct {
	ID         string
	Authorized bool
	Link       string // to authorize it
}

// index shows the signed-in person their upstreams with OAuth.
func (p *authPage) index(w http.ResponseWriter, r *http.Request) {
	sess, ok := p.session(r)
	if !ok {
		p.login(w, r, "")
		return
	}
	who := sess.identity()
	ups, err := p.g.cfg.Upstreams(r.Context(), who)
	if err != nil {
		p.g.cfg.Logger.Error("gateway: auth page: Upstreams", "err", err)
		p.fail(w, http.StatusServiceUnavailable, "Unavailable", "Your upstreams cannot be listed right now; try again in a moment.")
		return
	}
	v := &authView{Status: "index", Person: who, CSRF: p.csrfToken(sess), Base: p.base}
	for _, u := range p.g.checkUpstreams(ups) {
		if u.OAuth == nil {
			continue
		}
		_, err := p.a.credentials(r.Context(), who, &u)
		var req *AuthorizationRequiredError
		uv := upstreamView{ID: u.ID, Authorized: err == nil}
		if errors.As(err, &req) {
			uv.Link = req.URL
		}
		v.Upstreams = append(v.Upstreams, uv)
	}
	p.render(w, http.StatusOK, v)
}

// revoke forgets the signed-in person's tokens for one upstream, and asks
// its authorization server to revoke them.
func (p *authPage) revoke(w http.ResponseWriter, r *http.Request) {
	if err := p.cop.Check(r); err != nil {
		p.fail(w, http.StatusForbidden, "Cross-site request refused", "The form must be sent from this page itself. Nothing was revoked.")
		return
	}
	if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(strings.ToLower(ct)) != "application/x-www-form-urlencoded" {
		p.fail(w, http.StatusBadRequest, "Bad request", "The form must be sent as application/x-www-form-urlencoded. Nothing was revoked.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil || len(r.PostForm["upstream"]) != 1 || len(r.PostForm["csrf"]) != 1 {
		p.fail(w, http.StatusBadRequest, "Bad request", "The form must carry one upstream and one token. Nothing was revoked.")
		return
	}
	sess, ok := p.session(r)
	switch {
	case !ok:
		p.fail(w, http.StatusUnauthorized, "Not signed in", "Your sign-in is missing or expired: open this page again. Nothing was revoked.")
		return
	case !hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(p.csrfToken(sess))):
		p.fail(w, http.StatusForbidden, "Form expired", "The form does not match your sign-in: open this page again. Nothing was revoked.")
		return
	}
	who, id := sess.identity(), r.PostForm.Get("upstream")
	u, err := p.upstream(r.Context(), who, id)
	if err != nil || u == nil {
		p.fail(w, http.StatusNotFound, "No such upstream", "There is no upstream "+clip(id)+" of yours. Nothing was revoked.")
		return
	}
	if _, err := p.a.revoke(r.Context(), who, u); err != nil {
		p.g.cfg.Logger.Error("gateway: auth page: revoke", "upstream", u.ID, "err", err)
		p.fail(w, http.StatusServiceUnavailable, "Unavailable", "The authorization cannot be revoked right now; try again in a moment.")
		return
	}
	p.g.cfg.Logger.Info("gateway: upstream authorization revoked", "upstream", u.ID, "tenant", who.Tenant, "subject", who.Subject)
	p.render(w, http.StatusOK, &authView{Status: "revoked", Upstream: u.ID, Person: who, Base: p.base})
}

// csrfToken is the revocation form's token of sess: an HMAC of its
// random part.
func (p *authPage) csrfToken(sess *sessionCookie) string {
	sum := sha256.Sum256(p.csrf.Sign("revoke", []byte(sess.Nonce)))
	return hex.EncodeToString(sum[:16])
}

func (p *authPage) render(w http.ResponseWriter, status int, v *authView) {
	var b strings.Builder
	if err := authTemplate.ExecuteTemplate(&b, "page", v); err != nil {
		p.g.cfg.Logger.Error("gateway: auth page: template", "err", err)
		http.Error(w, "The page cannot be shown.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

func (p *authPage) fail(w http.ResponseWriter, status int, title, detail string) {
	p.render(w, status, &authView{Status: "error", Title: title, Detail: detail, Base: p.base})
}
