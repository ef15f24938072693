package mcptest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeServer is a minimal MCP Streamable HTTP server written directly on
// net/http, just enough to exercise the client.
type fakeServer struct {
	t     testing.TB
	token string // required bearer token, if set

	mu          sync.Mutex
	nextSession int
	sessions    map[string]string // session id -> negotiated version
	log         []seen            // every HTTP request, in order
	waiters     map[string]chan Message
	nextReq     int
	resumable   map[string]json.RawMessage // event id -> id of the request it answers
	requestIDs  map[string]bool            // client request ids seen
	duplicateID bool
}

// seen is one request the fake received.
type seen struct {
	HTTPMethod string
	Header     http.Header
	Msg        Message // zero for GET/DELETE and batches
	Body       []byte
}

func newFake(t testing.TB) *fakeServer {
	return &fakeServer{
		t:          t,
		sessions:   map[string]string{},
		waiters:    map[string]chan Message{},
		resumable:  map[string]json.RawMessage{},
		requestIDs: map[string]bool{},
	}
}

var supportedVersions = []string{"2025-03-26", "2025-06-18", "2025-11-25"}

func (f *fakeServer) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

// find returns the requests whose JSON-RPC method is method.
func (f *fakeServer) find(method string) []seen {
	var out []seen
	for _, s := range f.requests() {
		if s.Msg.Method == method {
			out = append(out, s)
		}
	}
	return out
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s := seen{HTTPMethod: r.Method, Header: r.Header.Clone(), Body: body}
	_ = json.Unmarshal(body, &s.Msg)
	f.mu.Lock()
	f.log = append(f.log, s)
	f.mu.Unlock()

	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		http.Error(w, `{"error":"invalid_token"}`, http.StatusUnauthorized)
		return
	}
	switch r.Method {
	case http.MethodPost:
		f.post(w, r, s)
	case http.MethodGet:
		f.get(w, r)
	case http.MethodDelete:
		if !f.checkSession(w, r, false) {
			return
		}
		f.mu.Lock()
		delete(f.sessions, r.Header.Get(HeaderSessionID))
		f.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

// checkSession answers 400 without a session id, 404 for an unknown one and
// 400 for a wrong protocol version header (checked when version is true).
func (f *fakeServer) checkSession(w http.ResponseWriter, r *http.Request, version bool) bool {
	sid := r.Header.Get(HeaderSessionID)
	if sid == "" {
		writeError(w, http.StatusBadRequest, "missing session id")
		return false
	}
	f.mu.Lock()
	v, ok := f.sessions[sid]
	f.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "session not found")
		return false
	}
	if version && r.Header.Get("MCP-Protocol-Version") != v {
		writeError(w, http.StatusBadRequest, "bad protocol version "+r.Header.Get("MCP-Protocol-Version"))
		return false
	}
	return true
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":%q}}`, msg)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func result(id json.RawMessage, res any) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": id, "result": res}
}

func rpcErr(id json.RawMessage, code int, msg string) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}}
}

func textResult(text string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}
}

// sse starts an SSE answer and returns a function that writes one event.
func sse(w http.ResponseWriter) func(id string, v any) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	fl.Flush()
	return func(id string, v any) {
		if id != "" {
			fmt.Fprintf(w, "id: %s\n", id)
		}
		if v == nil {
			fmt.Fprint(w, "data:\n\n")
		} else {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		fl.Flush()
	}
}

