package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// mrtrOptions are the handlers that answer the confirm tool's three input
// requests, counting their calls.
func mrtrOptions(t *testing.T, calls *atomic.Int32) []Option {
	return []Option{
		WithElicitationHandler(func(ctx context.Context, p ElicitParams) (ElicitResult, error) {
			calls.Add(1)
			if p.Message != "Delete alpha?" || p.Mode != "form" || len(p.RequestedSchema) == 0 {
				t.Errorf("elicitation params %s", p.Raw)
			}
			return ElicitResult{Action: ActionAccept, Content: map[string]any{"ok": true}}, nil
		}),
		WithSamplingHandler(func(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
			calls.Add(1)
			if !strings.Contains(string(p), `"maxTokens":10`) {
				t.Errorf("sampling params %s", p)
			}
			return json.RawMessage(confirmSampleAnswer), nil
		}),
		WithRootsHandler(func(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
			calls.Add(1)
			return json.RawMessage(confirmRootsAnswer), nil
		}),
	}
}

func confirmParams() map[string]any {
	return map[string]any{
		"name":      "confirm",
		"arguments": json.RawMessage(confirmArgs),
		"_meta":     map[string]any{"progressToken": "p-7"},
	}
}

func TestModernMultiRoundTrip(t *testing.T) {
	f := newModernFake(t)
	f.token = "tok"
	f.wantCaps = `{"elicitation":{},"sampling":{},"roots":{}}`
	f.wantInfo = `{"name":"tester","version":"9.9"}`
	f.wantLogLevel = "debug"
	var calls atomic.Int32
	var notified atomic.Int32
	opts := append(mrtrOptions(t, &calls), WithToken("tok"), WithClientInfo("tester", "9.9"), WithLogLevel("debug"),
		WithNotificationHandler(func(method string, _ json.RawMessage) {
			if method == "notifications/progress" {
				notified.Add(1)
			}
		}))
	c := NewModern(t, f, opts...)

	raw, err := c.Call(t.Context(), "tools/call", confirmParams())
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	res, err := decodeToolResult(raw)
	if err != nil || res.Text() != "deleted alpha" {
		t.Fatalf("result %s, %v", raw, err)
	}
	if ResultType(raw) != ResultTypeComplete {
		t.Errorf("resultType %q", ResultType(raw))
	}
	if c.Rounds() != 2 {
		t.Errorf("Rounds() = %d, want 2", c.Rounds())
	}
	if calls.Load() != 3 {
		t.Errorf("%d handler calls, want 3", calls.Load())
	}
	if notified.Load() != 1 || len(c.Notifications()) != 1 || c.Notifications()[0].Method != "notifications/progress" {
		t.Errorf("notifications %v", c.Notifications())
	}
	if len(f.rawEcho) != 1 || !f.rawEcho[0] {
		t.Errorf("requestState not echoed with the exact bytes: %v", f.rawEcho)
	}
	reqs := f.find("tools/call")
	if len(reqs) != 2 {
		t.Fatalf("%d tools/call requests, want 2", len(reqs))
	}
	if string(reqs[0].Msg.ID) == string(reqs[1].Msg.ID) {
		t.Errorf("retry reused id %s", reqs[0].Msg.ID)
	}
	for _, r := range reqs {
		if r.Header.Get("Mcp-Name") != "confirm" || r.Header.Get("Mcp-Method") != "tools/call" ||
			r.Header.Get("MCP-Protocol-Version") != ModernProtocolVersion || r.Header.Get("Authorization") != "Bearer tok" {
			t.Errorf("headers %v", r.Header)
		}
	}

	// The same call once more, now with the typed helper: a fresh state.
	c.ClearNotifications()
	f.lenient = true
	tr, err := c.CallTool(t.Context(), "confirm", json.RawMessage(confirmArgs))
	if err == nil || tr != nil {
		t.Fatalf("CallTool without progressToken: %v, %v (the fake requires it)", tr, err)
	}
	var he *HTTPError
	if !errors.As(err, &he) || he.RPCError() == nil || he.RPCError().Code != CodeInvalidParams {
		t.Fatalf("error %v, want HTTP 400 with -32602", err)
	}
}

