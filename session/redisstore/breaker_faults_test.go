package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// cachedGet reports whether a Get of id on st is served from the cache:
// it succeeds without sending a command (h counts st's client).
func cachedGet(t *testing.T, st *Store, h *redistest.CountingHook, id string) bool {
	t.Helper()
	h.Reset()
	if _, err := st.Get(context.Background(), id); err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return h.Counts().Commands == 0
}

// TestCacheFirstGetCancelled: the first Get of a store with a cache comes
// from a request whose client already hung up. That Get may fail, but the
// ones after it, Redis being healthy, must not — and the cache must come
// into service and receive evictions.
func TestCacheFirstGetCancelled(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	h := new(redistest.CountingHook)
	c.AddHook(h)
	st := New(c, Options{Prefix: prefix, CacheTTL: time.Minute})
	t.Cleanup(func() { st.Close() })
	other := New(redistest.Client(t), Options{Prefix: prefix, CacheTTL: time.Minute})
	t.Cleanup(func() { other.Close() })
	s := &session.Session{ID: "s1", Owner: "o", TTL: time.Hour}
	if err := other.Create(ctx, s); err != nil {
		t.Fatal(err)
	}

	gone, cancel := context.WithCancel(ctx)
	cancel()
	st.Get(gone, "s1")
	for i := range 3 {
		if _, err := st.Get(ctx, "s1"); err != nil {
			t.Fatalf("Get %d after a first Get from a cancelled request: %v", i, err)
		}
	}
	pollUntil(t, 5*time.Second, "the cache serves", func() bool { return cachedGet(t, st, h, "s1") })
	s.LogLevel = "debug"
	if err := other.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, time.Second, "the other replica's update is seen", func() bool {
		got, err := st.Get(ctx, "s1")
		return err == nil && got.LogLevel == "debug"
	})
}

// TestCacheFirstGetRedisDown: the first Get of a store with a cache finds
// Redis refusing connections and fails; once Redis answers, every Get
// succeeds, and the cache comes into service.
func TestCacheFirstGetRedisDown(t *testing.T) {
	ctx := context.Background()
	p := redistest.NewProxy(t, "")
	c := p.Client(t)
	prefix := redistest.Prefix(t, redistest.Client(t))
	h := new(redistest.CountingHook)
	c.AddHook(h)
	st := New(c, Options{Prefix: prefix, CacheTTL: time.Minute, OpTimeout: time.Second})
	t.Cleanup(func() { st.Close() })
	other := newStoreOn(t, redistest.Client(t), prefix)
	if err := other.Create(ctx, &session.Session{ID: "s1", Owner: "o", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}

	p.RefuseConnections()
	if _, err := st.Get(ctx, "s1"); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("Get with Redis down: %v, want ErrUnavailable", err)
	}
	p.AcceptConnections()
	// go-redis's pool, which gives up dialling after as many failed dials
	// as its size, and the store's breaker may each take up to a second to
	// see that Redis is back; from then on every Get succeeds.
	pollUntil(t, 3*time.Second, "a Get once Redis is back", func() bool { _, err := st.Get(ctx, "s1"); return err == nil })
	for i := range 3 {
		if _, err := st.Get(ctx, "s1"); err != nil {
			t.Fatalf("Get %d once Redis is back: %v", i, err)
		}
	}
	pollUntil(t, 5*time.Second, "the cache serves", func() bool { return cachedGet(t, st, h, "s1") })
}

