package mcphandler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/mcptest"
)

func TestConfirm(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  mcptest.ElicitationHandler
		runs    int64
		outcome mcphandler.Outcome
		text    string
	}{
		{"accept", answer("accept", map[string]any{"confirm": true}), 1, mcphandler.OutcomeConfirmed, "delete_thing ran"},
		{"accept unticked", answer("accept", map[string]any{"confirm": false}), 0, mcphandler.OutcomeDeclined, "did not confirm"},
		{"decline", answer("decline", nil), 0, mcphandler.OutcomeDeclined, "declined"},
		{"cancel", answer("cancel", nil), 0, mcphandler.OutcomeCancelled, "dismissed"},
		{"invalid answer", answer("accept", map[string]any{"confirm": "yes"}), 0, mcphandler.OutcomeDeclined, "failed"},
		{"client error", func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			return mcptest.ElicitResult{}, &mcptest.RPCError{Code: -1, Message: "user rejected"}
		}, 0, mcphandler.OutcomeDeclined, "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fixture{}
			h := mcphandler.New(f.config())
			var asked atomic.Int32
			c := connect(t, h, "acme-admin", mcptest.WithElicitationHandler(func(ctx context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
				asked.Add(1)
				if p.Message != "Really delete?" || p.Mode != "form" || !strings.Contains(string(p.RequestedSchema), `"confirm"`) {
					t.Errorf("elicitation params: %s", p.Raw)
				}
				return tc.answer(ctx, p)
			}))
			res, err := c.CallTool(context.Background(), "delete_thing", map[string]any{"id": "x"})
			if err != nil {
				t.Fatal(err)
			}
			if asked.Load() != 1 {
				t.Fatalf("asked %d times", asked.Load())
			}
			if n := f.count("delete_thing"); n != tc.runs {
				t.Fatalf("ran %d times, want %d", n, tc.runs)
			}
			if !strings.Contains(res.Text(), tc.text) || res.IsError != (tc.runs == 0) {
				t.Fatalf("result %s", res.Raw)
			}
			if ev := f.event(t); ev.Outcome != tc.outcome || ev.Tool != "delete_thing" || ev.Identity.Subject != "bob" || ev.SessionID != c.SessionID() {
				t.Fatalf("event %+v, want outcome %s", ev, tc.outcome)
			}
		})
	}
}

func TestConfirmTimeout(t *testing.T) {
	f := &fixture{}
	cfg := f.config()
	cfg.ConfirmTimeout = 150 * time.Millisecond
	h := mcphandler.New(cfg)
	c := connect(t, h, "acme-admin", mcptest.WithElicitationHandler(func(ctx context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		time.Sleep(400 * time.Millisecond) // the human is away
		return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
	}))
	// The client answers only after the server gave up: its late accept is
	// refused as a stray response, and the tool never runs.
	_, err := c.CallTool(context.Background(), "delete_thing", nil)
	var he *mcptest.HTTPError
	if !errors.As(err, &he) || he.Status != 400 {
		t.Fatalf("late answer: %v, want it refused with 400", err)
	}
	if ev := f.event(t); ev.Outcome != mcphandler.OutcomeTimedOut {
		t.Fatalf("outcome %s", ev.Outcome)
	}
	if n := f.count("delete_thing"); n != 0 {
		t.Fatalf("a late accept ran the tool %d times", n)
	}
}

func TestConfirmDisconnect(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := connect(t, h, "acme-admin", mcptest.WithCancelNotifications(false), mcptest.WithElicitationHandler(func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		cancel() // the client goes away instead of answering
		return mcptest.ElicitResult{}, errors.New("gone")
	}))
	if _, err := c.CallTool(ctx, "delete_thing", nil); err == nil {
		t.Fatal("call returned normally after the client went away")
	}
	if ev := f.event(t); ev.Outcome != mcphandler.OutcomeDisconnected {
		t.Fatalf("outcome %s", ev.Outcome)
	}
	if n := f.count("delete_thing"); n != 0 {
		t.Fatalf("ran %d times", n)
	}
}