func (f *fakeServer) post(w http.ResponseWriter, r *http.Request, s seen) {
	if r.Header.Get("Content-Type") != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "bad content type")
		return
	}
	acc := r.Header.Get("Accept")
	if !strings.Contains(acc, "application/json") || !strings.Contains(acc, "text/event-stream") {
		writeError(w, http.StatusNotAcceptable, "bad accept")
		return
	}
	if strings.HasPrefix(strings.TrimSpace(string(s.Body)), "[") {
		f.batch(w, r, s.Body)
		return
	}
	m := s.Msg
	if m.IsRequest() {
		f.mu.Lock()
		if f.requestIDs[string(m.ID)] {
			f.duplicateID = true
		}
		f.requestIDs[string(m.ID)] = true
		f.mu.Unlock()
	}
	if m.Method == "initialize" {
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(m.Params, &p)
		v := p.ProtocolVersion
		if !slices.Contains(supportedVersions, v) {
			v = "2025-11-25"
		}
		f.mu.Lock()
		f.nextSession++
		sid := fmt.Sprintf("sess-%d", f.nextSession)
		f.sessions[sid] = v
		f.mu.Unlock()
		w.Header().Set("MCP-Session-Id", sid)
		writeJSON(w, result(m.ID, map[string]any{
			"protocolVersion": v,
			"capabilities":    map[string]any{"tools": map[string]any{}, "logging": map[string]any{}},
			"serverInfo":      map[string]any{"name": "fake", "title": "Fake Server", "version": "0.1"},
			"instructions":    "be nice",
		}))
		return
	}
	if !f.checkSession(w, r, true) {
		return
	}
	switch {
	case m.IsResponse():
		f.mu.Lock()
		ch := f.waiters[string(m.ID)]
		delete(f.waiters, string(m.ID))
		f.mu.Unlock()
		if ch == nil {
			writeError(w, http.StatusBadRequest, "unknown response id")
			return
		}
		ch <- m
		w.WriteHeader(http.StatusAccepted)
	case m.IsNotification():
		w.WriteHeader(http.StatusAccepted)
	case m.IsRequest():
		f.request(w, r, m)
	default:
		writeError(w, http.StatusBadRequest, "invalid message")
	}
}

func (f *fakeServer) batch(w http.ResponseWriter, r *http.Request, body []byte) {
	if !f.checkSession(w, r, true) {
		return
	}
	var msgs []Message
	if err := json.Unmarshal(body, &msgs); err != nil {
		writeError(w, http.StatusBadRequest, "bad batch")
		return
	}
	var out []any
	for _, m := range msgs {
		switch {
		case !m.IsRequest():
		case m.Method == "ping":
			out = append(out, result(m.ID, map[string]any{}))
		default:
			out = append(out, rpcErr(m.ID, CodeMethodNotFound, "no "+m.Method))
		}
	}
	if out == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	slices.Reverse(out) // responses may come in any order
	writeJSON(w, out)
}

// serverRequest sends a server request on an SSE stream and waits for the
// client's answer, which arrives as a separate POST.
func (f *fakeServer) serverRequest(r *http.Request, send func(string, any), method string, params any) (Message, bool) {
	f.mu.Lock()
	f.nextReq++
	id := fmt.Sprintf(`"srv-%d"`, f.nextReq)
	ch := make(chan Message, 1)
	f.waiters[id] = ch
	f.mu.Unlock()
	req := map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method}
	if params != nil {
		req["params"] = params
	}
	send("", req)
	select {
	case m := <-ch:
		return m, true
	case <-r.Context().Done():
		return Message{}, false
	}
}

var allTools = []map[string]any{
	{"name": "echo", "title": "Echo", "inputSchema": map[string]any{"type": "object"}},
	{"name": "progress", "inputSchema": map[string]any{"type": "object"}},
	{"name": "confirm", "inputSchema": map[string]any{"type": "object"}, "annotations": map[string]any{"destructiveHint": true}},
}

func (f *fakeServer) request(w http.ResponseWriter, r *http.Request, m Message) {
	switch m.Method {
	case "ping", "logging/setLevel":
		writeJSON(w, result(m.ID, map[string]any{}))
	case "boom":
		http.Error(w, "kaboom", http.StatusInternalServerError)
	case "tools/list":
		var p struct {
			Cursor *string `json:"cursor"`
		}
		_ = json.Unmarshal(m.Params, &p)
		switch {
		case p.Cursor == nil:
			writeJSON(w, result(m.ID, map[string]any{"tools": allTools[:2], "nextCursor": "page2"}))
		case *p.Cursor == "page2":
			writeJSON(w, result(m.ID, map[string]any{"tools": allTools[2:]}))
		default:
			writeJSON(w, rpcErr(m.ID, CodeInvalidParams, "invalid cursor"))
		}
	case "tools/call":
		f.callTool(w, r, m)
	default:
		writeJSON(w, rpcErr(m.ID, CodeMethodNotFound, "Method not found"))
	}
}

