package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
	"github.com/mcphandler/mcphandler/session/sessiontest"
)

// TestClusterConformance runs the suite every session.Store must pass on a
// Redis Cluster, through go-redis's cluster client, which refuses a
// transaction across slots as the cluster refuses a command or script
// across slots: with the default options, over RESP2 (where a PING on a
// subscribed connection is answered differently), with the session cache,
// with writes waiting for a replica, and through the autopipeliner.
func TestClusterConformance(t *testing.T) {
	cl := redistest.SharedCluster(t)
	for name, opts := range map[string]func(*redis.ClusterOptions, *Options){
		"Default":      func(*redis.ClusterOptions, *Options) {},
		"RESP2":        func(c *redis.ClusterOptions, _ *Options) { c.Protocol = 2 },
		"CacheTTL":     func(_ *redis.ClusterOptions, o *Options) { o.CacheTTL = time.Second },
		"WaitReplicas": func(_ *redis.ClusterOptions, o *Options) { o.WaitReplicas = 1 },
		"AutoPipeline": func(_ *redis.ClusterOptions, o *Options) { o.AutoPipeline = true },
	} {
		t.Run(name, func(t *testing.T) {
			sessiontest.Run(t, func(t *testing.T) session.Store {
				copt := *cl.Client(t).Options()
				var o Options
				opts(&copt, &o)
				c := redis.NewClusterClient(&copt)
				t.Cleanup(func() { c.Close() })
				o.Prefix = redistest.Prefix(t, c)
				st := New(c, o)
				t.Cleanup(func() { st.Close() })
				return st
			})
		})
	}
}

// TestSentinelConformance runs the suite on a master watched by Sentinels,
// through go-redis's failover client, with the default options, with
// writes waiting for the replica, and through the autopipeliner.
func TestSentinelConformance(t *testing.T) {
	s := redistest.SharedSentinel(t)
	for name, o := range map[string]Options{"Default": {}, "WaitReplicas": {WaitReplicas: 1}, "AutoPipeline": {AutoPipeline: true}} {
		t.Run(name, func(t *testing.T) {
			sessiontest.Run(t, func(t *testing.T) session.Store {
				c := s.Client(t)
				o := o
				o.Prefix = redistest.Prefix(t, c)
				st := New(c, o)
				t.Cleanup(func() { st.Close() })
				return st
			})
		})
	}
}

// TestClusterShardTags: the hash tags of the cluster's channels are in the
// slots the store assumes, one in each sixteenth of the slot space.
func TestClusterShardTags(t *testing.T) {
	c := redistest.SharedCluster(t).Client(t)
	ctx := context.Background()
	seen := map[string]bool{}
	for i, st := range shardTags {
		slot, err := c.ClusterKeySlot(ctx, "{"+st.tag+"}x").Result()
		if err != nil {
			t.Fatal(err)
		}
		if int(slot) != st.slot || st.slot < i*1024 || st.slot >= (i+1)*1024 || seen[st.tag] {
			t.Errorf("tag %q: slot %d, table says %d, want it in [%d, %d) and unique", st.tag, slot, st.slot, i*1024, (i+1)*1024)
		}
		seen[st.tag] = true
	}
}

