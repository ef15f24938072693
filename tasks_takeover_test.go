package mcphandler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
)

// takeOver is one 2025-11-25 call of purge whose confirm is answered after
// the replica that asked it died: another replica takes the confirm over.
type takeOver struct {
	cl      *cluster
	ct      *confirmTasks
	c       *mcptest.Client
	asker   int
	confirm json.RawMessage // the elicitation's request id
}

// newTakeOver is a cluster of three replicas on real Redis serving the
// confirmTasks host, and a client whose elicitation handler, once asked,
// runs tamper on the confirm's stored record (when not nil), kills the
// asking replica and accepts.
func newTakeOver(t *testing.T, tamper func(st session.Store, id string)) *takeOver {
	to := &takeOver{ct: &confirmTasks{}, asker: -1}
	to.cl = newCluster(t, 3, to.ct.config(), redisClient(t))
	for _, r := range to.cl.replicas {
		mcphandler.SetConfirmTimes(r.h, 300*time.Millisecond, 50*time.Millisecond)
	}
	var asked atomic.Bool
	to.c = mcptest.Dial(to.cl.proxy.URL, mcptest.WithToken("acme-viewer"),
		mcptest.WithElicitationHandler(func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			if !asked.CompareAndSwap(false, true) {
				return mcptest.ElicitResult{Action: "decline"}, nil
			}
			reqs := to.c.ServerRequests()
			to.confirm = reqs[len(reqs)-1].ID
			to.asker = int(to.cl.lastCall.Load())
			if tamper != nil {
				var id string
				json.Unmarshal(to.confirm, &id)
				tamper(to.survivor(0).store, id)
			}
			to.cl.replicas[to.asker].kill()
			return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		}))
	t.Cleanup(to.c.Close)
	if _, err := to.c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	return to
}

// call sends the tools/call with params and waits at most wait.
func (to *takeOver) call(t *testing.T, params map[string]any, wait time.Duration) (map[string]any, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	raw, err := to.c.Call(ctx, "tools/call", params)
	if to.asker < 0 {
		t.Fatal("the confirm was not asked")
	}
	var m map[string]any
	json.Unmarshal(raw, &m)
	return m, err
}

// survivor is the i-th replica that is still up.
func (to *takeOver) survivor(i int) *replica {
	for j, r := range to.cl.replicas {
		if j != to.asker && !r.down.Load() {
			if i == 0 {
				return r
			}
			i--
		}
	}
	return nil
}

// tasksOf lists the tasks of token on the i-th surviving replica.
func (to *takeOver) tasksOf(t *testing.T, i int, token string) []any {
	t.Helper()
	list, err := callJSON(t, v1Client(t, to.survivor(i).h, token), "tasks/list", nil)
	if err != nil {
		t.Fatal(err)
	}
	tasks, _ := list["tasks"].([]any)
	return tasks
}

