package page

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/internal/ownerindex"
)

// sessionCookie is the signed-in approver, for one approval (Approval) or
// for the inbox (Inbox, Approval empty): an inbox session decides any
// approval its person may decide, a session of one approval that one
// only. The member "i" is absent from a session of one approval, which
// keeps the bytes of earlier releases; an earlier release reads an inbox
// session as no session (its Approval is not an id).
type sessionCookie struct {
	Approval string `json:"a"`
	Inbox    bool   `json:"i,omitempty"`
	Subject  string `json:"s"`
	Tenant   string `json:"t,omitempty"`
	Role     string `json:"r,omitempty"`
	Nonce    string `json:"n"` // random: the CSRF token derives from it
	Exp      int64  `json:"e"` // unix s
}

// valid reports whether s is for exactly one thing: one approval, or
// the inbox.
func (s *sessionCookie) valid() bool {
	return s.Subject != "" && (s.Inbox && s.Approval == "" || !s.Inbox && approval.ValidID(s.Approval))
}

// covers reports whether s may decide approval id: an inbox session any,
// another only its own.
func (s *sessionCookie) covers(id string) bool { return s.Inbox || s.Approval == id }

func (s *sessionCookie) identity() approval.Identity {
	return approval.Identity{Subject: s.Subject, Tenant: s.Tenant, Role: s.Role}
}

// loginCookie is a sign-in in progress in this browser, to one approval
// or (Inbox) to the inbox; "i" is absent from the first, as in earlier
// releases.
type loginCookie struct {
	Approval string `json:"a"`
	Inbox    bool   `json:"i,omitempty"`
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Exp      int64  `json:"e"` // unix s
}

func (l *loginCookie) valid() bool {
	return l.Inbox && l.Approval == "" || !l.Inbox && approval.ValidID(l.Approval)
}

// target is where the sign-in returns: the approval's page, or the inbox.
func (h *Handler) target(approvalID string) string { return h.base + approvalID }

// encodeCookie signs v for the cookie name.
func (h *Handler) encodeCookie(name string, v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(h.mac.Sign(name, b))
}

// decodeCookie reads the cookie name of r into v and reports whether it
// is present, within MaxCookieBytes, signed for name, and unexpired (exp
// returns v's expiry). Anything else is treated as absent.
func (h *Handler) decodeCookie(r *http.Request, name string, v any, exp func() int64) bool {
	c, err := r.Cookie(name)
	if err != nil {
		return false
	}
	return h.openCookie(name, c.Value, v) && time.Now().Unix() < exp()
}

// openCookie verifies and decodes one cookie value.
func (h *Handler) openCookie(name, value string, v any) bool {
	if len(value) > MaxCookieBytes {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(value)
	if err != nil {
		return false
	}
	p, err := h.mac.Open(name, b)
	if err != nil {
		return false
	}
	return json.Unmarshal(p, v) == nil
}

func (h *Handler) setCookie(w http.ResponseWriter, name, value string, ttl time.Duration) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: h.cookiePath, MaxAge: int(ttl / time.Second),
		HttpOnly: true, Secure: !h.cfg.InsecureCookies, SameSite: http.SameSiteLaxMode,
	})
}

// session returns the signed-in approver of r, if any.
func (h *Handler) session(r *http.Request) (*sessionCookie, bool) {
	var s sessionCookie
	if !h.decodeCookie(r, h.name, &s, func() int64 { return s.Exp }) || !s.valid() {
		return nil, false
	}
	return &s, true
}

func randText() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// login starts a sign-in for approval id, or for the inbox (id ""): it
// sets the login cookie (state, nonce, PKCE verifier) and redirects to the
// provider.
func (h *Handler) login(w http.ResponseWriter, r *http.Request, id string) {
	lc := loginCookie{Approval: id, Inbox: id == "", State: randText(), Nonce: randText(), Verifier: oauth2.GenerateVerifier(),
		Exp: time.Now().Add(h.cfg.LoginTTL).Unix()}
	h.setCookie(w, h.name+"-login", h.encodeCookie(h.name+"-login", &lc), h.cfg.LoginTTL)
	u := h.oauth.AuthCodeURL(lc.State, oauth2.S256ChallengeOption(lc.Verifier), oauth2.SetAuthURLParam("nonce", lc.Nonce))
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// callback answers the provider's redirect. Every check comes before the
// session cookie is set. For a sign-in to one approval the state is used
// up before the code is redeemed, so a replayed callback fails whatever
// its code; the mark counts against the approval. A sign-in to the inbox
// has no approval to count against, and anyone can start one: its code is
// redeemed and the ID token verified first, and the state then used up,
// counted against the person signed in (useInboxState), so that only
// someone the provider signs in makes marks. Its replayed callback fails
// too (the state is used), after a second redemption that the provider
// refuses for a used code.
func (h *Handler) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		h.cfg.Logger.Info("page: sign-in refused by the provider", "error", clip(e, 64), "description", clip(q.Get("error_description"), 200))
		h.fail(w, http.StatusForbidden, "Sign-in failed", "The identity provider did not sign you in. Nothing was decided.")
		return
	}
	state, code := q.Get("state"), q.Get("code")
	if state == "" || code == "" || len(state) > MaxStateBytes || len(code) > MaxCodeBytes || len(q["state"]) != 1 || len(q["code"]) != 1 {
		h.fail(w, http.StatusBadRequest, "Bad sign-in response", "The sign-in response is malformed. Nothing was decided.")
		return
	}
	var lc loginCookie
	if !h.decodeCookie(r, h.name+"-login", &lc, func() int64 { return lc.Exp }) || !lc.valid() ||
		!hmac.Equal([]byte(lc.State), []byte(state)) {
		h.fail(w, http.StatusBadRequest, "Sign-in not recognised", "This sign-in was not started in this browser, or it took too long: open the approval link again. Nothing was decided.")
		return
	}
	if !lc.Inbox && !h.useState(w, r.Context(), "approval-logins/"+lc.Approval, state) {
		return
	}
	who, err := h.redeem(r.Context(), code, &lc)
	if err != nil {
		h.cfg.Logger.Info("page: sign-in failed", "err", err)
		h.fail(w, http.StatusBadRequest, "Sign-in failed", "The sign-in could not be verified: open the link again. Nothing was decided.")
		return
	}
	if lc.Inbox && !h.useState(w, r.Context(), inboxLoginsKey(who), state) {
		return
	}
	sc := sessionCookie{Approval: lc.Approval, Inbox: lc.Inbox, Subject: who.Subject, Tenant: who.Tenant, Role: who.Role,
		Nonce: randText(), Exp: time.Now().Add(h.cfg.SessionTTL).Unix()}
	h.setCookie(w, h.name+"-login", "", -time.Second)
	h.setCookie(w, h.name, h.encodeCookie(h.name, &sc), h.cfg.SessionTTL)
	http.Redirect(w, r, h.target(lc.Approval), http.StatusSeeOther)
}

