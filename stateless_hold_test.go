package mcphandler_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

// holder is a host with one tool, "relay", that works like a gateway
// relaying another server's rounds: each run does its work once (counted),
// then either asks the next of steps questions — a raw elicitation under
// the key "ext/<step>", its step carried in SetRoundState — or completes.
// On a retry it reads the step from RoundState and the answer with
// InputResponse, and never starts over.
type holder struct {
	steps   int
	work    atomic.Int64
	mu      sync.Mutex
	answers []string // the answers read, in order
	confirm bool     // BeforeCall confirms the tool
	errs    []error  // what SetRoundState returned
}

func (hd *holder) config() mcphandler.Config {
	return mcphandler.Config{
		Name: "holder", Version: "1",
		Authenticate: bearer,
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{{Name: "relay", Handler: hd.run}}, nil
		},
		BeforeCall: func(ctx context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
			if hd.confirm {
				return mcphandler.Confirm("Relay?"), nil
			}
			return mcphandler.Allow(), nil
		},
		ConfirmTimeout: time.Minute,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func (hd *holder) run(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
	x := call.Exchange
	step := 0
	if b := x.RoundState(); b != nil {
		step = int(b[0])
		a, ok := x.InputResponse("ext/" + strconv.Itoa(step))
		if !ok {
			return mcphandler.ErrorResult("no answer to step " + strconv.Itoa(step)), nil
		}
		hd.mu.Lock()
		hd.answers = append(hd.answers, string(a))
		hd.mu.Unlock()
	}
	hd.work.Add(1) // what must not run twice for one answer
	if step == hd.steps {
		return mcphandler.TextResult("done after " + strconv.Itoa(step) + " steps"), nil
	}
	step++
	err := x.SetRoundState([]byte{byte(step)})
	hd.mu.Lock()
	hd.errs = append(hd.errs, err)
	hd.mu.Unlock()
	if err != nil {
		return nil, err
	}
	_, err = x.Ask(ctx, mcphandler.Input{Key: "ext/" + strconv.Itoa(step), Request: &mcphandler.ServerRequest{
		Method: "elicitation/create",
		Params: json.RawMessage(`{"mode":"form","message":"step ` + strconv.Itoa(step) + `","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}`),
	}})
	return nil, err
}

// round is one input_required answer: its keys and requestState.
type round struct {
	keys  []string
	state string
}

func inputRequired(t *testing.T, m map[string]any) round {
	t.Helper()
	res, _ := m["result"].(map[string]any)
	if res == nil || res["resultType"] != "input_required" {
		t.Fatalf("not input_required: %v", m)
	}
	var r round
	for k := range res["inputRequests"].(map[string]any) {
		r.keys = append(r.keys, k)
	}
	r.state, _ = res["requestState"].(string)
	return r
}

// answerAll answers every key of r with an accepted form whose ok is true,
// and carries r's state.
func answerAll(r round) string {
	parts := make([]string, len(r.keys))
	for i, k := range r.keys {
		content := `{"ok":true}`
		if k == mcphandler.ReservedKeyPrefix+"confirm" {
			content = `{"confirm":true}`
		}
		parts[i] = `"` + k + `":{"action":"accept","content":` + content + `}`
	}
	return `"name":"relay","arguments":{},"inputResponses":{` + strings.Join(parts, ",") + `},"requestState":"` + r.state + `"`
}

// A handler that carries state across rounds goes on from where it
// stopped: its work runs once per round, the raw question keeps its key,
// and the answer is read as the client sent it.
func TestRoundStateCarried(t *testing.T) {
	hd := &holder{steps: 2}
	h := mcphandler.New(hd.config())
	defer h.Close()
	_, m := serveModern(t, h, "acme-admin", 1, `"name":"relay","arguments":{}`)
	r1 := inputRequired(t, m)
	if len(r1.keys) != 1 || r1.keys[0] != "ext/1" {
		t.Fatalf("round 1 keys %q", r1.keys)
	}
	req := m["result"].(map[string]any)["inputRequests"].(map[string]any)["ext/1"].(map[string]any)
	if req["method"] != "elicitation/create" || req["params"].(map[string]any)["message"] != "step 1" {
		t.Fatalf("the raw request was not relayed as given: %v", req)
	}
	_, m = serveModern(t, h, "acme-admin", 2, answerAll(r1))
	r2 := inputRequired(t, m)
	if len(r2.keys) != 1 || r2.keys[0] != "ext/2" {
		t.Fatalf("round 2 keys %q", r2.keys)
	}
	_, m = serveModern(t, h, "acme-admin", 3, answerAll(r2))
	if got := resultText(m); got != "done after 2 steps" {
		t.Fatalf("result %q (%v)", got, m)
	}
	if n := hd.work.Load(); n != 3 {
		t.Fatalf("work ran %d times over 3 rounds", n)
	}
	if want := `{"action":"accept","content":{"ok":true}}`; len(hd.answers) != 2 || hd.answers[0] != want || hd.answers[1] != want {
		t.Fatalf("answers read %q", hd.answers)
	}
}

// The requestState of a round that carries handler state is taken once:
// a retry of an answered round runs nothing — the last round's gets its
// recorded input_required answer, a finished call's its result, an older
// one a refusal — and of concurrent retries one runs.
func TestAttackRoundStateSingleUse(t *testing.T) {
	hd := &holder{steps: 2}
	h := mcphandler.New(hd.config())
	defer h.Close()
	_, m := serveModern(t, h, "acme-admin", 1, `"name":"relay","arguments":{}`)
	r1 := inputRequired(t, m)

	// Concurrent retries of round 1: one runs.
	var wg sync.WaitGroup
	outs := make([]map[string]any, 4)
	for i := range outs {
		wg.Go(func() { _, outs[i] = serveModern(t, h, "acme-admin", 10+i, answerAll(r1)) })
	}
	wg.Wait()
	if n := hd.work.Load(); n != 2 {
		t.Fatalf("work ran %d times: round 1 once, its retry once", n)
	}
	var r2 round
	for _, o := range outs {
		if res, _ := o["result"].(map[string]any); res != nil && res["resultType"] == "input_required" {
			r2 = inputRequired(t, o)
		}
	}
	if r2.state == "" {
		t.Fatalf("no retry got round 2: %v", outs)
	}
	// Round 1 again, now that round 2 is asked: the same round 2, nothing runs.
	_, m = serveModern(t, h, "acme-admin", 20, answerAll(r1))
	if again := inputRequired(t, m); again.state != r2.state {
		t.Fatalf("round 1 replayed: %v", m)
	}
	_, m = serveModern(t, h, "acme-admin", 21, answerAll(r2))
	if got := resultText(m); got != "done after 2 steps" {
		t.Fatalf("result %q", got)
	}
	// After the end: round 2's state gets the result, round 1's too; nothing runs.
	for i, st := range []round{r2, r1} {
		_, m = serveModern(t, h, "acme-admin", 30+i, answerAll(st))
		if got := resultText(m); got != "done after 2 steps" {
			t.Fatalf("replay %d after the end: %v", i, m)
		}
	}
	if n := hd.work.Load(); n != 3 {
		t.Fatalf("work ran %d times, want 3", n)
	}
}

// A held state is bound like any other: to the caller, the tool's name and
// the arguments; flipped, moved or expired, it opens nothing and runs
// nothing.
func TestAttackRoundStateBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hd := &holder{steps: 1}
		h := mcphandler.New(hd.config())
		defer h.Close()
		_, m := serveModern(t, h, "acme-admin", 1, `"name":"relay","arguments":{}`)
		r1 := inputRequired(t, m)
		flipped := []byte(r1.state)
		flipped[len(flipped)/2] ^= 1
		if flipped[len(flipped)/2] == '"' || flipped[len(flipped)/2] == '\\' {
			flipped[len(flipped)/2] ^= 3
		}
		for name, tc := range map[string]struct{ token, params string }{
			"flipped":         {"acme-admin", answerAll(round{r1.keys, string(flipped)})},
			"other person":    {"acme-viewer", answerAll(r1)},
			"other tenant":    {"globex-editor", answerAll(r1)},
			"other arguments": {"acme-admin", strings.Replace(answerAll(r1), `"arguments":{}`, `"arguments":{"a":1}`, 1)},
		} {
			status, m := serveModern(t, h, tc.token, 2, tc.params)
			if status != 400 || errorCode(m) != -32602 {
				t.Errorf("%s: %d %v", name, status, m)
			}
		}
		time.Sleep(61 * time.Second)
		status, m := serveModern(t, h, "acme-admin", 3, answerAll(r1))
		if status != 400 || errorCode(m) != -32602 {
			t.Errorf("expired: %d %v", status, m)
		}
		if n := hd.work.Load(); n != 1 {
			t.Fatalf("work ran %d times, want only round 1's", n)
		}
	})
}

