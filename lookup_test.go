package mcphandler_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

// ToolLookupFrom names the tool a tools/call looks up, in every era, and
// nothing while a tools/list is built or after ListTools returned; a name
// ListTools serves only for that lookup runs, one it does not is unknown.
func TestToolLookupFrom(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	var after context.Context
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			name, ok := mcphandler.ToolLookupFrom(ctx)
			mu.Lock()
			seen = append(seen, name)
			after = ctx
			mu.Unlock()
			tools := []mcphandler.Tool{echoTool}
			if ok && name == "made_for_the_call" {
				tools = append(tools, mcphandler.Tool{Name: name, Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					return mcphandler.TextResult("served"), nil
				}})
			}
			return tools, nil
		},
	})
	defer h.Close()
	ctx := context.Background()
	for era, c := range listMetaClients(t, h) {
		seen = nil
		if _, names := listMeta(t, c); len(names) != 1 || len(seen) != 1 || seen[0] != "" {
			t.Errorf("%s: tools/list saw lookup %q, listed %v", era, seen, names)
		}
		seen = nil
		res, err := c.CallTool(ctx, "made_for_the_call", map[string]any{})
		if err != nil || res.IsError || res.Text() != "served" || len(seen) != 1 || seen[0] != "made_for_the_call" {
			t.Errorf("%s: call %+v, %v; lookups %q", era, res, err, seen)
		}
		if name, ok := mcphandler.ToolLookupFrom(after); ok || name != "" {
			t.Errorf("%s: after ListTools returned, ToolLookupFrom gave %q", era, name)
		}
		if _, err := c.CallTool(ctx, "other_name", map[string]any{}); err == nil {
			t.Errorf("%s: a name ListTools did not serve ran", era)
		}
	}
	if _, ok := mcphandler.ToolLookupFrom(ctx); ok {
		t.Error("ToolLookupFrom outside a request reported a name")
	}
}

// CompleteElicitation goes out on a 2025-11-25 call's stream, before its
// result; it is ErrCannotAsk where elicitations have no ids (2026-07-28,
// 2025-06-18).
func TestCompleteElicitation(t *testing.T) {
	var mu sync.Mutex
	var errs []error
	tool := mcphandler.Tool{Name: "done", Handler: func(_ context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		err := call.Exchange.CompleteElicitation("e-1")
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		return mcphandler.TextResult("ok"), nil
	}}
	h := mcphandler.New(mcphandler.Config{Authenticate: bearer, ListTools: func(context.Context) ([]mcphandler.Tool, error) {
		return []mcphandler.Tool{tool}, nil
	}})
	defer h.Close()
	ctx := context.Background()
	c := connect(t, h, "acme-viewer", mcptest.WithCapabilities(urlCaps))
	if res, err := c.CallTool(ctx, "done", map[string]any{}); err != nil || res.IsError {
		t.Fatalf("2025-11-25 call: %+v, %v", res, err)
	}
	if errs[0] != nil || !hasNote(c, "notifications/elicitation/complete", `"e-1"`) {
		t.Fatalf("2025-11-25: %v, notifications %v", errs[0], c.Notifications())
	}
	old := connect(t, h, "acme-viewer", mcptest.WithProtocolVersion(mcphandler.Version20250618))
	modern := mcptest.NewModern(t, h, mcptest.WithToken("acme-viewer"))
	for _, c := range []*mcptest.Client{old, modern} {
		if res, err := c.CallTool(ctx, "done", map[string]any{}); err != nil || res.IsError {
			t.Fatalf("call: %+v, %v", res, err)
		}
	}
	if len(errs) != 3 || !errors.Is(errs[1], mcphandler.ErrCannotAsk) || !errors.Is(errs[2], mcphandler.ErrCannotAsk) {
		t.Fatalf("errors %v, want ErrCannotAsk on 2025-06-18 and 2026-07-28", errs)
	}
}

