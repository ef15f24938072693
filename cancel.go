package mcphandler

import (
	"context"
	"sync"

	"github.com/mcphandler/mcphandler/session"
)

// cancelChannel carries notifications/cancelled between replicas: the
// replica that receives one for a request it does not run publishes the
// request's key, and the replica running it cancels it.
const cancelChannel = "cancel"

// canceller relays cancellations between replicas that share a store. The
// goroutine that listens is started at the first request that can be
// cancelled, and only for a store shared by replicas (any store but the
// in-memory one); [Handler.Close] stops it.
type canceller struct {
	once sync.Once
	mu   sync.Mutex // guards sub and closed
	sub  session.Subscription
	done chan struct{}
	quit bool
}

// cancelLocal cancels the request key if it runs here, and reports whether
// it did.
func (h *Handler) cancelLocal(key string) bool {
	h.runMu.Lock()
	run, ok := h.running[key]
	h.runMu.Unlock()
	if ok {
		run.st.suppress()
		run.cancel()
	}
	return ok
}

// cancel cancels request key of a session wherever it runs. The message
// other replicas receive is the key, signed for the cancel channel: one
// that does not verify, or is older than messageWindow, cancels nothing.
func (h *Handler) cancel(ctx context.Context, key string) {
	if h.cancelLocal(key) || !h.sharedStore() {
		return
	}
	h.publish(ctx, h.macs.cancel, cancelChannel, []byte(key))
}

func (h *Handler) sharedStore() bool {
	_, local := h.cfg.Store.(*session.Memory)
	return !local
}

// listenCancels starts, once, the goroutine that applies cancellations
// published by other replicas.
func (h *Handler) listenCancels(ctx context.Context) {
	if !h.sharedStore() {
		return
	}
	c := &h.cancels
	c.once.Do(func() {
		sub, err := h.cfg.Store.Subscribe(context.WithoutCancel(ctx), cancelChannel)
		if err != nil {
			h.logger().Error("mcphandler: session store", "err", err)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.quit {
			sub.Close()
			return
		}
		c.sub, c.done = sub, make(chan struct{})
		go func() {
			defer close(c.done)
			for b := range sub.C() {
				if key, ok := h.openMessage(h.macs.cancel, cancelChannel, b); ok {
					h.cancelLocal(string(key))
				}
			}
		}()
	})
}

// Close stops what the Handler runs in the background: with a store shared
// by replicas, the goroutine that receives cancellations from the other
// replicas. It does not close the store. Requests still being served are
// not interrupted. It is safe to call more than once.
func (h *Handler) Close() error {
	c := &h.cancels
	c.mu.Lock()
	c.quit = true
	sub, done := c.sub, c.done
	c.sub = nil
	c.mu.Unlock()
	if sub != nil {
		sub.Close()
		<-done
	}
	return nil
}
