package mcphandler

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

// canceller relays cancellations between replicas that share a store.
// The goroutine that listens (relayCancels) is started at the first
// request that can be cancelled, and only for a store shared by replicas
// (any store but the in-memory one). It belongs to the Handler: it runs
// with a context of its own, never a request's, subscribes again with a
// capped backoff whenever subscribing fails or the subscription ends, and
// [Handler.Close] stops it and waits for it.
type canceller struct {
	mu     sync.Mutex // guards the fields below
	closed bool
	stop   context.CancelFunc // nil until the listener started
	ready  chan struct{}      // closed after the listener's first attempt to subscribe
	done   chan struct{}      // closed when the listener returned
}

// Backoff of the cancellation listener between failed subscriptions.
const (
	cancelMinBackoff = 100 * time.Millisecond
	cancelMaxBackoff = time.Second
)

// cancelLocal cancels the request key if it runs here, and reports whether
// it did.
func (rb *replicaBus) cancelLocal(key string) bool {
	rb.runMu.Lock()
	run, ok := rb.running[key]
	rb.runMu.Unlock()
	if ok {
		run.st.suppress()
		run.cancel()
	}
	return ok
}

// cancel cancels request key of a session wherever it runs. The message
// other replicas receive is the key, signed for the cancel channel: one
// that does not verify, or is older than messageWindow, cancels nothing.
func (rb *replicaBus) cancel(ctx context.Context, key string) {
	if rb.cancelLocal(key) || !sharedStore(rb.cfg.Store) {
		return
	}
	rb.publish(ctx, rb.macs.cancel, cancelChannel, []byte(key))
}

// sharedStore reports whether st is shared by replicas: any store but the
// in-memory one.
func sharedStore(st session.Store) bool {
	_, local := st.(*session.Memory)
	return !local
}

// listenCancels starts, once, the goroutine that applies cancellations
// published by other replicas, and waits until its first attempt to
// subscribe ended (or ctx is done), so that with a healthy store a
// cancellation published after the call started reaches it. ctx only
// bounds that wait: the listener does not depend on the request.
func (rb *replicaBus) listenCancels(ctx context.Context) {
	if !sharedStore(rb.cfg.Store) {
		return
	}
	c := &rb.cancels
	c.mu.Lock()
	if c.stop == nil && !c.closed {
		var lctx context.Context
		lctx, c.stop = context.WithCancel(context.Background())
		c.ready, c.done = make(chan struct{}), make(chan struct{})
		go rb.relayCancels(lctx, c.ready, c.done)
	}
	ready := c.ready
	c.mu.Unlock()
	if ready == nil { // closed before it started
		return
	}
	select {
	case <-ready:
		return // the usual case; asking ctx for Done would allocate
	default:
	}
	select {
	case <-ready:
	case <-ctx.Done():
	}
}

// relayCancels is the listener: it subscribes to the cancellation channel
// and cancels the requests it names that run here, until ctx ends. When
// subscribing fails, or the subscription ends (the store was closed), it
// tries again after a backoff that doubles up to cancelMaxBackoff. It logs
// the first failure in a row, then one in 60.
func (rb *replicaBus) relayCancels(ctx context.Context, ready, done chan<- struct{}) {
	defer close(done)
	first := true
	failures := 0
	d := cancelMinBackoff
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		sub, err := rb.cfg.Store.Subscribe(ctx, cancelChannel)
		if first {
			first = false
			close(ready)
		}
		if err == nil {
			if failures > 0 {
				rb.cfg.Logger.Info("mcphandler: cancellations from other replicas: subscribed again",
					"failures", failures)
			}
			d, failures = cancelMinBackoff, 0
			if !rb.applyCancels(ctx, sub) {
				return
			}
			err = errors.New("the subscription ended")
		}
		if ctx.Err() != nil {
			return
		}
		if failures%60 == 0 {
			rb.cfg.Logger.Error("mcphandler: cancellations from other replicas: session store",
				"err", err, "failures", failures+1, "retry_in", d)
		}
		failures++
		if !sleep(ctx, t, d) {
			return
		}
		d = min(2*d, cancelMaxBackoff)
	}
}

// sleep waits d on t, stopped, unless ctx ends first (false).
func sleep(ctx context.Context, t *time.Timer, d time.Duration) bool {
	t.Reset(d)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// applyCancels cancels the requests named on sub until ctx ends (it then
// closes sub and reports false) or sub's channel closes (true).
func (rb *replicaBus) applyCancels(ctx context.Context, sub session.Subscription) bool {
	for {
		select {
		case b, ok := <-sub.C():
			if !ok {
				return true
			}
			if key, ok := rb.openMessage(rb.macs.cancel, cancelChannel, b); ok {
				rb.cancelLocal(string(key))
			}
		case <-ctx.Done():
			sub.Close()
			return false
		}
	}
}

// Close stops what the Handler runs in the background: with a store shared
// by replicas, the goroutine that receives cancellations from the other
// replicas, and waits for it to end; and the tasks this replica runs,
// which are marked failed (the server shut down before they ended) and
// whose work is cancelled and waited for; and the GET streams that took
// their connection over from net/http (see Config.Sessions.KeepStreamRequests),
// which end as if their session's client had left, and are waited for. It
// does not close the store. Requests still being served are not
// interrupted. It is safe to call
// more than once, and concurrently. The subscription to change
// notifications belongs to the open streams: it ends with the last of
// them.
func (h *Handler) Close() error {
	h.tasks.close()
	h.sessions.detached.close()
	h.bus.close()
	return nil
}

// close stops the listener of cancellations from other replicas, if it
// started, and waits for it to end; none starts afterwards.
func (rb *replicaBus) close() {
	c := &rb.cancels
	c.mu.Lock()
	c.closed = true
	stop, done := c.stop, c.done
	c.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// closed reports whether close was called.
func (rb *replicaBus) closed() bool {
	c := &rb.cancels
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}