// TestCacheStopsServingWhileEvictionsAreLost: the eviction subscription's
// connection breaks and cannot be restored (SUBSCRIBE is cut every time)
// while Redis itself answers. Another replica's update then cannot evict
// this replica's copy, so the copy must not be served: Gets read through
// to Redis and see the update. Once the subscription is back, the cache
// serves again, and evictions arrive.
func TestCacheStopsServingWhileEvictionsAreLost(t *testing.T) {
	ctx := context.Background()
	p := redistest.NewProxy(t, "")
	c := p.Client(t)
	prefix := redistest.Prefix(t, redistest.Client(t))
	h := new(redistest.CountingHook)
	c.AddHook(h)
	a := New(c, Options{Prefix: prefix, CacheTTL: time.Minute, OpTimeout: time.Second})
	t.Cleanup(func() { a.Close() })
	b := New(redistest.Client(t), Options{Prefix: prefix, CacheTTL: time.Minute})
	t.Cleanup(func() { b.Close() })
	s := &session.Session{ID: "s1", Owner: "o", TTL: time.Hour}
	if err := b.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 5*time.Second, "the cache serves", func() bool { return cachedGet(t, a, h, "s1") })

	p.CutOnCommand("SUBSCRIBE", -1)
	p.CutAll()
	// The Pub/Sub connection noticed the cut once it tried to subscribe
	// again.
	pollUntil(t, 5*time.Second, "a resubscription is attempted", func() bool { return p.Cuts() > 0 })
	s.LogLevel = "debug"
	if err := b.Update(ctx, s); err != nil { // its eviction cannot reach a
		t.Fatal(err)
	}
	got, err := a.Get(ctx, "s1")
	if err != nil || got.LogLevel != "debug" {
		t.Fatalf("Get while evictions cannot arrive = %+v, %v; want the updated record from Redis", got, err)
	}
	if cachedGet(t, a, h, "s1") {
		t.Fatal("the cache serves while its eviction subscription is down")
	}

	p.ClearCuts()
	pollUntil(t, 5*time.Second, "the cache serves again", func() bool { return cachedGet(t, a, h, "s1") })
	s.LogLevel = "info"
	if err := b.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, time.Second, "an eviction after the recovery arrives", func() bool {
		got, err := a.Get(ctx, "s1")
		return err == nil && got.LogLevel == "info"
	})
}

// failsFast makes calls of st until they fail with ErrUnavailable in less
// than bound, at most tries times, then checks that ten more do. It
// returns how many calls it took.
func failsFast(t *testing.T, st *Store, bound time.Duration, tries int) int {
	t.Helper()
	ctx := context.Background()
	for i := range tries {
		start := time.Now()
		_, err := st.Get(ctx, "s1")
		if !errors.Is(err, session.ErrUnavailable) {
			t.Fatalf("call %d with Redis unreachable: %v, want ErrUnavailable", i, err)
		}
		if time.Since(start) < bound {
			for j, call := range calls(st) {
				start := time.Now()
				err := call(ctx)
				if d := time.Since(start); !errors.Is(err, session.ErrUnavailable) || d >= bound {
					t.Fatalf("%s once the store knows Redis is down: %v after %v, want ErrUnavailable within %v", j, err, d, bound)
				}
			}
			return i
		}
	}
	t.Fatalf("after %d calls, calls still take more than %v to fail", tries, bound)
	return 0
}

// TestBreakerRefused: while Redis refuses connections, the store stops
// trying after a few calls and fails every call at once; when Redis
// accepts connections again, service resumes by itself.
func TestBreakerRefused(t *testing.T) {
	ctx := context.Background()
	p := redistest.NewProxy(t, "")
	prefix := redistest.Prefix(t, redistest.Client(t))
	const opTimeout = 400 * time.Millisecond
	st := New(p.Client(t), Options{Prefix: prefix, OpTimeout: opTimeout})
	t.Cleanup(func() { st.Close() })
	setup(t, prefix, "s1")
	p.RefuseConnections()
	p.CutAll()
	n := failsFast(t, st, opTimeout/4, 10)
	t.Logf("failing fast after %d calls", n)
	p.AcceptConnections()
	pollUntil(t, 5*time.Second, "service resumes", func() bool { _, err := st.Get(ctx, "s1"); return err == nil })
}

// TestBreakerFrozen: a Redis that accepts connections and answers nothing
// costs OpTimeout per call only until the store knows; then calls fail at
// once, and service resumes by itself when Redis answers again.
func TestBreakerFrozen(t *testing.T) {
	for _, ap := range []bool{false, true} {
		t.Run(mode(ap), func(t *testing.T) { testBreakerFrozen(t, ap) })
	}
}

func testBreakerFrozen(t *testing.T, ap bool) {
	ctx := context.Background()
	p := redistest.NewProxy(t, "")
	prefix := redistest.Prefix(t, redistest.Client(t))
	const opTimeout = 300 * time.Millisecond
	st := New(p.Client(t), Options{Prefix: prefix, OpTimeout: opTimeout, AutoPipeline: ap})
	t.Cleanup(func() { st.Close() })
	setup(t, prefix, "s1")
	p.Stall()
	n := failsFast(t, st, opTimeout/4, 10)
	t.Logf("failing fast after %d calls", n)
	p.Resume()
	pollUntil(t, 5*time.Second, "service resumes", func() bool { _, err := st.Get(ctx, "s1"); return err == nil })
}

