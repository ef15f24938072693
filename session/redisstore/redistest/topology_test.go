package redistest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCluster: the shared cluster serves keys of every slot through a
// cluster client, refuses a command across slots, and keeps every key
// across a manual failover of every master and the death of one.
func TestCluster(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	cl := SharedCluster(t)
	t.Logf("cluster up in %v", time.Since(start))
	c := cl.Client(t)
	prefix := Prefix(t, c)
	keys := make([]string, 30)
	masters := map[string]bool{}
	for i := range keys {
		keys[i] = fmt.Sprintf("%s{k%d}", prefix, i)
		if err := c.Set(ctx, keys[i], i, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		masters[cl.MasterOf(t, keys[i])] = true
	}
	if len(masters) != 3 {
		t.Fatalf("30 keys landed on %d masters, want 3", len(masters))
	}
	if err := c.MSet(ctx, keys[0], 1, keys[1], 2).Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("MSET across slots: %v, want CROSSSLOT", err)
	}
	check := func(when string) {
		t.Helper()
		for i, k := range keys {
			var v int
			var err error
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if v, err = c.Get(ctx, k).Int(); err == nil || time.Now().After(deadline) {
					break
				}
				// go-redis reloads its slot map on MOVED, not when a
				// node is unreachable.
				c.ReloadState(ctx)
			}
			if err != nil || v != i {
				t.Fatalf("%s: %s = %d, %v", when, k, v, err)
			}
		}
	}
	old := cl.MasterOf(t, keys[0])
	start = time.Now()
	cl.Failover(t)
	t.Logf("failover of every master in %v", time.Since(start))
	if now := cl.MasterOf(t, keys[0]); now == old {
		t.Fatalf("the master of %s is still %s", keys[0], now)
	}
	check("after the failover")
	start = time.Now()
	promoted, restart := cl.KillMaster(t, keys[0])
	t.Logf("failover after a kill in %v", time.Since(start))
	if promoted != old {
		t.Fatalf("promoted %s, want the old master %s (its replica)", promoted, old)
	}
	check("after the kill")
	start = time.Now()
	restart()
	t.Logf("rejoined in %v", time.Since(start))
	check("after the restart")
}

// TestSentinel: the failover client of the shared Sentinels reaches the
// master, follows it across a failover, and the data is still there.
func TestSentinel(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	s := SharedSentinel(t)
	t.Logf("sentinels up in %v", time.Since(start))
	c := s.Client(t)
	prefix := Prefix(t, c)
	if err := c.Set(ctx, prefix+"k", "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	// Written before the failover, with the replica in sync.
	if n, err := c.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT = %d, %v", n, err)
	}
	old := s.Master(t)
	start = time.Now()
	promoted := s.Failover(t)
	t.Logf("failover in %v", time.Since(start))
	if promoted == old || s.Master(t) != promoted {
		t.Fatalf("promoted %s, master was %s", promoted, old)
	}
	var v string
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if v, err = c.Get(ctx, prefix+"k").Result(); err == nil {
			break
		}
	}
	if v != "v" {
		t.Fatalf("after the failover: %q, %v", v, err)
	}
}
