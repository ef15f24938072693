package mcphandler_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// replicaTests are the replica tests (replica_test.go) that run, as they
// are, on every topology.
var replicaTests = []struct {
	name string
	test func(*testing.T)
}{
	{"ServeOneConversation", TestReplicasServeOneConversation},
	{"OneAnswerOneRun", TestReplicasOneAnswerOneRun},
	{"Resume", TestReplicasResume},
	{"NotifyAcrossReplicas", TestReplicasNotifyAcrossReplicas},
	{"ConfirmSurvivesReplicaDeath", TestReplicasConfirmSurvivesReplicaDeath},
	{"RunnerDeathIsReported", TestReplicasRunnerDeathIsReported},
	{"CancelAcrossReplicas", TestReplicasCancelAcrossReplicas},
	{"OneGETStream", TestReplicasOneGETStream},
}

func runReplicaTests(t *testing.T, clients func(t *testing.T) func() redis.UniversalClient) {
	for _, rt := range replicaTests {
		t.Run(rt.name, func(t *testing.T) {
			replicaTopology = clients
			t.Cleanup(func() { replicaTopology = nil })
			rt.test(t)
		})
	}
}

// clusterClients returns new clients of the test binary's Redis Cluster.
func clusterClients(t *testing.T) func() redis.UniversalClient {
	cl := redistest.SharedCluster(t)
	return func() redis.UniversalClient { return cl.Client(t) }
}

// sentinelClients returns new failover clients of the test binary's
// Sentinels.
func sentinelClients(t *testing.T) func() redis.UniversalClient {
	s := redistest.SharedSentinel(t)
	return func() redis.UniversalClient { return s.Client(t) }
}

// TestClusterReplicas runs the replica tests with every replica's store
// on a Redis Cluster (three masters, one replica each), through go-redis's
// cluster client.
func TestClusterReplicas(t *testing.T) { runReplicaTests(t, clusterClients) }

// TestSentinelReplicas runs the replica tests with every replica's store
// on a master watched by Sentinels, through go-redis's failover client.
func TestSentinelReplicas(t *testing.T) { runReplicaTests(t, sentinelClients) }

// confirmAcrossFailover is a 2025 confirm on two replicas whose Redis
// fails over at a chosen moment: its tool (delete_thing) signals started
// and waits for release before it returns.
type confirmAcrossFailover struct {
	f                *fixture
	cl               *cluster
	c                *mcptest.Client
	started, release chan struct{}
}

func newConfirmAcrossFailover(t *testing.T, clients func() redis.UniversalClient, opts redisstore.Options, elicit mcptest.ElicitationHandler) *confirmAcrossFailover {
	t.Helper()
	x := &confirmAcrossFailover{f: &fixture{}, started: make(chan struct{}, 1), release: make(chan struct{})}
	cfg := x.f.config()
	// Long enough for a failover on a loaded machine (seen to take 4 s)
	// plus the two seconds a subtest thinks after it; a refused answer
	// still ends the confirm well within the subtests' 20 s.
	cfg.ConfirmTimeout = 12 * time.Second
	tool := x.f.tool("delete_thing", "")
	run := tool.Handler
	tool.Handler = func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		select {
		case x.started <- struct{}{}:
		default: // a second run: the test counts it
		}
		<-x.release
		return run(ctx, call)
	}
	cfg.ListTools = func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{tool}, nil }
	x.cl = newClusterWith(t, 2, cfg, clients, opts)
	x.c = mcptest.Dial(x.cl.proxy.URL, mcptest.WithToken("acme-admin"), mcptest.WithElicitationHandler(elicit))
	t.Cleanup(func() { x.c.Close() })
	// A previous subtest may have just restarted a node: until its
	// replicas acknowledge writes again, a session cannot be created
	// with WaitReplicas and the handler answers 503. Setting up waits for
	// that; what the subtests check starts after it.
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := x.c.Initialize(context.Background())
		if err == nil {
			break
		}
		var he *mcptest.HTTPError
		if !errors.As(err, &he) || he.Status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return x
}

