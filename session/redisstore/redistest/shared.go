package redistest

import (
	"bytes"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// shared holds the servers one test binary shares: started by the first
// test that asks, stopped when Main's Run returns.
var shared struct {
	main     atomic.Bool // the tests run under Main
	mu       sync.Mutex  // guards the rest
	dir      string
	cluster  *Cluster
	sentinel *Sentinel
	err      map[string]error // why a shared set could not start, by kind
}

// Main wraps the tests of a package so that the servers [SharedCluster]
// and [SharedSentinel] start are stopped once they have run. Use it in
// TestMain, around whatever else runs the tests:
//
//	func TestMain(m *testing.M) {
//		goleak.VerifyTestMain(redistest.Main(m))
//	}
//
// Once they are stopped, Main also waits, up to three seconds, for the
// goroutines go-redis starts to redial a server that refused a
// connection: they sleep a second between attempts before they notice
// their client was closed, longer than goleak looks.
func Main(m interface{ Run() int }) interface{ Run() int } { return mainRunner{m} }

type mainRunner struct{ m interface{ Run() int } }

func (r mainRunner) Run() int {
	shared.main.Store(true)
	code := r.m.Run()
	stopShared()
	stopSpawner()
	for deadline := time.Now().Add(3 * time.Second); redialing() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	return code
}

// redialing reports whether a go-redis pool's dial retry goroutine runs.
func redialing() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Contains(buf[:n], []byte("internal/pool.(*ConnPool).tryDial"))
		}
		buf = make([]byte, 2*len(buf))
	}
}

func stopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cluster != nil {
		shared.cluster.stop()
	}
	if shared.sentinel != nil {
		shared.sentinel.stop()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	shared.cluster, shared.sentinel, shared.dir = nil, nil, ""
	shared.main.Store(false)
}

// SharedCluster returns the Redis Cluster of the test binary — three
// masters with one replica each, as [StartCluster] starts them — starting
// it on first use. Tests sharing it keep apart with [Prefix] and must
// leave it as they found it: three masters, each with a replica, which
// [Cluster.Failover] and [Cluster.KillMaster] (restarting the killed node
// when the test ends) do. It fails the test unless TestMain runs the
// tests through [Main], which stops the cluster at the end.
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if err := sharedDir(t); err != nil {
		t.Fatalf("redistest: SharedCluster: %v", err)
	}
	if shared.cluster == nil && shared.err["cluster"] == nil {
		shared.cluster, shared.err["cluster"] = startCluster(shared.dir+"/cluster", 3, 1)
	}
	if err := shared.err["cluster"]; err != nil {
		t.Fatalf("redistest: SharedCluster: %v", err)
	}
	return shared.cluster
}

// SharedSentinel returns the Sentinel set of the test binary, as
// [StartSentinel] starts it, starting it on first use, once it is settled
// (see [Sentinel.Settle]). Tests sharing it keep apart with [Prefix];
// after [Sentinel.Failover] or [Sentinel.KillMaster] the master is
// another server, which the failover client of [Sentinel.Client] follows. It fails the test unless TestMain
// runs the tests through [Main], which stops the set at the end.
func SharedSentinel(t testing.TB) *Sentinel {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if err := sharedDir(t); err != nil {
		t.Fatalf("redistest: SharedSentinel: %v", err)
	}
	if shared.sentinel == nil && shared.err["sentinel"] == nil {
		shared.sentinel, shared.err["sentinel"] = startSentinel(shared.dir + "/sentinel")
	}
	if err := shared.err["sentinel"]; err != nil {
		t.Fatalf("redistest: SharedSentinel: %v", err)
	}
	shared.sentinel.Settle(t)
	return shared.sentinel
}

// sharedDir makes the directory of the shared servers. The caller holds
// shared.mu.
func sharedDir(t testing.TB) error {
	if !shared.main.Load() {
		t.Fatal("redistest: the shared servers need TestMain to run the tests through redistest.Main, which stops them")
	}
	if shared.dir != "" {
		return nil
	}
	d, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return err
	}
	shared.dir, shared.err = d, map[string]error{}
	return nil
}
