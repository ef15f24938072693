package mcphandler_test

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// propertySeed is the seed of TestConfirmStateMachineProperty: the
// environment variable MCPH_CONFIRM_SEED, else 1. A failure prints the
// seed and the iteration; the same seed replays the same schedules (the
// timings of a loaded machine still vary).
func propertySeed() uint64 {
	if s, err := strconv.ParseUint(os.Getenv("MCPH_CONFIRM_SEED"), 10, 64); err == nil {
		return s
	}
	return 1
}

// propertyLease is the lease of the property test's replicas.
const propertyLease = 100 * time.Millisecond

// confirmSchedule is what happens to one confirm, at times after the
// question reached the client.
type confirmSchedule struct {
	asker        int
	answers      []scheduledAnswer
	disconnectAt time.Duration // < 0: never
	killAskerAt  time.Duration // < 0: never
	killRunner   bool
}

type scheduledAnswer struct {
	via    int
	at     time.Duration
	accept bool
}

func randomSchedule(rng *rand.Rand, replicas int, timeout time.Duration) confirmSchedule {
	at := func(span time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(span))) }
	s := confirmSchedule{asker: rng.IntN(replicas), disconnectAt: -1, killAskerAt: -1}
	for range rng.IntN(4) { // none, one, or duplicates
		s.answers = append(s.answers, scheduledAnswer{via: rng.IntN(replicas), at: at(timeout * 13 / 10), accept: rng.IntN(5) != 0})
	}
	if rng.IntN(5) == 0 {
		s.disconnectAt = at(timeout)
	}
	if rng.IntN(4) == 0 {
		s.killAskerAt = at(timeout)
	}
	s.killRunner = rng.IntN(5) == 0
	return s
}

// Random interleavings of what can happen to a 2025 confirm across three
// replicas — answers (accepts and declines, duplicates, through any
// replica, before and after the timeout), the timeout, the client
// disconnecting, the asking replica dying, the replica running the tool
// dying — on the memory store and on Redis. Whatever the schedule: the
// tool runs at most once; a client told "not run" never sees it run; a
// run has exactly one reported outcome; no confirm reports two.
//
// It runs as many schedules as fit in a bounded time (MCPH_CONFIRM_BUDGET,
// default 8s per store), from the seed of propertySeed.
func TestConfirmStateMachineProperty(t *testing.T) {
	if testing.Short() {
		t.Skip("long property test")
	}
	budget := 8 * time.Second
	if d, err := time.ParseDuration(os.Getenv("MCPH_CONFIRM_BUDGET")); err == nil {
		budget = d
	}
	seed := propertySeed()
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		const timeout = 250 * time.Millisecond
		l := newLab(t, labOptions{replicas: 3, confirmTimeout: timeout, lease: propertyLease, poll: 25 * time.Millisecond, store: stores})
		start := time.Now()
		n := 0
		for ; n < 500 && time.Since(start) < budget; n++ {
			rng := rand.New(rand.NewPCG(seed, uint64(n)))
			s := randomSchedule(rng, len(l.reps), timeout)
			runSchedule(t, l, n, s, timeout)
			if t.Failed() {
				t.Fatalf("seed %d, schedule %d: %+v", seed, n, s)
			}
		}
		t.Logf("seed %d: %d schedules in %v", seed, n, time.Since(start).Round(time.Millisecond))
		if n < 5 {
			t.Fatalf("only %d schedules fit in %v", n, budget)
		}
	})
}

