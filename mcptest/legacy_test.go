package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// legacyFake is a minimal 2024-11-05 HTTP+SSE server written directly on
// net/http: GET /sse opens the stream and announces the message URL in an
// endpoint event; POST /messages?sessionId=… accepts messages with 202 and
// everything the server says goes out on the stream.
type legacyFake struct {
	t        testing.TB
	token    string
	absolute bool // announce an absolute message URL

	wg sync.WaitGroup // request handlers

	mu       sync.Mutex
	next     int
	sessions map[string]*legacySession
	posts    []modernSeen // every POST, in order
}

type legacySession struct {
	id      string
	out     chan []byte
	done    <-chan struct{} // the GET's context
	mu      sync.Mutex
	replies map[string]chan Message // server request id -> its response
}

func newLegacyFake(t testing.TB) *legacyFake {
	return &legacyFake{t: t, sessions: map[string]*legacySession{}}
}

func (f *legacyFake) postsOf(method string) []modernSeen {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []modernSeen
	for _, p := range f.posts {
		if p.Msg.Method == method {
			out = append(out, p)
		}
	}
	return out
}

func (f *legacyFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/sse":
		f.stream(w, r)
	case r.Method == http.MethodPost && r.URL.Path == "/messages":
		f.message(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (f *legacyFake) stream(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Accept") != "text/event-stream" {
		http.Error(w, "want Accept: text/event-stream", http.StatusNotAcceptable)
		return
	}
	f.mu.Lock()
	f.next++
	s := &legacySession{id: fmt.Sprint("s", f.next), out: make(chan []byte), done: r.Context().Done(), replies: map[string]chan Message{}}
	f.sessions[s.id] = s
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.sessions, s.id)
		f.mu.Unlock()
	}()
	endpoint := "/messages?sessionId=" + s.id
	if f.absolute {
		endpoint = "http://" + r.Host + endpoint
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	fmt.Fprintf(w, ": hello\n\nevent: endpoint\ndata: %s\n\n", endpoint)
	fl.Flush()
	for {
		select {
		case b := <-s.out:
			fmt.Fprintf(w, "event: message\ndata: %s\n\n", b)
			fl.Flush()
		case <-r.Context().Done():
			return
		}
	}
}

// send puts a message on the session's stream; false if it has ended.
func (s *legacySession) send(v any) bool {
	b, _ := json.Marshal(v)
	select {
	case s.out <- b:
		return true
	case <-s.done:
		return false
	}
}

func (f *legacyFake) message(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	s := f.sessions[r.URL.Query().Get("sessionId")]
	f.mu.Unlock()
	if s == nil {
		http.Error(w, "unknown session", http.StatusNotFound)
		return
	}
	if r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "bad content type", http.StatusUnsupportedMediaType)
		return
	}
	body, _ := io.ReadAll(r.Body)
	seen := modernSeen{Header: r.Header.Clone(), Body: body}
	if err := json.Unmarshal(body, &seen.Msg); err != nil {
		http.Error(w, "bad JSON", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.posts = append(f.posts, seen)
	f.mu.Unlock()
	m := seen.Msg
	w.WriteHeader(http.StatusAccepted)
	switch {
	case m.IsResponse():
		s.mu.Lock()
		ch := s.replies[string(m.ID)]
		delete(s.replies, string(m.ID))
		s.mu.Unlock()
		if ch == nil {
			f.t.Errorf("legacy fake: response to unknown request %s", m.ID)
			return
		}
		ch <- m
	case m.IsRequest():
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.handle(s, m)
		}()
	}
}

// ask sends a server request on the stream and waits for its response.
func (s *legacySession) ask(id, method string, params any) (Message, bool) {
	ch := make(chan Message, 1)
	s.mu.Lock()
	s.replies[`"`+id+`"`] = ch
	s.mu.Unlock()
	if !s.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}) {
		return Message{}, false
	}
	select {
	case m := <-ch:
		return m, true
	case <-s.done:
		return Message{}, false
	}
}

