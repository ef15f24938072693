package mcphandler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"time"
)

// Re-authentication: a request is authenticated when it arrives, but what
// it starts may outlive its credentials. Whatever outlives them re-checks
// its caller the same way: Config.Authenticate runs again on the request
// every Config.Sessions.KeepAlive, and a failure of any kind (a revoked token and
// an unreachable authorization server alike) or an identity of another
// tenant or subject ends it, as does Identity.Expires (a later check that
// reports an earlier expiry moves the end forward).
//
//   - A long-lived stream (the session's GET stream, a resumed POST
//     stream, subscriptions/listen, the 2024-11-05 stream) checks on its
//     own loop (callerCheck, run by runStream).
//   - A POST whose answer waits for something other than its own tool's
//     work (a confirm, an approval, a question to the client, a task's
//     result) arms its stream's watch when it starts to wait (callerWatch,
//     stream.watchCaller): timers, no goroutine, until the check fails or
//     the request ends. A request that answers without waiting arms
//     nothing.
//   - Every POST's final message is checked before it goes (stream.finish):
//     after Identity.Expires it never goes; and a request that waited or
//     is older than KeepAlive runs Authenticate once more first, so that a
//     result is never delivered after its caller's credentials failed a
//     check, however short the wait.
//
// A POST whose caller fails ends with the error a new request with those
// credentials would get: HTTP 401 with the challenge (403, or 503 with
// Retry-After when they cannot be checked) if nothing was sent yet, else
// that JSON-RPC error as the stream's final message (logged, so that a
// resumed stream ends with it too).

// errCallerChanged is the failure of a check whose Authenticate answered
// another tenant or subject.
var errCallerChanged = errors.New("mcphandler: the credentials now name another caller")

// errCredentialsExpired is the failure of a check past Identity.Expires.
var errCredentialsExpired = errors.New("mcphandler: the credentials expired")

// errCallerLost is what a wait returns when its caller failed a check: the
// request's stream has ended, as if the client had gone (it matches
// ErrDisconnected).
var errCallerLost error = callerLostError{}

type callerLostError struct{}

func (callerLostError) Error() string {
	return "mcphandler: the caller's credentials failed a re-check: the request's stream ended"
}

func (callerLostError) Is(target error) bool { return target == ErrDisconnected }

// sameCaller reports whether a and b name the same tenant and subject
// (the binding of sessions, confirms and tasks: Identity.key).
func sameCaller(a, b Identity) bool { return a.Tenant == b.Tenant && a.Subject == b.Subject }

// errAuthPanicked is the failure of a re-check whose Authenticate
// panicked off the request's goroutine: the credentials could not be
// checked (503).
var errAuthPanicked = fmt.Errorf("mcphandler: Config.Authenticate panicked: %w", ErrAuthUnavailable)

