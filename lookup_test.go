package mcphandler_test

import (
	"context"
	"errors"
	"sync"
	"testing"

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
