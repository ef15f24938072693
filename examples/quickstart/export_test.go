package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

const tasksCaps = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`

// Without the tasks extension, export_docs waits and answers inline, for
// the caller's tenant; delay_ms is bounded.
func TestExportDocsInline(t *testing.T) {
	ctx := context.Background()
	c := connect(t, "globex-editor")
	start := time.Now()
	res, err := c.CallTool(ctx, "export_docs", map[string]any{"delay_ms": 300})
	if err != nil || res.IsError {
		t.Fatalf("export_docs: %+v %v", res, err)
	}
	var out searchOut
	if err := json.Unmarshal(res.StructuredContent, &out); err != nil || out.Count != len(out.Docs) || out.Count == 0 || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("export_docs: %s after %v", res.StructuredContent, time.Since(start))
	}
	for _, dc := range out.Docs {
		if strings.HasPrefix(dc.ID, "a") {
			t.Fatalf("globex got acme's document %+v", dc)
		}
	}
	for _, args := range []map[string]any{{"delay_ms": 60001}, {"delay_ms": -1}, {"delay_ms": "soon"}, {"delay_ms": 1.5}, {"other": 1}} {
		res, err := c.CallTool(ctx, "export_docs", args)
		if err != nil || !res.IsError {
			t.Fatalf("export_docs %v: %+v %v, want a tool error", args, res, err)
		}
	}
}

// call sends one 2026-07-28 request and returns its result object.
func call(t *testing.T, c *mcptest.Client, method string, params map[string]any) map[string]any {
	t.Helper()
	msg, _, err := c.CallOnce(context.Background(), method, params)
	if err != nil || msg.Error != nil {
		t.Fatalf("%s: %+v %v", method, msg, err)
	}
	var r map[string]any
	json.Unmarshal(msg.Result, &r)
	return r
}

// awaitTask polls task id on c until it is no longer working.
func awaitTask(t *testing.T, c *mcptest.Client, id string) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r := call(t, c, "tasks/get", map[string]any{"taskId": id})
		if r["status"] != "working" || time.Now().After(deadline) {
			return r
		}
	}
}

func newTaskClient(t *testing.T, h http.Handler, token string) *mcptest.Client {
	return mcptest.NewModern(t, h, mcptest.WithToken(token), mcptest.WithCapabilities(json.RawMessage(tasksCaps)))
}

func TestExportDocsTask(t *testing.T) {
	h := newDemo(newMemDocs()).handler(mcphandler.Config{})
	t.Cleanup(func() { h.Close() })
	c := newTaskClient(t, h, "acme-viewer")
	created := call(t, c, "tools/call", map[string]any{"name": "export_docs", "arguments": map[string]any{"delay_ms": 100}})
	id, _ := created["taskId"].(string)
	if created["resultType"] != "task" || id == "" {
		t.Fatalf("export_docs with tasks: %v", created)
	}
	done := awaitTask(t, c, id)
	sc, _ := done["result"].(map[string]any)["structuredContent"].(map[string]any)
	if done["status"] != "completed" || sc["count"] != float64(3) {
		t.Fatalf("export task: %v", done)
	}
	// Another tenant cannot read it.
	other := newTaskClient(t, h, "globex-editor")
	msg, _, err := other.CallOnce(context.Background(), "tasks/get", map[string]any{"taskId": id})
	if err == nil || !strings.Contains(err.Error(), `{"code":-32602,"message":"Invalid params: task not found"}`) {
		t.Fatalf("globex reads acme's task: %+v %v", msg, err)
	}
}

// With -redis, a task created on one process is read, cancelled and
// completed from another.
func TestExportDocsAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	first := redistest.Client(t)
	prefix := redistest.Prefix(t, first)
	var handlers []http.Handler
	for _, rc := range []redis.UniversalClient{first, redistest.Client(t)} {
		d, cfg, err := withRedis(ctx, rc, prefix, []byte("a secret both processes share, 32+ bytes"))
		if err != nil {
			t.Fatal(err)
		}
		h := d.handler(cfg)
		t.Cleanup(func() { h.Close(); cfg.Store.(*redisstore.Store).Close() })
		handlers = append(handlers, h)
	}
	p0, p1 := newTaskClient(t, handlers[0], "acme-viewer"), newTaskClient(t, handlers[1], "acme-viewer")

	long := call(t, p0, "tools/call", map[string]any{"name": "export_docs", "arguments": map[string]any{"delay_ms": 60000}})
	id, _ := long["taskId"].(string)
	if r := call(t, p1, "tasks/get", map[string]any{"taskId": id}); r["status"] != "working" {
		t.Fatalf("process 1 reads process 0's task: %v", r)
	}
	start := time.Now()
	call(t, p1, "tasks/cancel", map[string]any{"taskId": id})
	if r := call(t, p0, "tasks/get", map[string]any{"taskId": id}); r["status"] != "cancelled" {
		t.Fatalf("process 0 after a cancel on process 1: %v", r)
	}
	t.Logf("cancelled across processes in %v", time.Since(start).Round(time.Millisecond))

	short := call(t, p0, "tools/call", map[string]any{"name": "export_docs", "arguments": map[string]any{"delay_ms": 200}})
	done := awaitTask(t, p1, short["taskId"].(string))
	if done["status"] != "completed" || !strings.Contains(toJSON(done["result"]), `"count":3`) {
		t.Fatalf("process 1 reads the result of process 0's task: %v", done)
	}
}

func toJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// export_docs stops waiting at once when its call is cancelled (a task's
// work runs under the same context, cancelled by tasks/cancel).
func TestExportDocsStopsWhenCancelled(t *testing.T) {
	d := newDemo(newMemDocs())
	call, _ := mcptest.NewToolCall(d.exportDocs, map[string]any{"delay_ms": 60000}, tokens["acme-viewer"])
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	res, err := d.exportDocs.Handler(ctx, call)
	if took := time.Since(start); took > time.Second || err == nil {
		t.Fatalf("cancelled after 50 ms: returned %+v, %v after %v", res, err, took)
	}
}
