package mcphandler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

func TestTasksCreateAndGet(t *testing.T) {
	tf := &taskFixture{}
	h := mcphandler.New(tf.config())
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()

	_, b, r := taskCall(t, srv, "acme-viewer", "server/discover", "", capsNoTasks, nil)
	if !bytes.Contains(b, []byte(`"extensions":{"io.modelcontextprotocol/tasks":{}}`)) || r.Result["capabilities"].(map[string]any)["tasks"] != nil {
		t.Fatalf("server/discover does not advertise the extension (only): %s", b)
	}
	_, b, r = taskCall(t, srv, "acme-viewer", "tools/call", `"name":"quick","arguments":{}`, capsTasks, nil)
	for _, k := range []string{"task", "result", "error", "inputRequests", "requestState", "ttl", "pollInterval"} {
		if _, ok := r.Result[k]; ok {
			t.Fatalf("CreateTaskResult carries %q: %s", k, b)
		}
	}
	id, _ := r.Result["taskId"].(string)
	if r.Result["resultType"] != "task" || !uuidV4.MatchString(id) || r.Result["ttlMs"] != float64(time.Hour.Milliseconds()) {
		t.Fatalf("CreateTaskResult: %s", b)
	}
	res := awaitStatus(t, srv, "acme-viewer", id, "completed", 5*time.Second)
	inner, _ := res["result"].(map[string]any)
	if res["resultType"] != "complete" || inner == nil || !strings.Contains(fmt.Sprint(inner["content"]), "quick for acme") {
		t.Fatalf("completed task: %v", res)
	}
	if tf.runs.Load() != 1 {
		t.Fatalf("ran %d times", tf.runs.Load())
	}
	// Without the extension, the same tool runs inline.
	_, b, r = taskCall(t, srv, "acme-viewer", "tools/call", `"name":"quick","arguments":{}`, capsNoTasks, nil)
	if r.Result["resultType"] != "complete" || r.Result["taskId"] != nil || !bytes.Contains(b, []byte("quick for acme")) {
		t.Fatalf("call without the extension: %s", b)
	}
}

func TestTasksNegotiation(t *testing.T) {
	tf := &taskFixture{}
	h := mcphandler.New(tf.config())
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()

	status, b, r := taskCall(t, srv, "acme-viewer", "tools/call", `"name":"only_task","arguments":{}`, capsNoTasks, nil)
	if status != 400 || r.Error == nil || r.Error.Code != mcphandler.CodeMissingClientCapability ||
		string(r.Error.Data) != `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}` {
		t.Fatalf("required tool without the extension: %d %s", status, b)
	}
	if tf.runs.Load() != 0 {
		t.Fatal("the handler of a refused call ran")
	}
	for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
		params := `"taskId":"x"`
		if m == "tasks/update" {
			params += `,"inputResponses":{}`
		}
		_, b, r := taskCall(t, srv, "acme-viewer", m, params, capsNoTasks, nil)
		if r.Error == nil || r.Error.Code != mcphandler.CodeMissingClientCapability {
			t.Fatalf("%s without the extension: %s", m, b)
		}
	}
	for _, m := range []string{"tasks/result", "tasks/list"} {
		_, b, r := taskCall(t, srv, "acme-viewer", m, `"taskId":"x"`, capsTasks, nil)
		if r.Error == nil || r.Error.Code != -32601 {
			t.Fatalf("%s on 2026-07-28: %s", m, b)
		}
	}
	// The legacy params.task does not make a task of a tool without support.
	_, b, r = taskCall(t, srv, "acme-viewer", "tools/call", `"name":"plain","arguments":{},"task":{"ttl":60000}`, capsTasks, nil)
	if r.Result["resultType"] != "complete" {
		t.Fatalf("legacy task param: %s", b)
	}
}

