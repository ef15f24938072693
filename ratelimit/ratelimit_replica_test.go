package ratelimit_test

import (
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/ratelimit"
)

// TestLimitAcrossReplicas: a tenant hammering two replicas (separate
// Redis clients and stores, one Redis) is admitted, in total, what one
// GCRA bucket admits over the time the burst took — Burst plus one call
// per Period/Rate, within one token either way — not that much per
// replica. Meanwhile another tenant is admitted every call under its own
// burst, and a per-tenant-per-tool limit is independent of the tenant
// limit: exhausting it leaves the tenant's other tools callable.
func TestLimitAcrossReplicas(t *testing.T) {
	const (
		rate   = 20 // per second: one every 50ms
		burst  = 5
		hammer = 400 * time.Millisecond
	)
	interval := time.Second / rate
	h := newHost()
	rs := replicas(t, 2, h, nil,
		ratelimit.Limit{Name: "export", By: ratelimit.ByTenant | ratelimit.ByTool, Rate: 1, Period: time.Hour, Burst: 2,
			Match: func(c *mcphandler.ToolCall) bool { return c.Tool.Name == "export" }},
		ratelimit.Limit{Name: "tenant", By: ratelimit.ByTenant, Rate: rate, Burst: burst},
	)

	// acme: two clients per replica, calling search as fast as they can.
	type span struct{ firstStart, firstEnd, lastStart, lastEnd time.Time }
	var (
		mu       sync.Mutex
		spans    []span
		admitted [2]atomic.Int64
		refused  atomic.Int64
		wg       sync.WaitGroup
	)
	stop := time.Now().Add(hammer)
	for i := range 4 {
		c := session(t, rs[i%2].h, "acme", fmt.Sprint("u", i))
		wg.Go(func() {
			var s span
			for n := 0; n == 0 || time.Now().Before(stop); n++ {
				start := time.Now()
				ok, r, _ := call(t, c, "search")
				end := time.Now()
				if n == 0 {
					s.firstStart, s.firstEnd = start, end
				}
				s.lastStart, s.lastEnd = start, end
				if ok {
					admitted[i%2].Add(1)
					continue
				}
				refused.Add(1)
				if r.Limit.Name != "tenant" || r.Limit.Rate != rate || r.Limit.PeriodMs != 1000 || r.Limit.Burst != burst || r.RetryAfterMs > interval.Milliseconds() {
					t.Errorf("refusal %+v", r)
				}
			}
			mu.Lock()
			spans = append(spans, s)
			mu.Unlock()
		})
	}
	// globex, meanwhile, under its own burst: never refused.
	globex := session(t, rs[1].h, "globex", "carol")
	for range burst {
		if ok, r, _ := call(t, globex, "search"); !ok {
			t.Fatalf("globex refused while acme hammers: %+v", r)
		}
		time.Sleep(hammer / burst / 2)
	}
	wg.Wait()

	// The bucket started at the first call Redis saw and its last call
	// came at the last: between the two is at least the last start minus
	// the first end, at most the last end minus the first start.
	first, firstEnd, lastStart, last := spans[0].firstStart, spans[0].firstEnd, spans[0].lastStart, spans[0].lastEnd
	for _, s := range spans {
		first, firstEnd = minTime(first, s.firstStart), minTime(firstEnd, s.firstEnd)
		lastStart, last = maxTime(lastStart, s.lastStart), maxTime(last, s.lastEnd)
	}
	lo, hi := max(lastStart.Sub(firstEnd), 0), last.Sub(first)
	allowance := func(d time.Duration) int { return int(math.Floor(burst + float64(d)/float64(interval))) }
	total := int(admitted[0].Load() + admitted[1].Load())
	t.Logf("admitted %d (%d + %d per replica), refused %d, over %v–%v: expected %d–%d",
		total, admitted[0].Load(), admitted[1].Load(), refused.Load(), lo, hi, allowance(lo), allowance(hi))
	if total < allowance(lo)-1 || total > allowance(hi)+1 {
		t.Fatalf("admitted %d calls across both replicas, want %d–%d (one token either way)", total, allowance(lo)-1, allowance(hi)+1)
	}
	if admitted[0].Load() == 0 || admitted[1].Load() == 0 || refused.Load() == 0 {
		t.Fatal("the burst did not reach both replicas and the limit")
	}

	// Once acme's tenant bucket is full again: its export limit admits
	// 2 (each also counted by the tenant limit), then refuses before the
	// tenant limit counts the call, so search goes on; globex's export
	// is its own.
	time.Sleep(burst * interval)
	a := session(t, rs[0].h, "acme", "u0")
	for i := range 3 {
		ok, r, _ := call(t, a, "export")
		if ok != (i < 2) || !ok && r.Limit.Name != "export" {
			t.Fatalf("export %d: admitted %v, %+v", i, ok, r)
		}
	}
	if ok, r, _ := call(t, a, "search"); !ok {
		t.Fatalf("search refused once export was used up: %+v", r)
	}
	if ok, r, _ := call(t, globex, "export"); !ok {
		t.Fatalf("globex's export refused after acme's was used up: %+v", r)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// TestRefusalOnTheWire: the -32000 refusal carries retryAfterMs and the
// limit, exactly in the documented shape, on every revision (a 2025
// session, 2026-07-28, legacy HTTP+SSE); a retry after retryAfterMs, on
// the other replica, is admitted.
func TestRefusalOnTheWire(t *testing.T) {
	const rate = 5 // one every 200ms
	h := newHost()
	rs := replicas(t, 2, h, nil, ratelimit.Limit{Name: "identity", By: ratelimit.BySubject, Rate: rate, Burst: 1})
	clients := []struct {
		name      string
		on, retry caller
	}{
		{"2025", session(t, rs[0].h, "acme", "alice"), session(t, rs[1].h, "acme", "alice")},
		{"2026-07-28", mcptest.NewModern(t, rs[0].h, mcptest.WithToken(token("acme", "bob"))), mcptest.NewModern(t, rs[1].h, mcptest.WithToken(token("acme", "bob")))},
		{"legacy", legacy(t, rs[0].h, "acme", "carol"), legacy(t, rs[1].h, "acme", "carol")},
	}
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			var re *mcptest.RPCError
			var r *refusal
			for i := 0; re == nil; i++ {
				if i == 10 {
					t.Fatal("10 calls in a row admitted by a limit of burst 1")
				}
				_, r, re = call(t, c.on, "search")
			}
			var shape map[string]any
			json.Unmarshal(re.Data, &shape)
			want := fmt.Sprintf(`{"limit":{"name":"identity","rate":%d,"periodMs":1000,"burst":1},"retryAfterMs":%d}`, rate, r.RetryAfterMs)
			if string(re.Data) != want || re.Message != "Rate limited" || len(shape) != 2 {
				t.Fatalf("refusal %q %s, want %s", re.Message, re.Data, want)
			}
			if r.RetryAfterMs > 1000/rate {
				t.Fatalf("retryAfterMs %d for a limit of one call per %dms", r.RetryAfterMs, 1000/rate)
			}
			time.Sleep(time.Duration(r.RetryAfterMs) * time.Millisecond)
			if ok, r, _ := call(t, c.retry, "search"); !ok {
				t.Fatalf("a retry after retryAfterMs was refused: %+v", r)
			}
		})
	}
}
