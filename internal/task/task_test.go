package task

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/sign"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// A task created on A is in the store before Create returns: B reads it
// at once, and reads its result once A completes it.
func TestCreatedOnAReadOnB(t *testing.T) {
	eachStore(t, func(t *testing.T, rs *replicas) {
		a, b := rs.add(), rs.add()
		run, created := mustCreate(t, a, alice)
		if !validID(created.TaskID) || uuid.MustParse(created.TaskID).Version() != 4 {
			t.Fatalf("task id %q is not a random UUID", created.TaskID)
		}
		got := mustGet(t, b, alice, created.TaskID)
		if got.Status != Working || got.CreatedAt != created.CreatedAt || *got.TTLMs != DefaultTTL.Milliseconds() || got.PollIntervalMs != 100 {
			t.Fatalf("B read %+v, created %+v", got, created)
		}
		if got.Result != nil || got.Error != nil || got.InputRequests != nil {
			t.Fatalf("working task carries %+v", got)
		}
		if err := run.Complete(ctxT(t), result("done")); err != nil {
			t.Fatal(err)
		}
		got = mustGet(t, b, alice, created.TaskID)
		if got.Status != Completed || !strings.Contains(string(got.Result), `"done"`) || got.Error != nil {
			t.Fatalf("after Complete B read %+v", got)
		}
		if run.Context().Err() == nil || !errors.Is(context.Cause(run.Context()), ErrTerminal) {
			t.Fatalf("run context after Complete: %v", context.Cause(run.Context()))
		}
		if err := run.Complete(ctxT(t), result("again")); !errors.Is(err, ErrTerminal) {
			t.Fatalf("second Complete: %v, want ErrTerminal", err)
		}
		if got2 := mustGet(t, a, alice, created.TaskID); string(got2.Result) != string(got.Result) {
			t.Fatalf("result changed: %s", got2.Result)
		}
	})
}

// tasks/cancel served by B reaches the runner on A: its context is
// cancelled (cause ErrCancelled), the task reads cancelled everywhere at
// once, and the runner's late result is dropped.
func TestCancelViaBWhileRunningOnA(t *testing.T) {
	eachStore(t, func(t *testing.T, rs *replicas) {
		// A lease far longer than the wait: only the signal can be in time.
		rs.tune = func(c *Config) { c.Lease = time.Minute }
		a, b := rs.add(), rs.add()
		run, d := mustCreate(t, a, alice)
		start := time.Now()
		got, err := b.Cancel(ctxT(t), alice, d.TaskID)
		if err != nil || got.Status != Cancelled {
			t.Fatalf("Cancel: %+v, %v", got, err)
		}
		if s := mustGet(t, a, alice, d.TaskID).Status; s != Cancelled {
			t.Fatalf("A reads %s right after the cancel", s)
		}
		select {
		case <-run.Context().Done():
		case <-time.After(2 * time.Second):
			t.Fatal("the cancel signal did not reach the runner")
		}
		if !errors.Is(context.Cause(run.Context()), ErrCancelled) {
			t.Fatalf("cause %v", context.Cause(run.Context()))
		}
		t.Logf("cancel reached the runner in %v", time.Since(start))
		if err := run.Complete(ctxT(t), result("late")); !errors.Is(err, ErrTerminal) {
			t.Fatalf("Complete after cancel: %v", err)
		}
		if got := mustGet(t, b, alice, d.TaskID); got.Status != Cancelled || got.Result != nil {
			t.Fatalf("after the late Complete: %+v", got)
		}
		// Cancelling again: the task unchanged, with ErrTerminal (code -32602).
		again, err := b.Cancel(ctxT(t), alice, d.TaskID)
		if !errors.Is(err, ErrTerminal) || again.Status != Cancelled || Code(err) != jsonrpc.CodeInvalidParams {
			t.Fatalf("second Cancel: %+v, %v", again, err)
		}
	})
}

