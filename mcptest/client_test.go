package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func initialized(t *testing.T, f *fakeServer, opts ...Option) *Client {
	t.Helper()
	c := New(t, f, opts...)
	if _, err := c.Initialize(t.Context()); err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	return c
}

func TestInitialize(t *testing.T) {
	f := newFake(t)
	f.token = "tok"
	c := New(t, f, WithToken("tok"), WithClientInfo("tester", "9.9"), WithHeader("X-Extra", "yes"))
	if c.SessionID() != "" || c.ProtocolVersion() != "" {
		t.Fatalf("state before initialize: %q %q", c.SessionID(), c.ProtocolVersion())
	}
	res, err := c.Initialize(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.ProtocolVersion != "2025-11-25" || res.ServerInfo.Name != "fake" || res.ServerInfo.Title != "Fake Server" ||
		res.ServerInfo.Version != "0.1" || res.Instructions != "be nice" || !strings.Contains(string(res.Capabilities), "tools") {
		t.Fatalf("bad result: %+v", res)
	}
	if c.SessionID() != "sess-1" || c.ProtocolVersion() != "2025-11-25" {
		t.Fatalf("session %q version %q", c.SessionID(), c.ProtocolVersion())
	}

	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("want 2 requests, got %d", len(reqs))
	}
	init, note := reqs[0], reqs[1]
	if init.Msg.Method != "initialize" || init.Header.Get(HeaderSessionID) != "" || init.Header.Get("MCP-Protocol-Version") != "" {
		t.Errorf("initialize request: %s %v", init.Body, init.Header)
	}
	var p struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ClientInfo      Implementation  `json:"clientInfo"`
	}
	if err := json.Unmarshal(init.Msg.Params, &p); err != nil {
		t.Fatal(err)
	}
	if p.ProtocolVersion != "2025-11-25" || string(p.Capabilities) != "{}" || p.ClientInfo.Name != "tester" || p.ClientInfo.Version != "9.9" {
		t.Errorf("initialize params: %s", init.Msg.Params)
	}
	if note.Msg.Method != "notifications/initialized" || note.Header.Get(HeaderSessionID) != "sess-1" ||
		note.Header.Get("MCP-Protocol-Version") != "2025-11-25" || note.Msg.ID != nil {
		t.Errorf("initialized notification: %s %v", note.Body, note.Header)
	}
	for _, r := range reqs {
		if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("X-Extra") != "yes" ||
			r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Accept") != "application/json, text/event-stream" {
			t.Errorf("headers of %s: %v", r.Msg.Method, r.Header)
		}
	}
}