// pingHook counts the PINGs a client sends and the most that were in
// flight at once.
type pingHook struct {
	mu             sync.Mutex
	inFlight, most int
	total          int
}

func (h *pingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *pingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *pingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "ping" {
			return next(ctx, cmd)
		}
		h.mu.Lock()
		h.total++
		h.inFlight++
		h.most = max(h.most, h.inFlight)
		h.mu.Unlock()
		defer func() {
			h.mu.Lock()
			h.inFlight--
			h.mu.Unlock()
		}()
		return next(ctx, cmd)
	}
}

func (h *pingHook) counts() (total, most int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total, h.most
}

// TestBreakerProbes: while the breaker is open the store sends nothing
// but PINGs, one at a time, on the backoff schedule; the first answer
// closes it.
func TestBreakerProbes(t *testing.T) {
	ctx := context.Background()
	p := redistest.NewProxy(t, "")
	c := p.Client(t)
	prefix := redistest.Prefix(t, redistest.Client(t))
	pings := new(pingHook)
	c.AddHook(pings)
	counts := new(redistest.CountingHook)
	c.AddHook(counts)
	const opTimeout = 300 * time.Millisecond
	st := New(c, Options{Prefix: prefix, OpTimeout: opTimeout, BreakerThreshold: 2,
		BreakerMinBackoff: 20 * time.Millisecond, BreakerMaxBackoff: 40 * time.Millisecond})
	t.Cleanup(func() { st.Close() })
	setup(t, prefix, "s1")
	p.Stall()
	for range 2 { // the threshold: two calls that time out
		if _, err := st.Get(ctx, "s1"); !errors.Is(err, session.ErrUnavailable) {
			t.Fatalf("Get on a frozen Redis: %v", err)
		}
	}
	if !st.br.open.Load() {
		t.Fatal("two failures in a row did not open a breaker of threshold 2")
	}
	counts.Reset()
	time.Sleep(time.Second)
	for name, call := range calls(st) {
		if err := call(ctx); !errors.Is(err, session.ErrUnavailable) {
			t.Fatalf("%s while open: %v", name, err)
		}
	}
	n := counts.Counts()
	// Each PING waits OpTimeout (300ms) then 40ms: about 3 in a second,
	// fewer on a loaded machine, each on a new connection (go-redis drops
	// one that timed out), whose setup (HELLO, CLIENT SETINFO) is counted
	// too.
	if n.ByName["ping"] < 1 || n.ByName["ping"] > 6 || n.Commands != n.ByName["ping"]+n.ByName["hello"]+n.ByName["client"] {
		t.Fatalf("in 1s of open breaker the store sent %v; want only PINGs, about 3", n.ByName)
	}
	if _, most := pings.counts(); most != 1 {
		t.Fatalf("%d PINGs in flight at once, want 1", most)
	}
	p.Resume()
	pollUntil(t, 5*time.Second, "the breaker closes", func() bool { return !st.br.open.Load() })
	pollUntil(t, 5*time.Second, "a Get after the breaker closed", func() bool { _, err := st.Get(ctx, "s1"); return err == nil })
}