// The cancel signal is an optimisation: with it lost (the runner's
// Manager not subscribed), the runner still stops at its next renewal.
func TestCancelWithoutSignal(t *testing.T) {
	eachStore(t, func(t *testing.T, rs *replicas) {
		a, b := rs.add(), rs.add()
		run, d := mustCreate(t, a, alice)
		a.mu.Lock()
		a.sub.Close() // the signals stop reaching A
		a.mu.Unlock()
		if _, err := b.Cancel(ctxT(t), alice, d.TaskID); err != nil {
			t.Fatal(err)
		}
		select {
		case <-run.Context().Done():
		case <-time.After(2 * testLease):
			t.Fatal("the runner did not notice the cancel at its renewal")
		}
	})
}

// A replica that dies mid-task (no more renewals, no more writes): any
// replica reading the task marks it failed within about a lease, once,
// and nothing runs it again.
func TestRunnerDiesTaskFails(t *testing.T) {
	eachStore(t, func(t *testing.T, rs *replicas) {
		a, b := rs.add(), rs.add()
		var runs atomic.Int32
		run, d := mustCreate(t, a, alice)
		runs.Add(1)
		a.close(false) // a crash: nothing more from A
		took := eventually(t, 3*testLease, "failed after the runner died", func() bool {
			return mustGet(t, b, alice, d.TaskID).Status == Failed
		})
		t.Logf("failed %v after the crash (lease %v)", took, testLease)
		got := mustGet(t, b, alice, d.TaskID)
		if got.Error == nil || got.Error.Code != jsonrpc.CodeInternalError || got.Error.Message != msgLapsed || got.Result != nil {
			t.Fatalf("failed task: %+v", got)
		}
		if err := run.Complete(ctxT(t), result("late")); !errors.Is(err, ErrTerminal) {
			t.Fatalf("the dead runner's late Complete: %v", err)
		}
		if runs.Load() != 1 || len(b.runs) != 0 {
			t.Fatalf("task ran %d times; B runs %d", runs.Load(), len(b.runs))
		}
		if got2 := mustGet(t, b, alice, d.TaskID); got2.Status != Failed || got2.LastUpdatedAt != got.LastUpdatedAt {
			t.Fatalf("failed task changed: %+v", got2)
		}
	})
}

// On Redis, A loses the store (the proxy stalls its connections) for
// longer than the lease: B fails the task; when A's connections come
// back, A's runner learns it lost the task and its result is dropped.
func TestRunnerPartitionedRedis(t *testing.T) {
	rs := &replicas{t: t, redis: true}
	rs.prefix = redistest.Prefix(t, redistest.Client(t))
	p := redistest.NewProxy(t, "")
	a, b := rs.addVia(p), rs.add()
	run, d := mustCreate(t, a, alice)
	p.Stall()
	eventually(t, 4*testLease, "failed while A is cut off", func() bool {
		return mustGet(t, b, alice, d.TaskID).Status == Failed
	})
	p.Resume()
	select {
	case <-run.Context().Done():
	case <-time.After(4 * testLease):
		t.Fatal("A's runner did not learn it lost the task")
	}
	if !errors.Is(context.Cause(run.Context()), ErrTerminal) {
		t.Fatalf("cause %v", context.Cause(run.Context()))
	}
	if err := run.Complete(ctxT(t), result("late")); !errors.Is(err, ErrTerminal) {
		t.Fatalf("Complete after losing the task: %v", err)
	}
	if got := mustGet(t, b, alice, d.TaskID); got.Status != Failed || got.Result != nil {
		t.Fatalf("%+v", got)
	}
}

// A short outage (shorter than the lease) does not fail the task.
func TestRunnerSurvivesShortOutage(t *testing.T) {
	rs := &replicas{t: t, redis: true}
	rs.prefix = redistest.Prefix(t, redistest.Client(t))
	p := redistest.NewProxy(t, "")
	a, b := rs.addVia(p), rs.add()
	run, d := mustCreate(t, a, alice)
	p.CutAll()
	time.Sleep(testLease / 2)
	if s := mustGet(t, b, alice, d.TaskID).Status; s != Working {
		t.Fatalf("after a short outage: %s", s)
	}
	if err := run.Complete(ctxT(t), result("ok")); err != nil {
		t.Fatal(err)
	}
}

