package mcphandler_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcphandler/mcphandler"
)

// serveModern sends one 2026-07-28 tools/call straight to h (no network, so
// it runs inside a synctest bubble) and returns the status and the decoded
// body.
func serveModern(t *testing.T, h http.Handler, token string, id int, params string) (int, map[string]any) {
	t.Helper()
	body := modernBody(id, "tools/call", params, `{"elicitation":{}}`)
	var p struct {
		Params struct{ Name string } `json:"params"`
	}
	json.Unmarshal([]byte(body), &p)
	req := httptest.NewRequest("POST", "/", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", p.Params.Name)
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	return rec.Code, m
}

// askConfirm runs round 1 of a confirmed call and returns the input key and
// the requestState.
func askConfirm(t *testing.T, h http.Handler, token, tool, args string) (string, string) {
	t.Helper()
	_, m := serveModern(t, h, token, 1, `"name":"`+tool+`","arguments":`+args)
	res, _ := m["result"].(map[string]any)
	if res == nil || res["resultType"] != "input_required" {
		t.Fatalf("round 1: %v", m)
	}
	reqs := res["inputRequests"].(map[string]any)
	for k := range reqs {
		return k, res["requestState"].(string)
	}
	t.Fatal("no input request")
	return "", ""
}

func answerParams(tool, args, key, action, state string) string {
	content := ""
	if action == "accept" {
		content = `,"content":{"confirm":true}`
	}
	return `"name":"` + tool + `","arguments":` + args + `,"inputResponses":{"` + key + `":{"action":"` + action + `"` + content + `}},"requestState":"` + state + `"`
}

func TestModernConfirmAtMostOnce(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	key, state := askConfirm(t, h, "acme-admin", "delete_thing", `{"id":"x"}`)
	if key != mcphandler.ReservedKeyPrefix+"confirm" {
		t.Fatalf("input key %q", key)
	}
	if ev := f.event(t); ev.Outcome != mcphandler.OutcomeInputRequired || ev.ConfirmID == "" {
		t.Fatalf("round 1 event %+v", ev)
	}
	accept := answerParams("delete_thing", `{"id":"x"}`, key, "accept", state)
	_, m := serveModern(t, h, "acme-admin", 2, accept)
	if resultText(m) != "delete_thing ran for acme" {
		t.Fatalf("retry: %v", m)
	}
	first := f.event(t)
	// The client lost the response and retries the same request: it gets
	// the recorded result, and nothing runs again.
	_, again := serveModern(t, h, "acme-admin", 3, accept)
	if resultText(again) != "delete_thing ran for acme" {
		t.Fatalf("second retry: %v", again)
	}
	second := f.event(t)
	if n := f.count("delete_thing"); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
	if first.Outcome != mcphandler.OutcomeConfirmed || second.Outcome != mcphandler.OutcomeReplayed || first.ConfirmID != second.ConfirmID {
		t.Fatalf("events %+v then %+v", first, second)
	}
	// A decline sent later with the same state changes nothing.
	_, m = serveModern(t, h, "acme-admin", 4, answerParams("delete_thing", `{"id":"x"}`, key, "decline", state))
	if resultText(m) != "delete_thing ran for acme" || f.count("delete_thing") != 1 {
		t.Fatalf("decline after the run: %v", m)
	}
}

func TestModernConfirmDeclineIsFinal(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	key, state := askConfirm(t, h, "acme-admin", "delete_thing", `{}`)
	_, m := serveModern(t, h, "acme-admin", 2, answerParams("delete_thing", `{}`, key, "decline", state))
	if !strings.Contains(resultText(m), "declined") {
		t.Fatalf("decline: %v", m)
	}
	// Replaying the state with an accept cannot turn the decline around.
	_, m = serveModern(t, h, "acme-admin", 3, answerParams("delete_thing", `{}`, key, "accept", state))
	if !strings.Contains(resultText(m), "declined") || f.count("delete_thing") != 0 {
		t.Fatalf("accept after decline: %v (ran %d)", m, f.count("delete_thing"))
	}
}

func TestModernConfirmStateIsBound(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	key, state := askConfirm(t, h, "acme-admin", "delete_thing", `{"id":"x"}`)
	for name, tc := range map[string]struct{ token, tool, args string }{
		"other arguments": {"acme-admin", "delete_thing", `{"id":"y"}`},
		"other identity":  {"acme-viewer", "delete_thing", `{"id":"x"}`},
		"other tenant":    {"globex-editor", "delete_thing", `{"id":"x"}`},
	} {
		status, m := serveModern(t, h, tc.token, 2, answerParams(tc.tool, tc.args, key, "accept", state))
		if status != 400 || errorCode(m) != -32602 {
			t.Errorf("%s: %d %v", name, status, m)
		}
	}
	if n := f.count("delete_thing"); n != 0 {
		t.Fatalf("a moved state ran the tool %d times", n)
	}
}

func TestModernConfirmExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fixture{}
		cfg := f.config()
		cfg.ConfirmTimeout = time.Minute
		h := mcphandler.New(cfg)
		key, state := askConfirm(t, h, "acme-admin", "delete_thing", `{}`)
		time.Sleep(61 * time.Second)
		status, m := serveModern(t, h, "acme-admin", 2, answerParams("delete_thing", `{}`, key, "accept", state))
		if status != 400 || errorCode(m) != -32602 || f.count("delete_thing") != 0 {
			t.Fatalf("expired state: %d %v (ran %d)", status, m, f.count("delete_thing"))
		}
	})
}

