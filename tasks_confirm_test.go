package mcphandler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
	"github.com/redis/go-redis/v9"
)

// callReply is a decoded 2026-07-28 answer: its result, and its error
// code (0 for none).
type callReply struct {
	res  map[string]any
	code int
}

// callURL sends one 2026-07-28 tools/call of tool to url.
func callURL(t *testing.T, url, token, tool, params, caps string) callReply {
	t.Helper()
	body := modernBody(1, "tools/call", `"name":"`+tool+`",`+params, caps)
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("body: %v", err)
	}
	res, _ := m["result"].(map[string]any)
	return callReply{res, errorCode(m)}
}

// taskRound returns the only input key and the requestState of an
// input_required result.
func taskRound(t *testing.T, r callReply) (string, string, map[string]any) {
	t.Helper()
	res := r.res
	if r.code != 0 || res == nil || res["resultType"] != "input_required" {
		t.Fatalf("want input_required, got %v (error %d)", res, r.code)
	}
	reqs := res["inputRequests"].(map[string]any)
	if len(reqs) != 1 {
		t.Fatalf("input requests %v", reqs)
	}
	for k, v := range reqs {
		return k, res["requestState"].(string), v.(map[string]any)
	}
	return "", "", nil
}

func taskOf(t *testing.T, r callReply) string {
	t.Helper()
	id, _ := r.res["taskId"].(string)
	if r.code != 0 || r.res["resultType"] != "task" || !uuidV4.MatchString(id) {
		t.Fatalf("want a CreateTaskResult, got %v (error %d)", r.res, r.code)
	}
	return id
}

// answer is the params of the retry of round state answering key.
func roundAnswer(args, key, action, state string) string {
	content := ""
	if action == "accept" {
		content = `,"content":{"confirm":true}`
	}
	return `"arguments":` + args + `,"inputResponses":{"` + key + `":{"action":"` + action + `"` + content + `}},"requestState":"` + state + `"`
}

// completedText polls task id on url until it completes and returns the
// text of its result.
func completedText(t *testing.T, url, token, id string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		body := modernBody(2, "tasks/get", `"taskId":"`+id+`"`, capsTasks)
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tasks/get")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Result map[string]any `json:"result"`
		}
		json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		st, _ := m.Result["status"].(string)
		if st == "completed" {
			return fmt.Sprint(m.Result["result"])
		}
		if st != "working" || time.Now().After(deadline) {
			t.Fatalf("task %s: %v", id, m.Result)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testConfirmedTask: a confirmed call of a tool with task support from a
// client that declared the extension becomes a task once confirmed; the
// confirm is used once: a replay, concurrent or later, gets the same
// task and runs nothing; another identity's replay opens nothing.
func testConfirmedTask(t *testing.T, ct *confirmTasks, url string) {
	args := `{"id":"x"}`
	key, state, _ := taskRound(t, callURL(t, url, "acme-admin", "purge", `"arguments":`+args, capsTasks))
	if key != mcphandler.ReservedKeyPrefix+"confirm" || ct.runs.Load() != 0 {
		t.Fatalf("round 1: key %q, ran %d", key, ct.runs.Load())
	}
	accept := roundAnswer(args, key, "accept", state)
	id := taskOf(t, callURL(t, url, "acme-admin", "purge", accept, capsTasks))
	if got := completedText(t, url, "acme-admin", id); !strings.Contains(got, `purged {"id":"x"} for bob`) {
		t.Fatalf("task result %s", got)
	}
	// The same answered round, replayed at once by many: the same task,
	// nothing runs again.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			again := taskOf(t, callURL(t, url, "acme-admin", "purge", accept, capsTasks))
			if again != id {
				t.Errorf("replay created task %s, first %s", again, id)
			}
		})
	}
	wg.Wait()
	// Another identity's replay of the state: refused before anything.
	for _, token := range []string{"acme-viewer", "globex-editor"} {
		if r := callURL(t, url, token, "purge", accept, capsTasks); r.code != int(mcphandler.CodeInvalidParams) {
			t.Fatalf("%s replays the state: %v %d", token, r.res, r.code)
		}
	}
	// A decline sent later with the same state changes nothing either.
	if again := taskOf(t, callURL(t, url, "acme-admin", "purge", roundAnswer(args, key, "decline", state), capsTasks)); again != id {
		t.Fatalf("decline after the task: task %s", again)
	}
	time.Sleep(100 * time.Millisecond) // a second run, if any, would land now
	if n, h := ct.runs.Load(), ct.handled.Load(); n != 1 || h != 1 {
		t.Fatalf("work ran %d times, the Handler %d, want 1 and 1", n, h)
	}
}

