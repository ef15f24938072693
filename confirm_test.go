package mcphandler_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unicode"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/mcptest"
)

func TestConfirmAnswerIsSingleUse(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	ctx := context.Background()
	c := connect(t, h, "acme-admin", mcptest.WithElicitationHandler(answer("accept", map[string]any{"confirm": true})))
	if res, err := c.CallTool(ctx, "delete_thing", nil); err != nil || res.IsError {
		t.Fatalf("confirmed call: %+v, %v", res, err)
	}
	id := confirmID(t, c)
	if !strings.HasPrefix(string(id), `"mcphc-`) || len(id) < 30 {
		t.Fatalf("confirm id %s is not an unguessable string", id)
	}
	// OnCall runs after the response is flushed: wait for its event
	// before the replays, whose events would otherwise race it.
	first := f.event(t)
	// The same accept again, through the same session: refused, nothing runs.
	if err := c.Respond(ctx, id, accept); !isHTTP(err, 400) {
		t.Fatalf("replayed accept: %v, want 400", err)
	}
	// An accept nobody asked for.
	if err := c.Respond(ctx, json.RawMessage(`"mcphc-AAAAAAAAAAAAAAAAAAAAAAAAAA"`), accept); !isHTTP(err, 400) {
		t.Fatalf("unsolicited accept: %v, want 400", err)
	}
	if n := f.count("delete_thing"); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
	second := f.event(t)
	cid := strings.Trim(string(id), `"`)
	if first.Outcome != mcphandler.OutcomeConfirmed || first.ConfirmID != cid ||
		second.Outcome != mcphandler.OutcomeReplayRefused || second.ConfirmID != cid {
		t.Fatalf("events %+v then %+v", first, second)
	}
}

// An answer is accepted only from the identity and session it was asked
// of; the confirm stays pending for the real answer.
func TestConfirmAnswerFromSomeoneElse(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	ctx := context.Background()
	bobOther := connect(t, h, "acme-admin")
	carol := connect(t, h, "globex-editor")
	var bob *mcptest.Client
	bob = connect(t, h, "acme-admin", mcptest.WithElicitationHandler(func(ctx context.Context, _ mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		id := confirmID(t, bob)
		// bob's other session, carol's session, and carol in bob's session
		if err := bobOther.Respond(ctx, id, accept); !isHTTP(err, 400) {
			t.Errorf("answer from bob's other session: %v, want 400", err)
		}
		if err := carol.Respond(ctx, id, accept); !isHTTP(err, 400) {
			t.Errorf("answer from carol's session: %v, want 400", err)
		}
		intruder := mcptest.New(t, h, mcptest.WithToken("globex-editor"))
		intruder.SetSessionID(bob.SessionID())
		intruder.SetProtocolVersion("2025-11-25")
		if err := intruder.Respond(ctx, id, accept); !isHTTP(err, 404) {
			t.Errorf("carol answering in bob's session: %v, want 404", err)
		}
		return mcptest.ElicitResult{Action: "decline"}, nil
	}))
	res, err := bob.CallTool(ctx, "delete_thing", nil)
	if err != nil || !res.IsError || !strings.Contains(res.Text(), "declined") {
		t.Fatalf("bob's own decline must decide: %+v, %v", res, err)
	}
	if n := f.count("delete_thing"); n != 0 {
		t.Fatalf("ran %d times", n)
	}
}

func TestConfirmConcurrentAnswersRunOnce(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	ctx := context.Background()
	var accepted atomic.Int32
	var c *mcptest.Client
	c = connect(t, h, "acme-admin", mcptest.WithElicitationHandler(func(ctx context.Context, _ mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		id := confirmID(t, c)
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				if err := c.Respond(ctx, id, accept); err == nil {
					accepted.Add(1)
				} else if !isHTTP(err, 400) {
					t.Errorf("concurrent answer: %v", err)
				}
			})
		}
		wg.Wait()
		return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
	}))
	_, err := c.CallTool(ctx, "delete_thing", nil)
	if err != nil && !isHTTP(err, 400) { // the client's own answer comes last and is refused
		t.Fatal(err)
	}
	// That refusal may end the client's call before the tool ran: wait for
	// the call's event.
	waitOutcome(t, f, mcphandler.OutcomeConfirmed)
	if accepted.Load() != 1 {
		t.Fatalf("%d answers accepted, want 1", accepted.Load())
	}
	if n := f.count("delete_thing"); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
}

