package mcphandler_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler"
)

// FuzzTaskWire sends arbitrary 2026-07-28 and 2025-11-25 bodies to the
// tasks surface (tools/call of task tools, tasks/*, listen filters): the
// handler never panics, never answers 500, and every JSON answer it gives
// is a JSON-RPC response.
func FuzzTaskWire(f *testing.F) {
	cfg := (&fixture{}).config()
	cfg.BeforeCall, cfg.OnCall = nil, nil
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.ListTools = func(context.Context) ([]mcphandler.Tool, error) {
		return []mcphandler.Tool{{Name: "t", TaskSupport: mcphandler.TaskOptional, Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			return call.RunAsTask(ctx, func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				return mcphandler.TextResult("ok"), nil
			})
		}}}, nil
	}
	h := mcphandler.New(cfg)
	f.Cleanup(func() { h.Close() })
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	for _, s := range []struct{ method, params string }{
		{"tools/call", `"name":"t","arguments":{},` + meta},
		{"tools/call", `"name":"t","task":{"ttl":-1},` + meta},
		{"tasks/get", `"taskId":"00000000-0000-4000-8000-000000000000",` + meta},
		{"tasks/update", `"taskId":"x","inputResponses":{"a":{"b":1}},` + meta},
		{"tasks/update", `"taskId":"x","inputResponses":{"a":{},"a":{}},` + meta},
		{"tasks/cancel", `"taskId":"x","taskId":"y",` + meta},
		{"subscriptions/listen", `"notifications":{"taskIds":["x",7]},` + meta},
		{"tasks/list", `"cursor":{"x":1},` + meta},
	} {
		f.Add(s.method, `{"jsonrpc":"2.0","id":1,"method":"`+s.method+`","params":{`+s.params+`}}`)
	}
	f.Fuzz(func(t *testing.T, method, body string) {
		req := httptest.NewRequest("POST", "/", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer acme-admin")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", method)
		if method == "subscriptions/listen" {
			return // a stream: not for a recorder
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != 503 {
			t.Fatalf("%d for %q", rec.Code, body)
		}
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") && rec.Body.Len() > 0 {
			var m struct {
				JSONRPC string `json:"jsonrpc"`
			}
			if json.Unmarshal(rec.Body.Bytes(), &m) != nil || m.JSONRPC != "2.0" {
				t.Fatalf("not a JSON-RPC answer: %s", rec.Body)
			}
		}
	})
}