// testConfirmedRoundsTask: a confirmed call that asks its own question in
// a further round becomes a task after that round; its replay too gets
// the one task.
func testConfirmedRoundsTask(t *testing.T, ct *confirmTasks, url string) {
	args := `{"id":"y"}`
	key, state, _ := taskRound(t, callURL(t, url, "acme-admin", "purge_ask", `"arguments":`+args, capsTasks))
	key2, state2, _ := taskRound(t, callURL(t, url, "acme-admin", "purge_ask", roundAnswer(args, key, "accept", state), capsTasks))
	if key2 != "really" || ct.runs.Load() != 0 {
		t.Fatalf("round 2: key %q, ran %d", key2, ct.runs.Load())
	}
	final := roundAnswer(args, key2, "accept", state2)
	id := taskOf(t, callURL(t, url, "acme-admin", "purge_ask", final, capsTasks))
	if got := completedText(t, url, "acme-admin", id); !strings.Contains(got, `purged {"id":"y"} for bob`) {
		t.Fatalf("task result %s", got)
	}
	for range 3 {
		if again := taskOf(t, callURL(t, url, "acme-admin", "purge_ask", final, capsTasks)); again != id {
			t.Fatalf("replay of the final round created task %s, first %s", again, id)
		}
	}
	// The confirm's round replayed after the end: the last answer (the
	// task), never the question again.
	if again := callURL(t, url, "acme-admin", "purge_ask", roundAnswer(args, key, "accept", state), capsTasks); again.res["resultType"] == "input_required" || again.res["resultType"] == "task" && again.res["taskId"] != id {
		t.Fatalf("replay of round 1: %v", again.res)
	}
	time.Sleep(100 * time.Millisecond)
	if n := ct.runs.Load(); n != 1 {
		t.Fatalf("work ran %d times, want 1", n)
	}
}

func TestTasksAfterConfirm(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		ct := &confirmTasks{}
		h := mcphandler.New(ct.config())
		t.Cleanup(func() { h.Close() })
		testConfirmedTask(t, ct, newServer(t, h).URL)
	})
	t.Run("redis", func(t *testing.T) {
		ct := &confirmTasks{}
		cl := newCluster(t, 2, ct.config(), redisClient(t))
		testConfirmedTask(t, ct, cl.proxy.URL)
	})
}

func TestTasksAfterConfirmAndRounds(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		ct := &confirmTasks{}
		h := mcphandler.New(ct.config())
		t.Cleanup(func() { h.Close() })
		testConfirmedRoundsTask(t, ct, newServer(t, h).URL)
	})
	t.Run("redis", func(t *testing.T) {
		ct := &confirmTasks{}
		cl := newCluster(t, 2, ct.config(), redisClient(t))
		testConfirmedRoundsTask(t, ct, cl.proxy.URL)
	})
}

// TestTasksAfterConfirmWithoutExtension: the same confirmed call from a
// client that did not declare the extension runs inline, once.
func TestTasksAfterConfirmWithoutExtension(t *testing.T) {
	ct := &confirmTasks{}
	h := mcphandler.New(ct.config())
	t.Cleanup(func() { h.Close() })
	url := newServer(t, h).URL
	key, state, _ := taskRound(t, callURL(t, url, "acme-admin", "purge", `"arguments":{}`, capsNoTasks))
	for range 2 {
		r := callURL(t, url, "acme-admin", "purge", roundAnswer(`{}`, key, "accept", state), capsNoTasks)
		if r.code != 0 || r.res["resultType"] != "complete" || !strings.Contains(fmt.Sprint(r.res["content"]), "purged {} for bob") {
			t.Fatalf("confirmed call without the extension: %v %d", r.res, r.code)
		}
	}
	if n := ct.runs.Load(); n != 1 {
		t.Fatalf("ran %d times", n)
	}
}