// Another identity's task id answers exactly like an unknown one, on
// every method, and changes nothing.
func TestForeignIDIsUnknown(t *testing.T) {
	eachStore(t, func(t *testing.T, rs *replicas) {
		a, b := rs.add(), rs.add()
		run, d := mustCreate(t, a, alice)
		if err := run.RequestInput(ctxT(t), map[string]json.RawMessage{"ok": json.RawMessage(`{"method":"elicitation/create"}`)}, ""); err != nil {
			t.Fatal(err)
		}
		unknown := uuid.NewString()
		type probe struct {
			name string
			call func(o Owner, id string) error
		}
		probes := []probe{
			{"get", func(o Owner, id string) error { _, err := b.Get(ctxT(t), o, id); return err }},
			{"update", func(o Owner, id string) error {
				return b.Update(ctxT(t), o, id, map[string]json.RawMessage{"ok": json.RawMessage(`{"action":"accept"}`)})
			}},
			{"cancel", func(o Owner, id string) error { _, err := b.Cancel(ctxT(t), o, id); return err }},
			{"wait", func(o Owner, id string) error { _, err := b.Wait(ctxT(t), o, id); return err }},
		}
		for _, p := range probes {
			want := p.call(alice, unknown)
			if want != ErrNotFound {
				t.Fatalf("%s of an unknown id: %v", p.name, want)
			}
			for _, o := range []Owner{bob, mallory, {Tenant: "acme"}, {Subject: "alice"}} {
				if err := p.call(o, d.TaskID); err != want || err.Error() != want.Error() {
					t.Fatalf("%s by %+v: %v, unknown answers %v", p.name, o, err, want)
				}
			}
			for _, id := range []string{"", "x", strings.ToUpper(d.TaskID), d.TaskID + " ", "../" + d.TaskID, strings.Repeat("a", 10000)} {
				if err := p.call(alice, id); err != want {
					t.Fatalf("%s of %q: %v", p.name, id, err)
				}
			}
		}
		got := mustGet(t, a, alice, d.TaskID)
		if got.Status != InputRequired || len(got.InputRequests) != 1 {
			t.Fatalf("another identity's calls changed the task: %+v", got)
		}
		if l, _, err := b.List(ctxT(t), bob, ""); err != nil || len(l) != 0 {
			t.Fatalf("bob lists %v, %v", l, err)
		}
	})
}

// Limits: MaxTasks per identity with a clear error, other identities
// unaffected; a result over MaxResultBytes fails the task.
func TestLimits(t *testing.T) {
	eachStore(t, func(t *testing.T, rs *replicas) {
		rs.tune = func(c *Config) { c.MaxTasks, c.MaxResultBytes = 3, 100 }
		a, b := rs.add(), rs.add()
		for range 2 {
			mustCreate(t, a, alice)
		}
		run, d := mustCreate(t, b, alice)
		_, _, err := a.Create(ctxT(t), alice, "export_docs", 0)
		if !errors.Is(err, ErrTooManyTasks) || Code(err) != -32000 || !strings.Contains(err.Error(), "3 tasks held, at most 3") {
			t.Fatalf("fourth task: %v", err)
		}
		if run.Complete(ctxT(t), result("x")) != nil {
			t.Fatal("complete")
		}
		if _, _, err := b.Create(ctxT(t), alice, "export_docs", 0); !errors.Is(err, ErrTooManyTasks) {
			t.Fatalf("an ended task still counts until it expires: %v", err)
		}
		r2, d2 := mustCreate(t, a, bob)
		err = r2.Complete(ctxT(t), result(strings.Repeat("x", 100)))
		if !errors.Is(err, ErrResultTooLarge) {
			t.Fatalf("oversized result: %v", err)
		}
		got := mustGet(t, b, bob, d2.TaskID)
		if got.Status != Failed || got.Result != nil || !strings.Contains(got.Error.Message, "more than the limit of 100") {
			t.Fatalf("oversized result stored as %+v", got)
		}
		_ = d
	})
}

