package mcphandler_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

// TestDenyData: a Deny's Decision.Data reaches the client as members of
// the error's data object, next to retryAfterMs, which is rounded up (a
// client that waits exactly that long is not early) and wins over a
// member of the same name; a Data that is not a JSON object is left out
// and logged, never sent half-way.
func TestDenyData(t *testing.T) {
	type limit struct {
		Name string `json:"name"`
		Rate int    `json:"rate"`
	}
	for _, tc := range []struct {
		name   string
		d      mcphandler.Decision
		code   mcphandler.Code
		data   string
		logged bool
	}{
		{"retry rounded up", mcphandler.RateLimit("slow down", 1500*time.Microsecond), mcphandler.CodeRateLimited, `{"retryAfterMs":2}`, false},
		{"longest retry", mcphandler.RateLimit("slow down", math.MaxInt64), mcphandler.CodeRateLimited, `{"retryAfterMs":9223372036855}`, false},
		{"retry below a millisecond", mcphandler.RateLimit("slow down", 300), mcphandler.CodeRateLimited, `{"retryAfterMs":1}`, false},
		{"limit", withData(mcphandler.RateLimit("", 250*time.Millisecond), map[string]any{"limit": limit{"tenant", 10}}),
			mcphandler.CodeRateLimited, `{"limit":{"name":"tenant","rate":10},"retryAfterMs":250}`, false},
		{"retryAfterMs wins", withData(mcphandler.RateLimit("", 2*time.Second), map[string]any{"retryAfterMs": 1, "x": true}),
			mcphandler.CodeRateLimited, `{"retryAfterMs":2000,"x":true}`, false},
		{"rate limit without a delay", withData(mcphandler.RateLimit("", 0), map[string]int{"a": 1}), mcphandler.CodeRateLimited, `{"a":1}`, false},
		{"forbidden", withData(mcphandler.Deny("no"), struct {
			Reason string `json:"reason"`
		}{"plan"}), mcphandler.CodeForbidden, `{"reason":"plan"}`, false},
		{"not an object", withData(mcphandler.RateLimit("", time.Second), []int{1}), mcphandler.CodeRateLimited, `{"retryAfterMs":1000}`, true},
		{"null", withData(mcphandler.Deny("no"), (*limit)(nil)), mcphandler.CodeForbidden, ``, true},
		{"does not marshal", withData(mcphandler.RateLimit("", time.Second), map[string]any{"f": func() {}}), mcphandler.CodeRateLimited, `{"retryAfterMs":1000}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fixture{}
			cfg := f.config()
			var logs bytes.Buffer
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			cfg.BeforeCall = func(context.Context, *mcphandler.ToolCall) (mcphandler.Decision, error) { return tc.d, nil }
			c := connect(t, mcphandler.New(cfg), "acme-viewer")
			_, err := c.CallTool(context.Background(), "read", nil)
			var re *mcptest.RPCError
			if !errors.As(err, &re) || re.Code != tc.code || string(re.Data) != tc.data {
				t.Fatalf("got %v (data %s), want %d with data %s", err, dataOf(re), tc.code, tc.data)
			}
			if got := strings.Contains(logs.String(), "Decision.Data"); got != tc.logged {
				t.Fatalf("logged %v, want %v: %s", got, tc.logged, logs.String())
			}
			if f.count("read") != 0 {
				t.Fatal("a denied tool ran")
			}
		})
	}
}

func withData(d mcphandler.Decision, data any) mcphandler.Decision {
	d.Data = data
	return d
}

func dataOf(re *mcptest.RPCError) string {
	if re == nil {
		return "-"
	}
	return string(re.Data)
}

// TestDenyCode: a Deny's Decision.Code is CodeForbidden (also for 0) or
// CodeRateLimited; any other code — one that could tell the client to
// retry, or look like a server failure — still refuses the call, as
// CodeForbidden, and is logged as the hook's mistake.
func TestDenyCode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   mcphandler.Code
		want   mcphandler.Code
		logged bool
	}{
		{"forbidden", mcphandler.CodeForbidden, mcphandler.CodeForbidden, false},
		{"rate limited", mcphandler.CodeRateLimited, mcphandler.CodeRateLimited, false},
		{"zero", 0, mcphandler.CodeForbidden, false},
		{"internal error", mcphandler.CodeInternalError, mcphandler.CodeForbidden, true},
		{"store unavailable", mcphandler.CodeStoreUnavailable, mcphandler.CodeForbidden, true},
		{"positive", 7, mcphandler.CodeForbidden, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fixture{}
			cfg := f.config()
			var logs bytes.Buffer
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			cfg.BeforeCall = func(context.Context, *mcphandler.ToolCall) (mcphandler.Decision, error) {
				return mcphandler.Decision{Kind: mcphandler.DecisionDeny, Message: "no", Code: tc.code}, nil
			}
			c := connect(t, mcphandler.New(cfg), "acme-viewer")
			_, err := c.CallTool(context.Background(), "read", nil)
			var re *mcptest.RPCError
			if !errors.As(err, &re) || re.Code != tc.want {
				t.Fatalf("got %v, want code %d", err, tc.want)
			}
			if n := f.count("read"); n != 0 {
				t.Fatalf("the denied tool ran %d times", n)
			}
			if got := strings.Contains(logs.String(), "Decision.Code"); got != tc.logged {
				t.Fatalf("logged %v, want %v: %s", got, tc.logged, logs.String())
			}
		})
	}
}