// TestClusterPubSubIsSharded: on a cluster the store's channels are shard
// channels (SSUBSCRIBE), spread over every master, never classic ones
// (which a cluster broadcasts to every node); the store subscribes through
// at most one connection per shard, and Publish counts exactly the
// subscribed replicas.
func TestClusterPubSubIsSharded(t *testing.T) {
	ctx := context.Background()
	cl := redistest.SharedCluster(t)
	c1, c2 := cl.Client(t), cl.Client(t)
	prefix := redistest.Prefix(t, c1)
	a, b := newStoreOn(t, c1, prefix), newStoreOn(t, c2, prefix)
	const n = 40
	for i := range n {
		sub, err := a.Subscribe(ctx, fmt.Sprint("ch", i))
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		if got, err := b.Publish(ctx, fmt.Sprint("ch", i), []byte("x")); err != nil || got != 1 {
			t.Fatalf("Publish to ch%d = %d, %v; want 1", i, got, err)
		}
		if m := recv(t, sub, 5*time.Second); string(m) != "x" {
			t.Fatalf("ch%d received %q", i, m)
		}
	}
	var mu sync.Mutex // ForEachMaster calls in parallel
	var sharded []string
	masters := 0
	err := c1.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		classic, err := m.PubSubChannels(ctx, prefix+"*").Result()
		if err != nil {
			return err
		}
		if len(classic) > 0 {
			return fmt.Errorf("%s has classic channels %q", m.Options().Addr, classic)
		}
		shard, err := m.PubSubShardChannels(ctx, prefix+"*").Result()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if len(shard) > 0 {
			masters++
		}
		sharded = append(sharded, shard...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var ours int
	for _, ch := range sharded {
		if !strings.Contains(ch, "store/probe/") {
			ours++
		}
	}
	if ours != n || masters != 3 {
		t.Fatalf("%d of %d channels are shard channels, on %d masters (want 3): %q", ours, n, masters, sharded)
	}
	a.ps.mu.Lock()
	shards := len(a.ps.shards)
	a.ps.mu.Unlock()
	if shards > len(shardTags) {
		t.Fatalf("%d shards, want at most %d", shards, len(shardTags))
	}
}

// topologyData is what a failover test writes before the failover and
// checks after it: sessions, records and event logs whose keys spread
// over the slots, and subscriptions of channels of every shard.
type topologyData struct {
	subs map[string]session.Subscription
}

const topologyItems = 24

func writeTopologyData(t *testing.T, st *Store) *topologyData {
	t.Helper()
	ctx := context.Background()
	d := &topologyData{subs: map[string]session.Subscription{}}
	for i := range topologyItems {
		id := fmt.Sprint("s", i)
		if err := st.Create(ctx, sample(id)); err != nil {
			t.Fatal(err)
		}
		if ok, err := st.PutIfAbsent(ctx, fmt.Sprint("r", i), []byte("pending"), time.Minute); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if ok, err := st.CompareAndSwap(ctx, fmt.Sprint("r", i), []byte("pending"), []byte("decided"), time.Minute); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if _, err := st.AppendEvent(ctx, fmt.Sprint("l", i), []byte("e1"), time.Minute); err != nil {
			t.Fatal(err)
		}
		ch := fmt.Sprint("ch", i)
		sub, err := st.Subscribe(ctx, ch)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Close() })
		d.subs[ch] = sub
	}
	return d
}

// checkTopologyData checks, on st (another replica's store), that every
// write survived, that new writes work, and that every subscription of
// the writer hears st's messages again within within, counted exactly.
func checkTopologyData(t *testing.T, d *topologyData, st, writer *Store, within time.Duration) time.Duration {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	retry := func(what string, f func() error) {
		t.Helper()
		var err error
		for deadline := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
			if err = f(); err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v: %v", what, within, err)
			}
		}
	}
	for i := range topologyItems {
		retry("Get", func() error {
			s, err := st.Get(ctx, fmt.Sprint("s", i))
			if err == nil && s.Owner != sample("").Owner {
				err = fmt.Errorf("owner %q", s.Owner)
			}
			return err
		})
		retry("Load", func() error {
			v, err := st.Load(ctx, fmt.Sprint("r", i))
			if err == nil && string(v) != "decided" {
				return &permanentErr{fmt.Errorf("r%d = %q after the failover, want the decided value", i, v)}
			}
			return err
		})
		retry("EventsAfter", func() error {
			evs, err := st.EventsAfter(ctx, fmt.Sprint("l", i), 0)
			if err == nil && len(evs) != 1 {
				return &permanentErr{fmt.Errorf("l%d holds %d events", i, len(evs))}
			}
			return err
		})
		retry("Update", func() error { return st.Update(ctx, sample(fmt.Sprint("s", i))) })
	}
	for ch, sub := range d.subs {
		retry("a message on "+ch, func() error {
			n, err := st.Publish(ctx, ch, []byte("after"))
			if err != nil {
				return err
			}
			select {
			case m := <-sub.C():
				for len(sub.C()) > 0 {
					<-sub.C()
				}
				if string(m) != "after" {
					return fmt.Errorf("received %q", m)
				}
				if n != 1 {
					return fmt.Errorf("Publish counted %d receivers, want 1", n)
				}
				return nil
			case <-time.After(50 * time.Millisecond):
				return fmt.Errorf("nothing received (Publish counted %d)", n)
			}
		})
	}
	took := time.Since(start)
	for _, s := range []*Store{st, writer} {
		if s.br.open.Load() {
			t.Fatal("the circuit breaker is open after the failover")
		}
	}
	return took
}