// Of 16 goroutines racing Complete (on the runner) against Cancel (on
// another replica), exactly one wins, and the task ends as the winner said.
func TestCompleteVersusCancelRace(t *testing.T) {
	eachStore(t, func(t *testing.T, rs *replicas) {
		a, b := rs.add(), rs.add()
		for round := range 5 {
			run, d := mustCreate(t, a, alice)
			var wins atomic.Int32
			var winner atomic.Value
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range 16 {
				wg.Go(func() {
					<-start
					var err error
					what := Completed
					if i%2 == 0 {
						err = run.Complete(ctxT(t), result("done"))
					} else {
						what = Cancelled
						_, err = b.Cancel(ctxT(t), alice, d.TaskID)
					}
					switch {
					case err == nil:
						wins.Add(1)
						winner.Store(what)
					case !errors.Is(err, ErrTerminal):
						t.Errorf("round %d: %v", round, err)
					}
				})
			}
			close(start)
			wg.Wait()
			if wins.Load() != 1 {
				t.Fatalf("round %d: %d winners", round, wins.Load())
			}
			if got := mustGet(t, b, alice, d.TaskID).Status; got != winner.Load().(Status) {
				t.Fatalf("round %d: winner %v, task %v", round, winner.Load(), got)
			}
		}
	})
}

// Keyed input requests: partial answers on another replica, each key
// answered once, keys unique over the task's lifetime.
func TestInputRequests(t *testing.T) {
	eachStore(t, func(t *testing.T, rs *replicas) {
		a, b := rs.add(), rs.add()
		run, d := mustCreate(t, a, alice)
		ask := json.RawMessage(`{"method":"elicitation/create","params":{"message":"Approve?","requestedSchema":{"type":"object"}}}`)
		reqs := map[string]json.RawMessage{"approve": ask, "name": ask}
		if err := run.RequestInput(ctxT(t), reqs, "waiting for approval"); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, b, alice, d.TaskID)
		if got.Status != InputRequired || len(got.InputRequests) != 2 || got.StatusMessage != "waiting for approval" {
			t.Fatalf("%+v", got)
		}
		answered := make(chan map[string]json.RawMessage, 1)
		go func() {
			m, err := run.AwaitInput(ctxT(t), "approve", "name")
			if err != nil {
				t.Error(err)
			}
			answered <- m
		}()
		upd := func(k, v string) {
			if err := b.Update(ctxT(t), alice, d.TaskID, map[string]json.RawMessage{k: json.RawMessage(v), "unknown": json.RawMessage(`{}`)}); err != nil {
				t.Fatal(err)
			}
		}
		for _, bad := range []map[string]json.RawMessage{{"approve": json.RawMessage(`[1]`)}, {"approve": json.RawMessage(`{"a":`)}, {"": json.RawMessage(`{}`)}} {
			if err := b.Update(ctxT(t), alice, d.TaskID, bad); !errors.Is(err, ErrInvalidParams) {
				t.Fatalf("Update(%s): %v", bad, err)
			}
		}
		upd("approve", `{"action":"accept","content":{"ok":true}}`)
		got = mustGet(t, a, alice, d.TaskID)
		if got.Status != InputRequired || len(got.InputRequests) != 1 || got.InputRequests["name"] == nil {
			t.Fatalf("after a partial answer: %+v", got)
		}
		upd("approve", `{"action":"decline"}`) // answered already: ignored
		upd("name", `{"action":"accept","content":{"name":"Alice"}}`)
		var m map[string]json.RawMessage
		select {
		case m = <-answered:
		case <-time.After(2 * testLease):
			t.Fatal("the runner did not get its answers")
		}
		if string(m["approve"]) != `{"action":"accept","content":{"ok":true}}` || !strings.Contains(string(m["name"]), "Alice") {
			t.Fatalf("answers %s", m)
		}
		if s := mustGet(t, b, alice, d.TaskID).Status; s != Working {
			t.Fatalf("after every answer: %s", s)
		}
		for _, bad := range []map[string]json.RawMessage{
			{"approve": ask}, {ReservedKeyPrefix + "confirm": ask}, {"x": json.RawMessage(`[1]`)}, {"": ask}, {"y\n": ask},
		} {
			if err := run.RequestInput(ctxT(t), bad, ""); !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("RequestInput(%v): %v", bad, err)
			}
		}
		if err := run.Complete(ctxT(t), result("ok")); err != nil {
			t.Fatal(err)
		}
	})
}

