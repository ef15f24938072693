package page

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/internal/ownerindex"
	"github.com/mcphandler/mcphandler/internal/sign"
	"github.com/mcphandler/mcphandler/session"
)

// Defaults and bounds of Config.
const (
	DefaultSessionTTL = 10 * time.Minute
	DefaultLoginTTL   = 10 * time.Minute
	// DefaultMaxSignInsPerApproval is the default of
	// Config.MaxSignInsPerApproval.
	DefaultMaxSignInsPerApproval = 20
	// MaxFormBytes bounds the body of a decision POST; a larger one is
	// refused with 400.
	MaxFormBytes = 4 << 10
	// MaxCookieBytes bounds each cookie value read; a longer one is
	// treated as absent.
	MaxCookieBytes = 4 << 10
	// MaxStateBytes and MaxCodeBytes bound the state and code of the
	// callback; longer ones are refused with 400.
	MaxStateBytes = 256
	MaxCodeBytes  = 4 << 10
)

// IdentityFunc maps a verified ID token to the approver. It may refuse the
// person with an error (the page says sign-in failed, and logs err). It is
// called concurrently.
type IdentityFunc func(ctx context.Context, tok *oidc.IDToken) (approval.Identity, error)

// Config configures a [Handler]. Zero fields take the defaults noted.
type Config struct {
	// Approvals holds the approvals decided here. Required.
	Approvals *approval.Store
	// Store keeps the single-use marks of sign-in states, shared by every
	// replica (the handler's session store). Required.
	Store session.Records
	// Issuer is the OpenID provider's issuer URL; its discovery document
	// is read at New. Required.
	Issuer string
	// ClientID and ClientSecret are the client registered at the provider
	// for the authorization code flow. ClientID is required; the ID
	// token's audience must contain it.
	ClientID, ClientSecret string
	// RedirectURL is the absolute URL of <mount>/callback, registered at
	// the provider. Required: the mount (its directory), the trusted
	// origin of decision POSTs and, with InsecureCookies, the cookies' path
	// derive from it.
	RedirectURL string
	// Scopes are requested besides "openid". If nil, {"profile", "email"}.
	Scopes []string
	// Identity maps the ID token to the approver. Set it to MapClaims of
	// the auth.ClaimsMapping the handler's bearer tokens are mapped with,
	// so that a person approves as the tenant, subject and role they call
	// tools with. If nil, DefaultIdentity.
	Identity IdentityFunc
	// Keys sign the cookies, each at least 32 bytes: the first signs, all
	// verify (rotate by prepending). Required; they may be the handler's
	// StateKeys (the cookie keys are derived for this purpose only).
	Keys [][]byte
	// SessionTTL is how long a sign-in lasts for one approval. If zero,
	// DefaultSessionTTL (10 minutes).
	SessionTTL time.Duration
	// LoginTTL is how long a sign-in may take, from the redirect to the
	// provider to the callback. If zero, DefaultLoginTTL (10 minutes).
	LoginTTL time.Duration
	// MaxSignInsPerApproval bounds the sign-in callbacks the page accepts
	// for one approval within LoginTTL, across every replica sharing
	// Store: each uses up its state with a mark kept for LoginTTL, and
	// anyone holding the approval's URL can start one, without signing
	// in. A callback past it is refused (429) before anything is written.
	// If zero, DefaultMaxSignInsPerApproval (20); at most 1024.
	MaxSignInsPerApproval int
	// Templates replaces the pages: it must define "page", which is
	// executed with a *View, and may define "inbox", executed with an
	// *InboxView (else the built-in inbox is used). If nil, the built-in
	// pages are used.
	Templates *template.Template
	// HTTPClient is used to reach the provider. If nil,
	// http.DefaultClient.
	HTTPClient *http.Client
	// InsecureCookies drops the Secure attribute and the __Secure- name
	// prefix of the cookies, so that the page works over plain HTTP. It
	// MUST NOT be set in production: only for tests and localhost.
	InsecureCookies bool
	// Logger receives every decision (Info: approval id, state, tool,
	// asker and approver) and why a sign-in or a request failed (the page
	// says less). If nil, slog.Default.
	Logger *slog.Logger
}

