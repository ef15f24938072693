package mcphandler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

// The 2025-11-25 task methods, through a session.

func TestTasksV1(t *testing.T) {
	tf := &taskFixture{}
	h := mcphandler.New(tf.config())
	defer h.Close()
	c := v1Client(t, h, "acme-viewer")
	ctx := context.Background()
	tools, err := c.Call(ctx, "tools/list", nil)
	if err != nil || !strings.Contains(string(tools), `"name":"quick","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}`) ||
		!strings.Contains(string(tools), `"name":"only_task","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}`) {
		t.Fatalf("tools/list: %s %v", tools, err)
	}
	created, err := callJSON(t, c, "tools/call", map[string]any{"name": "quick", "task": map[string]any{"ttl": 60000}})
	tk, _ := created["task"].(map[string]any)
	id, _ := tk["taskId"].(string)
	if err != nil || id == "" || tk["ttl"] != float64(60000) || tk["ttlMs"] != nil {
		t.Fatalf("CreateTaskResult: %v %v", created, err)
	}
	res, err := callJSON(t, c, "tasks/result", map[string]any{"taskId": id})
	meta, _ := res["_meta"].(map[string]any)
	if err != nil || !strings.Contains(toJSONString(res["content"]), "quick for acme") || toJSONString(meta["io.modelcontextprotocol/related-task"]) != `{"taskId":"`+id+`"}` {
		t.Fatalf("tasks/result: %v %v", res, err)
	}
	got, err := callJSON(t, c, "tasks/get", map[string]any{"taskId": id})
	if err != nil || got["status"] != "completed" || got["taskId"] != id || got["pollInterval"] == nil {
		t.Fatalf("tasks/get: %v %v", got, err)
	}
	if _, err := callJSON(t, c, "tasks/cancel", map[string]any{"taskId": id}); !isRPC(err, -32602) {
		t.Fatalf("cancelling an ended task: %v", err)
	}
	// Without params.task, a required tool is refused; an optional one runs.
	if _, err := callJSON(t, c, "tools/call", map[string]any{"name": "only_task"}); !isRPC(err, -32601) {
		t.Fatalf("a required tool without params.task: %v", err)
	}
	if r, err := c.CallTool(ctx, "quick", nil); err != nil || r.IsError || r.Text() != "quick for acme" {
		t.Fatalf("an optional tool without params.task: %+v %v", r, err)
	}
	// tasks/list is the caller's: another subject of the same tenant sees none.
	list, err := callJSON(t, c, "tasks/list", map[string]any{})
	if err != nil || len(list["tasks"].([]any)) != 1 {
		t.Fatalf("tasks/list: %v %v", list, err)
	}
	other := v1Client(t, h, "acme-admin")
	list, err = callJSON(t, other, "tasks/list", nil)
	if err != nil || len(list["tasks"].([]any)) != 0 {
		t.Fatalf("tasks/list of another identity: %v %v", list, err)
	}
	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		_, e1 := callJSON(t, other, m, map[string]any{"taskId": id})
		_, e2 := callJSON(t, other, m, map[string]any{"taskId": "00000000-0000-4000-8000-000000000000"})
		if e1 == nil || e2 == nil || e1.Error() != e2.Error() {
			t.Fatalf("%s of another identity's task: %v; of an unknown one: %v", m, e1, e2)
		}
	}
	if _, err := callJSON(t, c, "tasks/list", map[string]any{"cursor": "nope"}); !isRPC(err, -32602) {
		t.Fatalf("a forged cursor: %v", err)
	}
}

func TestTasksV1CancelAndOlderVersions(t *testing.T) {
	tf := &taskFixture{}
	h := mcphandler.New(tf.config())
	defer h.Close()
	c := v1Client(t, h, "acme-viewer")
	created, err := callJSON(t, c, "tools/call", map[string]any{"name": "wait", "task": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	id := created["task"].(map[string]any)["taskId"].(string)
	<-tf.started
	got, err := callJSON(t, c, "tasks/cancel", map[string]any{"taskId": id})
	if err != nil || got["status"] != "cancelled" {
		t.Fatalf("tasks/cancel: %v %v", got, err)
	}
	select {
	case <-tf.stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the work was not stopped")
	}
	if _, err := callJSON(t, c, "tasks/result", map[string]any{"taskId": id}); !isRPC(err, -32603) {
		t.Fatalf("tasks/result of a cancelled task: %v", err)
	}
	// 2025-06-18 has no tasks: params.task is ignored, the methods unknown,
	// the capability absent.
	old := mcptest.New(t, h, mcptest.WithToken("acme-viewer"), mcptest.WithProtocolVersion(mcphandler.Version20250618))
	init, err := old.Initialize(context.Background())
	if err != nil || strings.Contains(toJSONString(init), `"tasks"`) {
		t.Fatalf("initialize 2025-06-18: %v %v", init, err)
	}
	r, err := callJSON(t, old, "tools/call", map[string]any{"name": "quick", "task": map[string]any{}})
	if err != nil || r["task"] != nil {
		t.Fatalf("2025-06-18 call with params.task: %v %v", r, err)
	}
	if _, err := callJSON(t, old, "tasks/get", map[string]any{"taskId": id}); !isRPC(err, -32601) {
		t.Fatalf("tasks/get on 2025-06-18: %v", err)
	}
}