func (f *legacyFake) handle(s *legacySession, m Message) {
	reply := func(res any) { s.send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": res}) }
	var p struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ClientInfo      Implementation  `json:"clientInfo"`
		Name            string          `json:"name"`
	}
	_ = json.Unmarshal(m.Params, &p)
	switch m.Method {
	case "initialize":
		if p.ProtocolVersion != LegacyProtocolVersion || !jsonEqual(p.Capabilities, []byte(`{"elicitation":{}}`)) || p.ClientInfo.Name != "old" {
			f.t.Errorf("legacy fake: initialize params %s", m.Params)
		}
		reply(map[string]any{"protocolVersion": LegacyProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]any{"name": "legacy-fake", "version": "0.1"}})
	case "tools/list":
		reply(map[string]any{"tools": []any{map[string]any{"name": "confirm", "inputSchema": map[string]any{"type": "object"}}}})
	case "tools/call":
		switch p.Name {
		case "confirm":
			s.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"level": "info", "data": "asking"}})
			ans, ok := s.ask("srv-1", MethodElicit, map[string]any{"message": "Really?", "requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}})
			if !ok {
				return
			}
			var er ElicitResult
			_ = json.Unmarshal(ans.Result, &er)
			reply(textResult(fmt.Sprintf("%s %v", er.Action, er.Content["ok"])))
		case "slow":
			<-s.done
		default:
			s.send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": CodeInvalidParams, "message": "Unknown tool"}})
		}
	default:
		s.send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": CodeMethodNotFound, "message": "Method not found"}})
	}
}

func TestLegacyClient(t *testing.T) {
	f := newLegacyFake(t)
	f.token = "tok"
	t.Cleanup(f.wg.Wait) // runs after the client and the server are closed
	var elicited atomic.Int32
	c := NewLegacy(t, f, "/sse", WithToken("tok"), WithClientInfo("old", "1"),
		WithElicitationHandler(func(ctx context.Context, p ElicitParams) (ElicitResult, error) {
			elicited.Add(1)
			if p.Message != "Really?" {
				t.Errorf("elicitation params %s", p.Raw)
			}
			return ElicitResult{Action: ActionAccept, Content: map[string]any{"ok": true}}, nil
		}))
	if c.MessageURL() != "" {
		t.Errorf("MessageURL before Connect: %q", c.MessageURL())
	}
	if _, err := c.Call(t.Context(), "tools/list", nil); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Call before Connect: %v", err)
	}
	init, err := c.Initialize(t.Context())
	if err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	if init.ProtocolVersion != LegacyProtocolVersion || init.ServerInfo.Name != "legacy-fake" || c.ProtocolVersion() != LegacyProtocolVersion {
		t.Errorf("initialize result %s", init.Raw)
	}
	if want := strings.TrimSuffix(c.SSEURL(), "/sse") + "/messages?sessionId=s1"; c.MessageURL() != want {
		t.Errorf("MessageURL %q, want %q", c.MessageURL(), want)
	}
	if err := c.Connect(t.Context()); err == nil {
		t.Error("second Connect succeeded")
	}
	tools, err := c.ListTools(t.Context())
	if err != nil || len(tools) != 1 || tools[0].Name != "confirm" {
		t.Fatalf("ListTools: %v, %v", tools, err)
	}
	res, err := c.CallTool(t.Context(), "confirm", map[string]any{})
	if err != nil || res.Text() != "accept true" {
		t.Fatalf("CallTool: %v, %v", res, err)
	}
	if elicited.Load() != 1 {
		t.Errorf("%d elicitations", elicited.Load())
	}
	if n := c.Notifications(); len(n) != 1 || n[0].Method != "notifications/message" {
		t.Errorf("notifications %v", n)
	}
	if r := c.ServerRequests(); len(r) != 1 || r[0].Method != MethodElicit || string(r[0].ID) != `"srv-1"` {
		t.Errorf("server requests %v", r)
	}
	var re *RPCError
	if _, err := c.CallTool(t.Context(), "nope", nil); !errors.As(err, &re) || re.Code != CodeInvalidParams {
		t.Errorf("unknown tool: %v", err)
	}

	// What went over the wire.
	f.mu.Lock()
	posts := slices.Clone(f.posts)
	f.mu.Unlock()
	var kinds []string
	for _, p := range posts {
		if p.Header.Get("Authorization") != "Bearer tok" || p.Header.Get("Content-Type") != "application/json" ||
			p.Header.Get("Mcp-Protocol-Version") != "" || p.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("POST headers %v", p.Header)
		}
		switch {
		case p.Msg.IsResponse():
			kinds = append(kinds, "response "+string(p.Msg.ID))
		default:
			kinds = append(kinds, p.Msg.Method)
		}
	}
	want := []string{"initialize", "notifications/initialized", "tools/list", "tools/call", `response "srv-1"`, "tools/call"}
	if !slices.Equal(kinds, want) {
		t.Errorf("POSTs %q, want %q", kinds, want)
	}
	if errs := c.Errors(); len(errs) != 0 {
		t.Errorf("reader errors %v", errs)
	}

	c.Close()
	if _, err := c.Call(t.Context(), "tools/list", nil); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Call after Close: %v", err)
	}
	// A closed client can connect again; the server gives a new session.
	if err := c.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(c.MessageURL(), "sessionId=s2") {
		t.Errorf("MessageURL after reconnect %q", c.MessageURL())
	}
}

