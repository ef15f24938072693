package ratelimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/ratelimit"
)

func toolCall(tenant, subject, tool string) *mcphandler.ToolCall {
	return &mcphandler.ToolCall{Tool: mcphandler.Tool{Name: tool}, Identity: mcphandler.Identity{Tenant: tenant, Subject: subject}}
}

// TestPolicyInMemory, in a synctest bubble: the decisions of the policy
// itself — a refusal is a RateLimit with the exact delay and the limit in
// Data; limits are checked in order, and one that refuses stops the check
// (the tenant's bucket is not charged for a call the identity limit
// refused); next runs only for admitted calls, and its decision and error
// are returned as they are.
func TestPolicyInMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var nexts atomic.Int32
		next := func(_ context.Context, c *mcphandler.ToolCall) (mcphandler.Decision, error) {
			nexts.Add(1)
			switch c.Tool.Name {
			case "forbidden":
				return mcphandler.Deny("no"), nil
			case "broken":
				return mcphandler.Decision{}, errors.New("broken")
			}
			return mcphandler.Allow(), nil
		}
		lim := newLimiter(t, ratelimit.Options{},
			ratelimit.Limit{Name: "identity", By: ratelimit.BySubject, Rate: 2, Burst: 2},
			ratelimit.Limit{Name: "tenant", By: ratelimit.ByTenant, Rate: 3, Burst: 3},
		)
		policy := lim.Policy(next)
		decide := func(who, tool string) mcphandler.Decision {
			t.Helper()
			d, err := policy(ctx, toolCall("acme", who, tool))
			if err != nil && tool != "broken" {
				t.Fatal(err)
			}
			return d
		}
		refused := func(d mcphandler.Decision, name string, rate, burst int, retry time.Duration) {
			t.Helper()
			want := fmt.Sprintf(`{"limit":{"name":%q,"rate":%d,"periodMs":1000,"burst":%d}}`, name, rate, burst)
			data, _ := json.Marshal(d.Data)
			if d.Kind != mcphandler.DecisionDeny || d.Code != mcphandler.CodeRateLimited || d.RetryAfter != retry ||
				d.Message != "Rate limited" || string(data) != want {
				t.Fatalf("decision %+v (data %s), want a rate limit of %v with %s", d, data, retry, want)
			}
		}
		for range 2 {
			if d := decide("alice", "t"); d.Kind != mcphandler.DecisionAllow {
				t.Fatalf("alice: %+v", d)
			}
		}
		refused(decide("alice", "t"), "identity", 2, 2, 500*time.Millisecond)
		refused(decide("alice", "t"), "identity", 2, 2, 500*time.Millisecond)
		// alice's refusals did not charge the tenant: one call left.
		if d := decide("bob", "t"); d.Kind != mcphandler.DecisionAllow {
			t.Fatalf("bob's first call: %+v", d)
		}
		refused(decide("bob", "t"), "tenant", 3, 3, time.Second/3)
		if n := nexts.Load(); n != 3 {
			t.Fatalf("next ran %d times, want once per admitted call (3)", n)
		}
		time.Sleep(time.Second)
		if d := decide("carol", "forbidden"); d.Kind != mcphandler.DecisionDeny || d.Code != mcphandler.CodeForbidden {
			t.Fatalf("next's Deny: %+v", d)
		}
		if _, err := policy(ctx, toolCall("acme", "carol", "broken")); err == nil || err.Error() != "broken" {
			t.Fatalf("next's error: %v", err)
		}
		if d, err := lim.Policy(nil)(ctx, toolCall("acme", "dave", "t")); err != nil || d.Kind != mcphandler.DecisionAllow {
			t.Fatalf("Policy(nil): %+v %v", d, err)
		}
	})
}