func TestConfirmFallback(t *testing.T) {
	f := &fixture{}
	cfg := f.config()
	h := mcphandler.New(cfg)
	// The client declared no elicitation: fail closed.
	c := connect(t, h, "acme-admin")
	res, err := c.CallTool(context.Background(), "delete_thing", nil)
	if err != nil || !res.IsError || !strings.Contains(res.Text(), "confirmation") {
		t.Fatalf("no capability: %+v, %v", res, err)
	}
	if ev := f.event(t); ev.Outcome != mcphandler.OutcomeFallback {
		t.Fatalf("outcome %s", ev.Outcome)
	}
	// With a shaped fallback, that result is sent instead.
	cfg.BeforeCall = func(context.Context, *mcphandler.ToolCall) (mcphandler.Decision, error) {
		return mcphandler.Confirm("sure?").WithFallback(mcphandler.TextResult("open the dashboard to confirm")), nil
	}
	c = connect(t, mcphandler.New(cfg), "acme-admin")
	res, err = c.CallTool(context.Background(), "delete_thing", nil)
	if err != nil || res.IsError || res.Text() != "open the dashboard to confirm" {
		t.Fatalf("fallback: %+v, %v", res, err)
	}
	if n := f.count("delete_thing"); n != 0 {
		t.Fatalf("ran %d times", n)
	}
}

func TestDenyCodesStayDistinct(t *testing.T) {
	f := &fixture{}
	cfg := f.config()
	cfg.BeforeCall = func(_ context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
		switch call.Tool.Name {
		case "read":
			return mcphandler.Deny("viewers may not read on Sundays"), nil
		case "acme_only":
			return mcphandler.RateLimit("slow down", 3*time.Second), nil
		}
		return mcphandler.Decision{}, errors.New("database password is hunter2")
	}
	c := connect(t, mcphandler.New(cfg), "acme-viewer")
	ctx := context.Background()
	_, err := c.CallTool(ctx, "read", nil)
	var re *mcptest.RPCError
	if !errors.As(err, &re) || re.Code != mcphandler.CodeForbidden || re.Message != "viewers may not read on Sundays" {
		t.Fatalf("deny: %v", err)
	}
	_, err = c.CallTool(ctx, "acme_only", nil)
	if !errors.As(err, &re) || re.Code != mcphandler.CodeRateLimited || string(re.Data) != `{"retryAfterMs":3000}` {
		t.Fatalf("rate limit: %v", err)
	}
	_, err = c.CallTool(ctx, "delete_thing", nil)
	if !errors.As(err, &re) || re.Code != mcphandler.CodeInternalError || strings.Contains(re.Message, "hunter2") {
		t.Fatalf("hook error: %v", err)
	}
	for _, want := range []mcphandler.Outcome{mcphandler.OutcomeDenied, mcphandler.OutcomeDenied, mcphandler.OutcomeError} {
		if ev := f.event(t); ev.Outcome != want {
			t.Fatalf("outcome %s, want %s", ev.Outcome, want)
		}
	}
	if f.count("read")+f.count("acme_only")+f.count("delete_thing") != 0 {
		t.Fatal("a denied tool ran")
	}
}

type addIn struct {
	A int    `json:"a" jsonschema:"first addend"`
	B int    `json:"b"`
	N string `json:"note,omitempty"`
}

type addOut struct {
	Sum int `json:"sum"`
}

func TestTypedTool(t *testing.T) {
	var runs, asked atomic.Int32
	add := mcphandler.NewTool(mcphandler.Tool{Name: "add", Description: "adds"}, func(_ context.Context, _ *mcphandler.ToolCall, in addIn) (addOut, error) {
		runs.Add(1)
		return addOut{in.A + in.B}, nil
	})
	h := mcphandler.New(mcphandler.Config{
		Authenticate: mcphandler.InsecureAnonymous,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{add}, nil },
		BeforeCall: func(context.Context, *mcphandler.ToolCall) (mcphandler.Decision, error) {
			asked.Add(1)
			return mcphandler.Allow(), nil
		},
	})
	c := connect(t, h, "")
	ctx := context.Background()
	tools, _ := c.ListTools(ctx)
	var in, out map[string]any
	json.Unmarshal(tools[0].InputSchema, &in)
	json.Unmarshal(tools[0].OutputSchema, &out)
	if in["type"] != "object" || fmt.Sprint(in["required"]) != "[a b]" || out["type"] != "object" {
		t.Fatalf("schemas: %s %s", tools[0].InputSchema, tools[0].OutputSchema)
	}
	res, err := c.CallTool(ctx, "add", map[string]any{"a": 2, "b": 3})
	if err != nil || res.IsError || string(res.StructuredContent) != `{"sum":5}` || res.Text() != `{"sum":5}` {
		t.Fatalf("add: %+v, %v", res, err)
	}
	for args, field := range map[string]string{`{"a":"two","b":3}`: "a", `{"a":1}`: "b", `{"a":1,"b":2,"c":3}`: "c"} {
		var a map[string]any
		json.Unmarshal([]byte(args), &a)
		res, err := c.CallTool(ctx, "add", a)
		if err != nil || !res.IsError || !strings.Contains(res.Text(), `"error":"bad_args"`) || !strings.Contains(res.Text(), field) {
			t.Errorf("args %s: %+v, %v; want a bad_args tool error naming %s", args, res, err, field)
		}
	}
	if runs.Load() != 1 || asked.Load() != 1 {
		t.Fatalf("runs %d, BeforeCall %d; invalid arguments must stop before both", runs.Load(), asked.Load())
	}
	_, err = c.Call(ctx, "tools/call", map[string]any{"name": "add", "arguments": []int{1}})
	if !isRPC(err, -32602) {
		t.Fatalf("non-object arguments: %v", err)
	}
}