// inboxLoginsKey names the index of the inbox sign-ins of who (tenant and
// subject, length-prefixed and hashed).
func inboxLoginsKey(who approval.Identity) string {
	sum := sha256.New()
	for _, p := range []string{who.Tenant, who.Subject} {
		sum.Write(binary.AppendUvarint(nil, uint64(len(p))))
		sum.Write([]byte(p))
	}
	return "approval-inbox-logins/" + hex.EncodeToString(sum.Sum(nil))
}

// useState marks state, of a sign-in counted in the index under key,
// used, once for every replica; false (with the page written) if it was
// used before, the index held Config.MaxSignInsPerApproval sign-ins
// within LoginTTL, or the store failed. Each mark first counts in its
// index (signed, purpose "approval-page-logins", package
// internal/ownerindex) for LoginTTL, as long as the mark lives: the
// index approval-logins/<id> of the approval signed in to (a mark costs
// two requests and the approval's URL, not a sign-in), or
// approval-inbox-logins/<digest> of the person who signed in to the
// inbox (inboxLoginsKey).
func (h *Handler) useState(w http.ResponseWriter, ctx context.Context, key, state string) bool {
	sum := sha256.Sum256([]byte(state))
	mark := hex.EncodeToString(sum[:])
	err := h.logins.Admit(ctx, key, mark, time.Now().Add(h.cfg.LoginTTL).UnixMilli(), nil)
	if _, full := errors.AsType[*ownerindex.FullError](err); full {
		h.fail(w, http.StatusTooManyRequests, "Too many sign-ins", "Too many sign-ins to this page were started in the last "+
			h.cfg.LoginTTL.String()+": try again later. Nothing was decided.")
		return false
	}
	ok := false
	if err == nil {
		ok, err = h.cfg.Store.PutIfAbsent(ctx, "approval-login/"+mark, []byte{1}, h.cfg.LoginTTL)
	}
	switch {
	case err != nil:
		h.cfg.Logger.Error("page: session store", "err", err)
		h.fail(w, http.StatusServiceUnavailable, "Unavailable", "The sign-in cannot be checked right now; try again in a moment.")
		return false
	case !ok:
		h.fail(w, http.StatusBadRequest, "Sign-in already used", "This sign-in response was used before: open the link again. Nothing was decided.")
		return false
	}
	return true
}

// redeem exchanges code for tokens with the PKCE verifier, verifies the
// ID token and its nonce, and maps it to the approver.
func (h *Handler) redeem(ctx context.Context, code string, lc *loginCookie) (approval.Identity, error) {
	ctx = h.clientContext(ctx)
	tok, err := h.oauth.Exchange(ctx, code, oauth2.VerifierOption(lc.Verifier))
	if err != nil {
		return approval.Identity{}, err
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok || raw == "" {
		return approval.Identity{}, errors.New("no id_token in the token response")
	}
	idt, err := h.verifier.Verify(ctx, raw)
	if err != nil {
		return approval.Identity{}, err
	}
	if !hmac.Equal([]byte(idt.Nonce), []byte(lc.Nonce)) {
		return approval.Identity{}, errors.New("the ID token's nonce is not the sign-in's")
	}
	who, err := h.cfg.Identity(ctx, idt)
	if err == nil && (who.Subject == "" || len(who.Subject) > approval.MaxFieldBytes || len(who.Tenant) > approval.MaxFieldBytes || len(who.Role) > approval.MaxFieldBytes) {
		err = errors.New("the approver's subject is empty, or a claim is too long")
	}
	return who, err
}

// clip cuts s to n bytes for a log line.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// markLen is the length of a sign-in mark: the hex SHA-256 of its state.
const markLen = 2 * sha256.Size

// validMark reports whether id has the shape of a sign-in mark.
func validMark(id string) bool {
	if len(id) != markLen {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}