// Another identity's task id answers byte for byte like an unknown one,
// on every tasks method, and changes nothing.
func TestTasksForeignIDIsUnknown(t *testing.T) {
	tf := &taskFixture{}
	h := mcphandler.New(tf.config())
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	id := createTask(t, srv, "acme-viewer", "wait")
	<-tf.started
	unknown := "00000000-0000-4000-8000-000000000000"
	for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
		params := func(id string) string {
			p := `"taskId":"` + id + `"`
			if m == "tasks/update" {
				p += `,"inputResponses":{"sure":{"action":"accept"}}`
			}
			return p
		}
		for _, tok := range []string{"globex-editor", "acme-admin"} { // other tenant; same tenant, other subject
			s1, foreign, _ := taskCall(t, srv, tok, m, params(id), capsTasks, nil)
			s2, none, _ := taskCall(t, srv, tok, m, params(unknown), capsTasks, nil)
			if s1 != s2 || !bytes.Equal(foreign, none) || !bytes.Contains(foreign, []byte("-32602")) {
				t.Fatalf("%s by %s: foreign %d %s, unknown %d %s", m, tok, s1, foreign, s2, none)
			}
		}
	}
	if res := getTask(t, srv, "acme-viewer", id); res["status"] != "working" {
		t.Fatalf("another identity changed the task: %v", res)
	}
}

func TestTasksMcpNameHeader(t *testing.T) {
	tf := &taskFixture{}
	h := mcphandler.New(tf.config())
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	id := createTask(t, srv, "acme-viewer", "quick")
	_, b, r := taskCall(t, srv, "acme-viewer", "tasks/get", `"taskId":"`+id+`"`, capsTasks, func(h http.Header) { h.Set("Mcp-Name", id) })
	if r.Result == nil {
		t.Fatalf("matching Mcp-Name: %s", b)
	}
	_, b, r = taskCall(t, srv, "acme-viewer", "tasks/get", `"taskId":"`+id+`"`, capsTasks, func(h http.Header) { h.Set("Mcp-Name", "other") })
	if r.Error == nil || r.Error.Code != mcphandler.CodeHeaderMismatch {
		t.Fatalf("mismatched Mcp-Name: %s", b)
	}
	// A duplicated taskId: the header check and the method cannot read
	// different ids.
	_, b, r = taskCall(t, srv, "acme-viewer", "tasks/get", `"taskId":"other","taskId":"`+id+`"`, capsTasks, func(h http.Header) { h.Set("Mcp-Name", id) })
	if r.Error == nil || r.Error.Code != -32602 {
		t.Fatalf("duplicated taskId: %s", b)
	}
	for _, p := range []string{`"taskId":""`, `"taskId":7`, `"taskId":"` + strings.Repeat("a", 65) + `"`, `"nothing":1`} {
		_, b, r = taskCall(t, srv, "acme-viewer", "tasks/get", p, capsTasks, nil)
		if r.Error == nil || r.Error.Code != -32602 {
			t.Fatalf("tasks/get %s: %s", p, b)
		}
	}
}

// A task asks its question through inputRequests; answers under other keys
// are ignored, the pending one is delivered once, and a replayed update
// changes nothing.
func TestTasksInputRequired(t *testing.T) {
	tf := &taskFixture{}
	h := mcphandler.New(tf.config())
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	tok := "acme-viewer"
	id := createTask(t, srv, tok, "ask")
	res := awaitStatus(t, srv, tok, id, "input_required", 5*time.Second)
	reqs, _ := res["inputRequests"].(map[string]any)
	if sure, _ := reqs["sure"].(map[string]any); sure["method"] != "elicitation/create" {
		t.Fatalf("inputRequests: %v", res)
	}
	update := func(responses string) {
		t.Helper()
		_, b, r := taskCall(t, srv, tok, "tasks/update", `"taskId":"`+id+`","inputResponses":`+responses, capsTasks, nil)
		if r.Result == nil || r.Result["resultType"] != "complete" || r.Result["taskId"] != nil || r.Result["status"] != nil {
			t.Fatalf("tasks/update ack: %s", b)
		}
	}
	update(`{"other":{"action":"accept"}}`)
	if res := getTask(t, srv, tok, id); res["status"] != "input_required" {
		t.Fatalf("an unknown key moved the task: %v", res)
	}
	_, b, r := taskCall(t, srv, tok, "tasks/update", `"taskId":"`+id+`","inputResponses":{"sure":1}`, capsTasks, nil)
	if r.Error == nil || r.Error.Code != -32602 {
		t.Fatalf("a non-object answer: %s", b)
	}
	update(`{"sure":{"action":"accept","content":{"confirm":true}}}`)
	res = awaitStatus(t, srv, tok, id, "completed", 5*time.Second)
	update(`{"sure":{"action":"decline"}}`) // replayed, changed
	if again := getTask(t, srv, tok, id); fmt.Sprint(again["result"]) != fmt.Sprint(res["result"]) || !strings.Contains(fmt.Sprint(res["result"]), "answer accept true") {
		t.Fatalf("result %v, after a replay %v", res["result"], again["result"])
	}
	if tf.runs.Load() != 1 {
		t.Fatalf("ran %d times", tf.runs.Load())
	}
}