// testConfirmDecidedAcrossFailover: a confirm is answered (the answer
// claimed in the store, waiting for a replica) and its tool is running
// when Redis fails over. The tool finishes after the failover, exactly
// once, and its result reaches the client; the same answer replayed after
// the failover is refused and runs nothing: the decision survived.
func testConfirmDecidedAcrossFailover(t *testing.T, clients func() redis.UniversalClient, failover func(t *testing.T, confirmID string)) {
	ctx := context.Background()
	x := newConfirmAcrossFailover(t, clients, redisstore.Options{OpTimeout: time.Second, WaitReplicas: 1},
		answer("accept", map[string]any{"confirm": true}))
	type result struct {
		res *mcptest.ToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res, err := x.c.CallTool(ctx, "delete_thing", nil)
		done <- result{res, err}
	}()
	select {
	case <-x.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the confirmed tool did not start")
	}
	id := confirmID(t, x.c)
	var cid string
	json.Unmarshal(id, &cid)
	start := time.Now()
	failover(t, cid)
	t.Logf("failover in %v", time.Since(start))
	close(x.release)
	r := <-done
	if r.err != nil || r.res.IsError || r.res.Text() != "delete_thing ran for acme" {
		t.Fatalf("the call decided before the failover: %+v, %v", r.res, r.err)
	}
	waitOutcome(t, x.f, mcphandler.OutcomeConfirmed)
	// The replay, through either replica: refused (400) once the store
	// answers, whatever it takes the failover to settle.
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err = x.c.Respond(ctx, id, accept); !isHTTP(err, 503) {
			break
		}
	}
	if !isHTTP(err, 400) {
		t.Fatalf("the answer replayed after the failover: %v, want 400", err)
	}
	if n := x.f.count("delete_thing"); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
}

// testConfirmPendingAcrossFailover: Redis fails over while the human
// thinks, who answers think after the failover. The answer is either
// accepted — the tool runs once and the client gets its result — or
// refused, and then the confirm ends cleanly within its timeout and
// nothing runs; never twice, never a hang.
func testConfirmPendingAcrossFailover(t *testing.T, clients func() redis.UniversalClient, opts redisstore.Options, think time.Duration, failover func(t *testing.T, confirmID string)) (ran bool) {
	ctx := context.Background()
	var x *confirmAcrossFailover
	var failedOver atomic.Bool
	x = newConfirmAcrossFailover(t, clients, opts, func(ctx context.Context, _ mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		var cid string
		json.Unmarshal(confirmID(t, x.c), &cid)
		start := time.Now()
		failover(t, cid)
		t.Logf("failover in %v", time.Since(start))
		failedOver.Store(true)
		time.Sleep(think)
		return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
	})
	if opts.WaitReplicas > 0 {
		waitReplicated(t, clients(), opts.WaitReplicas)
	}
	close(x.release)
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second) // a hang fails
	defer cancel()
	res, err := x.c.CallTool(cctx, "delete_thing", nil)
	if !failedOver.Load() {
		t.Fatalf("the confirm was not asked: %+v, %v", res, err)
	}
	n := x.f.count("delete_thing")
	if n > 1 {
		t.Fatalf("ran %d times", n)
	}
	if err == nil && !res.IsError {
		if n != 1 || res.Text() != "delete_thing ran for acme" {
			t.Fatalf("answered after the failover: %+v, ran %d times", res, n)
		}
		waitOutcome(t, x.f, mcphandler.OutcomeConfirmed)
		return true
	}
	// Refused: the confirm ends and nothing runs.
	t.Logf("the answer after the failover was refused: %+v, %v", res, err)
	for {
		ev := x.f.event(t)
		if ev.Outcome == mcphandler.OutcomeConfirmed {
			if n := x.f.count("delete_thing"); n != 1 {
				t.Fatalf("ran %d times", n)
			}
			// The client was told the tool did not run, yet it ran.
			t.Fatal("the answer after the failover was refused, and the tool ran anyway")
		}
		if ev.Tool == "delete_thing" && ev.Outcome != mcphandler.OutcomeReplayRefused {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("the confirm did not end")
		}
	}
	if n := x.f.count("delete_thing"); n != 0 {
		t.Fatalf("ran %d times after a refused answer", n)
	}
	return false
}

// TestClusterConfirmAcrossFailover: confirms on a Redis Cluster across a
// manual failover of every master and across the death of the master that
// holds the confirm. Decided confirms run exactly once; a confirm pending
// during a manual failover is answered after it (the old masters are the
// new masters' replicas at once, so writes waiting for a replica go on).
func TestClusterConfirmAcrossFailover(t *testing.T) {
	cl := redistest.SharedCluster(t)
	clients := func() redis.UniversalClient { return cl.Client(t) }
	every := func(t *testing.T, _ string) { cl.Failover(t) }
	kill := func(t *testing.T, id string) { cl.KillMaster(t, "{confirm/"+id+"}") }
	t.Run("DecidedThenFailover", func(t *testing.T) { testConfirmDecidedAcrossFailover(t, clients, every) })
	t.Run("DecidedThenMasterDies", func(t *testing.T) { testConfirmDecidedAcrossFailover(t, clients, kill) })
	t.Run("PendingDuringFailover", func(t *testing.T) {
		if !testConfirmPendingAcrossFailover(t, clients, redisstore.Options{OpTimeout: time.Second, WaitReplicas: 1}, 0, every) {
			t.Fatal("the answer after a manual failover was refused")
		}
	})
	t.Run("PendingWhileMasterDies", func(t *testing.T) {
		testConfirmPendingAcrossFailover(t, clients, redisstore.Options{OpTimeout: time.Second, WaitReplicas: 1}, 0, kill)
	})
}

