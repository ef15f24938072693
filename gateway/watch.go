package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
	"github.com/mcphandler/mcphandler/internal/record"
)

// The defaults and bounds of watches.
const (
	defaultMaxWatches = 256
	watchPrefix       = "gw-watch/" // + the scope's id: who watches it (a record.Lease)
	watchLease        = 30 * time.Second
	// watchIdle is how long a watch runs after its scope's last list.
	watchIdle = 5 * time.Minute
	// minBackoff and maxBackoff bound the wait before a watch that ended
	// is opened again; it doubles after each end that came sooner than
	// maxBackoff after the watch opened.
	minBackoff = time.Second
	maxBackoff = time.Minute
	// changeEvery is the shortest time between two invalidations of one
	// scope: list_changed notifications that come faster are folded into
	// one, at the end of the interval.
	changeEvery = time.Second
)

// watches hears the list_changed notifications of the upstreams whose
// lists this replica serves (Config.ToolsChanged). For each scope (a
// tenant's upstream URL and credentials) one replica at a time watches,
// the one holding its lease in Config.Store; the others try again when
// the lease may have lapsed. A notification invalidates the scope's
// lists on every replica (listStore.invalidate) and is passed on to the
// tenant's sessions (Config.ToolsChanged). It is safe for concurrent use.
type watches struct {
	g      *Gateway
	max    int
	lease  time.Duration // watchLease
	idle   time.Duration // watchIdle
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	m  map[[32]byte]*watch // by scope
}

// watch is one scope's watch on this replica.
type watch struct {
	ref      listRef
	tenant   string
	upstream string // the upstream's ID, for logs

	// Guarded by watches.mu:
	ep      upstream.Endpoint // how the newest list of the scope reached it
	caps    json.RawMessage
	wanted  time.Time // the scope's newest list on this replica
	running bool      // a goroutine holds the lease or is taking it
	retryAt time.Time // when not running: when to try taking it again

	cmu     sync.Mutex // guards the fields below
	last    time.Time  // the last invalidation
	pending bool       // a notification waits for changeEvery to pass
}

func newWatches(g *Gateway) *watches {
	ctx, cancel := context.WithCancel(context.Background())
	return &watches{g: g, max: g.cfg.MaxWatches, lease: watchLease, idle: watchIdle, ctx: ctx, cancel: cancel, m: map[[32]byte]*watch{}}
}

// want records that a list of ref's scope, of upstream u, was served
// now, reached through ep with the client capabilities caps: the scope is
// watched, by this replica or another, until watchIdle after its last
// list. Past Config.MaxWatches scopes on this replica, a new one is not
// watched (its lists expire by their TTL alone). It does no I/O.
func (ws *watches) want(ref listRef, u *Upstream, ep upstream.Endpoint, caps json.RawMessage) {
	if ws.max <= 0 || ws.g.cfg.ListTTL <= 0 {
		return
	}
	now := time.Now()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.ctx.Err() != nil {
		return
	}
	w, ok := ws.m[ref.scope]
	if !ok {
		if len(ws.m) >= ws.max {
			ws.sweep(now)
		}
		if len(ws.m) >= ws.max {
			return
		}
		w = &watch{ref: ref, tenant: ref.tenant, upstream: u.ID}
		ws.m[ref.scope] = w
	}
	w.ep, w.caps, w.wanted = ep, caps, now
	if !w.running && !now.Before(w.retryAt) {
		w.running = true
		ws.wg.Add(1)
		go ws.run(w)
	}
}

// sweep forgets the scopes that another replica watched when this one
// last tried and that were not listed since watchIdle: what keeps a place
// among MaxWatches is a watch running or a scope listed. Called with mu
// held, when the map is full: linear in MaxWatches.
func (ws *watches) sweep(now time.Time) {
	for k, w := range ws.m {
		if !w.running && !now.Before(w.wanted.Add(ws.idle)) {
			delete(ws.m, k)
		}
	}
}

// run takes w's lease and watches its upstream until w is idle, then
// forgets w. When another replica holds the lease, it tries again once
// the lease may have lapsed.
func (ws *watches) run(w *watch) {
	defer ws.wg.Done()
	tok := make([]byte, 16)
	_, _ = rand.Read(tok)
	key := watchPrefix + ws.g.lists.id("watch", w.ref.scope)
	ws.mu.Lock()
	ttl := ws.lease
	ws.mu.Unlock()
	lease, err := record.Take(ws.ctx, ws.g.cfg.Store, key, hex.EncodeToString(tok), ttl)
	if lease == nil {
		if err != nil && ws.ctx.Err() == nil {
			ws.g.cfg.Logger.Warn("gateway: upstream list watch not started", "upstream", w.upstream, "err", err)
		}
		ws.mu.Lock()
		w.running, w.retryAt = false, time.Now().Add(ttl)
		ws.mu.Unlock()
		return
	}
	lease.Keep(nil)
	defer lease.Release()
	for again := false; ; again = true {
		ws.loop(w, again)
		ws.mu.Lock()
		if ws.ctx.Err() == nil && time.Now().Before(w.wanted.Add(ws.idle)) {
			ws.mu.Unlock()
			continue // listed again as it ended
		}
		w.running = false
		if ws.m[w.ref.scope] == w {
			delete(ws.m, w.ref.scope)
		}
		ws.mu.Unlock()
		return
	}
}

