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
	go func() {
		defer cancel()
		var (
			expires time.Time
			timer   *time.Timer
			expired <-chan time.Time
		)
		defer func() {
			if timer != nil {
				timer.Stop()
			}
		}()
		setExpiry := func(t time.Time) {
			if t.IsZero() || (!expires.IsZero() && !t.Before(expires)) {
				return
			}
			expires = t
			if timer == nil {
				timer = time.NewTimer(time.Until(t))
				expired = timer.C
			} else {
				timer.Reset(time.Until(t))
			}
		}
		setExpiry(id.Expires)
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
			case <-expired:
				return
			case <-recheck:
				got, err := h.cfg.Authenticate(r)
				if err != nil || got.key() != id.key() {
					return
				}
				setExpiry(got.Expires)
			}
		}
	}()
	return ctx, cancel
}