// TestTasksAfterConfirmAtTheLimit: a confirmed call whose task cannot be
// created (the identity holds its Config.Tasks.MaxPerIdentity) is answered with
// that error and runs nothing; the confirm stands, so the same round
// retried later, once there is room, becomes the one task.
func TestTasksAfterConfirmAtTheLimit(t *testing.T) {
	ct := &confirmTasks{}
	cfg := ct.config()
	cfg.Tasks.MaxPerIdentity = 1
	cfg.Tasks.TTL, cfg.Tasks.ResultRetention = time.Second, time.Millisecond
	h := mcphandler.New(cfg)
	t.Cleanup(func() { h.Close() })
	url := newServer(t, h).URL
	// The first task fills the identity's room.
	key, state, _ := taskRound(t, callURL(t, url, "acme-admin", "purge", `"arguments":{"n":1}`, capsTasks))
	first := taskOf(t, callURL(t, url, "acme-admin", "purge", roundAnswer(`{"n":1}`, key, "accept", state), capsTasks))
	completedText(t, url, "acme-admin", first)

	key, state, _ = taskRound(t, callURL(t, url, "acme-admin", "purge", `"arguments":{"n":2}`, capsTasks))
	retry := roundAnswer(`{"n":2}`, key, "accept", state)
	for range 2 {
		if r := callURL(t, url, "acme-admin", "purge", retry, capsTasks); r.code != int(mcphandler.CodeRateLimited) {
			t.Fatalf("confirmed call at the limit: %v %d", r.res, r.code)
		}
	}
	if n := ct.runs.Load(); n != 1 {
		t.Fatalf("work ran %d times, want 1", n)
	}
	// Once the first task is gone, the same confirmed round runs, once.
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := callURL(t, url, "acme-admin", "purge", retry, capsTasks)
		if r.code == 0 {
			id := taskOf(t, r)
			completedText(t, url, "acme-admin", id)
			if again := taskOf(t, callURL(t, url, "acme-admin", "purge", retry, capsTasks)); again != id {
				t.Fatalf("replay created %s, first %s", again, id)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still refused: %v %d", r.res, r.code)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := ct.runs.Load(); n != 2 {
		t.Fatalf("work ran %d times, want 2", n)
	}
}

// TestTasksAfterApproval: on 2026-07-28, an approved call of a tool with
// task support becomes a task once approved, and the approval is used
// once: replays on either replica get the same task.
func TestTasksAfterApproval(t *testing.T) {
	ct := &confirmTasks{}
	rig := newApprovalRig(t, 2, 5*time.Second, func(cfg *mcphandler.Config) { cfg.ListTools = ct.tools })
	caps := `{"extensions":{"io.modelcontextprotocol/tasks":{}},"elicitation":{"url":{}}}`
	url := rig.cl.proxy.URL
	key, state, req := taskRound(t, callURL(t, url, "acme-viewer", "purge", `"arguments":{"id":"z"}`, caps))
	page := req["params"].(map[string]any)["url"].(string)
	decideLater(t, rig.stores[1], strings.TrimPrefix(page, approvalPage), true)
	retry := `"arguments":{"id":"z"},"inputResponses":{"` + key + `":{"action":"accept"}},"requestState":"` + state + `"`
	id := taskOf(t, callURL(t, url, "acme-viewer", "purge", retry, caps))
	if got := completedText(t, url, "acme-viewer", id); !strings.Contains(got, `purged {"id":"z"} for alice`) {
		t.Fatalf("task result %s", got)
	}
	for range 3 {
		if again := taskOf(t, callURL(t, url, "acme-viewer", "purge", retry, caps)); again != id {
			t.Fatalf("replay created %s, first %s", again, id)
		}
	}
	// The same call repeated without the state: the approval was used.
	if r := callURL(t, url, "acme-viewer", "purge", `"arguments":{"id":"z"}`, caps); r.res["resultType"] == "task" {
		t.Fatalf("repeat after the approval made another task: %v", r.res)
	}
	time.Sleep(100 * time.Millisecond)
	if n := ct.runs.Load(); n != 1 {
		t.Fatalf("work ran %d times, want 1", n)
	}
}

// TestTasksAfterApprovalByRepeat: a call repeated, without any
// requestState, once its approval was given becomes a task: from a client
// that declared the tasks extension but not URL mode (sent to the page in
// a tool result), and from one that did (asked in an input_required
// round it never retried). A second repeat finds the approval used.
func TestTasksAfterApprovalByRepeat(t *testing.T) {
	for _, caps := range []string{capsTasks, `{"extensions":{"io.modelcontextprotocol/tasks":{}},"elicitation":{"url":{}}}`} {
		ct := &confirmTasks{}
		rig := newApprovalRig(t, 2, 5*time.Second, func(cfg *mcphandler.Config) { cfg.ListTools = ct.tools })
		url := rig.cl.proxy.URL
		r := callURL(t, url, "acme-viewer", "purge", `"arguments":{"id":"r"}`, caps)
		text := fmt.Sprint(r.res)
		at := strings.Index(text, approvalPage)
		if r.code != 0 || at < 0 {
			t.Fatalf("first call: %v %d", r.res, r.code)
		}
		id := strings.FieldsFunc(text[at+len(approvalPage):], func(c rune) bool { return c == ' ' || c == ']' })[0]
		if _, err := rig.stores[1].Decide(context.Background(), id, bobApproves, true); err != nil {
			t.Fatal(err)
		}
		task := taskOf(t, callURL(t, url, "acme-viewer", "purge", `"arguments":{"id":"r"}`, caps))
		if got := completedText(t, url, "acme-viewer", task); !strings.Contains(got, `purged {"id":"r"} for alice`) {
			t.Fatalf("task result %s", got)
		}
		if r := callURL(t, url, "acme-viewer", "purge", `"arguments":{"id":"r"}`, caps); r.res["resultType"] == "task" {
			t.Fatalf("second repeat made another task: %v", r.res)
		}
		if n := ct.runs.Load(); n != 1 {
			t.Fatalf("work ran %d times, want 1", n)
		}
	}
}

// TestTasksAfterConfirmStoreCut: the retry that turns a confirmed round
// into its task has its store connection cut mid-operation, at a sweep of
// byte offsets (the confirm's nonce read, the task's creation, the nonce's
// close; go-redis sends a command again when its connection broke, so a
// script may reach Redis twice), and once finds the store down. An
// attempt may fail, and then runs nothing; once the store answers, the
// same retry becomes exactly one task, and every replay returns it.
func TestTasksAfterConfirmStoreCut(t *testing.T) {
	ct := &confirmTasks{}
	p := redistest.NewProxy(t, "")
	cl := newCluster(t, 2, ct.config(), func() redis.UniversalClient { return p.Client(t) })
	url := cl.proxy.URL
	cutRetries := 0
	for i, at := range []int{1, 20, 60, 120, 250, 500, 1000, 2000, 4000} {
		args := fmt.Sprintf(`{"n":%d}`, i)
		key, state, _ := taskRound(t, callURL(t, url, "acme-admin", "purge", `"arguments":`+args, capsTasks))
		retry := roundAnswer(args, key, "accept", state)
		before := ct.runs.Load()
		cuts := p.Cuts()
		p.CutAfter(at)
		first := callURL(t, url, "acme-admin", "purge", retry, capsTasks)
		p.ClearCuts()
		if p.Cuts() > cuts {
			cutRetries++
		}
		t.Logf("cut at %d bytes: cut %v, first attempt error %d", at, p.Cuts() > cuts, first.code)
		var id string
		if first.code == 0 {
			id = taskOf(t, first)
		}
		for deadline := time.Now().Add(10 * time.Second); id == ""; time.Sleep(50 * time.Millisecond) {
			if r := callURL(t, url, "acme-admin", "purge", retry, capsTasks); r.code == 0 {
				id = taskOf(t, r)
			} else if time.Now().After(deadline) {
				t.Fatalf("cut at %d bytes: still refused: %v %d", at, r.res, r.code)
			}
		}
		if got := completedText(t, url, "acme-admin", id); !strings.Contains(got, "purged "+args) {
			t.Fatalf("cut at %d bytes: the task's result %q", at, got)
		}
		for range 2 {
			if again := taskOf(t, callURL(t, url, "acme-admin", "purge", retry, capsTasks)); again != id {
				t.Fatalf("cut at %d bytes: a replay made task %s, the first %s", at, again, id)
			}
		}
		if n := ct.runs.Load() - before; n != 1 {
			t.Fatalf("cut at %d bytes (first attempt: error %d): the work ran %d times, want 1", at, first.code, n)
		}
	}
	// Down for the first attempt: refused, nothing runs; up again: one task.
	key, state, _ := taskRound(t, callURL(t, url, "acme-admin", "purge", `"arguments":{"n":"down"}`, capsTasks))
	retry := roundAnswer(`{"n":"down"}`, key, "accept", state)
	before := ct.runs.Load()
	p.RefuseConnections()
	p.CutAll()
	if r := callURL(t, url, "acme-admin", "purge", retry, capsTasks); r.code == 0 {
		t.Fatalf("with the store down: %v", r.res)
	}
	p.AcceptConnections()
	var id string
	for deadline := time.Now().Add(10 * time.Second); id == ""; time.Sleep(50 * time.Millisecond) {
		if r := callURL(t, url, "acme-admin", "purge", retry, capsTasks); r.code == 0 {
			id = taskOf(t, r)
		} else if time.Now().After(deadline) {
			t.Fatalf("the store is back, still refused: %v %d", r.res, r.code)
		}
	}
	completedText(t, url, "acme-admin", id)
	if again := taskOf(t, callURL(t, url, "acme-admin", "purge", retry, capsTasks)); again != id {
		t.Fatalf("a replay after the outage made task %s, the first %s", again, id)
	}
	if n := ct.runs.Load() - before; n != 1 {
		t.Fatalf("across the outage the work ran %d times, want 1", n)
	}
	if cutRetries < 5 {
		t.Fatalf("only %d of the retries had their store connection cut: the sweep tests nothing", cutRetries)
	}
}
