package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
)

func newTestHandler(t *testing.T) (http.Handler, *approval.Store) {
	t.Helper()
	o := defaults()
	o.approvalTTL = time.Second
	h, approvals, err := newHandler(session.NewMemory(), [][]byte{[]byte("0123456789abcdef0123456789abcdef")}, o, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(); approvals.Close() })
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	sse, messages := h.LegacySSE("/messages")
	mux.Handle("/sse", sse)
	mux.Handle("/messages", messages)
	return mux, approvals
}

// TestTools: each tool does what the soak expects of it, with its
// confirm, approval or task, for the demo identities.
func TestTools(t *testing.T) {
	mux, approvals := newTestHandler(t)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx := context.Background()

	c := mcptest.Dial(srv.URL+"/mcp", mcptest.WithToken("globex-editor"), mcptest.WithCapabilities(json.RawMessage(`{"elicitation":{"form":{},"url":{}}}`)),
		mcptest.WithElicitationHandler(func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			if p.Mode == "url" {
				if _, err := approvals.Decide(ctx, path.Base(p.URL), approval.Identity{Tenant: "globex", Subject: "dan", Role: "admin"}, true); err != nil {
					t.Errorf("decide: %v", err)
				}
				return mcptest.ElicitResult{Action: "accept"}, nil
			}
			return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		}))
	defer c.Close()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"echo", map[string]any{"text": "hi"}, "hi"},
		{"delete_doc", map[string]any{"id": "d1"}, "deleted d1 of globex"},
		{"transfer", map[string]any{"ref": "t1"}, "transferred t1 for globex"},
		{"build_report", map[string]any{"ms": 1}, "report of globex"},
		{"slow", map[string]any{"ms": 1}, "slept"},
	} {
		res, err := c.CallTool(ctx, tc.tool, tc.args)
		if err != nil || res.IsError || res.Text() != tc.want {
			t.Errorf("%s: %+v, %v; want %q", tc.tool, res, err, tc.want)
		}
	}

	// A 2026-07-28 client that declares the tasks extension gets a task.
	m := mcptest.Dial(srv.URL+"/mcp", mcptest.WithEra(mcptest.Stateless), mcptest.WithToken("acme-viewer"),
		mcptest.WithCapabilities(json.RawMessage(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`)))
	defer m.Close()
	msg, _, err := m.CallOnce(ctx, "tools/call", map[string]any{"name": "build_report", "arguments": map[string]any{"ms": 1}})
	if err != nil || mcptest.ResultType(msg.Result) != "task" {
		t.Fatalf("a task: %+v, %v", msg, err)
	}

	// An approval nobody decides expires.
	v := mcptest.Dial(srv.URL+"/mcp", mcptest.WithToken("acme-viewer"), mcptest.WithCapabilities(json.RawMessage(`{"elicitation":{"url":{}}}`)),
		mcptest.WithElicitationHandler(func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			return mcptest.ElicitResult{Action: "accept"}, nil
		}))
	defer v.Close()
	if _, err := v.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := v.CallTool(ctx, "transfer", map[string]any{"ref": "t2"}); err != nil || !res.IsError || !strings.Contains(res.Text(), "expired") {
		t.Fatalf("an approval left to expire: %+v, %v", res, err)
	}

	// The 2024-11-05 transport.
	l := mcptest.Dial(srv.URL+"/sse", mcptest.WithEra(mcptest.SSE), mcptest.WithToken("initech-admin"))
	defer l.Close()
	if _, err := l.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := l.CallTool(ctx, "echo", map[string]any{"text": "old"}); err != nil || res.Text() != "old" {
		t.Fatalf("echo over HTTP+SSE: %+v, %v", res, err)
	}

	// Every other token is refused.
	if _, err := mcptest.Dial(srv.URL+"/mcp", mcptest.WithToken("nobody")).Initialize(ctx); err == nil {
		t.Fatal("an unknown token was served")
	}
}

// TestDebug: /debug/soak says the process id and its goroutines.
func TestDebug(t *testing.T) {
	srv := httptest.NewServer(debugMux())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/debug/soak")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct{ PID, Goroutines int }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || v.Goroutines <= 0 || v.PID <= 0 {
		t.Fatalf("/debug/soak: %+v, %v", v, err)
	}
}

// TestSelfTestLeak: the self-test's middleware leaks one goroutine per
// request, which is what the soak must catch.
func TestSelfTestLeak(t *testing.T) {
	srv := httptest.NewServer(leakPerRequest(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	defer srv.Close()
	before := runtime.NumGoroutine()
	for range 20 {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if after := runtime.NumGoroutine(); after < before+20 {
		t.Fatalf("%d goroutines after 20 requests, %d before: the leak leaked nothing", after, before)
	}
}
