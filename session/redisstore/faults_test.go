package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// pollUntil calls ok every few milliseconds until it reports true, and
// fails the test after d.
func pollUntil(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

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
	st := New(c, Options{Prefix: prefix, CacheTTL: time.Minute, OpTimeout: 300 * time.Millisecond})
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
	a := New(c, Options{Prefix: prefix, CacheTTL: time.Minute, OpTimeout: 300 * time.Millisecond})
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