func TestToolErrorClasses(t *testing.T) {
	errs := map[string]error{
		"timeout":     context.DeadlineExceeded,
		"unavailable": mcphandler.Unavailable(errors.New("dial tcp 10.0.0.7:5432: refused")),
		"badargs":     mcphandler.BadArgs("limit must be positive"),
		"notfound":    mcphandler.NotFound("no document %q", "a9"),
		"internal":    errors.New("pq: tenant globex row 7 is corrupt"),
		"panics":      nil,
	}
	var tools []mcphandler.Tool
	for name, err := range errs {
		tools = append(tools, mcphandler.Tool{Name: name, Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			if name == "panics" {
				panic("boom: secret")
			}
			return nil, err
		}})
	}
	h := mcphandler.New(mcphandler.Config{Authenticate: mcphandler.InsecureAnonymous, ListTools: func(context.Context) ([]mcphandler.Tool, error) { return tools, nil }})
	c := connect(t, h, "")
	for name, want := range map[string]string{
		"timeout":     `{"error":"timeout","retryable":true,`,
		"unavailable": `{"error":"backend_unavailable","retryable":true,`,
		"badargs":     `{"error":"bad_args","retryable":false,`,
		"notfound":    `{"error":"not_found","retryable":false,`,
		"internal":    `{"error":"internal","retryable":false,`,
		"panics":      `{"error":"internal","retryable":false,`,
	} {
		res, err := c.CallTool(context.Background(), name, nil)
		if err != nil || !res.IsError {
			t.Fatalf("%s: %+v, %v", name, res, err)
		}
		text := res.Text()
		if !strings.HasPrefix(text, want) || !strings.Contains(text, `"hint":`) {
			t.Errorf("%s: %s", name, text)
		}
		for _, leak := range []string{"10.0.0.7", "globex", "secret", "corrupt"} {
			if strings.Contains(text, leak) {
				t.Errorf("%s leaks %q: %s", name, leak, text)
			}
		}
	}
	res, _ := c.CallTool(context.Background(), "notfound", nil)
	if !strings.Contains(res.Text(), `"detail":"no document \"a9\""`) {
		t.Errorf("a ToolError's detail is shown: %s", res.Text())
	}
}

func TestPagination(t *testing.T) {
	var tools []mcphandler.Tool
	for i := range 25 {
		tools = append(tools, mcphandler.Tool{Name: fmt.Sprintf("t%02d", i), Handler: echoTool.Handler})
	}
	h := mcphandler.New(mcphandler.Config{
		Authenticate: mcphandler.InsecureAnonymous,
		Limits:       mcphandler.Limits{PageSize: 10},
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return tools, nil },
	})
	c := connect(t, h, "")
	ctx := context.Background()
	page, next, err := c.ListToolsPage(ctx, "")
	if err != nil || len(page) != 10 || next == "" {
		t.Fatalf("first page: %d tools, next %q, %v", len(page), next, err)
	}
	all, err := c.ListTools(ctx)
	if err != nil || len(all) != 25 || all[24].Name != "t24" {
		t.Fatalf("all pages: %d tools, %v", len(all), err)
	}
	for _, bad := range []string{"nope!", "LTE", "OTk5"} {
		if _, _, err := c.ListToolsPage(ctx, bad); !isRPC(err, -32602) {
			t.Errorf("cursor %q: %v, want -32602", bad, err)
		}
	}
}