// permanentErr stops a retry of checkTopologyData: the data is wrong,
// not late.
type permanentErr struct{ error }

// TestClusterFailover: a manual failover of every master of the cluster
// loses nothing the store wrote (waiting for a replica), and every
// subscription hears messages again, counted exactly, within seconds:
// the old masters unsubscribe the store's connections, which move to the
// new masters. The old masters become the new ones' replicas, so writes
// waiting for a replica go on.
func TestClusterFailover(t *testing.T) {
	cl := redistest.SharedCluster(t)
	c1, c2 := cl.Client(t), cl.Client(t)
	prefix := redistest.Prefix(t, c1)
	a := New(c1, Options{Prefix: prefix, WaitReplicas: 1})
	b := New(c2, Options{Prefix: prefix, WaitReplicas: 1})
	t.Cleanup(func() { a.Close(); b.Close() })
	d := writeTopologyData(t, a)
	start := time.Now()
	cl.Failover(t)
	t.Logf("failover of every master: %v", time.Since(start))
	t.Logf("everything back: %v", checkTopologyData(t, d, b, a, 10*time.Second))
}

// TestClusterMasterDies: the master of some of the store's keys and
// channels is killed; once its replica took over, the store reaches the
// slots again (go-redis alone would keep dialling the dead node until its
// next slot map reload, a minute later), nothing written while waiting
// for a replica is lost, and subscriptions hear messages again. Writes
// that wait for a replica fail on the new master, which has none, until
// the dead node is back as its replica. The reading replica runs without
// and with AutoPipeline.
func TestClusterMasterDies(t *testing.T) {
	for _, ap := range []bool{false, true} {
		t.Run(mode(ap), func(t *testing.T) { testClusterMasterDies(t, ap) })
	}
}

func testClusterMasterDies(t *testing.T, ap bool) {
	ctx := context.Background()
	cl := redistest.SharedCluster(t)
	c1, c2 := cl.Client(t), cl.Client(t)
	prefix := redistest.Prefix(t, c1)
	a := New(c1, Options{Prefix: prefix, WaitReplicas: 1, OpTimeout: time.Second})
	b := New(c2, Options{Prefix: prefix, OpTimeout: time.Second, AutoPipeline: ap})
	t.Cleanup(func() { a.Close(); b.Close() })
	d := writeTopologyData(t, a)
	// Both clients know the slot map before the death.
	for _, st := range []*Store{a, b} {
		if _, err := st.Get(ctx, "s0"); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	_, restart := cl.KillMaster(t, a.key("s0", kindSession))
	t.Logf("failover after the kill: %v", time.Since(start))
	t.Logf("everything back: %v", checkTopologyData(t, d, b, a, 10*time.Second))
	if err := a.Update(ctx, sample("s0")); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("a write waiting for a replica on a master without one: %v, want ErrUnavailable", err)
	}
	restart()
	pollUntil(t, 5*time.Second, "a write waiting for a replica, once the dead node is back", func() bool {
		return a.Update(ctx, sample("s0")) == nil
	})
}