// recheckWait is recheck for a waiting request, whose check may run on a
// timer's goroutine, where a panic would end the process: a panic of
// Authenticate is logged and fails the check.
func (ss *streams) recheckWait(r *http.Request, id Identity) (got Identity, err error) {
	defer func() {
		if v := recover(); v != nil {
			ss.cfg.Logger.Error("mcphandler: Config.Authenticate panicked re-checking a waiting request", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			got, err = Identity{}, errAuthPanicked
		}
	}()
	return ss.recheck(r, id)
}

// recheck runs Authenticate again on r, whose caller was id, and returns
// the identity it answers now, or why it no longer answers id.
func (ss *streams) recheck(r *http.Request, id Identity) (Identity, error) {
	if r.Context().Err() != nil {
		// The client left (a 2025 POST's work goes on): the check is
		// about the credentials, not the connection.
		r = r.WithContext(context.WithoutCancel(r.Context()))
	}
	got, err := ss.cfg.Authenticate(r)
	if err == nil && !sameCaller(got, id) {
		err = errCallerChanged
	}
	return got, err
}

// callerFailure is how a request whose credentials failed is answered:
// the HTTP status (when nothing was sent yet), the JSON-RPC error, and the
// WWW-Authenticate challenge ("" for none).
type callerFailure struct {
	status     int
	code       Code
	msg        string
	challenge  string
	retryAfter bool // 503: the credentials could not be checked now
}

// authFailure maps the error of Authenticate on r (or of a re-check) to
// its answer: 503 with Retry-After for ErrAuthUnavailable, 403 for
// ErrForbidden, else 401 with Config.Challenge's challenge.
func (ss *streams) authFailure(r *http.Request, err error) *callerFailure {
	if errors.Is(err, ErrAuthUnavailable) {
		return &callerFailure{status: http.StatusServiceUnavailable, code: CodeStoreUnavailable,
			msg: "Service Unavailable: credentials cannot be checked now", retryAfter: true}
	}
	f := &callerFailure{status: http.StatusUnauthorized, code: CodeInvalidRequest, msg: "Unauthorized", challenge: `Bearer realm="mcp"`}
	if errors.Is(err, ErrForbidden) {
		f.status, f.msg = http.StatusForbidden, "Forbidden"
	}
	if ss.cfg.Challenge != nil {
		f.challenge = ss.cfg.Challenge(r, err)
	}
	return f
}

// setHeader sets the headers of f's HTTP answer on hdr.
func (f *callerFailure) setHeader(hdr http.Header) {
	if f.retryAfter {
		hdr.Set("Retry-After", "5")
	}
	if f.challenge != "" {
		hdr.Set("WWW-Authenticate", f.challenge)
	}
}

// callerCheck is what a long-lived stream opened by r for the caller id
// checks of its caller, on the stream's own loop (see runStream), so that
// a stream costs no goroutine of its own for it. The stream ends at
// id.Expires, or as soon as Config.Authenticate, run again on r every
// KeepAlive, fails (for any reason: a revoked token and an unreachable
// authorization server alike) or names another tenant or subject; a later
// check that reports an earlier expiry moves the end forward. While
// Authenticate runs, the stream sends nothing: it must not block for long.
// A nil *callerCheck checks nothing.
type callerCheck struct {
	ss  *streams
	r   *http.Request
	id  Identity
	exp expiry
}

// checkCaller returns the check of a stream opened by r for id, or nil if
// nothing can end it: no Authenticate hook and no expiry.
func (ss *streams) checkCaller(r *http.Request, id Identity) *callerCheck {
	if ss.cfg.Authenticate == nil && id.Expires.IsZero() {
		return nil
	}
	c := &callerCheck{ss: ss, r: r, id: id}
	c.exp.set(id.Expires)
	return c
}

// expired fires when the caller's credentials expire.
func (c *callerCheck) expired() <-chan time.Time {
	if c == nil {
		return nil
	}
	return c.exp.c
}

// recheck runs Authenticate again and reports whether it still answers the
// stream's caller, moving the expiry earlier if it says so.
func (c *callerCheck) recheck() bool {
	if c == nil || c.ss.cfg.Authenticate == nil {
		return true
	}
	got, err := c.ss.recheck(c.r, c.id)
	if err != nil {
		return false
	}
	c.exp.set(got.Expires)
	return true
}

// stop releases the check's timer.
func (c *callerCheck) stop() {
	if c != nil {
		c.exp.stop()
	}
}

// expiry fires c at the earliest expiry time it was given.
type expiry struct {
	at    time.Time
	timer *time.Timer
	c     <-chan time.Time
}

// set moves the expiry earlier to t; a zero or later t changes nothing.
func (e *expiry) set(t time.Time) {
	if t.IsZero() || (!e.at.IsZero() && !t.Before(e.at)) {
		return
	}
	e.at = t
	if e.timer == nil {
		e.timer = time.NewTimer(time.Until(t))
		e.c = e.timer.C
	} else {
		e.timer.Reset(time.Until(t))
	}
}

func (e *expiry) stop() {
	if e.timer != nil {
		e.timer.Stop()
	}
}
