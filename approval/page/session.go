package page

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
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

// sessionCookie is the signed-in approver for one approval.
type sessionCookie struct {
	Approval string `json:"a"`
	Subject  string `json:"s"`
	Tenant   string `json:"t,omitempty"`
	Role     string `json:"r,omitempty"`
	Nonce    string `json:"n"` // random: the CSRF token derives from it
	Exp      int64  `json:"e"` // unix s
}

func (s *sessionCookie) identity() approval.Identity {
	return approval.Identity{Subject: s.Subject, Tenant: s.Tenant, Role: s.Role}
}

// loginCookie is a sign-in in progress in this browser.
type loginCookie struct {
	Approval string `json:"a"`
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Exp      int64  `json:"e"` // unix s
}

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
	if !h.decodeCookie(r, h.name, &s, func() int64 { return s.Exp }) || !approval.ValidID(s.Approval) || s.Subject == "" {
		return nil, false
	}
	return &s, true
}

func randText() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// login starts a sign-in for approval id: it sets the login cookie (state,
// nonce, PKCE verifier) and redirects to the provider.
func (h *Handler) login(w http.ResponseWriter, r *http.Request, id string) {
	lc := loginCookie{Approval: id, State: randText(), Nonce: randText(), Verifier: oauth2.GenerateVerifier(),
		Exp: time.Now().Add(h.cfg.LoginTTL).Unix()}
	h.setCookie(w, h.name+"-login", h.encodeCookie(h.name+"-login", &lc), h.cfg.LoginTTL)
	u := h.oauth.AuthCodeURL(lc.State, oauth2.S256ChallengeOption(lc.Verifier), oauth2.SetAuthURLParam("nonce", lc.Nonce))
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// callback answers the provider's redirect. Every check comes before the
// session cookie is set, and the state is used up before the code is
// redeemed, so a replayed callback fails whatever its code.
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
	if !h.decodeCookie(r, h.name+"-login", &lc, func() int64 { return lc.Exp }) || !approval.ValidID(lc.Approval) ||
		!hmac.Equal([]byte(lc.State), []byte(state)) {
		h.fail(w, http.StatusBadRequest, "Sign-in not recognised", "This sign-in was not started in this browser, or it took too long: open the approval link again. Nothing was decided.")
		return
	}
	if !h.useState(w, r.Context(), lc.Approval, state) {
		return
	}
	who, err := h.redeem(r.Context(), code, &lc)
	if err != nil {
		h.cfg.Logger.Info("page: sign-in failed", "err", err)
		h.fail(w, http.StatusBadRequest, "Sign-in failed", "The sign-in could not be verified: open the approval link again. Nothing was decided.")
		return
	}
	sc := sessionCookie{Approval: lc.Approval, Subject: who.Subject, Tenant: who.Tenant, Role: who.Role,
		Nonce: randText(), Exp: time.Now().Add(h.cfg.SessionTTL).Unix()}
	h.setCookie(w, h.name+"-login", "", -time.Second)
	h.setCookie(w, h.name, h.encodeCookie(h.name, &sc), h.cfg.SessionTTL)
	http.Redirect(w, r, h.base+lc.Approval, http.StatusSeeOther)
}

// useState marks state, of a sign-in to approval id, used, once for every
// replica; false (with the page written) if it was used before, the
// approval had Config.MaxSignInsPerApproval sign-ins within LoginTTL, or
// the store failed. Each mark first counts against its approval, in the
// index approval-logins/<id> (signed, purpose "approval-page-logins",
// package internal/ownerindex) for LoginTTL, as long as the mark lives:
// a mark costs two requests and the approval's URL, not a sign-in.
func (h *Handler) useState(w http.ResponseWriter, ctx context.Context, id, state string) bool {
	sum := sha256.Sum256([]byte(state))
	mark := hex.EncodeToString(sum[:])
	err := h.logins.Admit(ctx, "approval-logins/"+id, mark, time.Now().Add(h.cfg.LoginTTL).UnixMilli(), nil)
	if _, full := errors.AsType[*ownerindex.FullError](err); full {
		h.fail(w, http.StatusTooManyRequests, "Too many sign-ins", "Too many sign-ins to this approval were started in the last "+
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
		h.fail(w, http.StatusBadRequest, "Sign-in already used", "This sign-in response was used before: open the approval link again. Nothing was decided.")
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