func (f *fakeServer) callTool(w http.ResponseWriter, r *http.Request, m Message) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	_ = json.Unmarshal(m.Params, &p)
	switch p.Name {
	case "echo":
		var args struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(p.Arguments, &args)
		writeJSON(w, result(m.ID, map[string]any{
			"content":           []any{map[string]any{"type": "text", "text": args.Text}},
			"structuredContent": map[string]any{"text": args.Text, "hadArguments": p.Arguments != nil},
		}))
	case "fail":
		writeJSON(w, result(m.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": "nope"}}, "isError": true}))
	case "progress":
		send := sse(w)
		send("p-0", nil) // priming event
		fmt.Fprint(w, ": keep-alive comment\n\n")
		send("p-1", map[string]any{"jsonrpc": "2.0", "method": "notifications/progress",
			"params": map[string]any{"progressToken": "tok", "progress": 1, "total": 2}})
		send("p-2", map[string]any{"jsonrpc": "2.0", "method": "notifications/message",
			"params": map[string]any{"level": "info", "data": "half way"}})
		send("p-3", result(m.ID, textResult("done")))
	case "confirm":
		send := sse(w)
		send("c-0", nil)
		ans, ok := f.serverRequest(r, send, MethodElicit, map[string]any{
			"message":         "Really delete?",
			"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"confirm": map[string]any{"type": "boolean"}}},
		})
		if !ok {
			return
		}
		b, _ := json.Marshal(ans)
		send("c-1", result(m.ID, textResult(string(b))))
	case "roots", "pingback":
		method := MethodRootsList
		if p.Name == "pingback" {
			method = MethodPing
		}
		send := sse(w)
		ans, ok := f.serverRequest(r, send, method, nil)
		if !ok {
			return
		}
		b, _ := json.Marshal(ans)
		send("", result(m.ID, textResult(string(b))))
	case "resume":
		// Close the connection after one event, as 2025-11-25 polling
		// allows; the result is served to a GET with Last-Event-ID.
		w.Header().Set("Content-Type", "text/event-stream")
		f.mu.Lock()
		f.resumable["r-1"] = m.ID
		f.mu.Unlock()
		fmt.Fprint(w, "id: r-1\nretry: 10\ndata:\n\n")
	case "resume_cut", "cut":
		// Break the connection (the body left unterminated) after one
		// event, with an id for resume_cut and without for cut.
		w.Header().Set("Content-Type", "text/event-stream")
		if p.Name == "cut" {
			fmt.Fprint(w, "retry: 10\ndata:\n\n")
		} else {
			f.mu.Lock()
			f.resumable["r-1"] = m.ID
			f.mu.Unlock()
			fmt.Fprint(w, "id: r-1\nretry: 10\ndata:\n\n")
		}
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	case "slow":
		send := sse(w)
		send("s-0", nil)
		<-r.Context().Done()
	default:
		writeJSON(w, rpcErr(m.ID, CodeInvalidParams, "unknown tool "+p.Name))
	}
}

func (f *fakeServer) get(w http.ResponseWriter, r *http.Request) {
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		writeError(w, http.StatusNotAcceptable, "bad accept")
		return
	}
	if !f.checkSession(w, r, true) {
		return
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		f.mu.Lock()
		id, ok := f.resumable[last]
		delete(f.resumable, last)
		f.mu.Unlock()
		if !ok {
			writeError(w, http.StatusNotFound, "unknown event id")
			return
		}
		send := sse(w)
		send("r-2", result(id, textResult("resumed")))
		return
	}
	send := sse(w)
	send("g-0", nil) // priming event
	fmt.Fprint(w, ": hello\r\n\r\n")
	send("g-1", map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
	f.mu.Lock()
	f.nextReq++
	id := fmt.Sprintf(`"srv-%d"`, f.nextReq)
	ch := make(chan Message, 1)
	f.waiters[id] = ch
	f.mu.Unlock()
	send("g-2", map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": "ping"})
	select {
	case m := <-ch:
		b, _ := json.Marshal(m)
		send("g-3", map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"level": "info", "data": string(b)}})
	case <-r.Context().Done():
		return
	}
	<-r.Context().Done()
}