func TestModernConcurrentCalls(t *testing.T) {
	f := newModernFake(t)
	var calls atomic.Int32
	c := NewModern(t, f, mrtrOptions(t, &calls)...)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			raw, err := c.Call(t.Context(), "tools/call", confirmParams())
			if err != nil {
				t.Errorf("Call: %v", err)
				return
			}
			if res, _ := decodeToolResult(raw); res == nil || res.Text() != "deleted alpha" {
				t.Errorf("result %s", raw)
			}
		})
	}
	wg.Wait()
	if calls.Load() != 24 {
		t.Errorf("%d handler calls, want 24", calls.Load())
	}
}

func TestModernCallOnceAndRetry(t *testing.T) {
	f := newModernFake(t)
	c := NewModern(t, f, WithCapabilities(json.RawMessage(`{"elicitation":{"form":{}}}`)))
	m, hdr, err := c.CallOnce(t.Context(), "tools/call", confirmParams())
	if err != nil {
		t.Fatal(err)
	}
	if hdr.Get("Content-Type") != "application/json" {
		t.Errorf("header %v", hdr)
	}
	ir, err := ParseInputRequired(m.Result)
	if err != nil {
		t.Fatal(err)
	}
	if len(ir.InputRequests) != 3 || ir.InputRequests["ask"].Method != MethodElicit ||
		ir.InputRequests["llm"].Method != MethodSampling || ir.InputRequests["where"].Method != MethodRootsList {
		t.Fatalf("input requests %+v", ir.InputRequests)
	}
	if !ir.HasRequestState || !strings.HasPrefix(ir.RequestState, "v1.<&>\"é\"\u2028 st/+=#") ||
		!strings.HasPrefix(string(ir.RawRequestState), `"`+mrtrStatePrefixRaw) {
		t.Fatalf("state %q raw %s", ir.RequestState, ir.RawRequestState)
	}
	if f.requests()[0].Meta[MetaClientCapabilities] == nil || !jsonEqual(f.requests()[0].Meta[MetaClientCapabilities], []byte(`{"elicitation":{"form":{}}}`)) {
		t.Errorf("capabilities %s", f.requests()[0].Meta[MetaClientCapabilities])
	}

	answers := map[string]any{
		"ask":   json.RawMessage(confirmElicitAnswer),
		"llm":   json.RawMessage(confirmSampleAnswer),
		"where": json.RawMessage(confirmRootsAnswer),
	}
	// A tampered state is refused...
	bad, err := c.Retry(t.Context(), "tools/call", confirmParams(), answers, ir.RequestState+"x")
	var he *HTTPError
	if !errors.As(err, &he) || he.RPCError() == nil || he.RPCError().Code != CodeInvalidParams || bad != nil {
		t.Fatalf("tampered retry: %v, %v", bad, err)
	}
	// ...the real one completes.
	m2, err := c.Retry(t.Context(), "tools/call", confirmParams(), answers, ir.RequestState)
	if err != nil || m2.Error != nil {
		t.Fatalf("retry: %v, %v", m2, err)
	}
	if res, _ := decodeToolResult(m2.Result); res == nil || res.Text() != "deleted alpha" || string(m2.ID) == string(m.ID) {
		t.Fatalf("retry answer %s", mustJSON(m2))
	}
	if n := c.Notifications(); len(n) != 1 || n[0].Method != "notifications/progress" {
		t.Errorf("notifications %v", n)
	}
	// The state is single use.
	m3, err := c.Retry(t.Context(), "tools/call", confirmParams(), answers, ir.RequestState)
	if !errors.As(err, &he) || m3 != nil {
		t.Errorf("replayed state: %v, %v", m3, err)
	}
	// A JSON-RPC error that comes with 200 is a message for CallOnce, an
	// *RPCError for Call.
	m4, _, err := c.CallOnce(t.Context(), "tools/call", map[string]any{"name": "fails"})
	if err != nil || m4.Error == nil || m4.Error.Code != CodeInternalError {
		t.Errorf("CallOnce of a failing tool: %v, %v", m4, err)
	}
	var re *RPCError
	if _, err := c.Call(t.Context(), "tools/call", map[string]any{"name": "fails"}); !errors.As(err, &re) || re.Code != CodeInternalError {
		t.Errorf("Call of a failing tool: %v", err)
	}
}