// TestSentinelConfirmAcrossFailover: confirms behind Sentinels across the
// death of the master and across a SENTINEL FAILOVER. Decided confirms run
// exactly once. A confirm pending during a SENTINEL FAILOVER is answered
// two seconds after it (without waiting for a replica: with
// WaitReplicas, the new master has none until the Sentinels turn the old
// one into its replica, about ten seconds later, and the answer would be
// refused). Answered at once, see the skip in
// testConfirmPendingAcrossFailover.
func TestSentinelConfirmAcrossFailover(t *testing.T) {
	shared := redistest.SharedSentinel(t)
	kill := func(t *testing.T, _ string) { shared.KillMaster(t) }
	t.Run("DecidedThenMasterDies", func(t *testing.T) {
		testConfirmDecidedAcrossFailover(t, func() redis.UniversalClient { return shared.Client(t) }, kill)
	})
	// After a SENTINEL FAILOVER the set takes ten seconds to be whole
	// again; a set of its own starts in about one.
	private := func(t *testing.T) (func() redis.UniversalClient, func(*testing.T, string)) {
		s := redistest.StartSentinel(t)
		failover := func(t *testing.T, _ string) {
			// SENTINEL FAILOVER promotes the replica without waiting for it
			// to catch up; what the subtest wrote before (the session, the
			// pending confirm) is on the replica first, as a host's planned
			// failover would make sure. Writes during the failover are
			// what the subtests are about.
			if n, err := s.Client(t).Do(context.Background(), "WAIT", 1, 5000).Int64(); err != nil || n < 1 {
				t.Fatalf("before the failover, the replica acknowledged %d writes: %v", n, err)
			}
			s.Failover(t)
		}
		return func() redis.UniversalClient { return s.Client(t) }, failover
	}
	t.Run("DecidedThenFailover", func(t *testing.T) {
		clients, failover := private(t)
		testConfirmDecidedAcrossFailover(t, clients, failover)
	})
	t.Run("PendingDuringFailover", func(t *testing.T) {
		clients, failover := private(t)
		if !testConfirmPendingAcrossFailover(t, clients, redisstore.Options{OpTimeout: time.Second}, 2*time.Second, failover) {
			t.Fatal("the answer two seconds after the failover was refused")
		}
	})
	t.Run("AnsweredRightAfterFailover", func(t *testing.T) {
		clients, failover := private(t)
		testConfirmPendingAcrossFailover(t, clients, redisstore.Options{OpTimeout: time.Second}, 0, failover)
	})
}

// waitReplicated waits (up to 10 s) until every master of c acknowledges
// a write with n replicas: a replica that rejoined after an earlier
// subtest's failover may not yet acknowledge, and the confirm's first
// write, made before the failover under test, would fail for that reason
// alone.
func waitReplicated(t *testing.T, c redis.UniversalClient, n int) {
	t.Helper()
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return
	}
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			key, err := ownedKey(ctx, m)
			if err != nil {
				return err
			}
			if err := m.Set(ctx, key, "1", time.Second).Err(); err != nil {
				return err
			}
			got, err := m.Wait(ctx, n, 500*time.Millisecond).Result()
			if err == nil && got < int64(n) {
				err = errors.New("a write was not acknowledged by enough replicas")
			}
			return err
		})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster does not replicate before the test: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ownedKey returns a key whose slot the master m serves.
func ownedKey(ctx context.Context, m *redis.Client) (string, error) {
	slots, err := m.ClusterSlots(ctx).Result()
	if err != nil {
		return "", err
	}
	for i := range 256 {
		key := "{mcph-probe-" + strconv.Itoa(i) + "}"
		slot, err := m.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			return "", err
		}
		for _, r := range slots {
			if int64(r.Start) <= slot && slot <= int64(r.End) && len(r.Nodes) > 0 && r.Nodes[0].Addr == m.Options().Addr {
				return key, nil
			}
		}
	}
	return "", errors.New("no key found for the master " + m.Options().Addr)
}