func TestModernConfirmConcurrentRetries(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	key, state := askConfirm(t, h, "acme-admin", "delete_thing", `{}`)
	accept := answerParams("delete_thing", `{}`, key, "accept", state)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() { serveModern(t, h, "acme-admin", 10+i, accept) })
	}
	wg.Wait()
	if n := f.count("delete_thing"); n != 1 {
		t.Fatalf("16 concurrent retries ran the tool %d times, want 1", n)
	}
}

// Between the ask and the answer the caller lost the tool: the retry is
// resolved with the caller's identity of now and nothing runs.
func TestModernConfirmRechecksVisibility(t *testing.T) {
	f := &fixture{}
	cfg := f.config()
	var mu sync.Mutex
	role := "admin"
	cfg.Authenticate = func(r *http.Request) (mcphandler.Identity, error) {
		id, err := bearer(r)
		mu.Lock()
		id.Role = role
		mu.Unlock()
		return id, err
	}
	cfg.BeforeCall = func(context.Context, *mcphandler.ToolCall) (mcphandler.Decision, error) {
		return mcphandler.Confirm("run the admin op?"), nil
	}
	h := mcphandler.New(cfg)
	key, state := askConfirm(t, h, "acme-admin", "admin_op", `{}`)
	mu.Lock()
	role = "viewer"
	mu.Unlock()
	status, m := serveModern(t, h, "acme-admin", 2, answerParams("admin_op", `{}`, key, "accept", state))
	if status != 400 || errorCode(m) != -32602 || f.count("admin_op") != 0 {
		t.Fatalf("after demotion: %d %v (ran %d)", status, m, f.count("admin_op"))
	}
}

// A confirm is answered only after this server asked it: an accept sent up
// front, without the sealed state of the ask, runs nothing.
func TestModernConfirmUnaskedAnswer(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	params := `"name":"delete_thing","arguments":{},"inputResponses":{"confirm":{"action":"accept","content":{"confirm":true}}}`
	_, m := serveModern(t, h, "acme-admin", 1, params)
	res, _ := m["result"].(map[string]any)
	if res == nil || res["resultType"] != "input_required" || f.count("delete_thing") != 0 {
		t.Fatalf("an unasked accept: %v (ran %d)", m, f.count("delete_thing"))
	}
}