// TestSentinelMasterDies: the master is killed; once the Sentinels agreed
// and promoted the replica, the store works again on its own, nothing
// written while waiting for the replica is lost, and subscriptions hear
// messages again. Writes that wait for a replica fail until the dead
// server is back as a replica. The reading replica runs without and with
// AutoPipeline.
func TestSentinelMasterDies(t *testing.T) {
	for _, ap := range []bool{false, true} {
		t.Run(mode(ap), func(t *testing.T) { testSentinelMasterDies(t, ap) })
	}
}

func testSentinelMasterDies(t *testing.T, ap bool) {
	ctx := context.Background()
	s := redistest.SharedSentinel(t)
	c1, c2 := s.Client(t), s.Client(t)
	prefix := redistest.Prefix(t, c1)
	a := New(c1, Options{Prefix: prefix, WaitReplicas: 1, OpTimeout: time.Second})
	b := New(c2, Options{Prefix: prefix, OpTimeout: time.Second, AutoPipeline: ap})
	t.Cleanup(func() { a.Close(); b.Close() })
	d := writeTopologyData(t, a)
	start := time.Now()
	_, restart := s.KillMaster(t)
	t.Logf("failover after the kill: %v", time.Since(start))
	t.Logf("everything back: %v", checkTopologyData(t, d, b, a, 10*time.Second))
	if err := a.Update(ctx, sample("s0")); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("a write waiting for a replica on a master without one: %v, want ErrUnavailable", err)
	}
	restart()
	pollUntil(t, 5*time.Second, "a write waiting for a replica, once the dead server is back", func() bool {
		return a.Update(ctx, sample("s0")) == nil
	})
}

// TestSentinelFailover: across a SENTINEL FAILOVER, sessions, records and
// event logs written (waiting for the replica) are all there, writes
// work, and every subscription hears messages again, counted exactly,
// within a few seconds — although the old master goes on running as a
// master, keeping the store's Pub/Sub connection, for about ten seconds,
// until the Sentinels turn it into a replica: the store's probe finds the
// connection deaf and moves it. The breaker does not stay open. Until the
// old master is a replica, the new one has none, and writes waiting for a
// replica fail.
func TestSentinelFailover(t *testing.T) {
	ctx := context.Background()
	s := redistest.SharedSentinel(t)
	c1, c2 := s.Client(t), s.Client(t)
	prefix := redistest.Prefix(t, c1)
	a := New(c1, Options{Prefix: prefix, WaitReplicas: 1})
	b := New(c2, Options{Prefix: prefix})
	t.Cleanup(func() { a.Close(); b.Close() })
	d := writeTopologyData(t, a)
	start := time.Now()
	s.Failover(t)
	t.Logf("failover: %v", time.Since(start))
	t.Logf("everything back: %v", checkTopologyData(t, d, b, a, 6*time.Second))
	if err := a.Update(ctx, sample("s0")); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("a write waiting for a replica, before the old master became one: %v, want ErrUnavailable", err)
	}
}