// runSchedule plays s on l for call i and checks the invariants.
func runSchedule(t *testing.T, l *lab, i int, s confirmSchedule, timeout time.Duration) {
	t.Helper()
	cs := l.session("acme-admin")
	alive := func(r int) bool { return !l.reps[r].st.dead.Load() }
	var killed sync.Once
	onRun := func(rep int) {
		if s.killRunner {
			killed.Do(func() { l.kill(rep) })
			time.Sleep(10 * time.Millisecond) // a dead replica's goroutine runs on
		}
	}
	l.onRun.Store(&onRun)
	defer l.onRun.Store(nil)
	began := time.Now()
	defer func() {
		if os.Getenv("MCPH_CONFIRM_TRACE") != "" {
			t.Logf("schedule %d took %v", i, time.Since(began))
		}
	}()
	pc := startCall(t, cs[s.asker], i)
	var wg sync.WaitGroup
	for _, a := range s.answers {
		wg.Go(func() {
			time.Sleep(a.at)
			via := a.via
			for n := 0; !alive(via) && n < len(cs); n++ {
				via = (via + 1) % len(cs)
			}
			action := map[string]any{"action": "decline"}
			if a.accept {
				action = accept
			}
			cs[via].Respond(context.Background(), pc.id, action)
		})
	}
	if s.disconnectAt >= 0 {
		wg.Go(func() { time.Sleep(s.disconnectAt); pc.disconnect() })
	}
	if s.killAskerAt >= 0 {
		wg.Go(func() { time.Sleep(s.killAskerAt); l.kill(s.asker) })
	}
	final := pc.await(cs, alive, timeout+time.Second+4*propertyLease)
	wg.Wait()
	if !l.idle(timeout + 5*time.Second) {
		t.Fatalf("schedule %d: a replica is still serving", i)
	}
	told := verdictOf(final)
	if os.Getenv("MCPH_CONFIRM_TRACE") != "" {
		t.Logf("schedule %d: %+v: told %v, ran %d, outcomes %v", i, s, told, l.count(i), l.eventsFor(pc.confirmID()))
	}
	checkConfirmInvariants(t, l, pc, i, told, "schedule "+strconv.Itoa(i))
	// A run the client heard of has exactly one reported outcome. (A
	// client that never got through again to any replica may hear of
	// nothing: then nobody noticed a dead runner either.)
	if runs := l.count(i); runs == 1 && told != toldNothing {
		n := 0
		for _, ev := range l.eventsFor(pc.confirmID()) {
			if ev.Outcome != "replay_refused" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("schedule %d: it ran, and %d outcomes were reported (told %v)", i, n, told)
		}
	}
	l.revive()
}

// An answer swept across the confirm's timeout, from well before to well
// after, through another replica, on Redis behind a TCP proxy that adds
// 1 ms each way to every command and message. For every offset: an answer
// accepted (202) runs the tool once and the client gets its result; an
// answer refused (400) runs nothing and the client is told it timed out;
// one outcome per confirm.
func TestConfirmAnswerAcrossTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	proxy := redistest.NewProxy(t, "")
	proxy.SetLatency(time.Millisecond, time.Millisecond)
	prefix := redistest.Prefix(t, redistest.Client(t))
	l := newLab(t, labOptions{replicas: 2, confirmTimeout: timeout, store: func(int) session.Store {
		st := redisstore.New(proxy.Client(t), redisstore.Options{Prefix: prefix})
		t.Cleanup(func() { st.Close() })
		return st
	}})
	// Warm up: connections, scripts, subscriptions.
	warm := l.session("acme-admin")
	pc := startCall(t, warm[0], 999)
	warm[1].Respond(context.Background(), pc.id, accept)
	pc.await(warm, alwaysAlive, 5*time.Second)
	offsets := []time.Duration{-150 * time.Millisecond}
	for o := -50 * time.Millisecond; o <= 50*time.Millisecond; o += 10 * time.Millisecond {
		offsets = append(offsets, o)
	}
	offsets = append(offsets, 150*time.Millisecond)
	var accepted, refused atomic.Int32
	for n, offset := range offsets {
		t.Run(offset.String(), func(t *testing.T) {
			cs := l.session("acme-admin")
			asked := time.Now()
			pc := startCall(t, cs[0], n)
			// The server set its deadline just before asking; the client
			// got the question a little after.
			time.Sleep(time.Until(asked.Add(timeout + offset)))
			err := cs[1].Respond(context.Background(), pc.id, accept)
			told := verdictOf(pc.await(cs, alwaysAlive, timeout+3*time.Second))
			if !l.idle(5 * time.Second) {
				t.Fatal("a replica is still serving")
			}
			checkConfirmInvariants(t, l, pc, n, told, "offset "+offset.String())
			if err == nil {
				accepted.Add(1)
			} else {
				refused.Add(1)
			}
			if err == nil && told != toldRan || err != nil && told != toldNotRun {
				t.Fatalf("answer accepted %v (%v), client told %v", err == nil, err, told)
			}
		})
	}
	// 150 ms on either side of a 300 ms timeout: unless the machine is
	// starved, both kinds of rows occur; if not, the sweep proved nothing.
	if accepted.Load() == 0 || refused.Load() == 0 {
		t.Fatalf("%d answers accepted, %d refused: the sweep did not cross the deadline", accepted.Load(), refused.Load())
	}
}
