package mcphandler

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

// changeBuffer is how many published changes a stream holds before it
// misses the next ones: the hub never waits for a slow stream (Pub/Sub
// delivers at most once anyway).
const changeBuffer = 8

// changeHub is the Handler's one subscription to notifyChannel, shared by
// every stream that carries change notifications (GET streams,
// subscriptions/listen, 2024-11-05 streams). Each published change is
// verified and decoded once, on the hub's goroutine, and handed only to
// the streams whose caller its Target matches: those of its tenant (every
// stream for a change without one), so that a tenant's notification costs
// the streams of that tenant, and no other tenant's stream ever sees it.
//
// The hub subscribes when the first stream registers and unsubscribes
// when the last one leaves. If its subscription ends (the store closed
// it) or cannot be made, it tries again after a backoff that doubles from
// cancelMinBackoff to cancelMaxBackoff while streams are registered; a
// stream that registers meanwhile waits for the next attempt, and is
// refused (503) if it fails.
type changeHub struct {
	mu       sync.Mutex // guards everything below
	byTenant map[string]map[*changeWatch]struct{}
	n        int           // registered streams
	run      *hubRun       // the subscribing goroutine; nil when n == 0
	live     bool          // run holds a subscription
	err      error         // why the last attempt failed
	attempt  chan struct{} // closed when run's current attempt ends
}

// hubRun is one life of the hub's goroutine, from the first stream to the
// last.
type hubRun struct {
	stop context.CancelFunc
	kick chan struct{} // a registering stream asks for an attempt now
}

// changeWatch is a stream's registration: the changes for its caller.
type changeWatch struct {
	id Identity
	c  chan *change
}

// watchChanges registers a stream of caller id for the published changes,
// which its loop then receives on the returned watch's channel. It
// returns once the hub's subscription is live, so that a change published
// afterwards, on any replica, reaches the stream; it fails when the store
// cannot subscribe (or ctx ends first). The stream must call
// unwatchChanges when it ends.
func (ss *streams) watchChanges(ctx context.Context, id Identity) (*changeWatch, error) {
	w := &changeWatch{id: id, c: make(chan *change, changeBuffer)}
	hub := &ss.changes
	hub.mu.Lock()
	if hub.byTenant == nil {
		hub.byTenant = make(map[string]map[*changeWatch]struct{})
	}
	set := hub.byTenant[id.Tenant]
	if set == nil {
		set = make(map[*changeWatch]struct{})
		hub.byTenant[id.Tenant] = set
	}
	set[w] = struct{}{}
	hub.n++
	if hub.run == nil {
		hub.startLocked(ss)
	}
	live, attempt, kick := hub.live, hub.attempt, hub.run.kick
	hub.mu.Unlock()
	if live {
		return w, nil
	}
	select {
	case kick <- struct{}{}:
	default:
	}
	select {
	case <-attempt:
	case <-ctx.Done():
	}
	hub.mu.Lock()
	live, err := hub.live, hub.err
	hub.mu.Unlock()
	if !live {
		ss.unwatchChanges(w)
		return nil, cmpErr(err, ctx.Err())
	}
	return w, nil
}

// cmpErr returns the first non-nil error.
func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	if b != nil {
		return b
	}
	return errors.New("mcphandler: change notifications: not subscribed")
}

// unwatchChanges ends w's registration; the last one stops the hub.
func (ss *streams) unwatchChanges(w *changeWatch) {
	hub := &ss.changes
	hub.mu.Lock()
	defer hub.mu.Unlock()
	set := hub.byTenant[w.id.Tenant]
	if _, ok := set[w]; !ok {
		return
	}
	delete(set, w)
	if len(set) == 0 {
		delete(hub.byTenant, w.id.Tenant)
	}
	hub.n--
	if hub.n == 0 {
		hub.run.stop()
		hub.run, hub.live, hub.err = nil, false, nil
	}
}

// startLocked starts the hub's goroutine. hub.mu is held.
func (hub *changeHub) startLocked(ss *streams) {
	ctx, stop := context.WithCancel(context.Background())
	r := &hubRun{stop: stop, kick: make(chan struct{}, 1)}
	hub.run, hub.live, hub.err = r, false, nil
	hub.attempt = make(chan struct{})
	go ss.relayChanges(ctx, r)
}

// relayChanges is the hub's goroutine: it subscribes to notifyChannel and
// dispatches what arrives, subscribing again when the subscription ends or
// could not be made, until ctx ends. It logs the first failure in a row,
// then one in 60.
func (ss *streams) relayChanges(ctx context.Context, r *hubRun) {
	hub := &ss.changes
	d, failures := cancelMinBackoff, 0
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		sub, err := ss.cfg.Store.Subscribe(ctx, notifyChannel)
		hub.attempted(r, err)
		if err == nil {
			d, failures = cancelMinBackoff, 0
			if !ss.dispatchChanges(ctx, sub) {
				return
			}
			hub.attempted(r, errors.New("mcphandler: change notifications: the subscription ended"))
		}
		if ctx.Err() != nil {
			return
		}
		if failures%60 == 0 {
			ss.cfg.Logger.Error("mcphandler: change notifications: session store",
				"err", hub.lastErr(), "failures", failures+1, "retry_in", d)
		}
		failures++
		t.Reset(d)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.kick:
		}
		d = min(2*d, cancelMaxBackoff)
	}
}

// attempted records the outcome of an attempt of run r (err nil: live),
// waking the streams that wait for it.
func (hub *changeHub) attempted(r *hubRun, err error) {
	hub.mu.Lock()
	defer hub.mu.Unlock()
	if hub.run != r {
		return // the hub stopped, or started again: not ours
	}
	hub.live, hub.err = err == nil, err
	close(hub.attempt)
	hub.attempt = make(chan struct{})
}

func (hub *changeHub) lastErr() error {
	hub.mu.Lock()
	defer hub.mu.Unlock()
	return hub.err
}

// dispatchChanges hands each change that arrives on sub to the streams it
// targets, until ctx ends (it then closes sub and reports false) or sub's
// channel closes (true). A message that does not verify or decode is
// dropped (openChange).
func (ss *streams) dispatchChanges(ctx context.Context, sub session.Subscription) bool {
	for {
		select {
		case b, ok := <-sub.C():
			if !ok {
				return true
			}
			if c, ok := ss.bus.openChange(b); ok {
				ss.changes.deliver(&c)
			}
		case <-ctx.Done():
			sub.Close()
			return false
		}
	}
}

// deliver hands c to the registered streams whose caller it targets,
// without waiting: a stream whose buffer is full misses it.
func (hub *changeHub) deliver(c *change) {
	hub.mu.Lock()
	defer hub.mu.Unlock()
	if c.Tenant != "" {
		hub.deliverTo(hub.byTenant[c.Tenant], c)
		return
	}
	for _, set := range hub.byTenant {
		hub.deliverTo(set, c)
	}
}

func (hub *changeHub) deliverTo(set map[*changeWatch]struct{}, c *change) {
	for w := range set {
		if !c.Target.matches(w.id) {
			continue
		}
		select {
		case w.c <- c:
		default:
		}
	}
}