// TestWaitReplicas: with WaitReplicas, a write returns once the replica
// has it; while replication is stalled (the replica's link to the master
// goes through a proxy) every kind of write fails with ErrUnavailable
// within WaitTimeout, without opening the breaker, and a write that
// changed nothing does not. Without WaitReplicas the same writes succeed
// while the replica lacks them: what a failover at that moment loses.
func TestWaitReplicas(t *testing.T) {
	ctx := context.Background()
	master, _, _ := redistest.Start(t)
	link := redistest.NewProxy(t, master)
	replicaAddr := redistest.StartReplica(t, link.Addr())
	c := redistest.ClientAt(t, master)
	replica := redistest.ClientAt(t, replicaAddr)
	prefix := redistest.Prefix(t, c)
	// Long enough for a loaded machine's replica to acknowledge writes in
	// sync (at most OpTimeout/2, 1 s by default).
	const waitTimeout = time.Second
	st := New(c, Options{Prefix: prefix, WaitReplicas: 1, WaitTimeout: waitTimeout, BreakerThreshold: 1})
	t.Cleanup(func() { st.Close() })
	plain := newStoreOn(t, c, prefix)

	writes := func(st *Store, i int) map[string]func() error {
		id := fmt.Sprint(i)
		return map[string]func() error{
			"Create": func() error { return st.Create(ctx, sample("s"+id)) },
			"Update": func() error { return st.Update(ctx, sample("s"+id)) },
			"PutIfAbsent": func() error {
				_, err := st.PutIfAbsent(ctx, "r"+id, []byte("a"), time.Minute)
				return err
			},
			"CompareAndSwap": func() error {
				_, err := st.CompareAndSwap(ctx, "r"+id, []byte("a"), []byte("b"), time.Minute)
				return err
			},
			"AppendEvent": func() error { _, err := st.AppendEvent(ctx, "l"+id, []byte("e"), time.Minute); return err },
			"Delete":      func() error { return st.Delete(ctx, "s"+id) },
		}
	}
	order := []string{"Create", "Update", "PutIfAbsent", "CompareAndSwap", "AppendEvent", "Delete"}
	onReplica := func(key string) bool { return replica.Exists(ctx, key).Val() == 1 }

	for _, name := range order {
		if err := writes(st, 1)[name](); err != nil {
			t.Fatalf("%s with the replica in sync: %v", name, err)
		}
		// Acknowledged: the replica has it already.
		switch name {
		case "Update":
			if !onReplica(st.key("s1", kindSession)) {
				t.Fatal("the replica lacks the session")
			}
		case "CompareAndSwap":
			if v := replica.Get(ctx, st.key("r1", kindRecord)).Val(); v != "b" {
				t.Fatalf("the replica holds %q after the swap", v)
			}
		case "AppendEvent":
			if n := replica.LLen(ctx, st.key("l1", kindLog)).Val(); n != 1 {
				t.Fatalf("the replica's log holds %d events", n)
			}
		case "Delete":
			if onReplica(st.key("s1", kindSession)) {
				t.Fatal("the replica still holds the deleted session")
			}
		}
	}

	if err := st.Create(ctx, sample("taken")); err != nil {
		t.Fatal(err)
	}
	link.Stall()
	for _, name := range order {
		start := time.Now()
		err := writes(st, 2)[name]()
		if !errors.Is(err, session.ErrUnavailable) || !strings.Contains(err.Error(), "replicas") {
			t.Fatalf("%s with replication stalled: %v, want ErrUnavailable", name, err)
		}
		if d := time.Since(start); d < waitTimeout || d > waitTimeout+time.Second {
			t.Errorf("%s failed after %v, want about WaitTimeout (%v)", name, d, waitTimeout)
		}
	}
	if st.br.open.Load() {
		t.Fatal("unreplicated writes opened the breaker (threshold 1)")
	}
	// Changing nothing needs no replica: a taken id, a swap that does not
	// happen.
	start := time.Now()
	if err := st.Create(ctx, sample("taken")); !errors.Is(err, errIDInUse) {
		t.Fatalf("Create of a taken id: %v", err)
	}
	if ok, err := st.CompareAndSwap(ctx, "r2", []byte("x"), []byte("y"), time.Minute); ok || err != nil {
		t.Fatalf("a CAS that does not swap: %v, %v", ok, err)
	}
	t.Logf("two writes that changed nothing took %v", time.Since(start))
	// Without WaitReplicas the writes succeed, and the replica lacks them.
	for _, name := range order[:5] {
		if err := writes(plain, 3)[name](); err != nil {
			t.Fatalf("%s without WaitReplicas: %v", name, err)
		}
	}
	if onReplica(st.key("s3", kindSession)) || onReplica(st.key("r3", kindRecord)) {
		t.Fatal("the stalled replica has the writes: the test proves nothing")
	}
	link.Resume()
	for _, name := range order {
		var err error
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if err = writes(st, 4)[name](); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("%s once replication resumed: %v", name, err)
		}
	}
}