// TestBreakerStaysClosed: what does not show Redis down leaves the
// breaker closed: a single slow command, failures in a row fewer than the
// threshold, error replies (WRONGTYPE, a script error, NOSCRIPT answered
// by go-redis's fallback), and calls whose caller gave up.
func TestBreakerStaysClosed(t *testing.T) {
	ctx := context.Background()
	addr, _, _ := redistest.Start(t) // SCRIPT FLUSH must not touch the shared Redis
	p := redistest.NewProxy(t, addr)
	c := redistest.ClientAt(t, p.Addr())
	const opTimeout = 500 * time.Millisecond
	st := New(c, Options{OpTimeout: opTimeout})
	t.Cleanup(func() { st.Close() })
	if err := newStoreOn(t, redistest.ClientAt(t, addr), DefaultPrefix).Create(ctx, sample("s1")); err != nil {
		t.Fatal(err)
	}
	// closed checks that the breaker is closed, then that calls go to
	// Redis: a Get succeeds (one may still time out on a loaded machine,
	// which the failures below leave room for).
	closed := func(what string) {
		t.Helper()
		if st.br.open.Load() {
			t.Fatalf("%s opened the breaker", what)
		}
		pollUntil(t, 5*time.Second, "a Get after "+what, func() bool {
			_, err := st.Get(ctx, "s1")
			if errors.Is(err, errOpen) {
				t.Fatalf("after %s: %v", what, err)
			}
			return err == nil
		})
	}
	// Fewer failures in a row than the threshold, twice, with a success in
	// between; together they are more than the threshold.
	const some = DefaultBreakerThreshold - 2

	p.SetLatency(opTimeout, 0)
	if _, err := st.Get(ctx, "s1"); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("a Get slower than OpTimeout: %v, want ErrUnavailable", err)
	}
	p.SetLatency(0, 0)
	closed("a single slow command")

	p.Stall()
	for range some {
		st.Get(ctx, "s1")
	}
	p.Resume()
	closed(fmt.Sprint(some, " timeouts in a row"))
	p.Stall()
	for range some {
		st.Get(ctx, "s1")
	}
	p.Resume()
	closed("as many timeouts again, after a success")

	// A key of another type is not even an error for the store's calls
	// (TestForeignTypes); a WRONGTYPE reply to an operation run by Do is
	// one, and does not count either.
	list := st.key("list", kindSession)
	c.RPush(ctx, list, "x")
	for range 3 * DefaultBreakerThreshold {
		if _, err := st.Get(ctx, "list"); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("Get of a list: %v, want ErrNotFound", err)
		}
		err := st.Do(ctx, 0, func(ctx context.Context, c redis.UniversalClient) error { return c.Get(ctx, list).Err() })
		if !errors.Is(err, session.ErrUnavailable) || !isReply(err) || !foreign(err) {
			t.Fatalf("GET of a list through Do: %v, want a WRONGTYPE reply", err)
		}
	}
	closed("WRONGTYPE replies")

	c.Set(ctx, st.key("k", kindRecord), "v", time.Minute)
	bad := redis.NewScript(`return redis.call('NOPE')`)
	for range 3 * DefaultBreakerThreshold {
		err := bad.Run(ctx, c, nil).Err()
		st.observe(ctx, err) // as a call of the store would
		if !isReply(err) {
			t.Fatalf("a failing script: %v, want an error reply", err)
		}
	}
	closed("script errors")

	for range 3 * DefaultBreakerThreshold {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := st.CompareAndSwap(ctx, "k", []byte("v"), []byte("v"), time.Minute); err != nil {
			t.Fatalf("CompareAndSwap after SCRIPT FLUSH: %v", err)
		}
	}
	closed("NOSCRIPT replies")

	p.Stall()
	gone, cancel := context.WithCancel(ctx)
	time.AfterFunc(20*time.Millisecond, cancel)
	impatient, cancel2 := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel2()
	for _, ctx := range []context.Context{gone, impatient} {
		for range 2 * DefaultBreakerThreshold {
			if _, err := st.Get(ctx, "s1"); err == nil {
				t.Fatal("a Get on a frozen Redis succeeded")
			}
		}
	}
	p.Resume()
	closed("callers that gave up")
}

// TestBreakerOptions: the threshold is configurable, a negative one
// disables the breaker, and Close turns it off.
func TestBreakerOptions(t *testing.T) {
	ctx := context.Background()
	p := redistest.NewProxy(t, "")
	prefix := redistest.Prefix(t, redistest.Client(t))
	const opTimeout = 300 * time.Millisecond
	one := New(p.Client(t), Options{Prefix: prefix, OpTimeout: opTimeout, BreakerThreshold: 1, BreakerMinBackoff: time.Hour})
	t.Cleanup(func() { one.Close() })
	off := New(p.Client(t), Options{Prefix: prefix, OpTimeout: opTimeout, BreakerThreshold: -1})
	t.Cleanup(func() { off.Close() })
	setup(t, prefix, "s1", "s0")
	p.Stall()
	one.Get(ctx, "s1")
	if !one.br.open.Load() {
		t.Fatal("one failure did not open a breaker of threshold 1")
	}
	for range DefaultBreakerThreshold + 1 {
		start := time.Now()
		if _, err := off.Get(ctx, "s0"); !errors.Is(err, session.ErrUnavailable) || time.Since(start) < opTimeout/2 {
			t.Fatalf("with the breaker disabled, Get on a frozen Redis: %v after %v, want a timeout", err, time.Since(start))
		}
	}
	p.Resume()
	// Its first probe would come in an hour, but Close turns the breaker
	// off: calls go to Redis again.
	if err := one.Close(); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 5*time.Second, "a Get after Close", func() bool { _, err := one.Get(ctx, "s1"); return err == nil })
}