// Status notifications reach listeners of the tenant on any replica, and
// say whose task it is.
func TestStatusNotifications(t *testing.T) {
	eachStore(t, func(t *testing.T, rs *replicas) {
		a, b := rs.add(), rs.add()
		l, err := b.Listen(ctxT(t), "acme")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		other, err := b.Listen(ctxT(t), "evil")
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		run, d := mustCreate(t, a, alice)
		run.Complete(ctxT(t), result("hi"))
		var seen []Status
		for len(seen) < 2 {
			select {
			case n := <-l.C():
				if n.Task.TaskID != d.TaskID || !n.For(alice) || n.For(bob) || n.For(mallory) {
					t.Fatalf("notification %+v", n)
				}
				seen = append(seen, n.Task.Status)
			case <-time.After(2 * time.Second):
				t.Fatalf("notifications seen: %v", seen)
			}
		}
		if seen[0] != Working || seen[1] != Completed {
			t.Fatalf("seen %v", seen)
		}
		select {
		case n := <-other.C():
			t.Fatalf("another tenant's listener got %+v", n)
		case <-time.After(100 * time.Millisecond):
		}
	})
}

// A task still running at its TTL is failed, and is gone after
// TTL+ResultRetention.
func TestTTL(t *testing.T) {
	eachStore(t, func(t *testing.T, rs *replicas) {
		rs.tune = func(c *Config) { c.TTL, c.ResultRetention = time.Second, 500*time.Millisecond }
		a, b := rs.add(), rs.add()
		run, d := mustCreate(t, a, alice)
		if dl, ok := run.Context().Deadline(); !ok || time.Until(dl) > time.Second {
			t.Fatalf("run deadline %v", dl)
		}
		<-run.Context().Done()
		eventually(t, 2*testLease, "failed at the ttl", func() bool { return mustGet(t, b, alice, d.TaskID).Status == Failed })
		if msg := mustGet(t, b, alice, d.TaskID).Error.Message; msg != msgExpired {
			t.Fatalf("message %q", msg)
		}
		eventually(t, 2*time.Second, "gone after the retention", func() bool {
			_, err := b.Get(ctxT(t), alice, d.TaskID)
			return err == ErrNotFound
		})
	})
}

// 2025-11-25 tasks/list: the caller's tasks only, newest first, in pages.
func TestList(t *testing.T) {
	eachStore(t, func(t *testing.T, rs *replicas) {
		a, b := rs.add(), rs.add()
		var ids []string
		for range MaxListPage + 5 {
			_, d := mustCreate(t, a, alice)
			ids = append(ids, d.TaskID)
		}
		mustCreate(t, a, bob)
		page, next, err := b.List(ctxT(t), alice, "")
		if err != nil || len(page) != MaxListPage || next == "" || page[0].TaskID != ids[len(ids)-1] {
			t.Fatalf("first page: %d tasks, next %q, %v", len(page), next, err)
		}
		page2, next2, err := b.List(ctxT(t), alice, next)
		if err != nil || len(page2) != 5 || next2 != "" || page2[4].TaskID != ids[0] {
			t.Fatalf("second page: %d, %q, %v", len(page2), next2, err)
		}
		if _, _, err := b.List(ctxT(t), bob, next); !errors.Is(err, ErrInvalidCursor) {
			t.Fatalf("alice's cursor used by bob: %v", err)
		}
	})
}

// Closing a Manager fails the tasks it runs at once.
func TestCloseFailsRuns(t *testing.T) {
	eachStore(t, func(t *testing.T, rs *replicas) {
		a, b := rs.add(), rs.add()
		run, d := mustCreate(t, a, alice)
		a.Close()
		if !errors.Is(context.Cause(run.Context()), ErrClosed) {
			t.Fatalf("cause %v", context.Cause(run.Context()))
		}
		if got := mustGet(t, b, alice, d.TaskID); got.Status != Failed || got.Error.Message != msgClosed {
			t.Fatalf("%+v", got)
		}
		if _, _, err := a.Create(ctxT(t), alice, "x", 0); !errors.Is(err, ErrClosed) {
			t.Fatalf("Create after Close: %v", err)
		}
	})
}