// A confirmed call whose handler carries state: the confirm's round, then
// the handler's, on the confirm's record; a retry of a passed round runs
// nothing.
func TestRoundStateAfterConfirm(t *testing.T) {
	hd := &holder{steps: 1, confirm: true}
	h := mcphandler.New(hd.config())
	defer h.Close()
	_, m := serveModern(t, h, "acme-admin", 1, `"name":"relay","arguments":{}`)
	r1 := inputRequired(t, m)
	if len(r1.keys) != 1 || r1.keys[0] != mcphandler.ReservedKeyPrefix+"confirm" || hd.work.Load() != 0 {
		t.Fatalf("round 1 %q, work %d", r1.keys, hd.work.Load())
	}
	_, m = serveModern(t, h, "acme-admin", 2, answerAll(r1))
	r2 := inputRequired(t, m)
	if len(r2.keys) != 1 || r2.keys[0] != "ext/1" {
		t.Fatalf("round 2 %q", r2.keys)
	}
	_, m = serveModern(t, h, "acme-admin", 3, answerAll(r2))
	if got := resultText(m); got != "done after 1 steps" {
		t.Fatalf("result %q", got)
	}
	_, m = serveModern(t, h, "acme-admin", 4, answerAll(r2))
	if got := resultText(m); got != "done after 1 steps" || hd.work.Load() != 2 {
		t.Fatalf("replay %q, work %d", got, hd.work.Load())
	}
}

