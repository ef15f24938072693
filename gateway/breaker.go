package gateway

import (
	listpkg "container/list"
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
)

// The breaker's defaults (see Config).
const (
	defaultFailureThreshold = 3
	defaultCoolDown         = 30 * time.Second
	defaultMaxCoolDown      = 5 * time.Minute
	defaultGrace            = 5 * time.Minute
	defaultMaxBreakers      = 4096
	// probeRetry is the retryAfter told while another request probes.
	probeRetry = time.Second
	// probeSlack is how long past Config.Timeout a probe may go without
	// reporting before another request may probe: upstream operations
	// end by their Timeout, and ending a session takes at most 5 s more.
	probeSlack = 10 * time.Second
)

// ErrBreakerOpen is the cause of a list or call of an upstream that was
// not contacted because its breaker is open: it failed
// Config.FailureThreshold times in a row, and its cool-down has not run
// out (or another request is probing it).
var ErrBreakerOpen = errors.New("gateway: upstream not contacted: its breaker is open")

// outcome is what an upstream operation says of its upstream's health.
type outcome int

const (
	// neutral: nothing (the caller went away, a call ran past its time).
	neutral outcome = iota
	// answered: the upstream answered, if only with an error of its own.
	answered
	// failed: the upstream did not answer usably.
	failed
)

// breakers is the breaker of each upstream, per URL and credentials
// (breakerKey), that failed since it last answered. An upstream that
// answers has no entry: only failures are remembered, and at most max of
// them; past it, the one touched least recently is forgotten (its
// upstream is then contacted again, up to the threshold). It is safe for
// concurrent use: one mutex, held for O(1) work.
type breakers struct {
	mu          sync.Mutex
	m           map[[32]byte]*breaker
	lru         listpkg.List // of *breaker, most recently touched first
	max         int
	threshold   int // < 0: never opens
	coolDown    time.Duration
	maxCoolDown time.Duration
	probeLimit  time.Duration
}

// breaker is one upstream's failures in a row and, once they reach the
// threshold, its open state.
//
//	closed     openUntil zero: every request goes; fails counts failures in a row
//	open       now before openUntil: nothing goes
//	half-open  openUntil passed: one request (probing set) goes, the others wait
type breaker struct {
	key       [32]byte
	elem      *listpkg.Element
	fails     int
	since     time.Time // the first failure in a row: the grace period counts from it
	class     string    // the last failure's class (status.go)
	openUntil time.Time
	coolDown  time.Duration // the last cool-down, doubled by a failed probe
	probing   time.Time     // when the probe under way began; zero: none
}

// ticket is a request let through to an upstream: probe when it is the
// one request of a half-open breaker.
type ticket struct {
	b     *breaker
	probe bool
}

// view is what a breaker says of its upstream to a request it refused or
// whose failure it recorded.
type view struct {
	class      string
	since      time.Time
	retryAfter time.Duration // until it may be contacted again; 0: at once
}

func newBreakers(cfg *Config) *breakers {
	return &breakers{m: make(map[[32]byte]*breaker), max: cfg.MaxBreakers, threshold: cfg.FailureThreshold,
		coolDown: cfg.CoolDown, maxCoolDown: cfg.MaxCoolDown, probeLimit: cfg.Timeout + probeSlack}
}

// admit says whether a request may contact the upstream of key now: a
// ticket, or false with what the breaker knows. In the half-open state
// the first request gets the probe's ticket; the others are refused
// until it reports (done) or probeLimit passes.
func (bs *breakers) admit(key [32]byte, now time.Time) (ticket, view, bool) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.m[key]
	switch {
	case b == nil || b.openUntil.IsZero():
		return ticket{b: b}, view{}, true
	case now.Before(b.openUntil):
		return ticket{}, view{class: b.class, since: b.since, retryAfter: b.openUntil.Sub(now)}, false
	case !b.probing.IsZero() && now.Sub(b.probing) < bs.probeLimit:
		return ticket{}, view{class: b.class, since: b.since, retryAfter: probeRetry}, false
	}
	b.probing = now
	bs.touch(b)
	return ticket{b: b, probe: true}, view{}, true
}

// openFor is how long the breaker of key stays open from now: 0 when it
// is closed or may be probed. It changes nothing.
func (bs *breakers) openFor(key [32]byte, now time.Time) time.Duration {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if b := bs.m[key]; b != nil && now.Before(b.openUntil) {
		return b.openUntil.Sub(now)
	}
	return 0
}

// done records the outcome of a request admitted with t. It returns what
// the breaker says after a failure, and whether this failure opened it.
func (bs *breakers) done(key [32]byte, t ticket, o outcome, class string, now time.Time) (view, bool) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.m[key]
	if t.b != nil && t.b != b { // forgotten meanwhile: what it knew is gone
		t = ticket{}
	}
	switch o {
	case neutral:
		if t.probe {
			b.probing = time.Time{} // the next request probes
		}
		return view{}, false
	case answered:
		if b != nil {
			bs.forget(b)
		}
		return view{}, false
	}
	if b == nil {
		b = bs.add(key)
	}
	switch {
	case t.probe: // the probe failed: open again, for twice as long
		b.fails++
		b.class = class
		b.probing = time.Time{}
		b.coolDown = min(2*b.coolDown, max(bs.maxCoolDown, bs.coolDown))
		b.openUntil = now.Add(b.coolDown)
		bs.touch(b)
		return view{class: class, since: b.since, retryAfter: b.coolDown}, false
	case !b.openUntil.IsZero():
		// Admitted before the breaker opened: it knows already.
		return view{class: b.class, since: b.since, retryAfter: max(b.openUntil.Sub(now), 0)}, false
	}
	if b.fails == 0 {
		b.since = now
	}
	b.fails++
	b.class = class
	bs.touch(b)
	if bs.threshold < 0 || b.fails < bs.threshold {
		return view{class: class, since: b.since}, false
	}
	b.coolDown = bs.coolDown
	b.openUntil = now.Add(b.coolDown)
	return view{class: class, since: b.since, retryAfter: b.coolDown}, true
}