func TestModernHelpers(t *testing.T) {
	f := newModernFake(t)
	f.wantCaps = `{}`
	f.wantInfo = `{"name":"mcptest","version":"1.0.0"}`
	c := NewModern(t, f, WithPath("mcp"))
	if !strings.HasSuffix(c.URL(), "/mcp") {
		t.Errorf("URL %s", c.URL())
	}
	d, err := c.Discover(t.Context())
	if err != nil || !strings.Contains(string(d), `"supportedVersions":["2026-07-28"]`) {
		t.Fatalf("Discover: %s, %v", d, err)
	}
	tools, err := c.ListTools(t.Context())
	if err != nil || len(tools) != 2 || tools[0].Name != "confirm" || tools[1].Name != "héllo wörld" {
		t.Fatalf("ListTools: %+v, %v", tools, err)
	}
	res, err := c.ReadResource(t.Context(), "docs://ünï code")
	if err != nil || !strings.Contains(string(res), "body of docs://ünï code") {
		t.Fatalf("ReadResource: %s, %v", res, err)
	}
	p, err := c.GetPrompt(t.Context(), "summarize", map[string]string{"id": "7"})
	if err != nil || !strings.Contains(string(p), `{\"id\":\"7\"}`) {
		t.Fatalf("GetPrompt: %s, %v", p, err)
	}
	for _, r := range f.requests() {
		if r.Header.Get("Mcp-Method") != r.Msg.Method {
			t.Errorf("Mcp-Method %q for %s", r.Header.Get("Mcp-Method"), r.Msg.Method)
		}
		switch r.Msg.Method {
		case "server/discover", "tools/list":
			if _, ok := r.Header["Mcp-Name"]; ok {
				t.Errorf("Mcp-Name on %s", r.Msg.Method)
			}
		case "resources/read":
			if got := r.Header.Get("Mcp-Name"); got != EncodeHeaderValue("docs://ünï code") || !strings.HasPrefix(got, "=?base64?") {
				t.Errorf("Mcp-Name %q for resources/read", got)
			}
		case "prompts/get":
			if r.Header.Get("Mcp-Name") != "summarize" {
				t.Errorf("Mcp-Name %q for prompts/get", r.Header.Get("Mcp-Name"))
			}
		}
	}
	if c.Rounds() != 1 {
		t.Errorf("Rounds() = %d", c.Rounds())
	}
}

func TestModernMcpNameEncoding(t *testing.T) {
	f := newModernFake(t)
	c := NewModern(t, f)
	for name, wire := range map[string]string{
		"héllo wörld":    "=?base64?aMOpbGxvIHfDtnJsZA==?=",
		" padded":        "=?base64?IHBhZGRlZA==?=",
		"=?base64?abc?=": "=?base64?PT9iYXNlNjQ/YWJjPz0=?=",
	} {
		res, err := c.CallTool(t.Context(), name, nil)
		if err != nil || res.Text() != "hi "+name {
			t.Fatalf("CallTool(%q): %v, %v", name, res, err)
		}
		reqs := f.find("tools/call")
		if got := reqs[len(reqs)-1].Header.Values("Mcp-Name"); len(got) != 1 || got[0] != wire {
			t.Errorf("Mcp-Name for %q = %q, want %q", name, got, wire)
		}
	}
}