// loop watches w's upstream, opening the watch again after each end (a
// broken stream, the upstream's end) with a backoff, until w is idle or
// the Gateway closed. Each reopening (and the first opening, when
// reopened) invalidates the scope's lists: a change may have come while
// no watch was open. An upstream that cannot
// notify is not asked again while w is wanted.
func (ws *watches) loop(w *watch, reopened bool) {
	backoff := minBackoff
	for ; ; reopened = true {
		ep, caps, idleAt := ws.state(w)
		if !time.Now().Before(idleAt) {
			return
		}
		// An upstream whose breaker is open is not contacted, by a watch
		// either: its lists are not served fresh meanwhile.
		if d := ws.g.breakers.openFor(breakerKey(ep.URL, ep.Header), ws.g.now()); d > 0 {
			if !ws.sleep(d) {
				return
			}
			reopened = true
			continue
		}
		ctx, cancel := context.WithCancel(ws.ctx)
		stopIdle := ws.stopWhenIdle(w, cancel)
		if reopened {
			ws.changed(w)
		}
		opened := time.Now()
		err := upstream.WatchTools(ctx, ep, caps, func() { ws.changed(w) })
		stopIdle()
		idle := ctx.Err() != nil
		cancel()
		switch {
		case ws.ctx.Err() != nil || idle:
			return
		case errors.Is(err, upstream.ErrNoListChanged):
			ws.sleepUntilIdle(w)
			return
		}
		ws.g.cfg.Logger.Info("gateway: upstream list watch ended, opened again", "upstream", w.upstream, "err", err)
		if time.Since(opened) >= maxBackoff {
			backoff = minBackoff
		}
		if !ws.sleep(backoff + mrand.N(backoff/2+1)) {
			return
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// state is what w's watch needs, and when w becomes idle.
func (ws *watches) state(w *watch) (upstream.Endpoint, json.RawMessage, time.Time) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return w.ep, w.caps, w.wanted.Add(ws.idle)
}

// stopWhenIdle calls cancel once w is idle; the function returned stops
// watching for it.
func (ws *watches) stopWhenIdle(w *watch, cancel context.CancelFunc) func() {
	var t *time.Timer
	var mu sync.Mutex
	var check func()
	check = func() {
		_, _, idleAt := ws.state(w)
		mu.Lock()
		defer mu.Unlock()
		if d := time.Until(idleAt); d > 0 && t != nil {
			t.Reset(d)
			return
		}
		cancel()
	}
	_, _, idleAt := ws.state(w)
	mu.Lock()
	t = time.AfterFunc(time.Until(idleAt), check)
	mu.Unlock()
	return func() {
		mu.Lock()
		t.Stop()
		t = nil
		mu.Unlock()
	}
}

// sleepUntilIdle waits until w is idle or the Gateway closed.
func (ws *watches) sleepUntilIdle(w *watch) {
	for {
		_, _, idleAt := ws.state(w)
		d := time.Until(idleAt)
		if d <= 0 || !ws.sleep(d) {
			return
		}
	}
}

// sleep waits d, and reports false when the Gateway closed first.
func (ws *watches) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ws.ctx.Done():
		return false
	}
}

// changed handles a list_changed of w's upstream: the scope's lists are
// invalidated on every replica and the tenant's sessions told, at most
// once per changeEvery (a notification within it is folded into one at
// its end).
func (ws *watches) changed(w *watch) {
	w.cmu.Lock()
	if wait := changeEvery - time.Since(w.last); wait > 0 {
		if !w.pending {
			w.pending = true
			ws.wg.Add(1)
			time.AfterFunc(wait, func() {
				defer ws.wg.Done()
				w.cmu.Lock()
				w.pending = false
				w.cmu.Unlock()
				if ws.ctx.Err() == nil {
					ws.changed(w)
				}
			})
		}
		w.cmu.Unlock()
		return
	}
	w.last = time.Now()
	w.cmu.Unlock()
	ctx, cancel := context.WithTimeout(ws.ctx, 10*time.Second)
	defer cancel()
	if err := ws.g.lists.invalidate(ctx, w.ref); err != nil {
		ws.g.cfg.Logger.Warn("gateway: upstream lists not invalidated everywhere", "upstream", w.upstream, "err", err)
	}
	if f := ws.g.cfg.ToolsChanged; f != nil {
		if err := f(ctx, mcphandler.TenantOf(w.tenant)); err != nil {
			ws.g.cfg.Logger.Warn("gateway: list change not passed on", "upstream", w.upstream, "err", err)
		}
	}
}

// close stops every watch and waits for them.
func (ws *watches) close() {
	ws.mu.Lock()
	ws.cancel()
	ws.mu.Unlock()
	ws.wg.Wait()
}
