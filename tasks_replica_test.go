package mcphandler_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// Tasks on two replicas sharing real Redis, through the HTTP wire: each
// request goes to the replica the test names.

func TestTasksReplicasCreatedOnAReadAndCancelledOnB(t *testing.T) {
	tf := &taskFixture{}
	cl := newCluster(t, 2, tf.config(), redisClient(t))
	a, b := cl.replicas[0].srv, cl.replicas[1].srv
	tok := "acme-viewer"

	id := createTask(t, a, tok, "quick")
	awaitStatus(t, b, tok, id, "completed", 5*time.Second)

	id = createTask(t, a, tok, "wait")
	<-tf.started
	if res := getTask(t, b, tok, id); res["status"] != "working" {
		t.Fatalf("on B, a task running on A: %v", res)
	}
	_, body, r := taskCall(t, b, tok, "tasks/cancel", `"taskId":"`+id+`"`, capsTasks, nil)
	if r.Result == nil {
		t.Fatalf("tasks/cancel on B: %s", body)
	}
	select {
	case err := <-tf.stopped:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the work on A ended with %v, want it cancelled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancel on B did not reach the work on A within 5 s")
	}
	if res := getTask(t, a, tok, id); res["status"] != "cancelled" {
		t.Fatalf("on A after a cancel on B: %v", res)
	}
	if n := tf.runs.Load(); n != 2 {
		t.Fatalf("%d runs for two tasks", n)
	}
}

func TestTasksReplicasForeignIDIsUnknown(t *testing.T) {
	tf := &taskFixture{}
	cl := newCluster(t, 2, tf.config(), redisClient(t))
	a, b := cl.replicas[0].srv, cl.replicas[1].srv
	id := createTask(t, a, "acme-viewer", "quick")
	awaitStatus(t, b, "acme-viewer", id, "completed", 5*time.Second)
	_, foreign, _ := taskCall(t, b, "globex-editor", "tasks/get", `"taskId":"`+id+`"`, capsTasks, nil)
	_, none, _ := taskCall(t, b, "globex-editor", "tasks/get", `"taskId":"00000000-0000-4000-8000-000000000000"`, capsTasks, nil)
	if !bytes.Equal(foreign, none) {
		t.Fatalf("another tenant's task on B: %s, an unknown one: %s", foreign, none)
	}
}

// The replica running a task dies: another replica reports the task failed
// within seconds (the lease, 5 s by default), and nothing runs it again.
func TestTasksReplicasRunnerDies(t *testing.T) {
	tf := &taskFixture{}
	cl := newCluster(t, 2, tf.config(), redisClient(t))
	a, b := cl.replicas[0], cl.replicas[1].srv
	tok := "acme-viewer"
	id := createTask(t, a.srv, tok, "wait")
	<-tf.started
	a.kill()
	died := time.Now()
	res := awaitStatus(t, b, tok, id, "failed", 10*time.Second)
	took := time.Since(died)
	if e, _ := res["error"].(map[string]any); e["code"] != float64(-32603) {
		t.Fatalf("a task whose runner died: %v", res)
	}
	t.Logf("failed %v after its runner died", took.Round(10*time.Millisecond))
	time.Sleep(500 * time.Millisecond)
	if n := tf.runs.Load(); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
	if res := getTask(t, b, tok, id); res["status"] != "failed" {
		t.Fatalf("later: %v", res)
	}
}

// Config.Tasks.MaxPerIdentity counts the identity's tasks on every replica.
func TestTasksReplicasLimit(t *testing.T) {
	tf := &taskFixture{}
	cfg := tf.config()
	cfg.Tasks.MaxPerIdentity = 1
	cl := newCluster(t, 2, cfg, redisClient(t))
	createTask(t, cl.replicas[0].srv, "acme-viewer", "quick")
	_, body, r := taskCall(t, cl.replicas[1].srv, "acme-viewer", "tools/call", `"name":"quick","arguments":{}`, capsTasks, nil)
	if r.Error == nil || r.Error.Code != -32000 {
		t.Fatalf("a second task on B: %s", body)
	}
}

// 2025-11-25: a task created in a session on A is waited for on B, in
// another session of the same identity.
func TestTasksReplicasV1(t *testing.T) {
	tf := &taskFixture{}
	cl := newCluster(t, 2, tf.config(), redisClient(t))
	a, b := v1Client(t, cl.replicas[0].h, "acme-viewer"), v1Client(t, cl.replicas[1].h, "acme-viewer")
	created, err := callJSON(t, a, "tools/call", map[string]any{"name": "quick", "task": map[string]any{"ttl": 5000}})
	if err != nil {
		t.Fatal(err)
	}
	id := created["task"].(map[string]any)["taskId"].(string)
	res, err := callJSON(t, b, "tasks/result", map[string]any{"taskId": id})
	if err != nil || !strings.Contains(toJSONString(res), "quick for acme") {
		t.Fatalf("tasks/result on B: %v %v", res, err)
	}
	list, err := callJSON(t, b, "tasks/list", nil)
	if err != nil || len(list["tasks"].([]any)) != 1 {
		t.Fatalf("tasks/list on B: %v %v", list, err)
	}
}