// TestPolicyWithConfirms: the limits come before any human is asked, in
// both orders of composition with ConfirmDestructive, on 2025 sessions
// and on 2026-07-28: a rate-limited call never asks. A call admitted and
// then declined by the human has counted (as has each round of a
// 2026-07-28 confirm). Within Policy the host's own denials count; a
// host that checks first and calls Policy(nil) after keeps them out.
func TestPolicyWithConfirms(t *testing.T) {
	const burst = 2
	limit := ratelimit.Limit{Name: "identity", By: ratelimit.BySubject, Rate: 1, Period: time.Hour, Burst: burst}
	orders := map[string]func(*ratelimit.Limiter) mcphandler.BeforeCallFunc{
		"Policy(ConfirmDestructive)": func(l *ratelimit.Limiter) mcphandler.BeforeCallFunc {
			return l.Policy(mcphandler.ConfirmDestructive(nil))
		},
		"ConfirmDestructive(Policy)": func(l *ratelimit.Limiter) mcphandler.BeforeCallFunc {
			return mcphandler.ConfirmDestructive(l.Policy(nil))
		},
	}
	for name, order := range orders {
		t.Run(name, func(t *testing.T) {
			h := newHost()
			hd := mcphandler.New(h.config(order(newLimiter(t, ratelimit.Options{}, limit))))
			var asked atomic.Int32
			c := session(t, hd, "acme", "alice", mcptest.WithElicitationHandler(func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
				asked.Add(1)
				return mcptest.ElicitResult{Action: "decline"}, nil
			}))
			for i := range burst {
				res, err := c.CallTool(context.Background(), "delete", nil)
				if err != nil || !res.IsError || asked.Load() != int32(i+1) {
					t.Fatalf("delete %d: %+v %v, asked %d times", i, res, err, asked.Load())
				}
			}
			for range 3 {
				if ok, _, _ := call(t, c, "delete"); ok {
					t.Fatal("a rate-limited delete was admitted")
				}
			}
			if ok, _, _ := call(t, c, "search"); ok || asked.Load() != burst || h.runs.Load() != 0 {
				t.Fatalf("after %d declined deletes: search admitted %v, asked %d times, ran %d", burst, ok, asked.Load(), h.runs.Load())
			}

			// 2026-07-28: the ask and the retry with the answer are two
			// calls; the next one is refused, and not asked.
			m := mcptest.NewModern(t, hd, mcptest.WithToken(token("acme", "bob")), mcptest.WithElicitationHandler(func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
				asked.Add(1)
				return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
			}))
			if res, err := m.CallTool(context.Background(), "delete", nil); err != nil || res.IsError || h.runs.Load() != 1 {
				t.Fatalf("2026 confirmed delete: %+v %v", res, err)
			}
			if ok, _, _ := call(t, m, "delete"); ok || asked.Load() != burst+1 {
				t.Fatalf("2026 delete after its confirm's two rounds: admitted %v, asked %d times", ok, asked.Load())
			}
		})
	}

	host := func(_ context.Context, c *mcphandler.ToolCall) (mcphandler.Decision, error) {
		if c.Tool.Name == "export" {
			return mcphandler.Deny("not on your plan"), nil
		}
		return mcphandler.Allow(), nil
	}
	for _, tc := range []struct {
		name        string
		policy      func(*ratelimit.Limiter) mcphandler.BeforeCallFunc
		deniesCount bool
	}{
		{"limits first", func(l *ratelimit.Limiter) mcphandler.BeforeCallFunc { return l.Policy(host) }, true},
		{"host first", func(l *ratelimit.Limiter) mcphandler.BeforeCallFunc {
			limits := l.Policy(nil)
			return func(ctx context.Context, c *mcphandler.ToolCall) (mcphandler.Decision, error) {
				if d, err := host(ctx, c); err != nil || d.Kind != mcphandler.DecisionAllow {
					return d, err
				}
				return limits(ctx, c)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost()
			c := session(t, mcphandler.New(h.config(tc.policy(newLimiter(t, ratelimit.Options{}, limit)))), "acme", "alice")
			for range burst {
				_, err := c.CallTool(context.Background(), "export", nil)
				var re *mcptest.RPCError
				if !errors.As(err, &re) || re.Code != mcphandler.CodeForbidden {
					t.Fatalf("export: %v, want the host's -32001", err)
				}
			}
			if ok, _, _ := call(t, c, "search"); ok == tc.deniesCount {
				t.Fatalf("search after %d denied exports: admitted %v", burst, ok)
			}
		})
	}
}

// TestNewValidates: New refuses limits it could not apply as written.
func TestNewValidates(t *testing.T) {
	ok := ratelimit.Limit{Name: "a", Rate: 1}
	for _, tc := range []struct {
		name   string
		limits []ratelimit.Limit
		want   string
	}{
		{"no name", []ratelimit.Limit{{Rate: 1}}, "a name is required"},
		{"long name", []ratelimit.Limit{{Name: strings.Repeat("n", 65), Rate: 1}}, "longer than 64"},
		{"twice", []ratelimit.Limit{ok, ok}, "used twice"},
		{"zero rate", []ratelimit.Limit{{Name: "a"}}, "Rate must be positive"},
		{"negative burst", []ratelimit.Limit{{Name: "a", Rate: 1, Burst: -1}}, "not negative"},
		{"negative period", []ratelimit.Limit{{Name: "a", Rate: 1, Period: -time.Second}}, "not negative"},
		{"unknown By", []ratelimit.Limit{{Name: "a", Rate: 1, By: 1 << 7}}, "unknown By"},
		{"too fast", []ratelimit.Limit{{Name: "a", Rate: 2, Period: time.Nanosecond}}, "below a nanosecond"},
		{"too long a burst", []ratelimit.Limit{{Name: "a", Rate: 1, Period: time.Hour, Burst: 1 << 40}}, "too long"},
	} {
		if _, err := ratelimit.New(ratelimit.Options{}, tc.limits...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if _, err := ratelimit.New(ratelimit.Options{}, ok, ratelimit.Limit{Name: "b", Rate: 1e9, Burst: 1e9}); err != nil {
		t.Fatal(err)
	}
}
