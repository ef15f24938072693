package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
)

// CallToolRound stops at the library's first input_required round, asks
// the Asker nothing, and returns the question and the state; the retry
// that carries the answer and the state byte for byte completes the call,
// which the tool finished once.
func TestCallToolRound(t *testing.T) {
	var ran atomic.Int32
	twice := mcphandler.Tool{Name: "two", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		var got []string
		for _, k := range []string{"a", "b"} {
			res, err := call.Elicit(ctx, mcphandler.ElicitRequest{Key: k, Message: "Say " + k,
				Schema: elicitation.NewSchema().String("v", elicitation.Required())})
			if err != nil {
				return nil, err
			}
			got = append(got, k+"="+res.Content["v"].(string))
		}
		ran.Add(1)
		return mcphandler.TextResult(strings.Join(got, " ")), nil
	}}
	l := newLib(t, mcphandler.Config{ListTools: tools(twice)})
	a := &asker{}
	ep := l.endpoint(upstream.Stateless)
	var retry upstream.Retry
	for round, key := range []string{"a", "b"} {
		res, ir, err := upstream.CallToolRound(context.Background(), ep, allCaps, "two", nil, &retry, a)
		if err != nil || res != nil || ir == nil {
			t.Fatalf("round %d: %s %+v %v", round, res, ir, err)
		}
		if len(ir.Requests) != 1 || ir.Requests[0].Key != key || ir.Requests[0].Method != "elicitation/create" ||
			!strings.Contains(string(ir.Requests[0].Params), `"Say `+key+`"`) || len(ir.State) < 3 || ir.State[0] != '"' {
			t.Fatalf("round %d asked %+v, state %s", round, ir.Requests, ir.State)
		}
		retry = upstream.Retry{Responses: json.RawMessage(`{"` + key + `":{"action":"accept","content":{"v":"` + strings.ToUpper(key) + `"}}}`), State: ir.State}
	}
	res, ir, err := upstream.CallToolRound(context.Background(), ep, allCaps, "two", nil, &retry, a)
	if err != nil || ir != nil {
		t.Fatalf("%+v %v", ir, err)
	}
	if got := text(t, res); got != "a=A b=B" || ran.Load() != 1 {
		t.Fatalf("text %q, ran %d", got, ran.Load())
	}
	if len(a.askedMethods()) != 0 {
		t.Fatalf("the Asker was asked %v", a.askedMethods())
	}
}

// CallToolRound retries a state-only answer (load shedding) itself, echoing
// the state; a question the client did not declare, or too many, are
// malformed; a retry of an upstream that has no rounds is an error.
func TestCallToolRoundChecks(t *testing.T) {
	var calls atomic.Int32
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
		n := calls.Add(1)
		var p struct{ RequestState string }
		_ = json.Unmarshal(m.Params, &p)
		switch {
		case n == 1:
			writeJSON(w, m.ID, `{"resultType":"input_required","requestState":"shed<1>"}`)
		case p.RequestState == "shed<1>":
			writeJSON(w, m.ID, `{"resultType":"input_required","requestState":"q\u003c2>","inputRequests":{"k":{"method":"sampling/createMessage","params":{}}}}`)
		default:
			t.Errorf("request %d: %s", n, m.Params)
		}
		return true
	})
	ep := f.endpoint(upstream.Stateless)
	_, ir, err := upstream.CallToolRound(context.Background(), ep, allCaps, "t", nil, nil, &asker{})
	if err != nil || ir == nil || string(ir.State) != `"q\u003c2>"` || ir.Requests[0].Key != "k" {
		t.Fatalf("%+v %v", ir, err)
	}
	calls.Store(0)
	if _, _, err := upstream.CallToolRound(context.Background(), ep, json.RawMessage(`{"elicitation":{}}`), "t", nil, nil, &asker{}); !errors.Is(err, upstream.ErrMalformed) {
		t.Fatalf("an undeclared question: %v", err)
	}
	many := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
		var b strings.Builder
		for i := range 65 {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"k` + strings.Repeat("x", i) + `":{"method":"roots/list"}`)
		}
		writeJSON(w, m.ID, `{"resultType":"input_required","inputRequests":{`+b.String()+`}}`)
		return true
	})
	if _, _, err := upstream.CallToolRound(context.Background(), many.endpoint(upstream.Stateless), allCaps, "t", nil, nil, &asker{}); !errors.Is(err, upstream.ErrTooMany) {
		t.Fatalf("65 questions: %v", err)
	}
	l := newLib(t, mcphandler.Config{ListTools: tools()})
	retry := &upstream.Retry{State: json.RawMessage(`"x"`)}
	if _, _, err := upstream.CallToolRound(context.Background(), l.endpoint(upstream.Sessions), allCaps, "greet", nil, retry, &asker{}); err == nil {
		t.Fatal("a retry went to a 2025 upstream")
	}
	for _, bad := range []upstream.Retry{{State: json.RawMessage(`1`)}, {Responses: json.RawMessage(`[]`)}} {
		if _, _, err := upstream.CallToolRound(context.Background(), l.endpoint(upstream.Stateless), allCaps, "greet", nil, &bad, &asker{}); err == nil {
			t.Fatalf("retry %+v accepted", bad)
		}
	}
}