// add makes the entry of key, forgetting the least recently touched one
// when max are kept. Called with mu held.
func (bs *breakers) add(key [32]byte) *breaker {
	for len(bs.m) >= bs.max {
		bs.forget(bs.lru.Back().Value.(*breaker))
	}
	b := &breaker{key: key}
	b.elem = bs.lru.PushFront(b)
	bs.m[key] = b
	return b
}

func (bs *breakers) touch(b *breaker) { bs.lru.MoveToFront(b.elem) }

func (bs *breakers) forget(b *breaker) {
	bs.lru.Remove(b.elem)
	delete(bs.m, b.key)
}

// len is how many upstreams' failures are remembered.
func (bs *breakers) len() int {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return len(bs.m)
}

// admitCall lets a call of f's tool go upstream, or refuses it at once
// with a retryable error while the upstream's breaker is open. In the
// half-open state the call first lists the upstream's tools as the
// probe (a list acts on nothing), and goes only when that answered. The
// function returned runs the call and records its outcome: an answer,
// the upstream's own error included, closes the breaker; an upstream that
// did not answer (backend_unavailable) counts as a failure; a caller that
// went away, or a call that ran out of time, counts as neither. ep is
// how the caller reaches the upstream: its breaker is that of ep's URL
// and headers.
func (g *Gateway) admitCall(ctx context.Context, f *forward, ep upstream.Endpoint, call *mcphandler.ToolCall) (mcphandler.ToolHandler, error) {
	key := breakerKey(ep.URL, ep.Header)
	t, v, ok := g.breakers.admit(key, g.now())
	if !ok {
		return nil, f.unavailable(v)
	}
	if t.probe {
		lctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
		_, err := upstream.ListTools(lctx, ep, capsJSON(call.Exchange.ClientCapabilities()))
		cancel()
		o, class := listOutcome(ctx, err)
		v, _ := g.breakers.done(key, t, o, class, g.now())
		if err != nil {
			g.cfg.Logger.Warn("gateway: upstream probe failed", "upstream", f.upstream, "err", err)
			return nil, f.unavailable(v)
		}
		t = ticket{}
	}
	return func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		release, err := g.inflight.acquire(ctx, ep.URL)
		if errors.Is(err, ErrBusy) {
			return nil, &mcphandler.ToolError{Class: mcphandler.ClassBackendUnavailable, Err: err,
				Detail: "upstream " + f.upstream + " is busy: " + strconv.Itoa(g.cfg.MaxConcurrent) +
					" requests to it are in flight from this server; it was not contacted"}
		}
		if err != nil {
			return nil, mcphandler.Timeout(err)
		}
		defer release()
		res, err := f.run(ctx, call, ep)
		if o, class := callOutcome(ctx, err); o != neutral {
			if _, opened := g.breakers.done(key, t, o, class, g.now()); opened {
				g.cfg.Logger.Warn("gateway: upstream breaker opened", "upstream", f.upstream, "after", class)
			}
		}
		return res, err
	}, nil
}

// unavailable is the error of a call refused without contacting the
// upstream: backend_unavailable, retryable, saying when to retry.
func (f *forward) unavailable(v view) error {
	d := "upstream " + f.upstream + " is unavailable"
	if v.class != "" {
		d += " (" + v.class + ")"
	}
	d += " and was not contacted"
	if v.retryAfter > 0 {
		d += "; retryAfterMs: " + strconv.FormatInt(retryMs(v.retryAfter), 10)
	}
	return &mcphandler.ToolError{Class: mcphandler.ClassBackendUnavailable, Detail: d, Err: ErrBreakerOpen}
}

// retryMs is d in whole milliseconds, rounded up.
func retryMs(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// callOutcome is what a call's end says of its upstream.
func callOutcome(ctx context.Context, err error) (outcome, string) {
	var te *mcphandler.ToolError
	var se *upstream.StatusError
	var rpc *upstream.RPCError
	switch {
	case err == nil, errors.Is(err, errRefusedQuestion), errors.Is(err, mcphandler.ErrInputRequired):
		return answered, ""
	case ctx.Err() != nil, errors.Is(err, ErrBusy):
		return neutral, ""
	case errors.As(err, &se): // an HTTP status, whatever its body says
		return failed, failureClass(err)
	case errors.As(err, &rpc): // the upstream's own refusal
		return answered, ""
	case errors.Is(err, upstream.ErrSessionGone): // it answered: the session ended
		return answered, ""
	case errors.As(err, &te) && te.Class == mcphandler.ClassBackendUnavailable:
		return failed, failureClass(err)
	}
	return neutral, ""
}

// listOutcome is what a list's end says of its upstream.
func listOutcome(ctx context.Context, err error) (outcome, string) {
	switch {
	case err == nil:
		return answered, ""
	case ctx.Err() != nil, errors.Is(err, ErrBusy): // the caller went away; the upstream was not asked
		return neutral, ""
	}
	return failed, failureClass(err)
}