// Whatever can write to the store but lacks the keys cannot make a task,
// move one, cancel a runner or inject a notification; a genuine record
// copied under another id is refused too.
func TestForgedStoreValues(t *testing.T) {
	eachStore(t, func(t *testing.T, rs *replicas) {
		rs.tune = func(c *Config) { c.Lease = time.Minute }
		a, b := rs.add(), rs.add()
		st := a.cfg.Store
		run, d := mustCreate(t, a, alice)
		_, other := mustCreate(t, a, alice)
		l, err := b.Listen(ctxT(t), alice.Tenant)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ctx := ctxT(t)
		forger, err := New(rs.config(st))
		if err != nil {
			t.Fatal(err)
		}
		forger.records.Signer, _ = sign.NewSigner("task", []byte("another key, 32 bytes or longer!!"))
		forger.signal, forger.status = forger.records.Signer, forger.records.Signer
		raw, _ := st.Load(ctx, taskKey(d.TaskID))
		// A copy of d's genuine record under another id, and a record
		// signed with a key the replicas do not hold.
		fresh := uuid.NewString()
		st.PutIfAbsent(ctx, taskKey(fresh), raw, time.Minute)
		rec, _ := a.decode(d.TaskID, raw)
		forged := forger.encode(other.TaskID, &rec)
		otherRaw, _ := st.Load(ctx, taskKey(other.TaskID))
		if ok, _ := st.CompareAndSwap(ctx, taskKey(other.TaskID), otherRaw, forged, time.Minute); !ok {
			t.Fatal("could not plant the forged record")
		}
		for _, id := range []string{fresh, other.TaskID} {
			if _, err := b.Get(ctx, alice, id); err != ErrNotFound {
				t.Fatalf("forged record %s: %v", id, err)
			}
		}
		// Forged signal and notification.
		forger.sendSignal(ctx, d.TaskID, signalCancel)
		rec.St = Completed
		rec.Res = json.RawMessage(`{"content":[]}`)
		forger.publishStatus(ctx, d.TaskID, &rec)
		st.Publish(ctx, signalChannel, []byte(`{"id":"`+d.TaskID+`","k":"cancel"}`))
		select {
		case <-run.Context().Done():
			t.Fatal("a forged signal stopped the runner")
		case n := <-l.C():
			if n.Task.TaskID != d.TaskID || n.Task.Status != Working {
				t.Fatalf("forged notification delivered: %+v", n)
			}
		case <-time.After(300 * time.Millisecond):
		}
		if s := mustGet(t, b, alice, d.TaskID).Status; s != Working {
			t.Fatalf("status %s", s)
		}
	})
}

// Wait (2025-11-25 tasks/result) returns once the task ended on another
// replica, and ctx's error if it ends first.
func TestWait(t *testing.T) {
	eachStore(t, func(t *testing.T, rs *replicas) {
		a, b := rs.add(), rs.add()
		run, d := mustCreate(t, a, alice)
		short, cancel := context.WithTimeout(ctxT(t), 150*time.Millisecond)
		defer cancel()
		if _, err := b.Wait(short, alice, d.TaskID); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait on a working task: %v", err)
		}
		time.AfterFunc(100*time.Millisecond, func() { run.Complete(context.Background(), result("waited")) })
		got, err := b.Wait(ctxT(t), alice, d.TaskID)
		if err != nil || got.Status != Completed || !strings.Contains(string(got.Result), "waited") {
			t.Fatalf("Wait: %+v, %v", got, err)
		}
	})
}

// An answer sent through another replica wakes the waiting runner by
// signal, long before its next renewal.
func TestInputSignal(t *testing.T) {
	eachStore(t, func(t *testing.T, rs *replicas) {
		rs.tune = func(c *Config) { c.Lease = time.Minute }
		a, b := rs.add(), rs.add()
		run, d := mustCreate(t, a, alice)
		if err := run.RequestInput(ctxT(t), map[string]json.RawMessage{"k": json.RawMessage(`{"method":"elicitation/create"}`)}, ""); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := run.AwaitInput(ctxT(t), "k"); done <- err }()
		time.Sleep(50 * time.Millisecond)
		if err := b.Update(ctxT(t), alice, d.TaskID, map[string]json.RawMessage{"k": json.RawMessage(`{"action":"accept"}`)}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("the answer's signal did not wake the runner")
		}
	})
}

