package mcphandler_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
)

// The attacker's tests of the tasks wire: odd and huge params, duplicated
// and raced updates and cancels.

func TestAttackTaskParams(t *testing.T) {
	tf := &taskFixture{}
	h := mcphandler.New(tf.config())
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	id := createTask(t, srv, "acme-viewer", "ask")
	awaitStatus(t, srv, "acme-viewer", id, "input_required", 5*time.Second)
	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprintf(`"k%d":{}`, i)
	}
	for _, c := range []struct{ method, params string }{
		{"tasks/get", `"taskId":"` + strings.Repeat("9", 1<<20) + `"`},
		{"tasks/get", `"taskId":["` + id + `"]`},
		{"tasks/get", `"taskId":null`},
		{"tasks/cancel", `"taskId":{"$ne":""}`},
		{"tasks/update", `"taskId":"` + id + `"`},
		{"tasks/update", `"taskId":"` + id + `","inputResponses":[]`},
		{"tasks/update", `"taskId":"` + id + `","inputResponses":{` + strings.Join(many, ",") + `}`},
		{"tasks/update", `"taskId":"` + id + `","inputResponses":{"sure":{"action":"accept"},"sure":{"action":"decline"}}`},
		{"tasks/update", `"taskId":"` + id + `","inputResponses":{"` + strings.Repeat("k", 129) + `":{}}`},
		{"tasks/update", `"taskId":"` + id + `","inputResponses":{"sure":{"pad":"` + strings.Repeat("x", 64<<10) + `"}}`},
	} {
		_, b, r := taskCall(t, srv, "acme-viewer", c.method, c.params, capsTasks, nil)
		if r.Error == nil || r.Error.Code != -32602 || len(b) > 600 {
			t.Errorf("%s %.80s: %.300s", c.method, c.params, b)
		}
	}
	if res := getTask(t, srv, "acme-viewer", id); res["status"] != "input_required" {
		t.Fatalf("refused updates changed the task: %v", res)
	}
}

// Many concurrent tasks/update with the same answer: every one is acked,
// the work gets the answer once and runs once.
func TestAttackTaskConcurrentUpdates(t *testing.T) {
	tf := &taskFixture{}
	h := mcphandler.New(tf.config())
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	id := createTask(t, srv, "acme-viewer", "ask")
	awaitStatus(t, srv, "acme-viewer", id, "input_required", 5*time.Second)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			answer := []string{`{"action":"accept","content":{"confirm":true}}`, `{"action":"decline"}`}[i%2]
			_, b, r := taskCall(t, srv, "acme-viewer", "tasks/update", `"taskId":"`+id+`","inputResponses":{"sure":`+answer+`}`, capsTasks, nil)
			if r.Result == nil {
				t.Errorf("update %d: %s", i, b)
			}
		})
	}
	wg.Wait()
	res := awaitStatus(t, srv, "acme-viewer", id, "completed", 5*time.Second)
	text := fmt.Sprint(res["result"])
	if !strings.Contains(text, "answer accept") && !strings.Contains(text, "answer decline") {
		t.Fatalf("result %v", res)
	}
	time.Sleep(100 * time.Millisecond)
	if n := tf.runs.Load(); n != 1 {
		t.Fatalf("ran %d times", n)
	}
	if again := getTask(t, srv, "acme-viewer", id); fmt.Sprint(again["result"]) != text {
		t.Fatalf("the result changed: %v then %v", text, again["result"])
	}
}

// Cancels racing the task's own end: whichever wins, the task ends once
// and never changes after.
func TestAttackTaskCancelRace(t *testing.T) {
	tf := &taskFixture{}
	h := mcphandler.New(tf.config())
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	for range 10 {
		id := createTask(t, srv, "acme-viewer", "quick")
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				_, b, r := taskCall(t, srv, "acme-viewer", "tasks/cancel", `"taskId":"`+id+`"`, capsTasks, nil)
				if r.Result == nil {
					t.Errorf("cancel: %s", b)
				}
			})
		}
		wg.Wait()
		first := getTask(t, srv, "acme-viewer", id)
		if first["status"] == "working" {
			first = awaitStatus(t, srv, "acme-viewer", id, "completed", 5*time.Second)
		}
		time.Sleep(20 * time.Millisecond)
		second := getTask(t, srv, "acme-viewer", id)
		if (first["status"] != "cancelled" && first["status"] != "completed") || first["status"] != second["status"] ||
			fmt.Sprint(first["result"]) != fmt.Sprint(second["result"]) {
			t.Fatalf("raced cancel: %v then %v", first, second)
		}
		if first["status"] == "cancelled" && first["result"] != nil {
			t.Fatalf("a cancelled task carries a result: %v", first)
		}
	}
}
