package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/mcptest"
)

// call sends method and decodes its result (a 2026-07-28 task result
// too, which Client.Call does not take: it is no round of a call).
func call(t *testing.T, c *mcptest.Client, method string, params any) map[string]any {
	t.Helper()
	msg, _, err := c.CallOnce(t.Context(), method, params)
	if err == nil && msg.Error != nil {
		err = msg.Error
	}
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	var m map[string]any
	if err := json.Unmarshal(msg.Result, &m); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return m
}

// poll gets task id until its status is not "working", for at most 10s.
func poll(t *testing.T, c *mcptest.Client, id string) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got := call(t, c, "tasks/get", map[string]any{"taskId": id})
		if got["status"] != "working" || time.Now().After(deadline) {
			return got
		}
	}
}

func text(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestTasks runs the example's handler with real clients: a 2026-07-28
// client with the tasks extension gets a task it polls to its result, or
// cancels, which stops the work; a 2025-11-25 client with params.task
// waits on tasks/result; a client without tasks gets the result inline.
func TestTasks(t *testing.T) {
	h := newHandler()
	t.Cleanup(func() { h.Close() })
	tasks := mcptest.WithCapabilities(json.RawMessage(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`))
	modern := mcptest.New(t, h, mcptest.WithEra(mcptest.Stateless), mcptest.WithToken("alice"), tasks)

	created := call(t, modern, "tools/call", map[string]any{"name": "build_report", "arguments": map[string]any{"seconds": 1}})
	id, _ := created["taskId"].(string)
	if created["resultType"] != "task" || id == "" {
		t.Fatalf("tools/call: %v", created)
	}
	if got := poll(t, modern, id); got["status"] != "completed" || !strings.Contains(text(got["result"]), "report of acme, 1s") {
		t.Fatalf("the task: %v", got)
	}

	created = call(t, modern, "tools/call", map[string]any{"name": "build_report", "arguments": map[string]any{"seconds": 60}})
	id, _ = created["taskId"].(string)
	call(t, modern, "tasks/cancel", map[string]any{"taskId": id})
	if got := poll(t, modern, id); got["status"] != "cancelled" {
		t.Fatalf("the cancelled task: %v", got)
	}

	old := mcptest.New(t, h, mcptest.WithToken("alice"))
	if _, err := old.Initialize(t.Context()); err != nil {
		t.Fatal(err)
	}
	created = call(t, old, "tools/call", map[string]any{"name": "build_report", "arguments": map[string]any{"seconds": 0}, "task": map[string]any{}})
	id, _ = created["task"].(map[string]any)["taskId"].(string)
	if res := call(t, old, "tasks/result", map[string]any{"taskId": id}); !strings.Contains(text(res["content"]), "report of acme, 0s") {
		t.Fatalf("tasks/result: %v", res)
	}
	res, err := old.CallTool(t.Context(), "build_report", map[string]any{"seconds": 0})
	if err != nil || res.Text() != "report of acme, 0s" {
		t.Fatalf("inline: %v %v", res, err)
	}
	if res, err := old.CallTool(t.Context(), "build_report", map[string]any{"seconds": 61}); err != nil || !res.IsError {
		t.Fatalf("61 seconds: %v %v", res, err)
	}
}