// Do ends the task with what the work returned, whatever it returned.
func TestDo(t *testing.T) {
	eachStore(t, func(t *testing.T, rs *replicas) {
		a, b := rs.add(), rs.add()
		cases := []struct {
			name string
			work func(ctx context.Context) (json.RawMessage, error)
			want Status
			code int
		}{
			{"result", func(context.Context) (json.RawMessage, error) { return result("ok"), nil }, Completed, 0},
			{"tool error", func(context.Context) (json.RawMessage, error) {
				return json.RawMessage(`{"content":[],"isError":true}`), nil
			}, Completed, 0},
			{"rpc error", func(context.Context) (json.RawMessage, error) {
				return nil, &jsonrpc.Error{Code: -32042, Message: "needs a URL"}
			}, Failed, -32042},
			{"other error", func(context.Context) (json.RawMessage, error) {
				return nil, errors.New("db password is hunter2")
			}, Failed, -32603},
			{"panic", func(context.Context) (json.RawMessage, error) { panic("boom") }, Failed, -32603},
		}
		for _, c := range cases {
			run, d := mustCreate(t, a, alice)
			if err := run.Do(c.work); err != nil {
				t.Fatalf("%s: Do: %v", c.name, err)
			}
			got := mustGet(t, b, alice, d.TaskID)
			if got.Status != c.want || (c.code != 0 && got.Error.Code != c.code) {
				t.Fatalf("%s: %+v", c.name, got)
			}
			if got.Error != nil && strings.Contains(got.Error.Message, "hunter2") {
				t.Fatalf("%s: error text leaked: %q", c.name, got.Error.Message)
			}
		}
		// Cancelled while working: the work sees it, its return is dropped.
		run, d := mustCreate(t, a, alice)
		err := run.Do(func(ctx context.Context) (json.RawMessage, error) {
			b.Cancel(ctxT(t), alice, d.TaskID)
			<-ctx.Done()
			return result("too late"), nil
		})
		if !errors.Is(err, ErrTerminal) || mustGet(t, b, alice, d.TaskID).Status != Cancelled {
			t.Fatalf("cancelled Do: %v", err)
		}
	})
}

// A runner whose outcome cannot be recorded (the store fails the write)
// stops holding the task: it is failed by the next reader within about a
// lease, never left working.
func TestOutcomeNotRecorded(t *testing.T) {
	rs := &replicas{t: t, redis: true}
	rs.prefix = redistest.Prefix(t, redistest.Client(t))
	p := redistest.NewProxy(t, "")
	a, b := rs.addVia(p), rs.add()
	run, d := mustCreate(t, a, alice)
	p.CutOnCommand("EVALSHA", -1) // every CompareAndSwap of A
	if err := run.Complete(ctxT(t), result("lost")); err == nil {
		t.Fatal("Complete succeeded through a cut connection")
	}
	p.ClearCuts()
	eventually(t, 3*testLease, "failed after the outcome was lost", func() bool {
		return mustGet(t, b, alice, d.TaskID).Status == Failed
	})
}

