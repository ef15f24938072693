package mcphandler

import (
	"context"
	"net/http"
)

// readyStore is a Config.Store that can tell whether it can serve now
// (redisstore.Store's Ready).
type readyStore interface {
	Ready(ctx context.Context) error
}

// Ready returns an http.Handler for a load balancer's readiness probe,
// to mount next to the endpoint (mux.Handle("/ready", h.Ready())). To a
// GET or HEAD it answers 200 "ready" while the handler can serve, and 503
// "unavailable" while Config.Store cannot be reached or once [Handler.Close]
// was called (so that a replica shutting down is taken out of rotation);
// any other method is 405. It needs no session and no authentication,
// and tells nothing but that.
//
// A store with a method Ready(context.Context) error is asked on every
// probe: redisstore.Store's PINGs Redis (one PING at a time however many
// probes arrive, answered at once while its circuit breaker is open, and
// within its OpTimeout, 2s by default, otherwise), so the probe turns 503
// when Redis dies or freezes and 200 when it answers again, whether or
// not clients sent requests meanwhile. A store without one, such as the
// memory store, is always ready.
//
// Use it for readiness, not liveness: every replica shares the store, so
// all of them turn unready together when it is down, and restarting a
// replica does not bring Redis back. The handler is safe for concurrent
// use.
func (h *Handler) Ready() http.Handler {
	return http.HandlerFunc(h.serveReady)
}

func (h *Handler) serveReady(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	closed := h.bus.closed()
	var err error
	if rs, ok := h.cfg.Store.(readyStore); ok && !closed {
		err = rs.Ready(r.Context())
	}
	if closed || err != nil {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ready\n"))
}