func TestHeaderValueEncoding(t *testing.T) {
	for _, tc := range []struct{ in, out string }{
		{"search_issues", "search_issues"},
		{"file:///a b.txt", "file:///a b.txt"},
		{"", ""},
		{"日本", "=?base64?5pel5pys?="},
		{"tab\t", "=?base64?dGFiCQ==?="},
		{"\tlead", "=?base64?CWxlYWQ=?="},
		{"line\nbreak", "=?base64?bGluZQpicmVhaw==?="},
		{"del\x7f", "=?base64?ZGVsfw==?="},
		{"=?base64?eA==?=", "=?base64?PT9iYXNlNjQ/ZUE9PT89?="},
		{"=?BASE64?eA==?=", "=?BASE64?eA==?="}, // markers are case-sensitive
		{"=?base64?=", "=?base64?="},
	} {
		if got := EncodeHeaderValue(tc.in); got != tc.out {
			t.Errorf("EncodeHeaderValue(%q) = %q, want %q", tc.in, got, tc.out)
		}
		if back, err := DecodeHeaderValue(tc.out); err != nil || back != tc.in {
			t.Errorf("DecodeHeaderValue(%q) = %q, %v, want %q", tc.out, back, err, tc.in)
		}
	}
	if _, err := DecodeHeaderValue("=?base64?not base64!?="); err == nil {
		t.Error("invalid Base64 decoded")
	}
}