// A handler asks the client mid-call through its Exchange, and reports
// progress and logs; each travels on the call's own SSE stream.
func TestExchange(t *testing.T) {
	var elicitErr, rootsErr atomic.Value
	tool := mcphandler.Tool{Name: "ask", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		call.Progress(0, 2, "starting")
		call.Log(mcphandler.LevelDebug, "t", "debug detail")
		call.Log(mcphandler.LevelWarning, "t", "careful")
		form := elicitation.NewSchema().String("name", elicitation.Required())
		res, err := call.Elicit(ctx, mcphandler.ElicitRequest{Message: "Your name?", Schema: form})
		if err != nil {
			elicitErr.Store(err.Error())
			return nil, err
		}
		sampled, err := call.CreateMessage(ctx, map[string]any{"messages": []any{}, "maxTokens": 10})
		if err != nil {
			return nil, err
		}
		roots, err := call.ListRoots(ctx)
		if err != nil {
			rootsErr.Store(err.Error())
		}
		call.Progress(2, 2, "done")
		return mcphandler.TextResult(fmt.Sprintf("%v %s %d", res.Content["name"], sampled, len(roots))), nil
	}}
	h := mcphandler.New(mcphandler.Config{Authenticate: mcphandler.InsecureAnonymous, ListTools: func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{tool}, nil }})
	c := connect(t, h, "",
		mcptest.WithCapabilities(json.RawMessage(`{"elicitation":{},"sampling":{}}`)),
		mcptest.WithElicitationHandler(answer("accept", map[string]any{"name": "Ada"})),
		mcptest.WithSamplingHandler(func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"hi"}}`), nil
		}),
	)
	ctx := context.Background()
	if err := c.SetLogLevel(ctx, "info"); err != nil {
		t.Fatal(err)
	}
	raw, err := c.Call(ctx, "tools/call", map[string]any{"name": "ask", "_meta": map[string]any{"progressToken": "tok-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `Ada {\"role\":\"assistant\"`) || !strings.Contains(string(raw), ` 0"`) {
		t.Fatalf("result %s", raw)
	}
	if v := rootsErr.Load(); v == nil || !strings.Contains(v.(string), "cannot be asked") {
		t.Fatalf("roots without the capability: %v", v)
	}
	var methods []string
	for _, n := range c.Notifications() {
		methods = append(methods, n.Method+" "+string(n.Params))
	}
	got := strings.Join(methods, "\n")
	for _, want := range []string{`"progressToken":"tok-1","progress":0,"total":2`, `"progress":2`, `"level":"warning"`} {
		if !strings.Contains(got, want) {
			t.Errorf("notifications lack %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "debug detail") {
		t.Errorf("a debug log passed an info level:\n%s", got)
	}
	if _, err := c.Call(ctx, "logging/setLevel", map[string]any{"level": "loud"}); !isRPC(err, -32602) {
		t.Errorf("bad level: %v", err)
	}
	// Without a progress token nothing is streamed: the answer is plain JSON.
	c2 := connect(t, h, "")
	resp, err := c2.Post(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask"}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content type %s", ct)
	}
	if v := elicitErr.Load(); v == nil || !strings.Contains(v.(string), "cannot be asked") {
		t.Fatalf("elicit without the capability: %v", v)
	}
}

// 2025-11-25 SSE responses start with a priming event (an id, empty data
// and a retry delay); older revisions get none.
func TestPrimingEvent(t *testing.T) {
	tool := mcphandler.Tool{Name: "slow", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		call.Progress(1, 0, "")
		return mcphandler.TextResult("ok"), nil
	}}
	h := mcphandler.New(mcphandler.Config{Authenticate: mcphandler.InsecureAnonymous, ListTools: func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{tool}, nil }})
	for version, primed := range map[string]bool{"2025-11-25": true, "2025-06-18": false} {
		c := connect(t, h, "", mcptest.WithProtocolVersion(version))
		resp, err := c.Post(context.Background(), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","_meta":{"progressToken":1}}}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		r := mcptest.NewSSEReader(resp.Body)
		first, err := r.Next()
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		isPriming := first.ID != "" && first.Retry > 0 && len(first.Data) == 0
		if isPriming != primed {
			t.Errorf("%s: first event %+v, priming %v", version, first, isPriming)
		}
	}
}

func TestBatch20250326(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	c := connect(t, h, "acme-viewer", mcptest.WithProtocolVersion("2025-03-26"))
	msgs, err := c.Batch(context.Background(),
		mcptest.BatchRequest{Method: "ping"},
		mcptest.BatchRequest{Method: "tools/call", Params: map[string]any{"name": "read"}},
		mcptest.BatchRequest{Method: "nope"},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 3 || msgs[0].Error != nil || !strings.Contains(string(msgs[1].Result), "read ran") || msgs[2].Error == nil || msgs[2].Error.Code != -32601 {
		t.Fatalf("batch answers: %+v", msgs)
	}
}