func TestConfirmRechecksVisibility(t *testing.T) {
	f := &fixture{}
	cfg := f.config()
	var mu sync.Mutex
	roles := map[string]string{"bob": "admin"}
	cfg.Authenticate = func(r *http.Request) (mcphandler.Identity, error) {
		id, err := bearer(r)
		mu.Lock()
		if role, ok := roles[id.Subject]; ok {
			id.Role = role
		}
		mu.Unlock()
		return id, err
	}
	cfg.BeforeCall = func(context.Context, *mcphandler.ToolCall) (mcphandler.Decision, error) {
		return mcphandler.Confirm("run the admin op?"), nil
	}
	h := mcphandler.New(cfg)
	c := connect(t, h, "acme-admin", mcptest.WithElicitationHandler(func(ctx context.Context, _ mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		mu.Lock()
		roles["bob"] = "viewer" // demoted while the human thinks
		mu.Unlock()
		return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
	}))
	_, err := c.CallTool(context.Background(), "admin_op", nil)
	if !isRPC(err, -32602) {
		t.Fatalf("call after demotion: %v, want the unknown-tool error", err)
	}
	if n := f.count("admin_op"); n != 0 {
		t.Fatalf("ran %d times after the role was revoked", n)
	}
	if ev := f.event(t); ev.Outcome != mcphandler.OutcomeRevoked || ev.ConfirmID == "" {
		t.Fatalf("event %+v", ev)
	}
}

func TestConfirmTypedForm(t *testing.T) {
	f := &fixture{}
	cfg := f.config()
	cfg.BeforeCall = func(_ context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
		var a struct{ ID string }
		json.Unmarshal(call.Arguments, &a)
		return mcphandler.Confirm("Type "+a.ID+" to delete it").
			WithForm(elicitation.TypeToConfirm("id", "Document id", a.ID), map[string]any{"id": a.ID}), nil
	}
	h := mcphandler.New(cfg)
	for typed, runs := range map[string]int64{"a1": 1, "a2": 0} {
		c := connect(t, h, "acme-admin", mcptest.WithElicitationHandler(func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			if !strings.Contains(string(p.RequestedSchema), `"id"`) {
				t.Errorf("form %s", p.RequestedSchema)
			}
			return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"id": typed}}, nil
		}))
		before := f.count("delete_thing")
		res, err := c.CallTool(context.Background(), "delete_thing", map[string]any{"id": "a1"})
		if err != nil || res.IsError != (runs == 0) || f.count("delete_thing")-before != runs {
			t.Fatalf("typed %q: %+v, %v, ran %d", typed, res, err, f.count("delete_thing")-before)
		}
	}
}

func TestConfirmDestructivePolicy(t *testing.T) {
	f := &fixture{}
	cfg := f.config()
	cfg.BeforeCall = mcphandler.ConfirmDestructive(func(_ context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
		if call.Tool.Name == "acme_only" {
			return mcphandler.Deny("no"), nil
		}
		return mcphandler.Allow(), nil
	})
	var asked []string
	c := connect(t, mcphandler.New(cfg), "acme-admin", mcptest.WithElicitationHandler(func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		asked = append(asked, p.Message)
		return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
	}))
	ctx := context.Background()
	evil := "x\x1b[2J\u202e" + strings.Repeat("A", 2000)
	if _, err := c.CallTool(ctx, "delete_thing", map[string]any{"id": evil}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallTool(ctx, "read", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallTool(ctx, "acme_only", nil); !isRPC(err, mcphandler.CodeForbidden) {
		t.Fatalf("the host's deny must win: %v", err)
	}
	if len(asked) != 1 {
		t.Fatalf("asked %d times, want only for the destructive tool", len(asked))
	}
	msg := asked[0]
	if !strings.Contains(msg, "delete_thing") || len([]rune(msg)) > 520 {
		t.Fatalf("message %q (%d runes)", msg, len([]rune(msg)))
	}
	for _, r := range msg {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			t.Fatalf("message carries control character %U", r)
		}
	}
}

// The human never answers: after ConfirmTimeout (two minutes, on the
// bubble's fake clock) the call ends timed_out and the tool never runs.
func TestConfirmTimeoutSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fixture{}
		cfg := f.config()
		cfg.ConfirmTimeout = 2 * time.Minute
		h := mcphandler.New(cfg)
		post := func(body, sid string) *httptest.ResponseRecorder {
			req := httptest.NewRequest("POST", "/", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer acme-admin")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if sid != "" {
				req.Header.Set("Mcp-Session-Id", sid)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec
		}
		init := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`, "")
		sid := init.Header().Get("Mcp-Session-Id")
		done := make(chan *httptest.ResponseRecorder)
		go func() {
			done <- post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"delete_thing"}}`, sid)
		}()
		synctest.Wait() // the elicitation is out; the call waits
		time.Sleep(2*time.Minute + time.Second)
		rec := <-done
		if !strings.Contains(rec.Body.String(), "elicitation/create") || !strings.Contains(rec.Body.String(), "timed out") {
			t.Fatalf("stream %q", rec.Body)
		}
		if ev := f.event(t); ev.Outcome != mcphandler.OutcomeTimedOut || f.count("delete_thing") != 0 {
			t.Fatalf("event %+v, ran %d", ev, f.count("delete_thing"))
		}
	})
}