func TestDialLegacy(t *testing.T) {
	f := newLegacyFake(t)
	f.absolute = true
	srv := httptest.NewServer(f)
	defer srv.Close()
	defer f.wg.Wait()
	c := DialLegacy(srv.URL+"/sse", WithClientInfo("old", "1"), WithCapabilities(json.RawMessage(`{"elicitation":{}}`)))
	defer c.Close()
	if err := c.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c.MessageURL() != srv.URL+"/messages?sessionId=s1" {
		t.Errorf("MessageURL %q", c.MessageURL())
	}
	if _, err := c.Initialize(t.Context()); err != nil {
		t.Fatal(err)
	}

	// A call whose context ends sends notifications/cancelled.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.CallTool(ctx, "slow", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow call: %v", err)
	}
	cancels := f.postsOf("notifications/cancelled")
	if len(cancels) != 1 || !strings.Contains(string(cancels[0].Msg.Params), `"requestId":2`) {
		t.Errorf("cancellations %v", cancels)
	}

	// Raw POST to the message URL.
	resp, err := c.Post(t.Context(), []byte(`{"jsonrpc":"2.0","method":"notifications/whatever"}`), http.Header{"Content-Type": {"text/plain"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("raw POST status %d", resp.StatusCode)
	}
}

func TestLegacyConnectErrors(t *testing.T) {
	f := newLegacyFake(t)
	f.token = "tok"
	c := NewLegacy(t, f, "sse")
	var he *HTTPError
	if err := c.Connect(t.Context()); !errors.As(err, &he) || he.Status != http.StatusUnauthorized {
		t.Errorf("Connect without token: %v", err)
	}

	noEndpoint := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n")
	})
	c2 := NewLegacy(t, noEndpoint, "/sse")
	if err := c2.Connect(t.Context()); err == nil || !strings.Contains(err.Error(), "endpoint") {
		t.Errorf("Connect without endpoint event: %v", err)
	}

	silent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	c3 := NewLegacy(t, silent, "/sse")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := c3.Connect(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Connect to a silent server: %v", err)
	}

	// The server ends the stream: pending and later calls fail.
	ended := make(chan struct{})
	short := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusAccepted)
			close(ended)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: endpoint\ndata: /messages\n\n")
		w.(http.Flusher).Flush()
		<-ended
	})
	c4 := NewLegacy(t, short, "/sse")
	if err := c4.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := c4.Call(t.Context(), "tools/list", nil); !errors.Is(err, ErrNoResponse) {
		t.Errorf("call on an ended stream: %v", err)
	}
}