// TestClusterWaitReplicas: on a cluster, WAIT follows the write on the
// connection to the master that took it: with the replicas of that
// master frozen, a write fails after WaitTimeout (a WAIT sent anywhere
// else would have counted the idle replica at once); thawed, it succeeds;
// and asking for more replicas than a master has fails every write.
func TestClusterWaitReplicas(t *testing.T) {
	ctx := context.Background()
	cl := redistest.SharedCluster(t)
	c := cl.Client(t)
	prefix := redistest.Prefix(t, c)
	st := New(c, Options{Prefix: prefix, WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { st.Close() })
	for i := range 8 {
		if ok, err := st.PutIfAbsent(ctx, fmt.Sprint("r", i), []byte("v"), time.Minute); err != nil || !ok {
			t.Fatalf("PutIfAbsent r%d: %v, %v", i, ok, err)
		}
	}
	thaw := cl.FreezeReplicas(t, st.key("r0", kindRecord))
	_, err := st.PutIfAbsent(ctx, "r0", []byte("v"), time.Minute) // changes nothing
	if err != nil {
		t.Fatalf("a PutIfAbsent that wrote nothing: %v", err)
	}
	_, err = st.CompareAndSwap(ctx, "r0", []byte("v"), []byte("w"), time.Minute)
	thaw()
	if !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("CompareAndSwap with the master's replicas frozen: %v, want ErrUnavailable", err)
	}
	if ok, err := st.CompareAndSwap(ctx, "r0", []byte("w"), []byte("x"), time.Minute); err != nil || !ok {
		t.Fatalf("CompareAndSwap after the thaw: %v, %v", ok, err)
	}
	two := New(c, Options{Prefix: prefix, WaitReplicas: 2, WaitTimeout: 50 * time.Millisecond})
	t.Cleanup(func() { two.Close() })
	if err := two.Create(ctx, sample("s1")); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("Create waiting for 2 replicas of 1: %v", err)
	}
}

// TestProbeReplacesDeafConnection: the client's connections move to
// another server (as they do when a failover moves the master behind one
// address, or a Sentinel's failover client learns the new master), while
// the store's Pub/Sub connection stays on the old server, which is alive
// and hears nothing published through the client any more. The store's
// probe finds it deaf and replaces it: the subscription hears what is
// published on the new server again within seconds.
func TestProbeReplacesDeafConnection(t *testing.T) {
	ctx := context.Background()
	first, _, _ := redistest.Start(t)
	second, _, _ := redistest.Start(t)
	var target atomic.Pointer[string]
	target.Store(&first)
	c := redis.NewClient(&redis.Options{
		ContextTimeoutEnabled: true, DialTimeout: time.Second, DialerRetries: 1,
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, *target.Load())
		},
	})
	t.Cleanup(func() { c.Close() })
	other := redistest.ClientAt(t, second)
	prefix := redistest.Prefix(t, other)
	st := newStoreOn(t, c, prefix)
	pub := newStoreOn(t, other, prefix)
	sub, err := st.Subscribe(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if n, err := st.Publish(ctx, "ch", []byte("one")); err != nil || n != 1 {
		t.Fatalf("Publish = %d, %v", n, err)
	}
	recv(t, sub, 5*time.Second)

	// The move: new connections go to the second server, and the first
	// drops the client's ordinary connections, not its Pub/Sub one.
	target.Store(&second)
	if err := redistest.ClientAt(t, first).Do(ctx, "client", "kill", "type", "normal").Err(); err != nil {
		t.Fatal(err)
	}
	if err := st.Create(ctx, sample("s1")); err != nil { // lands on the second
		t.Fatal(err)
	}
	start := time.Now()
	for deadline := start.Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n, err := pub.Publish(ctx, "ch", []byte("two"))
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the subscription is still on the old server after %v", time.Since(start))
		}
	}
	if got := recv(t, sub, 5*time.Second); string(got) != "two" {
		t.Fatalf("received %q", got)
	}
	t.Logf("the subscription moved in %v", time.Since(start))
}