func TestModernListen(t *testing.T) {
	f := newModernFake(t)
	c := NewModern(t, f)
	s, err := c.Listen(t.Context(), map[string]any{"toolsListChanged": true, "promptsListChanged": true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	ack, err := s.Next(ctx)
	if err != nil || ack.Message == nil || ack.Message.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("ack: %+v, %v", ack, err)
	}
	var ap struct {
		Notifications map[string]any             `json:"notifications"`
		Meta          map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(ack.Message.Params, &ap); err != nil || ap.Notifications["toolsListChanged"] != true || ap.Notifications["promptsListChanged"] != nil {
		t.Fatalf("ack params %s", ack.Message.Params)
	}
	if string(ap.Meta[MetaSubscriptionID]) != string(s.RequestID()) || s.RequestID() == nil {
		t.Errorf("subscriptionId %s, request id %s", ap.Meta[MetaSubscriptionID], s.RequestID())
	}
	ev, err := s.Next(ctx)
	if err != nil || ev.Message == nil || ev.Message.Method != "notifications/tools/list_changed" ||
		!strings.Contains(string(ev.Message.Params), string(s.RequestID())) {
		t.Fatalf("notification: %+v, %v", ev, err)
	}
	req := f.find("subscriptions/listen")[0]
	if req.Header.Get("Mcp-Method") != "subscriptions/listen" || req.Header.Get("Mcp-Name") != "" || req.Meta[MetaProtocolVersion] == nil {
		t.Errorf("listen request %v %s", req.Header, req.Body)
	}
	if s.Header().Get("Content-Type") != "text/event-stream" {
		t.Errorf("stream header %v", s.Header())
	}
	s.Close()
	if _, err := s.Next(ctx); !errors.Is(err, ErrStreamClosed) {
		t.Errorf("Next after Close: %v", err)
	}

	// A second stream is ended by the client's Close.
	s2, err := c.Listen(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := s2.Next(ctx); err != nil || ev.Message.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("ack 2: %+v, %v", ev, err)
	}
	c.Close()
	if _, err := s2.Next(ctx); !errors.Is(err, ErrStreamClosed) {
		t.Errorf("Next after client Close: %v", err)
	}
}

func TestModernErrors(t *testing.T) {
	f := newModernFake(t)
	c := NewModern(t, f, WithMaxRounds(3))

	_, err := c.Call(t.Context(), "logging/setLevel", map[string]string{"level": "debug"})
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusNotFound || he.RPCError() == nil || he.RPCError().Code != CodeMethodNotFound {
		t.Errorf("removed method: %v", err)
	}
	if _, err := c.CallTool(t.Context(), "rogue", nil); !errors.Is(err, ErrServerRequest) {
		t.Errorf("request on the stream: %v", err)
	}
	if _, err := c.CallTool(t.Context(), "loop", nil); !errors.Is(err, ErrTooManyRounds) || c.Rounds() != 3 {
		t.Errorf("loop: %v after %d rounds", err, c.Rounds())
	}
	loops := f.find("tools/call")
	if n := len(loops); n < 3 {
		t.Fatalf("%d tools/call", n)
	}
	// Each retry echoes the state of the answer before it, and only that.
	for i, r := range loops[len(loops)-2:] {
		if want := fmt.Sprintf(`"again-%d"`, i+1); string(r.Params["requestState"]) != want || r.Params["inputResponses"] != nil {
			t.Errorf("loop retry %d params %s, want state %s", i+1, r.Msg.Params, want)
		}
	}
	if _, err := c.CallTool(t.Context(), "needs_sampling", nil); !errors.Is(err, ErrNoHandler) {
		t.Errorf("missing handler: %v", err)
	}
	if _, err := c.CallTool(t.Context(), "weird", nil); !errors.Is(err, ErrUnknownResultType) {
		t.Errorf("unknown resultType: %v", err)
	}
	if res, err := c.CallTool(t.Context(), "untyped", nil); err != nil || res.Text() != "no resultType" {
		t.Errorf("absent resultType: %v, %v", res, err)
	}
	if _, err := c.Call(t.Context(), "tools/call", []int{1}); err == nil {
		t.Error("array params accepted")
	}

	// _meta keys set to null are removed; caller keys win.
	f.lenient = true
	_, err = c.Call(t.Context(), "server/discover", map[string]any{"_meta": map[string]any{MetaClientCapabilities: nil}})
	if !errors.As(err, &he) || he.RPCError() == nil || he.RPCError().Code != CodeInvalidParams {
		t.Errorf("without clientCapabilities: %v", err)
	}
	_, err = c.Call(t.Context(), "server/discover", map[string]any{"_meta": map[string]any{MetaProtocolVersion: "v999.0.0"}})
	if !errors.As(err, &he) || he.RPCError() == nil || he.RPCError().Code != CodeHeaderMismatch {
		t.Errorf("mismatched version: %v", err)
	}
}

func TestModernPostRaw(t *testing.T) {
	f := newModernFake(t)
	f.lenient = true
	c := NewModern(t, f, WithHeader("X-Extra", "yes"))
	body := []byte(`{"jsonrpc":"2.0","id":"raw-1","method":"tools/call","params":{"name":"héllo wörld","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	resp, err := c.Post(t.Context(), body, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d", resp.StatusCode)
	}
	h := f.requests()[0].Header
	if h.Get("Mcp-Method") != "tools/call" || h.Get("Mcp-Name") != EncodeHeaderValue("héllo wörld") || h.Get("X-Extra") != "yes" {
		t.Errorf("derived headers %v", h)
	}
	body = []byte(strings.Replace(string(body), "raw-1", "raw-2", 1))
	resp, err = c.Post(t.Context(), body, http.Header{"Mcp-Name": {""}})
	if err != nil {
		t.Fatal(err)
	}
	he := newHTTPError(resp)
	resp.Body.Close()
	if he.Status != http.StatusBadRequest || he.RPCError() == nil || he.RPCError().Code != CodeHeaderMismatch {
		t.Errorf("without Mcp-Name: %v", he)
	}
}

func TestModernCancel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		send := modernSSE(w)
		send(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working"}}`)
		<-r.Context().Done()
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c := DialModern(srv.URL, WithNotificationHandler(func(string, json.RawMessage) { cancel() }))
	defer c.Close()
	if _, err := c.Call(ctx, "tools/call", map[string]any{"name": "slow"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
	if n := c.Notifications(); len(n) != 1 || n[0].Method != "notifications/message" {
		t.Errorf("notifications %v", n)
	}
}
