package mcphandler_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

// asker answers the elicitations of a 2025-11-25 client, recording the
// related task of each.
type asker struct {
	mu      sync.Mutex
	related []string
	n       atomic.Int64
	fail    atomic.Bool // answer with a JSON-RPC error
}

func (a *asker) option(action string) mcptest.Option {
	return mcptest.WithElicitationHandler(func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		a.n.Add(1)
		var meta struct {
			Related struct {
				TaskID string `json:"taskId"`
			} `json:"io.modelcontextprotocol/related-task"`
		}
		json.Unmarshal(p.Meta, &meta)
		a.mu.Lock()
		a.related = append(a.related, meta.Related.TaskID)
		a.mu.Unlock()
		if a.fail.Load() {
			return mcptest.ElicitResult{}, &mcptest.RPCError{Code: -32603, Message: "no human here"}
		}
		if action != "accept" {
			return mcptest.ElicitResult{Action: action}, nil
		}
		return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
	})
}

// v1Task calls tool as a 2025-11-25 task through c and returns its id,
// once the task reads status.
func v1Task(t *testing.T, c *mcptest.Client, tool, status string) string {
	t.Helper()
	created, err := callJSON(t, c, "tools/call", map[string]any{"name": tool, "task": map[string]any{"ttl": 60000}})
	if err != nil {
		t.Fatal(err)
	}
	id := created["task"].(map[string]any)["taskId"].(string)
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := callJSON(t, c, "tasks/get", map[string]any{"taskId": id})
		if err == nil && got["status"] == status {
			return id
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: %v %v, want %s", id, got, err, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// On 2025-11-25 the work of a task asks the client through the task:
// input_required, then tasks/result carries the question (tagged with the
// task) and hands the answer to the work, which completes with it.
func TestTasksV1InputRequired(t *testing.T) {
	for _, action := range []string{"accept", "decline"} {
		tf := &taskFixture{}
		h := mcphandler.New(tf.config())
		t.Cleanup(func() { h.Close() })
		a := &asker{}
		c := v1Client(t, h, "acme-viewer", a.option(action))
		id := v1Task(t, c, "ask", "input_required")
		if a.n.Load() != 0 {
			t.Fatal("asked before tasks/result")
		}
		res, err := callJSON(t, c, "tasks/result", map[string]any{"taskId": id})
		want := "answer accept true"
		if action == "decline" {
			want = "answer decline <nil>"
		}
		if err != nil || !strings.Contains(fmtText(res), want) || !strings.Contains(toJSONString(res), `"io.modelcontextprotocol/related-task":{"taskId":"`+id+`"}`) {
			t.Fatalf("%s: tasks/result: %v %v", action, res, err)
		}
		if a.n.Load() != 1 || a.related[0] != id || tf.runs.Load() != 1 {
			t.Fatalf("%s: asked %d times (related %v), ran %d", action, a.n.Load(), a.related, tf.runs.Load())
		}
		// Asked and answered: a second tasks/result asks nothing more.
		if _, err := callJSON(t, c, "tasks/result", map[string]any{"taskId": id}); err != nil || a.n.Load() != 1 {
			t.Fatalf("second tasks/result: %v, asked %d", err, a.n.Load())
		}
	}
}

// Attacks on the relay: another identity's tasks/result is told the task
// does not exist and asked nothing; a client whose answer is an error gets
// it from tasks/result, the task stays input_required and the next
// tasks/result asks again; two tasks/result at once may both ask, but the
// work takes one answer and runs once.
func TestTasksV1InputRequiredAttacks(t *testing.T) {
	tf := &taskFixture{}
	h := mcphandler.New(tf.config())
	t.Cleanup(func() { h.Close() })
	a, other := &asker{}, &asker{}
	c := v1Client(t, h, "acme-viewer", a.option("accept"))
	id := v1Task(t, c, "ask", "input_required")

	for _, token := range []string{"acme-admin", "globex-editor"} {
		oc := v1Client(t, h, token, other.option("accept"))
		if _, err := callJSON(t, oc, "tasks/result", map[string]any{"taskId": id}); err == nil || !strings.Contains(err.Error(), "task not found") {
			t.Fatalf("%s: tasks/result of another's task: %v", token, err)
		}
	}
	if other.n.Load() != 0 {
		t.Fatal("another identity was asked the task's question")
	}

	// A session of the same identity that did not declare elicitation is
	// not sent the question.
	bare := v1Client(t, h, "acme-viewer")
	if _, err := callJSON(t, bare, "tasks/result", map[string]any{"taskId": id}); err == nil || !strings.Contains(err.Error(), "cannot be asked") {
		t.Fatalf("tasks/result from a session without elicitation: %v", err)
	}

	a.fail.Store(true)
	if _, err := callJSON(t, c, "tasks/result", map[string]any{"taskId": id}); err == nil || !strings.Contains(err.Error(), "no human here") {
		t.Fatalf("tasks/result when the client's answer is an error: %v", err)
	}
	if got, _ := callJSON(t, c, "tasks/get", map[string]any{"taskId": id}); got["status"] != "input_required" || tf.runs.Load() != 0 {
		t.Fatalf("after a failed answer: %v, ran %d", got, tf.runs.Load())
	}
	a.fail.Store(false)
	var wg sync.WaitGroup
	var errs atomic.Int64
	for range 2 {
		wg.Go(func() {
			res, err := callJSON(t, c, "tasks/result", map[string]any{"taskId": id})
			if err != nil || !strings.Contains(toJSONString(res), "answer accept true") {
				errs.Add(1)
				t.Errorf("tasks/result: %v %v", res, err)
			}
		})
	}
	wg.Wait()
	if tf.runs.Load() != 1 {
		t.Fatalf("the work ran %d times", tf.runs.Load())
	}
	if n := a.n.Load(); n < 2 || n > 3 {
		t.Fatalf("asked %d times: once failed, then once or twice", n)
	}
}

// Across replicas on Redis: the task runs on A, its tasks/result is served
// by B in another session of the same identity, and the client's answer
// reaches the work on A.
func TestTasksReplicasV1InputRequired(t *testing.T) {
	tf := &taskFixture{}
	cl := newCluster(t, 2, tf.config(), redisClient(t))
	a, creator := &asker{}, &asker{}
	ca := v1Client(t, cl.replicas[0].h, "acme-viewer", creator.option("decline")) // declares elicitation
	cb := v1Client(t, cl.replicas[1].h, "acme-viewer", a.option("accept"))
	created, err := callJSON(t, ca, "tools/call", map[string]any{"name": "ask", "task": map[string]any{"ttl": 60000}})
	if err != nil {
		t.Fatal(err)
	}
	id := created["task"].(map[string]any)["taskId"].(string)
	v1Wait(t, cb, id, "input_required")
	res, err := callJSON(t, cb, "tasks/result", map[string]any{"taskId": id})
	if err != nil || !strings.Contains(toJSONString(res), "answer accept true") || a.n.Load() != 1 || creator.n.Load() != 0 || tf.runs.Load() != 1 {
		t.Fatalf("tasks/result on B: %v %v, asked %d, ran %d", res, err, a.n.Load(), tf.runs.Load())
	}
}

func v1Wait(t *testing.T, c *mcptest.Client, id, status string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := callJSON(t, c, "tasks/get", map[string]any{"taskId": id})
		if err == nil && got["status"] == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: %v %v, want %s", id, got, err, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fmtText is the text of the first content block of a tool result.
func fmtText(res map[string]any) string {
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		return ""
	}
	text, _ := content[0].(map[string]any)["text"].(string)
	return text
}