// SetRoundState is refused outside 2026-07-28 rounds and past
// MaxRoundState; on a 2025 session, an Input.Request is asked on the
// call's stream and its raw result returned.
func TestRoundStateBounds(t *testing.T) {
	var setErr, bigErr error
	var got mcphandler.Answer
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{{Name: "t", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				setErr = call.Exchange.SetRoundState([]byte("x"))
				if b := call.Exchange.RoundState(); b != nil {
					return nil, errors.New("a 2025 call has round state")
				}
				a, err := call.Exchange.Ask(ctx, mcphandler.Input{Key: "k", Request: &mcphandler.ServerRequest{Method: "elicitation/create",
					Params: json.RawMessage(`{"message":"raw?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}`)}})
				if err != nil {
					return nil, err
				}
				got = a[0]
				return mcphandler.TextResult("ok"), nil
			}}, {Name: "big", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				bigErr = call.Exchange.SetRoundState(make([]byte, mcphandler.MaxRoundState+1))
				if err := call.Exchange.SetRoundState(make([]byte, mcphandler.MaxRoundState)); err != nil {
					return nil, err
				}
				return mcphandler.TextResult("ok"), nil
			}}}, nil
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	defer h.Close()
	c := connect(t, h, "acme-admin", mcptest.WithElicitationHandler(answer("accept", map[string]any{"ok": true})))
	if res, err := c.CallTool(context.Background(), "t", nil); err != nil || res.IsError {
		t.Fatalf("%+v %v", res, err)
	}
	if setErr == nil {
		t.Fatal("SetRoundState on a 2025 session did not fail")
	}
	var r struct {
		Action  string         `json:"action"`
		Content map[string]any `json:"content"`
	}
	if json.Unmarshal(got.Result, &r) != nil || r.Action != "accept" || r.Content["ok"] != true {
		t.Fatalf("raw result %s", got.Result)
	}
	_, m := serveModern(t, h, "acme-admin", 1, `"name":"big","arguments":{}`)
	if resultText(m) != "ok" || bigErr == nil {
		t.Fatalf("%v %v", m, bigErr)
	}
}
