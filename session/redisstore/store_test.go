package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
	"github.com/mcphandler/mcphandler/session/sessiontest"
)

// TestConformance runs the suite every session.Store must pass, the one the
// in-memory store runs too.
func TestConformance(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) session.Store { return newStore(t) })
}

// TestConformanceAutoPipeline runs the suite with Options.AutoPipeline.
func TestConformanceAutoPipeline(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) session.Store {
		c := redistest.Client(t)
		return newStoreWith(t, c, Options{Prefix: redistest.Prefix(t, c), AutoPipeline: true})
	})
}

// TestConformanceRESP2 runs the suite over the older protocol, where a
// PING on a subscribed connection is answered differently.
func TestConformanceRESP2(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) session.Store {
		opt := *redistest.Client(t).(*redis.Client).Options()
		opt.Protocol = 2
		c := redis.NewClient(&opt)
		t.Cleanup(func() { c.Close() })
		return newStoreOn(t, c, redistest.Prefix(t, c))
	})
}

// TestTwoReplicas plays two replicas: two clients (two connection pools)
// and two stores under one prefix, each seeing what the other wrote and
// receiving what the other publishes.
func TestTwoReplicas(t *testing.T) {
	for _, ap := range []bool{false, true} {
		t.Run(mode(ap), func(t *testing.T) { testTwoReplicas(t, Options{AutoPipeline: ap}) })
	}
}

