package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler/mcptest"
)

// answer answers every confirm with action and records what was asked.
func answer(action string, asked *[]string) mcptest.Option {
	return mcptest.WithElicitationHandler(func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		*asked = append(*asked, p.Message)
		return mcptest.ElicitResult{Action: action, Content: map[string]any{"confirm": true}}, nil
	})
}

// TestConfirm runs the example's handler with real clients of both
// eras: delete_note runs only once the human accepts, list_notes is never
// asked about, and a client that cannot be asked gets no run.
func TestConfirm(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    func(asked *[]string) []mcptest.Option
		deleted bool
		asks    int
	}{
		{"2025 declined", func(a *[]string) []mcptest.Option { return []mcptest.Option{answer(mcptest.ActionDecline, a)} }, false, 1},
		{"2025 accepted", func(a *[]string) []mcptest.Option { return []mcptest.Option{answer(mcptest.ActionAccept, a)} }, true, 1},
		{"2025 cannot be asked", func(*[]string) []mcptest.Option {
			return []mcptest.Option{mcptest.WithCapabilities(json.RawMessage(`{}`))}
		}, false, 0},
		{"2026-07-28 accepted", func(a *[]string) []mcptest.Option {
			return []mcptest.Option{mcptest.WithEra(mcptest.Stateless), answer(mcptest.ActionAccept, a)}
		}, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &notes{names: []string{"groceries", "ideas"}}
			h := newHandler(n)
			t.Cleanup(func() { h.Close() })
			var asked []string
			c := mcptest.New(t, h, append(tc.opts(&asked), mcptest.WithToken("alice"))...)
			ctx := t.Context()
			if c.Era() != mcptest.Stateless {
				if _, err := c.Initialize(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if res, err := c.CallTool(ctx, "list_notes", nil); err != nil || !strings.Contains(res.Text(), "groceries") {
				t.Fatalf("list_notes: %v %v", res, err)
			}
			res, err := c.CallTool(ctx, "delete_note", map[string]any{"name": "groceries"})
			if err != nil {
				t.Fatal(err)
			}
			if len(asked) != tc.asks || (tc.asks > 0 && !strings.Contains(asked[0], `delete_note to run with {"name":"groceries"}`)) {
				t.Fatalf("asked %q", asked)
			}
			gone := !slices.Contains(n.names, "groceries")
			if gone != tc.deleted || res.IsError == tc.deleted || (tc.deleted && res.Text() != "deleted groceries") {
				t.Fatalf("deleted %v, want %v: %s", gone, tc.deleted, res.Raw)
			}
		})
	}
	if _, err := mcptest.New(t, newHandler(&notes{}), mcptest.WithToken("mallory")).Initialize(t.Context()); err == nil {
		t.Fatal("an unknown token was served")
	}
}