// Handler serves the approval page. It is safe for concurrent use.
type Handler struct {
	cfg      Config
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
	mac      *sign.Signer
	csrf     *sign.Signer
	logins   *ownerindex.Index // the sign-ins of each approval (session.go)
	cop      *http.CrossOriginProtection
	tmpl     *template.Template
	inboxT   *template.Template // defines "inbox"
	base     string             // path of the mount, ending in "/"
	// name is the name of the session cookie (the login cookie's adds
	// "-login"); cookiePath their path.
	name, cookiePath string
}

// New returns the handler for cfg, after reading the provider's discovery
// document with ctx. It fails if a required field is missing or the
// provider cannot be discovered.
func New(ctx context.Context, cfg Config) (*Handler, error) {
	if cfg.Approvals == nil || cfg.Store == nil || cfg.Issuer == "" || cfg.ClientID == "" || cfg.RedirectURL == "" {
		return nil, errors.New("page: Approvals, Store, Issuer, ClientID and RedirectURL are required")
	}
	cb, err := url.Parse(cfg.RedirectURL)
	if err != nil || cb.Scheme == "" || cb.Host == "" || path.Base(cb.Path) != "callback" {
		return nil, errors.New("page: RedirectURL must be an absolute URL ending in /callback")
	}
	h := &Handler{cfg: cfg, cop: http.NewCrossOriginProtection(), tmpl: cfg.Templates, base: path.Dir(cb.Path)}
	if !strings.HasSuffix(h.base, "/") {
		h.base += "/"
	}
	if err := h.cop.AddTrustedOrigin(cb.Scheme + "://" + cb.Host); err != nil {
		return nil, fmt.Errorf("page: %w", err)
	}
	if h.mac, err = sign.NewSigner("approval-page-cookie", cfg.Keys...); err != nil {
		return nil, fmt.Errorf("page: Keys: %w", err)
	}
	h.csrf, _ = sign.NewSigner("approval-page-csrf", cfg.Keys...)
	logins, _ := sign.NewSigner("approval-page-logins", cfg.Keys...)
	if h.tmpl == nil {
		h.tmpl = defaultTemplates
	} else if h.tmpl.Lookup("page") == nil {
		return nil, errors.New(`page: Templates must define "page"`)
	}
	h.inboxT = defaultTemplates
	if h.tmpl.Lookup("inbox") != nil {
		h.inboxT = h.tmpl
	}
	h.setDefaults()
	h.logins = ownerindex.New(ownerindex.Config{Store: cfg.Store, Signer: logins, Max: h.cfg.MaxSignInsPerApproval,
		ValidID: validMark, MaxIDLen: markLen})
	p, err := oidc.NewProvider(h.clientContext(ctx), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("page: discovery: %w", err)
	}
	h.verifier = p.Verifier(&oidc.Config{ClientID: cfg.ClientID})
	h.oauth = oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: cfg.RedirectURL, Scopes: append([]string{oidc.ScopeOpenID}, h.cfg.Scopes...)}
	h.name, h.cookiePath = "mcphandler-approval", h.base
	if !cfg.InsecureCookies {
		// __Host-: Secure, Path=/ and no Domain, so that no other host
		// (a sibling subdomain) can plant a cookie the page would read.
		h.name, h.cookiePath = "__Host-mcphandler-approval", "/"
	}
	return h, nil
}