// A handler's ErrCallAgain starts an allowed 2025 call over, once, in the
// same request: looked up and decided again, so BeforeCall sees the tool
// as listed now; OnCall sees the second run. A second ErrCallAgain, a call
// that was confirmed, and 2026-07-28 give the client the tool error.
func TestCallAgain(t *testing.T) {
	var mu sync.Mutex
	var decided []string
	var events []mcphandler.CallEvent
	real := false // what the name stands for: the placeholder until set
	again := func(_ context.Context, _ *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		mu.Lock()
		real = true
		mu.Unlock()
		return nil, &mcphandler.ToolError{Class: mcphandler.ClassBackendUnavailable, Detail: "call it again", Err: mcphandler.ErrCallAgain}
	}
	confirmFirst := false
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			mu.Lock()
			defer mu.Unlock()
			if real {
				return []mcphandler.Tool{{Name: "flip", Description: "real", Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					return mcphandler.TextResult("the real one ran"), nil
				}}}, nil
			}
			return []mcphandler.Tool{{Name: "flip", Description: "placeholder", Handler: again}}, nil
		},
		BeforeCall: func(_ context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
			mu.Lock()
			defer mu.Unlock()
			decided = append(decided, call.Tool.Description)
			if confirmFirst && call.Tool.Description == "placeholder" {
				return mcphandler.Confirm("sure?"), nil
			}
			return mcphandler.Allow(), nil
		},
		OnCall: func(ev mcphandler.CallEvent) { mu.Lock(); events = append(events, ev); mu.Unlock() },
	})
	defer h.Close()
	ctx := context.Background()
	reset := func() { mu.Lock(); real, decided, events = false, nil, nil; mu.Unlock() }

	c := connect(t, h, "acme-viewer", mcptest.WithElicitationHandler(func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
	}))
	res, err := c.CallTool(ctx, "flip", map[string]any{})
	if err != nil || res.IsError || res.Text() != "the real one ran" {
		t.Fatalf("2025: %+v, %v", res, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for mu.Lock(); len(events) == 0 && time.Now().Before(deadline); mu.Lock() {
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	if len(decided) != 2 || decided[1] != "real" || len(events) != 1 || events[0].IsError {
		mu.Unlock()
		t.Fatalf("2025: decided %v, events %+v", decided, events)
	}
	mu.Unlock()

	// Confirmed first: no start over, the client is told.
	reset()
	confirmFirst = true
	res, err = c.CallTool(ctx, "flip", map[string]any{})
	if err != nil || !res.IsError || !strings.Contains(res.Text(), "call it again") || len(decided) != 1 {
		t.Fatalf("confirmed: %+v, %v; decided %v", res, err, decided)
	}
	confirmFirst = false

	// 2026-07-28: the client is told.
	reset()
	modern := mcptest.NewModern(t, h, mcptest.WithToken("acme-viewer"))
	res, err = modern.CallTool(ctx, "flip", map[string]any{})
	if err != nil || !res.IsError || !strings.Contains(res.Text(), "call it again") {
		t.Fatalf("2026-07-28: %+v, %v", res, err)
	}
	if res, err = modern.CallTool(ctx, "flip", map[string]any{}); err != nil || res.Text() != "the real one ran" {
		t.Fatalf("2026-07-28 again: %+v, %v", res, err)
	}

	// A second ErrCallAgain: told, not a loop.
	reset()
	h2 := mcphandler.New(mcphandler.Config{Authenticate: bearer, ListTools: func(context.Context) ([]mcphandler.Tool, error) {
		return []mcphandler.Tool{{Name: "flip", Handler: again}}, nil
	}})
	defer h2.Close()
	c2 := connect(t, h2, "acme-viewer")
	res, err = c2.CallTool(ctx, "flip", map[string]any{})
	if err != nil || !res.IsError || !strings.Contains(res.Text(), "call it again") {
		t.Fatalf("twice: %+v, %v", res, err)
	}
}