func TestTasksCancel(t *testing.T) {
	tf := &taskFixture{}
	h := mcphandler.New(tf.config())
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	tok := "acme-viewer"
	id := createTask(t, srv, tok, "wait")
	<-tf.started
	for range 2 { // the second cancels an ended task: acked alike
		_, b, r := taskCall(t, srv, tok, "tasks/cancel", `"taskId":"`+id+`"`, capsTasks, nil)
		if r.Result == nil || r.Result["resultType"] != "complete" || len(r.Result) != 2 { // resultType, _meta
			t.Fatalf("tasks/cancel ack: %s", b)
		}
	}
	if res := getTask(t, srv, tok, id); res["status"] != "cancelled" {
		t.Fatalf("after tasks/cancel: %v", res)
	}
	select {
	case err := <-tf.stopped:
		if err == nil {
			t.Fatal("the work was not cancelled")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the work did not stop within 5 s of tasks/cancel")
	}
}

func TestTasksLimits(t *testing.T) {
	tf := &taskFixture{}
	cfg := tf.config()
	cfg.Tasks.MaxPerIdentity = 2
	cfg.Tasks.MaxResultBytes = 1024
	h := mcphandler.New(cfg)
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	id := createTask(t, srv, "acme-viewer", "big")
	res := awaitStatus(t, srv, "acme-viewer", id, "failed", 5*time.Second)
	if e, _ := res["error"].(map[string]any); e["code"] != float64(-32603) || !strings.Contains(fmt.Sprint(e["message"]), "more than the limit of 1024") {
		t.Fatalf("oversized result: %v", res)
	}
	createTask(t, srv, "acme-viewer", "quick")
	_, b, r := taskCall(t, srv, "acme-viewer", "tools/call", `"name":"quick","arguments":{}`, capsTasks, nil)
	if r.Error == nil || r.Error.Code != -32000 || !strings.Contains(r.Error.Message, "at most 2") {
		t.Fatalf("a third task: %s", b)
	}
	// The limit is per identity.
	createTask(t, srv, "globex-editor", "quick")
}

// subscriptions/listen with taskIds: only the caller's own tasks are
// agreed, and their changes arrive as notifications/tasks.
func TestTasksListen(t *testing.T) {
	tf := &taskFixture{}
	h := mcphandler.New(tf.config())
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	mine := createTask(t, srv, "acme-viewer", "wait")
	<-tf.started
	theirs := createTask(t, srv, "globex-editor", "quick")
	ctx := context.Background()
	c := mcptest.NewModern(t, h, mcptest.WithToken("acme-viewer"), mcptest.WithCapabilities(json.RawMessage(capsTasks)))
	s, err := c.Listen(ctx, map[string]any{"taskIds": []string{theirs, mine, "00000000-0000-4000-8000-000000000000"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ack := nextMessage(t, s, 5*time.Second)
	if ack == nil || !strings.Contains(string(ack.Params), `"notifications":{"taskIds":["`+mine+`"]}`) {
		t.Fatalf("ack %+v: only the caller's own task is agreed", ack)
	}
	taskCall(t, srv, "globex-editor", "tasks/cancel", `"taskId":"`+theirs+`"`, capsTasks, nil)
	taskCall(t, srv, "acme-viewer", "tasks/cancel", `"taskId":"`+mine+`"`, capsTasks, nil)
	m := nextMessage(t, s, 5*time.Second)
	if m == nil || m.Method != "notifications/tasks" || !strings.Contains(string(m.Params), `"taskId":"`+mine+`","status":"cancelled"`) ||
		!strings.Contains(string(m.Params), "subscriptionId") {
		t.Fatalf("notification %+v", m)
	}
	if m := nextMessage(t, s, 300*time.Millisecond); m != nil {
		t.Fatalf("unexpected %+v", m)
	}
	// More taskIds than MaxSubscriptions (16) is refused.
	many := make([]string, 17)
	for i := range many {
		many[i] = mine
	}
	if _, err := c.Listen(ctx, map[string]any{"taskIds": many}); err == nil || !strings.Contains(err.Error(), "at most 16 taskIds") {
		t.Fatalf("17 taskIds: %v", err)
	}
}
