package task

import (
	"strconv"
	"testing"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// BenchmarkLifecycle measures one task from creation to its result read
// on another replica: Create on A, Get on B while working, Complete on A,
// Get on B.
func BenchmarkLifecycle(b *testing.B) {
	for _, store := range []string{"memory", "redis"} {
		b.Run(store, func(b *testing.B) {
			rs := &replicas{t: b, mem: session.NewMemory(), redis: store == "redis"}
			if rs.redis {
				rs.prefix = redistest.Prefix(b, redistest.Client(b))
			}
			a, c := rs.add(), rs.add()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				o := Owner{Tenant: "acme", Subject: strconv.Itoa(i)} // a fresh index each time
				run, d := mustCreate(b, a, o)
				mustGet(b, c, o, d.TaskID)
				if err := run.Complete(ctxT(b), result("ok")); err != nil {
					b.Fatal(err)
				}
				mustGet(b, c, o, d.TaskID)
			}
		})
	}
}

// Round trips to Redis of each step of a task, counted by the client
// (Publish included; the Pub/Sub connection's own commands are not):
// a regression here is a latency regression of every task.
func TestRoundTrips(t *testing.T) {
	rs := &replicas{t: t, redis: true}
	rs.prefix = redistest.Prefix(t, redistest.Client(t))
	ha, hb := new(redistest.CountingHook), new(redistest.CountingHook)
	ca, cb := redistest.Client(t), redistest.Client(t)
	ca.AddHook(ha)
	cb.AddHook(hb)
	a, b := rs.manager(rs.redisStore(ca)), rs.manager(rs.redisStore(cb))
	_, warm := mustCreate(t, a, bob) // warm up both clients
	mustGet(t, b, bob, warm.TaskID)
	step := func(name string, h *redistest.CountingHook, max int64, f func()) {
		h.Reset()
		f()
		got := h.Counts().RoundTrips
		t.Logf("%s: %d round trips", name, got)
		if got > max {
			t.Errorf("%s: %d round trips, want at most %d", name, got, max)
		}
	}
	var run *Run
	var id string
	step("Create", ha, 5, func() { r, d := mustCreate(t, a, alice); run, id = r, d.TaskID })
	step("Get (working)", hb, 2, func() { mustGet(t, b, alice, id) })
	step("Complete", ha, 4, func() { run.Complete(ctxT(t), result("ok")) })
	step("Get (completed)", hb, 1, func() { mustGet(t, b, alice, id) })
	step("Cancel (ended)", hb, 1, func() { b.Cancel(ctxT(t), alice, id) })
}