func (h *Handler) setDefaults() {
	c := &h.cfg
	if c.Scopes == nil {
		c.Scopes = []string{"profile", "email"}
	}
	c.Scopes = slices.DeleteFunc(slices.Clone(c.Scopes), func(s string) bool { return s == oidc.ScopeOpenID })
	if c.Identity == nil {
		c.Identity = DefaultIdentity
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.MaxSignInsPerApproval <= 0 {
		c.MaxSignInsPerApproval = DefaultMaxSignInsPerApproval
	}
	if c.LoginTTL <= 0 {
		c.LoginTTL = DefaultLoginTTL
	}
	if c.HTTPClient == nil {
		c.HTTPClient = http.DefaultClient
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// clientContext makes go-oidc and oauth2 use the configured client.
func (h *Handler) clientContext(ctx context.Context) context.Context {
	return oidc.ClientContext(context.WithValue(ctx, oauth2.HTTPClient, h.cfg.HTTPClient), h.cfg.HTTPClient)
}

// ServeHTTP serves the inbox at the mount itself (<mount>/, or "/" when
// the host strips the mount's prefix), and otherwise routes on the last
// segment of the path: "callback", or an approval id (approval.ValidID);
// anything else is 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setHeaders(w)
	seg := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	// The inbox is the mount itself: its path, or "/" under StripPrefix.
	inbox := r.URL.Path == h.base || r.URL.Path == "/"
	switch {
	case inbox && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		h.inbox(w, r)
	case inbox && r.Method == http.MethodPost:
		h.decideInbox(w, r)
	case seg == "callback" && r.Method == http.MethodGet:
		h.callback(w, r)
	case approval.ValidID(seg) && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		h.show(w, r, seg)
	case approval.ValidID(seg) && r.Method == http.MethodPost:
		h.decide(w, r, seg)
	case inbox || seg == "callback" || approval.ValidID(seg):
		w.Header().Set("Allow", "GET, POST")
		h.fail(w, http.StatusMethodNotAllowed, "Method not allowed", "")
	default:
		h.fail(w, http.StatusNotFound, "Not found", "There is no approval at this address.")
	}
}

// setHeaders forbids scripts, framing, caching and referrers: the page's
// URL names an approval, and the callback's carries a code.
func setHeaders(w http.ResponseWriter) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Content-Type-Options", "nosniff")
}

// show answers GET <mount>/<id>.
func (h *Handler) show(w http.ResponseWriter, r *http.Request, id string) {
	a, err := h.cfg.Approvals.Get(r.Context(), id)
	if err != nil {
		h.storeFailed(w, err)
		return
	}
	sess, ok := h.session(r)
	if !ok || !sess.covers(id) {
		h.login(w, r, id)
		return
	}
	who := sess.identity()
	refused := h.cfg.Approvals.Check(r.Context(), a, who)
	v := &View{Approver: who, Approval: h.shown(a, refused)}
	switch {
	case a.State == approval.Expired:
		v.Status = StatusExpired
		h.render(w, http.StatusGone, v)
	case a.State == approval.Withdrawn:
		v.Status = StatusWithdrawn
		h.render(w, http.StatusGone, v)
	case a.State != approval.Pending:
		v.Status = StatusDecided
		h.render(w, http.StatusConflict, v)
	case refused != nil:
		v.Status, v.Reason = StatusNotAllowed, reasonOf(refused)
		h.render(w, http.StatusForbidden, v)
	default:
		v.Status, v.CSRF, v.Action = StatusAsk, h.csrfToken(sess), h.base+id
		h.render(w, http.StatusOK, v)
	}
}

// shown is what of a the page shows to an approver the policy admits
// (refused nil) or refuses: nothing of the call to a refused one, who may
// be of another workspace.
func (h *Handler) shown(a *approval.Approval, refused error) *ApprovalView {
	if refused != nil {
		return nil
	}
	return viewOf(a, time.Now(), h.base)
}

// storeFailed answers a failed read of an approval.
func (h *Handler) storeFailed(w http.ResponseWriter, err error) {
	if errors.Is(err, approval.ErrNotFound) {
		h.fail(w, http.StatusNotFound, "Not found", "There is no approval at this address: the link is wrong, or it expired long ago.")
		return
	}
	h.cfg.Logger.Error("page: approval store", "err", err)
	h.fail(w, http.StatusServiceUnavailable, "Unavailable", "The approval cannot be read right now; try again in a moment.")
}

// decide answers POST <mount>/<id>. Every check comes before the one call
// that decides.
func (h *Handler) decide(w http.ResponseWriter, r *http.Request, id string) {
	if err := h.cop.Check(r); err != nil {
		h.fail(w, http.StatusForbidden, "Cross-site request refused", "The decision must be sent from the approval page itself. Nothing was decided.")
		return
	}
	approve, token, msg := readForm(w, r)
	if msg != "" {
		h.fail(w, http.StatusBadRequest, "Bad request", msg+" Nothing was decided.")
		return
	}
	sess, ok := h.session(r)
	switch {
	case !ok:
		h.fail(w, http.StatusUnauthorized, "Not signed in", "Your sign-in is missing or expired: open the approval link again. Nothing was decided.")
		return
	case !sess.covers(id):
		h.fail(w, http.StatusForbidden, "Wrong approval", "Your sign-in is for another approval: open this approval's link again. Nothing was decided.")
		return
	case !hmacEqual(token, h.csrfToken(sess)):
		h.fail(w, http.StatusForbidden, "Form expired", "The form does not match your sign-in: open the approval link again. Nothing was decided.")
		return
	}
	who := sess.identity()
	a, err := h.cfg.Approvals.Decide(r.Context(), id, who, approve)
	if err == nil {
		h.cfg.Logger.Info("page: approval decided", "approval", id, "state", string(a.State), "tool", a.Tool,
			"asker", a.Asker.Subject, "tenant", a.Asker.Tenant, "approver", who.Subject, "approverTenant", who.Tenant)
	}
	h.result(w, r, who, a, err)
}

// result writes the page of the decision Decide returned.
func (h *Handler) result(w http.ResponseWriter, r *http.Request, who approval.Identity, a *approval.Approval, err error) {
	v := &View{Approver: who}
	if a != nil {
		v.Approval = h.shown(a, h.cfg.Approvals.Check(r.Context(), a, who))
	}
	status := http.StatusOK
	switch {
	case err == nil && a.State == approval.Approved:
		v.Status = StatusApproved
	case err == nil:
		v.Status = StatusDeclined
	case errors.Is(err, approval.ErrNotAllowed):
		v.Status, v.Reason, status = StatusNotAllowed, reasonOf(err), http.StatusForbidden
	case errors.Is(err, approval.ErrDecided):
		v.Status, status = StatusDecided, http.StatusConflict
	case errors.Is(err, approval.ErrExpired):
		v.Status, status = StatusExpired, http.StatusGone
	case errors.Is(err, approval.ErrWithdrawn):
		v.Status, status = StatusWithdrawn, http.StatusGone
	default:
		h.storeFailed(w, err)
		return
	}
	h.render(w, status, v)
}

// readForm reads the decision form: at most MaxFormBytes of
// application/x-www-form-urlencoded, with exactly one "decision"
// ("approve" or "decline") and one "csrf". msg says what is wrong.
func readForm(w http.ResponseWriter, r *http.Request) (approve bool, token, msg string) {
	if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(strings.ToLower(ct)) != "application/x-www-form-urlencoded" {
		return false, "", "The form must be sent as application/x-www-form-urlencoded."
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxFormBytes)
	if err := r.ParseForm(); err != nil {
		return false, "", fmt.Sprintf("The form is malformed or larger than %d bytes.", MaxFormBytes)
	}
	f := r.PostForm
	if len(f["decision"]) != 1 || len(f["csrf"]) != 1 {
		return false, "", "The form must carry one decision and one token."
	}
	switch f.Get("decision") {
	case "approve":
		approve = true
	case "decline":
	default:
		return false, "", `The decision must be "approve" or "decline".`
	}
	return approve, f.Get("csrf"), ""
}

// csrfToken is the form token of sess: an HMAC of the session's random
// part and its approval (or "inbox", which is no approval id), so a token
// is valid for one session only, and a session's of one approval for
// that approval only.
func (h *Handler) csrfToken(sess *sessionCookie) string {
	scope := sess.Approval
	if sess.Inbox {
		scope = "inbox"
	}
	sum := sha256.Sum256(h.csrf.Sign(scope, []byte(sess.Nonce)))
	return fmt.Sprintf("%x", sum[:16])
}

// hmacEqual compares two tokens in constant time.
func hmacEqual(a, b string) bool { return hmac.Equal([]byte(a), []byte(b)) }

// reasonOf is the text of a refusal, for the page.
func reasonOf(err error) string {
	var na *approval.NotAllowedError
	if !errors.As(err, &na) {
		return ""
	}
	switch na.Reason {
	case approval.ReasonSelf:
		return "You asked for this call yourself: another person must approve it."
	case approval.ReasonTenant:
		return "You are signed in for another workspace than the one this call is for."
	case approval.ReasonRole:
		return "Your role is too low to approve this call."
	case approval.ReasonNoIdentity:
		return "Your sign-in does not say who you are."
	}
	return "The workspace's rules do not let you approve this call."
}
