package ratelimit_test

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/ratelimit"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// syncBuffer is a bytes.Buffer for a logger written from several
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestFailModes: while Redis is down — a private redis-server killed, or
// a Redis frozen behind the fault proxy — a fail-open limit admits every
// call (more than its burst), a fail-closed one refuses every call with
// -32000 and retryAfterMs 1000, and both answer well before the store's
// OpTimeout (2s): each call within the limiter's Timeout (200ms) plus
// margin, and in microseconds once the store's breaker opened. Each mode
// is logged once, not per call. When Redis is back, limiting resumes by
// itself: the limits refuse over-burst calls as "Rate limited" again.
func TestFailModes(t *testing.T) {
	for _, outage := range []string{"redis-server killed", "Redis frozen"} {
		t.Run(outage, func(t *testing.T) {
			var (
				down, up func()
				store    *redisstore.Store
				prefix   string
			)
			if outage == "redis-server killed" {
				addr, stop, restart := redistest.Start(t)
				store = redisstore.New(redistest.ClientAt(t, addr), redisstore.Options{})
				down, up = stop, restart
			} else {
				p := redistest.NewProxy(t, "")
				prefix = rateKeys(t, redistest.Client(t))
				store = redisstore.New(p.Client(t), redisstore.Options{Prefix: prefix})
				down, up = p.Stall, p.Resume
			}
			t.Cleanup(func() { store.Close() })
			var logs syncBuffer
			tool := func(name string) func(*mcphandler.ToolCall) bool {
				return func(c *mcphandler.ToolCall) bool { return c.Tool.Name == name }
			}
			lim := newLimiter(t, ratelimit.Options{Redis: store, Prefix: prefix, Logger: slog.New(slog.NewTextHandler(&logs, nil))},
				ratelimit.Limit{Name: "open", By: ratelimit.ByTenant, Rate: 1, Period: time.Hour, Burst: 2, FailOpen: true, Match: tool("search")},
				ratelimit.Limit{Name: "closed", By: ratelimit.ByTenant, Rate: 1, Period: time.Hour, Burst: 2, Match: tool("export")},
			)
			h := newHost()
			cfg := h.config(lim.Policy(nil))
			cfg.Store, cfg.StateKeys = store, [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
			hd := mcphandler.New(cfg)
			t.Cleanup(func() { hd.Close() })
			// 2026-07-28: a plain call needs nothing of the store but the
			// limits (a 2025 session would get 503 while Redis is down).
			c := mcptest.NewModern(t, hd, mcptest.WithToken(token("acme", "alice")))
			for _, tool := range []string{"search", "export"} {
				for i := range 3 {
					if ok, r, _ := call(t, c, tool); ok != (i < 2) {
						t.Fatalf("%s %d before the outage: admitted %v, %+v", tool, i, ok, r)
					}
				}
			}

			down()
			var took []time.Duration
			for i := range 20 {
				for _, tool := range []string{"search", "export"} {
					start := time.Now()
					ok, r, re := call(t, c, tool)
					took = append(took, time.Since(start))
					switch {
					case tool == "search" && !ok:
						t.Fatalf("fail-open, call %d while Redis is down: refused %+v", i, re)
					case tool == "export" && (ok || re.Message != "Rate limited: the limit cannot be checked now" || r.RetryAfterMs != 1000 || r.Limit.Name != "closed"):
						t.Fatalf("fail-closed, call %d while Redis is down: admitted %v, %+v", i, ok, re)
					}
					if took[len(took)-1] > 600*time.Millisecond {
						t.Fatalf("%s, call %d while Redis is down took %v: not well under OpTimeout", tool, i, took[len(took)-1])
					}
				}
			}
			slices.Sort(took)
			t.Logf("while Redis is down: median %v, slowest %v", took[len(took)/2], took[len(took)-1])
			for _, mode := range []string{"fail-open", "fail-closed"} {
				if n := strings.Count(logs.String(), mode); n != 1 {
					t.Fatalf("%s logged %d times, want once: %s", mode, n, logs.String())
				}
			}

			up()
			// Killed, Redis restarts empty: the fail-closed bucket admits
			// its burst again. Frozen, it kept both: they are spent.
			want := 0
			if outage == "redis-server killed" {
				want = 2
			}
			deadline := time.Now().Add(5 * time.Second)
			for _, tool := range []string{"search", "export"} {
				admitted := 0
				for {
					ok, _, re := call(t, c, tool)
					if ok {
						admitted++
					} else if re.Message == "Rate limited" {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s: limiting has not resumed 5s after Redis came back", tool)
					}
					time.Sleep(10 * time.Millisecond)
				}
				if tool == "export" && admitted != want {
					t.Fatalf("export: %d calls admitted once Redis was back, want %d", admitted, want)
				}
			}
		})
	}
}

// TestTimeoutSweep: Redis's round trip swept across the limiter's
// Timeout (100ms) behind the fault proxy. Below it the limit is checked
// (a burst of 1: admitted, then "Rate limited"); above it the call fails
// closed, answered when the Timeout ends rather than when Redis does, far
// below the store's OpTimeout.
func TestTimeoutSweep(t *testing.T) {
	const timeout = 100 * time.Millisecond
	for _, tc := range []struct {
		rtt     time.Duration
		checked bool
	}{
		{10 * time.Millisecond, true},
		{40 * time.Millisecond, true},
		{150 * time.Millisecond, false},
		{400 * time.Millisecond, false},
	} {
		t.Run(tc.rtt.String(), func(t *testing.T) {
			p := redistest.NewProxy(t, "")
			prefix := rateKeys(t, redistest.Client(t))
			store := redisstore.New(p.Client(t), redisstore.Options{Prefix: prefix})
			t.Cleanup(func() { store.Close() })
			lim := newLimiter(t, ratelimit.Options{Redis: store, Prefix: prefix, Timeout: timeout, Logger: slog.New(slog.DiscardHandler)},
				ratelimit.Limit{Name: "tenant", By: ratelimit.ByTenant, Rate: 1, Period: time.Hour, Burst: 1})
			hd := mcphandler.New(newHost().config(lim.Policy(nil)))
			c := mcptest.NewModern(t, hd, mcptest.WithToken(token("acme", "alice")))
			// Warm the pool and load the script with no latency, on
			// another tenant's bucket.
			call(t, mcptest.NewModern(t, hd, mcptest.WithToken(token("warm", "up"))), "search")
			p.SetLatency(tc.rtt/2, tc.rtt/2)
			for i, want := range []string{"", "Rate limited"} {
				if !tc.checked {
					want = "Rate limited: the limit cannot be checked now"
				}
				start := time.Now()
				ok, _, re := call(t, c, "search")
				took := time.Since(start)
				got := ""
				if !ok {
					got = re.Message
				}
				if got != want {
					t.Fatalf("call %d at a round trip of %v: %q, want %q", i, tc.rtt, got, want)
				}
				if !tc.checked && took > timeout+300*time.Millisecond {
					t.Fatalf("call %d at a round trip of %v answered after %v, want about the Timeout (%v)", i, tc.rtt, took, timeout)
				}
			}
		})
	}
}