func TestInitializeOptions(t *testing.T) {
	f := newFake(t)
	c := New(t, f, WithProtocolVersion("2025-03-26"), WithElicitationHandler(func(context.Context, ElicitParams) (ElicitResult, error) {
		return ElicitResult{Action: ActionCancel}, nil
	}))
	res, err := c.Initialize(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.ProtocolVersion != "2025-03-26" || c.ProtocolVersion() != "2025-03-26" {
		t.Fatalf("version %q", res.ProtocolVersion)
	}
	var p struct {
		Capabilities json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(f.find("initialize")[0].Msg.Params, &p)
	if string(p.Capabilities) != `{"elicitation":{}}` {
		t.Errorf("capabilities %s", p.Capabilities)
	}

	// Explicit capabilities win; an unsupported version is negotiated down.
	f2 := newFake(t)
	c2 := New(t, f2, WithProtocolVersion("1999-01-01"), WithCapabilities(json.RawMessage(`{"roots":{"listChanged":true}}`)),
		WithElicitationHandler(func(context.Context, ElicitParams) (ElicitResult, error) { return ElicitResult{}, nil }))
	if _, err := c2.Initialize(t.Context()); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(f2.find("initialize")[0].Msg.Params, &p)
	if string(p.Capabilities) != `{"roots":{"listChanged":true}}` || c2.ProtocolVersion() != "2025-11-25" {
		t.Errorf("capabilities %s version %s", p.Capabilities, c2.ProtocolVersion())
	}
}

func TestCallJSON(t *testing.T) {
	f := newFake(t)
	c := initialized(t, f)
	res, err := c.CallTool(t.Context(), "echo", map[string]any{"text": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Text() != "hello" || len(res.Content) != 1 || res.Content[0].Type != "text" ||
		!strings.Contains(string(res.Content[0].Raw), `"hello"`) {
		t.Fatalf("result %+v", res)
	}
	var sc struct {
		HadArguments bool `json:"hadArguments"`
	}
	if err := json.Unmarshal(res.StructuredContent, &sc); err != nil || !sc.HadArguments {
		t.Fatalf("structured %s", res.StructuredContent)
	}
	if !strings.Contains(string(res.Raw), "structuredContent") {
		t.Fatalf("raw %s", res.Raw)
	}

	// nil args: no arguments member at all.
	if _, err := c.CallTool(t.Context(), "echo", nil); err != nil {
		t.Fatal(err)
	}
	calls := f.find("tools/call")
	last := calls[len(calls)-1]
	if strings.Contains(string(last.Msg.Params), "arguments") {
		t.Fatalf("nil args sent arguments: %s", last.Msg.Params)
	}
	for _, r := range calls {
		if r.Header.Get(HeaderSessionID) != "sess-1" || r.Header.Get("Mcp-Protocol-Version") != "2025-11-25" {
			t.Errorf("session headers missing: %v", r.Header)
		}
	}

	fail, err := c.CallTool(t.Context(), "fail", nil)
	if err != nil || !fail.IsError || fail.Text() != "nope" {
		t.Fatalf("fail: %+v %v", fail, err)
	}
	if err := c.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLogLevel(t.Context(), "debug"); err != nil {
		t.Fatal(err)
	}
	if got := f.find("logging/setLevel"); len(got) != 1 || string(got[0].Msg.Params) != `{"level":"debug"}` {
		t.Fatalf("setLevel %+v", got)
	}
	// Ping carries no params member.
	if got := f.find("ping"); len(got) != 1 || got[0].Msg.Params != nil {
		t.Fatalf("ping %s", got[0].Body)
	}
}

func TestCallSSEWithNotifications(t *testing.T) {
	f := newFake(t)
	var mu sync.Mutex
	var seenMethods []string
	c := initialized(t, f, WithNotificationHandler(func(method string, params json.RawMessage) {
		mu.Lock()
		defer mu.Unlock()
		seenMethods = append(seenMethods, method)
	}))
	res, err := c.CallTool(t.Context(), "progress", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text() != "done" {
		t.Fatalf("result %s", res.Raw)
	}
	notes := c.Notifications()
	if len(notes) != 2 || notes[0].Method != "notifications/progress" || notes[1].Method != "notifications/message" {
		t.Fatalf("notifications %+v", notes)
	}
	var prog struct {
		ProgressToken string  `json:"progressToken"`
		Progress      float64 `json:"progress"`
		Total         float64 `json:"total"`
	}
	if err := json.Unmarshal(notes[0].Params, &prog); err != nil || prog.ProgressToken != "tok" || prog.Progress != 1 || prog.Total != 2 {
		t.Fatalf("progress %s", notes[0].Params)
	}
	mu.Lock()
	if strings.Join(seenMethods, ",") != "notifications/progress,notifications/message" {
		t.Errorf("handler saw %v", seenMethods)
	}
	mu.Unlock()
	c.ClearNotifications()
	if len(c.Notifications()) != 0 {
		t.Fatal("ClearNotifications")
	}
}

func TestElicitationMidStream(t *testing.T) {
	f := newFake(t)
	var got ElicitParams
	c := initialized(t, f, WithToken("tok"), WithElicitationHandler(func(ctx context.Context, p ElicitParams) (ElicitResult, error) {
		got = p
		return ElicitResult{Action: ActionAccept, Content: map[string]any{"confirm": true}}, nil
	}))
	res, err := c.CallTool(t.Context(), "confirm", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Message != "Really delete?" || !strings.Contains(string(got.RequestedSchema), "confirm") || got.Mode != "" || len(got.Raw) == 0 {
		t.Fatalf("handler params %+v", got)
	}
	var answer Message
	if err := json.Unmarshal([]byte(res.Text()), &answer); err != nil {
		t.Fatalf("result %s: %v", res.Raw, err)
	}
	if string(answer.ID) != `"srv-1"` || string(answer.Result) != `{"action":"accept","content":{"confirm":true}}` || answer.Error != nil {
		t.Fatalf("answer the server got: %s", mustJSON(answer))
	}
	// The answer was a separate POST with the session headers and the token.
	var post *seen
	for _, r := range f.requests() {
		if r.Msg.IsResponse() {
			post = &r
		}
	}
	if post == nil || post.Header.Get(HeaderSessionID) != "sess-1" || post.Header.Get("MCP-Protocol-Version") != "2025-11-25" ||
		post.Header.Get("Authorization") != "Bearer tok" || post.Header.Get("Accept") != acceptBoth {
		t.Fatalf("response post: %+v", post)
	}
	if reqs := c.ServerRequests(); len(reqs) != 1 || reqs[0].Method != MethodElicit {
		t.Fatalf("server requests %+v", reqs)
	}
}

func TestServerRequestWithoutHandler(t *testing.T) {
	f := newFake(t)
	c := initialized(t, f)
	res, err := c.CallTool(t.Context(), "roots", nil)
	if err != nil {
		t.Fatal(err)
	}
	var answer Message
	if err := json.Unmarshal([]byte(res.Text()), &answer); err != nil {
		t.Fatal(err)
	}
	if answer.Error == nil || answer.Error.Code != CodeMethodNotFound || answer.Result != nil {
		t.Fatalf("answer %s", res.Text())
	}

	// ping is always answered with {}.
	res, err = c.CallTool(t.Context(), "pingback", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(res.Text()), &answer); err != nil || string(answer.Result) != "{}" {
		t.Fatalf("ping answer %s", res.Text())
	}

	// A roots handler answers with its raw result; a handler error becomes
	// a JSON-RPC error.
	c2 := initialized(t, newFake(t), WithRootsHandler(func(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"roots":[{"uri":"file:///tmp"}]}`), nil
	}))
	res, err = c2.CallTool(t.Context(), "roots", nil)
	if err != nil || !strings.Contains(res.Text(), `"result":{"roots":[{"uri":"file:///tmp"}]}`) {
		t.Fatalf("roots answer %v %v", res, err)
	}
	c3 := initialized(t, newFake(t), WithRootsHandler(func(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
		return nil, &RPCError{Code: -1, Message: "no roots for you"}
	}))
	res, err = c3.CallTool(t.Context(), "roots", nil)
	if err != nil || !strings.Contains(res.Text(), `"error":{"code":-1,"message":"no roots for you"}`) {
		t.Fatalf("roots error answer %v %v", res, err)
	}
}

func TestRPCError(t *testing.T) {
	c := initialized(t, newFake(t))
	_, err := c.CallTool(t.Context(), "nosuch", nil)
	var re *RPCError
	if !errors.As(err, &re) || re.Code != CodeInvalidParams || !strings.Contains(re.Message, "unknown tool") {
		t.Fatalf("err %v", err)
	}
	_, err = c.Call(t.Context(), "nosuch/method", map[string]any{"a": 1})
	if !errors.As(err, &re) || re.Code != CodeMethodNotFound {
		t.Fatalf("err %v", err)
	}
}

func TestHTTPError(t *testing.T) {
	f := newFake(t)
	f.token = "tok"
	c := initialized(t, f, WithToken("tok"))

	_, err := c.Call(t.Context(), "boom", nil)
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusInternalServerError || !strings.Contains(string(he.Body), "kaboom") || he.Header == nil {
		t.Fatalf("err %v", err)
	}

	c.SetSessionID("bogus")
	err = c.Ping(t.Context())
	if !errors.As(err, &he) || he.Status != http.StatusNotFound {
		t.Fatalf("err %v", err)
	}
	if re := he.RPCError(); re == nil || re.Code != -32000 {
		t.Fatalf("body error %v", re)
	}
	c.SetSessionID("sess-1")
	c.SetProtocolVersion("1999-01-01")
	if err := c.Ping(t.Context()); !errors.As(err, &he) || he.Status != http.StatusBadRequest {
		t.Fatalf("err %v", err)
	}
	c.SetProtocolVersion("2025-11-25")
	if err := c.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}

	noToken := New(t, f)
	if _, err := noToken.Initialize(t.Context()); !errors.As(err, &he) || he.Status != http.StatusUnauthorized {
		t.Fatalf("err %v", err)
	}
}

func TestPagination(t *testing.T) {
	f := newFake(t)
	c := initialized(t, f)
	tools, err := c.ListTools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "echo,progress,confirm" {
		t.Fatalf("tools %v", names)
	}
	if tools[0].Title != "Echo" || string(tools[0].InputSchema) != `{"type":"object"}` || !strings.Contains(string(tools[2].Annotations), "destructiveHint") || len(tools[2].Raw) == 0 {
		t.Fatalf("tool fields %+v", tools)
	}
	lists := f.find("tools/list")
	if len(lists) != 2 || lists[0].Msg.Params != nil || string(lists[1].Msg.Params) != `{"cursor":"page2"}` {
		t.Fatalf("requests %+v", lists)
	}

	page, next, err := c.ListToolsPage(t.Context(), "")
	if err != nil || len(page) != 2 || next != "page2" {
		t.Fatalf("page %v %q %v", page, next, err)
	}
	page, next, err = c.ListToolsPage(t.Context(), next)
	if err != nil || len(page) != 1 || next != "" {
		t.Fatalf("page %v %q %v", page, next, err)
	}
	_, _, err = c.ListToolsPage(t.Context(), "garbage")
	var re *RPCError
	if !errors.As(err, &re) || re.Code != CodeInvalidParams {
		t.Fatalf("err %v", err)
	}
}

func TestGetStream(t *testing.T) {
	f := newFake(t)
	c := initialized(t, f, WithToken("tok"))
	ctx := t.Context()
	s, err := c.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ct := s.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	// priming event first (data empty), the comment is skipped.
	ev, err := s.Next(ctx)
	if err != nil || ev.Data != "" || ev.Message != nil || ev.ID != "g-0" || !ev.HasData {
		t.Fatalf("priming %+v %v", ev, err)
	}
	ev, err = s.Next(ctx)
	if err != nil || ev.ID != "g-1" || ev.Message == nil || !ev.Message.IsNotification() || ev.Message.Method != "notifications/tools/list_changed" {
		t.Fatalf("event %+v %v", ev, err)
	}
	ev, err = s.Next(ctx)
	if err != nil || ev.Message == nil || !ev.Message.IsRequest() || ev.Message.Method != "ping" || s.LastEventID() != "g-2" {
		t.Fatalf("event %+v %v", ev, err)
	}
	if err := c.HandleRequest(ctx, ev.Message); err != nil {
		t.Fatal(err)
	}
	ev, err = s.Next(ctx)
	if err != nil || ev.ID != "g-3" || !strings.Contains(ev.Data, `\"result\":{}`) {
		t.Fatalf("event %+v %v", ev, err)
	}
	// Nothing more comes: a short Next times out and the stream survives.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = s.Next(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	// Header checks on the GET.
	var get *seen
	for _, r := range f.requests() {
		if r.HTTPMethod == http.MethodGet {
			get = &r
		}
	}
	if get == nil || get.Header.Get("Accept") != "text/event-stream" || get.Header.Get(HeaderSessionID) != "sess-1" ||
		get.Header.Get("Mcp-Protocol-Version") != "2025-11-25" || get.Header.Get("Authorization") != "Bearer tok" {
		t.Fatalf("GET %+v", get)
	}
	s.Close()
	if _, err := s.Next(ctx); !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("after close: %v", err)
	}
	s.Close() // idempotent

	// Client.Close closes open streams.
	s2, err := c.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := s2.Next(ctx); !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("after client close: %v", err)
	}
}

func TestGetStreamErrors(t *testing.T) {
	c := initialized(t, newFake(t))
	c.SetSessionID("bogus")
	_, err := c.OpenStream(t.Context())
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusNotFound {
		t.Fatalf("err %v", err)
	}

	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		// a stream that ends without a terminating blank line
		fmt.Fprint(w, "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}")
	})
	c2 := New(t, h)
	if _, err := c2.OpenStream(t.Context()); !errors.As(err, &he) || he.Status != http.StatusMethodNotAllowed {
		t.Fatalf("err %v", err)
	}
	if _, err := c2.Call(t.Context(), "m", nil); !errors.Is(err, ErrIncompleteEvent) {
		t.Fatalf("err %v", err)
	}
}

func TestStreamEnds(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: a\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n\n")
	})
	c := New(t, h)
	s, err := c.OpenStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ev, err := s.Next(t.Context()); err != nil || ev.Message.Method != "n" {
		t.Fatalf("%+v %v", ev, err)
	}
	for range 2 {
		if _, err := s.Next(t.Context()); err != io.EOF {
			t.Fatalf("want EOF, got %v", err)
		}
	}
}

func TestResumeAfterEarlyClose(t *testing.T) {
	f := newFake(t)
	c := initialized(t, f)
	res, err := c.CallTool(t.Context(), "resume", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text() != "resumed" {
		t.Fatalf("result %s", res.Raw)
	}
	var get *seen
	for _, r := range f.requests() {
		if r.HTTPMethod == http.MethodGet {
			get = &r
		}
	}
	if get == nil || get.Header.Get("Last-Event-ID") != "r-1" || get.Header.Get(HeaderSessionID) != "sess-1" {
		t.Fatalf("resume GET %+v", get)
	}

	// Without auto-resume the call fails.
	c2 := initialized(t, newFake(t), WithAutoResume(false))
	if _, err := c2.CallTool(t.Context(), "resume", nil); !errors.Is(err, ErrNoResponse) {
		t.Fatalf("err %v", err)
	}
}

// A response stream whose connection breaks after an event with an id is
// resumed like one that ended early; one that breaks before any id, or
// with auto-resume off, fails with the error that broke it.
func TestResumeAfterBrokenConnection(t *testing.T) {
	f := newFake(t)
	c := initialized(t, f)
	res, err := c.CallTool(t.Context(), "resume_cut", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text() != "resumed" {
		t.Fatalf("result %s", res.Raw)
	}
	if _, err := c.CallTool(t.Context(), "cut", nil); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a stream broken before any event id: %v, want %v", err, io.ErrUnexpectedEOF)
	}
	c2 := initialized(t, newFake(t), WithAutoResume(false))
	if _, err := c2.CallTool(t.Context(), "resume_cut", nil); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("without auto-resume: %v, want %v", err, io.ErrUnexpectedEOF)
	}
}

func TestResumeMethod(t *testing.T) {
	f := newFake(t)
	c := initialized(t, f)
	f.mu.Lock()
	f.resumable["r-1"] = json.RawMessage("42")
	f.mu.Unlock()
	s, err := c.Resume(t.Context(), "r-1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.LastEventID() != "r-1" {
		t.Fatalf("last id %q", s.LastEventID())
	}
	ev, err := s.Next(t.Context())
	if err != nil || ev.Message == nil || !ev.Message.IsResponse() || string(ev.Message.ID) != "42" || s.LastEventID() != "r-2" {
		t.Fatalf("%+v %v", ev, err)
	}
}

func TestCancelNotification(t *testing.T) {
	f := newFake(t)
	c := initialized(t, f)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := c.CallTool(ctx, "slow", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	calls := f.find("tools/call")
	cancels := f.find("notifications/cancelled")
	if len(calls) != 1 || len(cancels) != 1 {
		t.Fatalf("calls %d cancels %d", len(calls), len(cancels))
	}
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	_ = json.Unmarshal(cancels[0].Msg.Params, &p)
	if string(p.RequestID) != string(calls[0].Msg.ID) {
		t.Fatalf("cancelled %s, call id %s", p.RequestID, calls[0].Msg.ID)
	}
}

func TestDelete(t *testing.T) {
	f := newFake(t)
	c := initialized(t, f, WithToken("tok"))
	if err := c.Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
	var del *seen
	for _, r := range f.requests() {
		if r.HTTPMethod == http.MethodDelete {
			del = &r
		}
	}
	if del == nil || del.Header.Get(HeaderSessionID) != "sess-1" || del.Header.Get("Authorization") != "Bearer tok" {
		t.Fatalf("DELETE %+v", del)
	}
	var he *HTTPError
	if err := c.Ping(t.Context()); !errors.As(err, &he) || he.Status != http.StatusNotFound {
		t.Fatalf("after delete: %v", err)
	}
	if err := c.Delete(t.Context()); !errors.As(err, &he) || he.Status != http.StatusNotFound {
		t.Fatalf("second delete: %v", err)
	}
}

func TestPostRaw(t *testing.T) {
	f := newFake(t)
	c := initialized(t, f)
	ctx := t.Context()
	body := []byte(`{"jsonrpc":"2.0","id":"raw-1","method":"ping"}`)

	resp, err := c.Post(ctx, body, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"raw-1"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}

	// An empty value deletes a default header.
	resp, err = c.Post(ctx, body, http.Header{"Accept": {""}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotAcceptable {
		t.Fatalf("status %d", resp.StatusCode)
	}
	reqs := f.requests()
	if _, ok := reqs[len(reqs)-1].Header["Accept"]; ok {
		t.Fatalf("Accept still sent: %v", reqs[len(reqs)-1].Header)
	}

	// Other values replace it; names ignore case.
	resp, err = c.Post(ctx, body, http.Header{"content-type": {"text/plain"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("status %d", resp.StatusCode)
	}
	resp, err = c.Post(ctx, body, http.Header{"MCP-Session-Id": {""}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if !strings.HasPrefix(c.URL(), "http://127.0.0.1:") || !strings.HasSuffix(c.URL(), "/") {
		t.Fatalf("url %q", c.URL())
	}
}

func TestBatch(t *testing.T) {
	c := initialized(t, newFake(t), WithProtocolVersion("2025-03-26"))
	out, err := c.Batch(t.Context(),
		BatchRequest{Method: "ping"},
		BatchRequest{Method: "notifications/whatever", Notification: true},
		BatchRequest{Method: "nope", Params: map[string]any{}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || out[0] == nil || string(out[0].Result) != "{}" || out[1] != nil || out[2] == nil || out[2].Error == nil || out[2].Error.Code != CodeMethodNotFound {
		t.Fatalf("batch %s", mustJSON(out))
	}
}

func TestDial(t *testing.T) {
	f := newFake(t)
	srv := httptest.NewServer(http.StripPrefix("/mcp", f))
	defer srv.Close()
	c := Dial(srv.URL + "/mcp")
	defer c.Close()
	if c.URL() != srv.URL+"/mcp" {
		t.Fatal(c.URL())
	}
	if _, err := c.Initialize(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}

	c2 := New(t, http.StripPrefix("/mcp", newFake(t)), WithPath("/mcp"))
	if !strings.HasSuffix(c2.URL(), "/mcp") {
		t.Fatal(c2.URL())
	}
	if _, err := c2.Initialize(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	f := newFake(t)
	var notes sync.Map
	c := initialized(t, f, WithNotificationHandler(func(method string, _ json.RawMessage) { notes.Store(method, true) }))
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 20 {
		wg.Go(func() {
			res, err := c.CallTool(t.Context(), "echo", map[string]any{"text": fmt.Sprint(i)})
			if err == nil && res.Text() != fmt.Sprint(i) {
				err = fmt.Errorf("got %q want %d", res.Text(), i)
			}
			errs <- err
		})
		wg.Go(func() {
			res, err := c.CallTool(t.Context(), "progress", nil)
			if err == nil && res.Text() != "done" {
				err = fmt.Errorf("got %q", res.Text())
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if len(c.Notifications()) != 40 {
		t.Errorf("notifications %d", len(c.Notifications()))
	}
	f.mu.Lock()
	dup := f.duplicateID
	f.mu.Unlock()
	if dup {
		t.Error("the client reused a request id")
	}
}

func TestMessageKinds(t *testing.T) {
	cases := []struct {
		in                      string
		req, notif, resp, valid bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"m"}`, true, false, false, true},
		{`{"jsonrpc":"2.0","method":"m"}`, false, true, false, true},
		{`{"jsonrpc":"2.0","id":1,"result":null}`, false, false, true, true},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"x"}}`, false, false, true, true},
		{`{"jsonrpc":"2.0","id":1}`, false, false, false, false},
	}
	for _, tc := range cases {
		var m Message
		if err := json.Unmarshal([]byte(tc.in), &m); err != nil {
			t.Fatal(err)
		}
		if m.IsRequest() != tc.req || m.IsNotification() != tc.notif || m.IsResponse() != tc.resp {
			t.Errorf("%s: request %v notification %v response %v", tc.in, m.IsRequest(), m.IsNotification(), m.IsResponse())
		}
	}
}

func TestUnexpectedAnswers(t *testing.T) {
	var modeV atomic.Value
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch modeV.Load().(string) {
		case "202":
			w.WriteHeader(http.StatusAccepted)
		case "html":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<p>hi</p>")
		case "wrongid":
			writeJSON(w, result(json.RawMessage("999999"), map[string]any{}))
		case "emptystream":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, ": nothing\n\n")
		case "nulliderror":
			writeJSON(w, map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32700, "message": "parse"}})
		}
	})
	c := New(t, h)
	for _, tc := range []struct {
		mode string
		want string
	}{
		{"202", "HTTP 202"},
		{"html", "Content-Type"},
		{"wrongid", "unexpected id"},
		{"emptystream", "stream ended"},
		{"nulliderror", "-32700"},
	} {
		modeV.Store(tc.mode)
		_, err := c.Call(t.Context(), "x", nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.mode, err, tc.want)
		}
	}
}

func TestStreamContextEnds(t *testing.T) {
	c := initialized(t, newFake(t))
	ctx, cancel := context.WithCancel(t.Context())
	s, err := c.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(t.Context()); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		t.Fatal("reading goroutine still running after the stream's context ended")
	}
	if _, err := s.Next(t.Context()); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	c.mu.Lock()
	n := len(c.streams)
	c.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d streams still registered", n)
	}
}

func TestStreamIncompleteEvent(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		fmt.Fprint(w, "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n\nid: 2\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"b\"}\n")
	})
	c := New(t, h)
	s, err := c.OpenStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ev, err := s.Next(t.Context()); err != nil || ev.Message.Method != "a" {
		t.Fatalf("%+v %v", ev, err)
	}
	ev, err := s.Next(t.Context())
	if !errors.Is(err, ErrIncompleteEvent) || ev.Message == nil || ev.Message.Method != "b" || s.LastEventID() != "2" {
		t.Fatalf("%+v %v", ev, err)
	}
	if ev, err := s.Next(t.Context()); !errors.Is(err, ErrIncompleteEvent) || ev.Message != nil {
		t.Fatalf("%+v %v", ev, err)
	}
}
