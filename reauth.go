package mcphandler

import (
	"context"
	"net/http"
	"time"
)

// callerContext returns the context of a long-lived stream opened by r for
// the caller id. It ends with r's context, at id.Expires, or as soon as
// Config.Authenticate, run again on r every KeepAlive, fails (for any
// reason: a revoked token and an unreachable authorization server alike) or
// names another tenant or subject; a later check that reports an earlier
// expiry moves the end forward. The goroutine that checks belongs to the
// stream and ends with the returned context: call cancel when the stream
// ends.
func (h *Handler) callerContext(r *http.Request, id Identity) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	if h.cfg.Authenticate == nil && id.Expires.IsZero() {
		return ctx, cancel
	}
	go h.watchCaller(ctx, cancel, r, id)
	return ctx, cancel
}

// watchCaller cancels ctx when id's credentials expire, or when
// Authenticate, asked again every KeepAlive, no longer answers id. It
// returns when ctx ends.
func (h *Handler) watchCaller(ctx context.Context, cancel context.CancelFunc, r *http.Request, id Identity) {
	defer cancel()
	var exp expiry
	defer exp.stop()
	exp.set(id.Expires)
	var recheck <-chan time.Time
	if h.cfg.Authenticate != nil {
		tick := time.NewTicker(h.cfg.KeepAlive)
		defer tick.Stop()
		recheck = tick.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-exp.c:
			return
		case <-recheck:
			got, err := h.cfg.Authenticate(r)
			if err != nil || got.key() != id.key() {
				return
			}
			exp.set(got.Expires)
		}
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