// Something that can write the store but not sign writes a task's record
// back to an earlier genuine revision after it moved on: input_required
// with its question pending after the runner took the answer, long after
// the task completed. Nothing in this package starts a task's work again;
// what a rollback could change is what readers are told: the question
// shown again (and answered twice), the completed task reported failed. A
// Manager that saw a later revision refuses the older one, as it refuses
// a forgery (ErrNotFound); one that never saw it may act on it once (here
// it fails it: the runner is gone), and then has seen a later one; past
// the record's signed expiry no Manager reads it, whatever its TTL in the
// store.
func TestRolledBackRecord(t *testing.T) {
	eachStore(t, func(t *testing.T, rs *replicas) {
		a, b := rs.add(), rs.add()
		rs.tune = func(c *Config) { c.now = func() time.Time { return time.Now().Add(2 * DefaultTTL) } }
		later := rs.add()
		st, ctx := a.cfg.Store, ctxT(t)
		run, d := mustCreate(t, a, alice)
		ask := json.RawMessage(`{"method":"elicitation/create","params":{"message":"Approve?","requestedSchema":{"type":"object"}}}`)
		if err := run.RequestInput(ctx, map[string]json.RawMessage{"approve": ask}, ""); err != nil {
			t.Fatal(err)
		}
		key := taskKey(d.TaskID)
		asked, err := st.Load(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Update(ctx, alice, d.TaskID, map[string]json.RawMessage{"approve": json.RawMessage(`{"action":"accept"}`)}); err != nil {
			t.Fatal(err)
		}
		if _, err := run.AwaitInput(ctx, "approve"); err != nil {
			t.Fatal(err)
		}
		if err := run.Complete(ctx, result("done")); err != nil {
			t.Fatal(err)
		}
		if s := mustGet(t, a, alice, d.TaskID).Status; s != Completed {
			t.Fatalf("status %s", s)
		}
		rollBack := func() {
			t.Helper()
			cur, _ := st.Load(ctx, key)
			if ok, err := st.CompareAndSwap(ctx, key, cur, asked, time.Hour); !ok || err != nil {
				t.Fatalf("writing the record back: %v %v", ok, err)
			}
		}
		rollBack()
		if got, err := a.Get(ctx, alice, d.TaskID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the Manager that saw it complete read the rolled-back record: %+v, %v", got, err)
		}
		if err := a.Update(ctx, alice, d.TaskID, map[string]json.RawMessage{"approve": json.RawMessage(`{"action":"decline"}`)}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("an answer to a rolled-back question: %v", err)
		}
		// b never saw the task: it reads the record written back and, the
		// runner's lease being gone, fails it; it runs nothing.
		time.Sleep(10 * time.Millisecond) // the lease, dropped at Complete, lapses
		if got, err := b.Get(ctx, alice, d.TaskID); err != nil || got.Status != Failed {
			t.Fatalf("a Manager that never saw the task: %+v, %v", got, err)
		}
		rollBack()
		if got, err := b.Get(ctx, alice, d.TaskID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("read the rolled-back record again after acting on it: %+v, %v", got, err)
		}
		if got, err := later.Get(ctx, alice, d.TaskID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a record kept past its expiry was read: %+v, %v", got, err)
		}
	})
}

// A task's status notifications are signed and fresh for 30 s. The
// attacker publishes them all again, in that window, after the task
// completed: a listener forwarded "working" after "completed", a status
// going backwards, and each twice. Now a listener forwards each task's
// notifications in the order of its revisions, each once.
func TestStatusNotificationReplayed(t *testing.T) {
	eachStore(t, func(t *testing.T, rs *replicas) {
		a, b := rs.add(), rs.add()
		rec := &recording{Store: a.cfg.Store}
		a.cfg.Store = rec
		l, err := b.Listen(ctxT(t), "acme")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		run, d := mustCreate(t, a, alice)
		run.SetMessage(ctxT(t), "half way")
		run.Complete(ctxT(t), result("hi"))
		var seen []Status
		next := func() bool {
			select {
			case n := <-l.C():
				seen = append(seen, n.Task.Status)
				return true
			case <-time.After(300 * time.Millisecond):
				return false
			}
		}
		for len(seen) < 3 && next() {
		}
		if len(seen) != 3 || seen[2] != Completed {
			t.Fatalf("notifications: %v", seen)
		}
		rec.mu.Lock()
		msgs := slices.Clone(rec.msgs)
		rec.mu.Unlock()
		for _, m := range msgs {
			if strings.HasPrefix(m.channel, "task-status/") {
				rec.Store.Publish(ctxT(t), m.channel, m.msg)
			}
		}
		for next() {
		}
		if len(seen) != 3 {
			t.Fatalf("task %s: notifications after the replay: %v", d.TaskID, seen)
		}
	})
}