// The asker of a confirmed 2025-11-25 task call dies; the replica that
// takes the confirm over creates the one task the call asked for and
// answers with CreateTaskResult on the call's stream. The task is read on
// either survivor, a replayed answer creates nothing more, and another
// identity cannot see it.
func TestTasksTakeOverConfirmedV1(t *testing.T) {
	to := newTakeOver(t, nil)
	created, err := to.call(t, map[string]any{"name": "purge", "arguments": map[string]any{"id": "t"}, "task": map[string]any{"ttl": 30000}}, 20*time.Second)
	tk, _ := created["task"].(map[string]any)
	id, _ := tk["taskId"].(string)
	if err != nil || !uuidV4.MatchString(id) || tk["ttl"] != float64(30000) {
		t.Fatalf("a confirmed task call taken over: %v %v", created, err)
	}
	for i := range 2 {
		res, err := callJSON(t, v1Client(t, to.survivor(i).h, "acme-viewer"), "tasks/result", map[string]any{"taskId": id})
		if err != nil || !strings.Contains(toJSONString(res), `purged {\"id\":\"t\"} for alice`) {
			t.Fatalf("tasks/result on survivor %d: %v %v", i, res, err)
		}
		got, err := callJSON(t, v1Client(t, to.survivor(i).h, "acme-viewer"), "tasks/get", map[string]any{"taskId": id})
		if err != nil || got["status"] != "completed" {
			t.Fatalf("tasks/get on survivor %d: %v %v", i, got, err)
		}
	}
	// The same answer again, on each survivor: refused, nothing created.
	for range 2 {
		if err := to.c.Respond(context.Background(), to.confirm, accept); !isHTTP(err, 400) {
			t.Fatalf("a replayed answer: %v, want 400", err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(to.tasksOf(t, 0, "acme-viewer")); n != 1 {
		t.Fatalf("%d tasks after the take-over and replays, want 1", n)
	}
	if r, h := to.ct.runs.Load(), to.ct.handled.Load(); r != 1 || h != 1 {
		t.Fatalf("work ran %d times, the handler %d, want 1 and 1", r, h)
	}
	// Another identity: the task answers like an unknown one.
	other := v1Client(t, to.survivor(1).h, "acme-admin")
	_, foreign := callJSON(t, other, "tasks/get", map[string]any{"taskId": id})
	_, unknown := callJSON(t, other, "tasks/get", map[string]any{"taskId": "00000000-0000-4000-8000-000000000000"})
	if foreign == nil || unknown == nil || foreign.Error() != unknown.Error() {
		t.Fatalf("another identity's tasks/get: %v, an unknown task: %v", foreign, unknown)
	}
	if n := len(to.tasksOf(t, 1, "acme-admin")); n != 0 {
		t.Fatalf("another identity lists %d tasks", n)
	}
}

// The same take-over without params.task runs the work inline, once, and
// the client gets the tool result; no task is created.
func TestTasksTakeOverConfirmedWithoutTask(t *testing.T) {
	to := newTakeOver(t, nil)
	res, err := to.call(t, map[string]any{"name": "purge", "arguments": map[string]any{"id": "i"}}, 20*time.Second)
	if err != nil || !strings.Contains(toJSONString(res), `purged {\"id\":\"i\"} for alice`) || res["task"] != nil {
		t.Fatalf("a confirmed call without params.task taken over: %v %v", res, err)
	}
	if n := len(to.tasksOf(t, 0, "acme-viewer")); n != 0 {
		t.Fatalf("%d tasks for an inline call", n)
	}
	if r := to.ct.runs.Load(); r != 1 {
		t.Fatalf("work ran %d times, want 1", r)
	}
}

// The task request in the stored confirm record altered (a longer ttl,
// another owner): the record no longer verifies, so it reads as absent:
// the answer is refused, no replica takes the call over, no task is
// created, nothing runs.
func TestAttackTakeOverTamperedTaskRequest(t *testing.T) {
	for name, swap := range map[string][2]string{
		"ttl":   {`"ttl":30000`, `"ttl":90000`},
		"owner": {`"sub":"alice"`, `"sub":"bobby"`},
	} {
		t.Run(name, func(t *testing.T) {
			var changed atomic.Bool
			to := newTakeOver(t, func(st session.Store, id string) {
				raw, err := st.Load(context.Background(), "confirm/"+id)
				if err != nil {
					return
				}
				forged := bytes.Replace(raw, []byte(swap[0]), []byte(swap[1]), 1)
				changed.Store(!bytes.Equal(forged, raw) && overwrite(st, "confirm/"+id, forged))
			})
			res, err := to.call(t, map[string]any{"name": "purge", "arguments": map[string]any{"id": "f"}, "task": map[string]any{"ttl": 30000}}, 4*time.Second)
			if !changed.Load() {
				t.Fatal("the stored record holds no " + swap[0])
			}
			if err == nil {
				t.Fatalf("a tampered record answered the call: %v", res)
			}
			if n := len(to.tasksOf(t, 0, "acme-viewer")) + len(to.tasksOf(t, 1, "acme-viewer")); n != 0 {
				t.Fatalf("%d tasks from a tampered record", n)
			}
			if r := to.ct.runs.Load() + to.ct.handled.Load(); r != 0 {
				t.Fatalf("a tampered record ran the tool (%d)", r)
			}
		})
	}
}

// The asker of an approved 2025-11-25 task call dies before the approval
// is decided; the replica serving the resumed stream takes the call over
// and creates its one task.
func TestTasksTakeOverApprovedV1(t *testing.T) {
	ct := &confirmTasks{}
	rig := newApprovalRig(t, 2, 3*time.Second, func(cfg *mcphandler.Config) { cfg.ListTools = ct.tools })
	c := rig.dialAskerDies(t)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	raw, err := c.Call(ctx, "tools/call", map[string]any{"name": "purge", "arguments": map[string]any{"id": "a"}, "task": map[string]any{}})
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	json.Unmarshal(raw, &created)
	if err != nil || !uuidV4.MatchString(created.Task.TaskID) {
		t.Fatalf("an approved task call taken over: %s %v", raw, err)
	}
	survivor := rig.cl.replicas[1-rig.cl.lastCall.Load()]
	if survivor.down.Load() {
		survivor = rig.cl.replicas[rig.cl.lastCall.Load()]
	}
	res, err := callJSON(t, v1Client(t, survivor.h, "acme-viewer"), "tasks/result", map[string]any{"taskId": created.Task.TaskID})
	if err != nil || !strings.Contains(toJSONString(res), `purged {\"id\":\"a\"} for alice`) {
		t.Fatalf("tasks/result: %v %v", res, err)
	}
	if r, h := ct.runs.Load(), ct.handled.Load(); r != 1 || h != 1 {
		t.Fatalf("work ran %d times, the handler %d, want 1 and 1", r, h)
	}
}

// The same confirmed 2025-11-25 task call answered while its asker lives:
// the asker creates the one task, as the replica taking over does.
func TestTasksConfirmedV1OnTheAsker(t *testing.T) {
	ct := &confirmTasks{}
	cl := newCluster(t, 2, ct.config(), redisClient(t))
	var asked atomic.Int64
	c := mcptest.Dial(cl.proxy.URL, mcptest.WithToken("acme-viewer"),
		mcptest.WithElicitationHandler(func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			asked.Add(1)
			return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		}))
	defer c.Close()
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	created, err := callJSON(t, c, "tools/call", map[string]any{"name": "purge", "arguments": map[string]any{"id": "o"}, "task": map[string]any{"ttl": 30000}})
	tk, _ := created["task"].(map[string]any)
	id, _ := tk["taskId"].(string)
	if err != nil || !uuidV4.MatchString(id) || asked.Load() != 1 {
		t.Fatalf("a confirmed task call on its asker (asked %d times): %v %v", asked.Load(), created, err)
	}
	res, err := callJSON(t, v1Client(t, cl.replicas[1].h, "acme-viewer"), "tasks/result", map[string]any{"taskId": id})
	if err != nil || !strings.Contains(toJSONString(res), `purged {\"id\":\"o\"} for alice`) {
		t.Fatalf("tasks/result on B: %v %v", res, err)
	}
	if r, h := ct.runs.Load(), ct.handled.Load(); r != 1 || h != 1 {
		t.Fatalf("work ran %d times, the handler %d, want 1 and 1", r, h)
	}
}