func testTwoReplicas(t *testing.T, opts Options) {
	ctx := context.Background()
	c1, c2 := redistest.Client(t), redistest.Client(t)
	opts.Prefix = redistest.Prefix(t, c1)
	a, b := newStoreWith(t, c1, opts), newStoreWith(t, c2, opts)

	if err := a.Create(ctx, sample("s1")); err != nil {
		t.Fatal(err)
	}
	if err := b.Create(ctx, sample("s1")); err == nil {
		t.Fatal("replica b created a session id replica a holds")
	}
	s, err := b.Get(ctx, "s1")
	if err != nil || s.Owner != "4:acme/alice" {
		t.Fatalf("b.Get = %+v, %v", s, err)
	}
	s.Initialized, s.LogLevel, s.Subscriptions = true, "debug", []string{"file:///a"}
	if err := b.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	got, err := a.Get(ctx, "s1")
	if err != nil || !got.Initialized || got.LogLevel != "debug" || !slices.Equal(got.Subscriptions, s.Subscriptions) {
		t.Fatalf("a.Get after b.Update = %+v, %v", got, err)
	}
	if err := a.Delete(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "s1"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("b.Get after a.Delete = %v", err)
	}

	// Pub/Sub across replicas, and only to the channel published on.
	subB, err := b.Subscribe(ctx, "reply/1")
	if err != nil {
		t.Fatal(err)
	}
	defer subB.Close()
	otherB, err := b.Subscribe(ctx, "reply/2")
	if err != nil {
		t.Fatal(err)
	}
	defer otherB.Close()
	if n, err := a.Publish(ctx, "reply/1", []byte("from a")); err != nil || n != 1 {
		t.Fatalf("a.Publish = %d, %v; want 1 (replica b)", n, err)
	}
	if got := recv(t, subB, 5*time.Second); string(got) != "from a" {
		t.Fatalf("b received %q", got)
	}
	subA, err := a.Subscribe(ctx, "reply/1")
	if err != nil {
		t.Fatal(err)
	}
	defer subA.Close()
	if n, err := b.Publish(ctx, "reply/1", []byte("from b")); err != nil || n != 2 {
		t.Fatalf("b.Publish = %d, %v; want 2 (replica a, and b's own subscriber)", n, err)
	}
	for _, sub := range []session.Subscription{subA, subB} {
		if got := recv(t, sub, 5*time.Second); string(got) != "from b" {
			t.Fatalf("received %q", got)
		}
	}
	quiet(t, otherB, 50*time.Millisecond)

	// One winner among racing replicas.
	if ok, err := a.PutIfAbsent(ctx, "confirm", []byte("pending"), time.Minute); !ok || err != nil {
		t.Fatal(ok, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := range 40 {
		st := []*Store{a, b}[i%2]
		wg.Go(func() {
			ok, err := st.CompareAndSwap(ctx, "confirm", []byte("pending"), fmt.Appendf(nil, "taken by %d", i), time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d winners across two replicas, want 1", wins)
	}

	// One event log, appended to by both, numbered consecutively.
	seqs := make(chan uint64, 40)
	for i := range 40 {
		st := []*Store{a, b}[i%2]
		wg.Go(func() {
			seq, err := st.AppendEvent(ctx, "stream", fmt.Appendf(nil, "%d", i), time.Minute)
			if err != nil {
				t.Error(err)
			}
			seqs <- seq
		})
	}
	wg.Wait()
	close(seqs)
	var all []uint64
	for s := range seqs {
		all = append(all, s)
	}
	slices.Sort(all)
	for i, s := range all {
		if s != uint64(i+1) {
			t.Fatalf("sequence numbers %v are not 1..40", all)
		}
	}
	evs, err := b.EventsAfter(ctx, "stream", 38)
	if err != nil || len(evs) != 2 || evs[0].Seq != 39 || evs[1].Seq != 40 {
		t.Fatalf("EventsAfter(38) = %+v, %v", evs, err)
	}
}

// TestPrefixIsolation: stores under different prefixes share nothing, not
// even Pub/Sub channels.
func TestPrefixIsolation(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	a := newStoreOn(t, c, redistest.Prefix(t, c))
	b := newStoreOn(t, c, redistest.Prefix(t, c))
	if err := a.Create(ctx, sample("s1")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "s1"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("another prefix sees the session: %v", err)
	}
	sub, err := b.Subscribe(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if n, _ := a.Publish(ctx, "ch", []byte("x")); n != 0 {
		t.Fatalf("Publish under another prefix reached %d", n)
	}
	quiet(t, sub, 50*time.Millisecond)
}

// TestTTLs checks that every key the store writes has an expiry, and that
// Get and Update restart a session's.
func TestTTLs(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	st := newStoreOn(t, c, prefix)

	s := sample("s1")
	s.TTL = 0 // the default
	if err := st.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := st.Create(ctx, sample("s2")); err != nil {
		t.Fatal(err)
	}
	s2, _ := st.Get(ctx, "s2")
	s2.LogLevel = "info"
	if err := st.Update(ctx, s2); err != nil {
		t.Fatal(err)
	}
	st.PutIfAbsent(ctx, "r1", []byte("a"), time.Minute)
	st.PutIfAbsent(ctx, "r2", []byte("a"), 0) // rounded up to 1 ms
	st.PutIfAbsent(ctx, "r3", []byte("a"), time.Minute)
	st.CompareAndSwap(ctx, "r3", []byte("a"), []byte("b"), time.Hour)
	st.AppendEvent(ctx, "log", []byte("e1"), time.Minute)
	st.AppendEvent(ctx, "log", []byte("e2"), 2*time.Minute)
	sub, err := st.Subscribe(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	st.Publish(ctx, "ch", []byte("x"))
	sub.Close()

	keys := redistest.Keys(t, c, prefix)
	want := []string{prefix + "{s1}:s", prefix + "{s2}:s", prefix + "{r1}:r", prefix + "{r3}:r", prefix + "{log}:l"}
	for _, k := range want {
		if !slices.Contains(keys, k) {
			t.Errorf("key %s missing; keys: %q", k, keys)
		}
	}
	pttl := func(k string) time.Duration {
		d, err := c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, k := range keys {
		// PTTL is -1 for a key without expiry, -2 for a missing one. A
		// key that expired between SCAN and PTTL (r2 lives 1 ms, which a
		// busy machine may not reach before SCAN) is gone (-2) or about
		// to go (0), not immortal.
		if d := pttl(k); d == -1 {
			t.Errorf("key %s has PTTL %v; every key must expire", k, d)
		}
	}
	if d := pttl(prefix + "{s1}:s"); d <= 29*time.Minute || d > session.DefaultTTL {
		t.Errorf("a session with TTL 0 has PTTL %v, want about %v", d, session.DefaultTTL)
	}
	if d := pttl(prefix + "{r3}:r"); d <= 59*time.Minute {
		t.Errorf("CompareAndSwap did not set the new ttl: PTTL %v", d)
	}
	if d := pttl(prefix + "{log}:l"); d <= 119*time.Second {
		t.Errorf("AppendEvent did not restart the log's ttl: PTTL %v", d)
	}

	// Get and Update restart the idle TTL in Redis itself, so a session
	// used through any replica stays alive.
	k := prefix + "{s2}:s"
	c.PExpire(ctx, k, time.Second)
	if _, err := st.Get(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	if d := pttl(k); d <= 59*time.Second {
		t.Errorf("Get did not restart the TTL: PTTL %v", d)
	}
	c.PExpire(ctx, k, time.Second)
	if err := st.Update(ctx, s2); err != nil {
		t.Fatal(err)
	}
	if d := pttl(k); d <= 59*time.Second {
		t.Errorf("Update did not restart the TTL: PTTL %v", d)
	}
}

// TestUpdateKeepsOwner: Update replaces every field but ID and Owner, as
// the Store contract says, and a changed TTL becomes the key's.
func TestUpdateKeepsOwner(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	st := newStoreOn(t, c, prefix)
	if err := st.Create(ctx, sample("s1")); err != nil {
		t.Fatal(err)
	}
	s := &session.Session{
		ID: "s1", Owner: "7:globex/carol", ProtocolVersion: "2024-11-05",
		ClientName: "other", ClientVersion: "2.0", Capabilities: session.CapRoots | session.CapRootsListChanged,
		Initialized: true, LogLevel: "error", Subscriptions: []string{"a", "", "c"}, TTL: time.Hour,
	}
	if err := st.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	want := *s
	want.Owner = "4:acme/alice"
	if fmt.Sprint(*got) != fmt.Sprint(want) {
		t.Fatalf("after Update: %+v, want %+v", *got, want)
	}
	if d := c.PTTL(ctx, prefix+"{s1}:s").Val(); d <= 59*time.Minute {
		t.Fatalf("Update to a TTL of 1h left PTTL %v", d)
	}
	// Back to no subscriptions and the default TTL.
	s.Subscriptions, s.TTL = nil, 0
	st.Update(ctx, s)
	if got, _ := st.Get(ctx, "s1"); got.Subscriptions != nil || got.TTL != 0 {
		t.Fatalf("after a second Update: %+v", got)
	}
	if d := c.PTTL(ctx, prefix+"{s1}:s").Val(); d <= 29*time.Minute || d > session.DefaultTTL {
		t.Fatalf("Update to TTL 0 left PTTL %v, want about %v", d, session.DefaultTTL)
	}
}

// TestForeignRecord: a value under a session key that is not a complete
// record of this version reads as not found, never as a session.
func TestForeignRecord(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	st := newStoreOn(t, c, prefix)
	good := string(encodeSession(sample("x")))
	for i, v := range []string{
		"",
		"garbage",
		"\x03" + good[1:],        // another version
		"\x01" + "60000:999:abc", // immutable part beyond the end
		"\x01" + "x:0:",          // bad header
	} {
		id := fmt.Sprint("bad", i)
		c.Set(ctx, prefix+"{"+id+"}:s", v, time.Minute)
		if _, err := st.Get(ctx, id); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want ErrNotFound", v, err)
		}
		if err := st.Update(ctx, sample(id)); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("Update over %q = %v, want ErrNotFound", v, err)
		}
	}
	// A record whose mutable part is damaged reads as not found, and an
	// Update, which replaces that part only, makes it whole again.
	for i, v := range []string{
		good[:len(good)-1], // truncated
		good + "\x00",      // trailing byte
	} {
		id := fmt.Sprint("damaged", i)
		c.Set(ctx, prefix+"{"+id+"}:s", v, time.Minute)
		if _, err := st.Get(ctx, id); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want ErrNotFound", v, err)
		}
		if err := st.Update(ctx, sample(id)); err != nil {
			t.Errorf("Update over %q = %v", v, err)
		}
		if s, err := st.Get(ctx, id); err != nil || fmt.Sprint(*s) != fmt.Sprint(*sample(id)) {
			t.Errorf("after Update: %+v, %v", s, err)
		}
	}
	// A key of another type is not a session either (TestForeignTypes
	// tries every type on every call).
	c.RPush(ctx, prefix+"{list}:s", "x")
	c.PExpire(ctx, prefix+"{list}:s", time.Minute)
	if _, err := st.Get(ctx, "list"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("Get of a list = %v, want ErrNotFound", err)
	}
	// A header whose TTL no record has, too long for PEXPIRE, or zero:
	// not found, whichever way Get reads it, and the store stays up.
	for i, ttl := range []string{"99999999999999999999", "9223372036854775807", "0", "1000000000000000000"} {
		id := fmt.Sprint("ttl", i)
		v := "\x02" + ttl + good[strings.Index(good, ":"):]
		for _, hint := range []int64{0, 60000} {
			c.Set(ctx, prefix+"{"+id+"}:s", v, time.Minute)
			st.ttlHint.Store(hint)
			if _, err := st.Get(ctx, id); !errors.Is(err, session.ErrNotFound) {
				t.Errorf("Get of a record whose header gives TTL %s = %v, want ErrNotFound", ttl, err)
			}
		}
	}
}

// TestCommandsPerCall pins the cost of each call: one round trip, and the
// commands listed.
func TestCommandsPerCall(t *testing.T) {
	for _, ap := range []bool{false, true} {
		t.Run(mode(ap), func(t *testing.T) { testCommandsPerCall(t, ap) })
	}
}

func testCommandsPerCall(t *testing.T, ap bool) {
	ctx := context.Background()
	c := redistest.Client(t)
	st := newStoreWith(t, c, Options{Prefix: redistest.Prefix(t, c), AutoPipeline: ap})
	h := new(redistest.CountingHook)
	c.AddHook(h)
	st.Create(ctx, sample("warm"))
	// Load the scripts, so that EVALSHA finds them.
	st.Get(ctx, "warm")
	st.Update(ctx, sample("warm"))
	st.CompareAndSwap(ctx, "warm", nil, nil, time.Second)
	// go-redis may open a connection of its own for pipelines; the
	// commands that set up a connection (HELLO, CLIENT SETINFO) are
	// counted too, so open it before counting.
	st.AppendEvent(ctx, "warm", nil, time.Second)
	// With AutoPipeline the calls above used the autopipeliner's
	// connection; Publish uses one of the client's pool.
	st.Publish(ctx, "warm", nil)

	for _, tc := range []struct {
		name string
		call func() error
		cmds []string
	}{
		{"Create", func() error { return st.Create(ctx, sample("s1")) }, []string{"set"}},
		{"Get", func() error { _, err := st.Get(ctx, "s1"); return err }, []string{"getex"}},
		{"Update", func() error { return st.Update(ctx, sample("s1")) }, []string{"evalsha"}},
		{"Delete", func() error { return st.Delete(ctx, "s1") }, []string{"del"}},
		{"Publish", func() error { _, err := st.Publish(ctx, "ch", nil); return err }, []string{"publish"}},
		{"PutIfAbsent", func() error { _, err := st.PutIfAbsent(ctx, "k", []byte("a"), time.Minute); return err }, []string{"set"}},
		{"Load", func() error { _, err := st.Load(ctx, "k"); return err }, []string{"get"}},
		{"CompareAndSwap", func() error {
			_, err := st.CompareAndSwap(ctx, "k", []byte("a"), []byte("b"), time.Minute)
			return err
		}, []string{"evalsha"}},
		{"AppendEvent", func() error { _, err := st.AppendEvent(ctx, "l", nil, time.Minute); return err }, []string{"multi", "rpush", "pexpire", "exec"}},
		{"EventsAfter", func() error { _, err := st.EventsAfter(ctx, "l", 0); return err }, []string{"lrange"}},
	} {
		h.Reset()
		if err := tc.call(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := h.Counts()
		want := map[string]int64{}
		for _, c := range tc.cmds {
			want[c]++
		}
		if got.RoundTrips != 1 || got.Commands != int64(len(tc.cmds)) || fmt.Sprint(got.ByName) != fmt.Sprint(want) {
			t.Errorf("%s: %d round trips, commands %v; want 1 round trip, %v", tc.name, got.RoundTrips, got.ByName, want)
		}
	}
}

// TestMillis pins the rounding of lifetimes to PX milliseconds.
func TestMillis(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		-time.Second: 1, 0: 1, 1: 1, time.Millisecond: 1,
		time.Millisecond + 1: 2, time.Minute: 60000,
		math.MaxInt64: math.MaxInt64/int64(time.Millisecond) + 1,
	} {
		if got := millis(d); got != want {
			t.Errorf("millis(%v) = %d, want %d", d, got, want)
		}
	}
}

// TestCacheConformance runs the store suite with the session cache on: it
// must keep every promise of the Store interface on one replica.
func TestCacheConformance(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) session.Store {
		c := redistest.Client(t)
		st := New(c, Options{Prefix: redistest.Prefix(t, c), CacheTTL: time.Second})
		t.Cleanup(func() { st.Close() })
		return st
	})
}

// TestCacheAcrossReplicas: reads of a cached session cost no command, and
// an update or delete on another replica evicts the copy promptly.
func TestCacheAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	ca, cb := redistest.Client(t), redistest.Client(t)
	prefix := redistest.Prefix(t, ca)
	hook := &redistest.CountingHook{}
	ca.AddHook(hook)
	a := New(ca, Options{Prefix: prefix, CacheTTL: time.Minute})
	b := New(cb, Options{Prefix: prefix, CacheTTL: time.Minute})
	t.Cleanup(func() { a.Close(); b.Close() })
	s := &session.Session{ID: "s1", Owner: "o", ProtocolVersion: "2025-11-25", TTL: time.Hour}
	if err := b.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Get(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	hook.Reset()
	for range 10 {
		if _, err := a.Get(ctx, "s1"); err != nil {
			t.Fatal(err)
		}
	}
	if n := hook.Counts().Commands; n != 0 {
		t.Fatalf("cached reads sent %d commands", n)
	}
	s.LogLevel = "debug"
	if err := b.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { got, err := a.Get(ctx, "s1"); return err == nil && got.LogLevel == "debug" })
	if err := b.Delete(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { _, err := a.Get(ctx, "s1"); return errors.Is(err, session.ErrNotFound) })
}

func eventually(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatal("the other replica's write was not seen within 1s")
}
