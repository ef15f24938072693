package mcphandler

import (
	"net/http"
	"time"
)

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
	h   *Handler
	r   *http.Request
	id  Identity
	exp expiry
}

// checkCaller returns the check of a stream opened by r for id, or nil if
// nothing can end it: no Authenticate hook and no expiry.
func (h *Handler) checkCaller(r *http.Request, id Identity) *callerCheck {
	if h.cfg.Authenticate == nil && id.Expires.IsZero() {
		return nil
	}
	c := &callerCheck{h: h, r: r, id: id}
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
	if c == nil || c.h.cfg.Authenticate == nil {
		return true
	}
	got, err := c.h.cfg.Authenticate(c.r)
	if err != nil || got.key() != c.id.key() {
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
