package mcptest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
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

// The requestState the modern fake issues, as raw JSON: escapes that a
// re-encoding would change (\u003c, \u00e9, \u2028, \/) must come back as
// sent. mrtrStateRaw(n) appends a nonce so that concurrent calls get
// different states.
const mrtrStatePrefixRaw = `v1.\u003c&>\"\u00e9\"\u2028 st\/+=`

func mrtrStateRaw(n int) string { return fmt.Sprintf(`"%s#%d"`, mrtrStatePrefixRaw, n) }

// modernFake is a minimal 2026-07-28 server written directly on net/http.
// Every request is checked against the wire rules; a violation is reported
// with t.Errorf and answered with 400 -32020 (headers) or -32602 (_meta).
type modernFake struct {
	t     testing.TB
	token string
	// wantCaps, when set, is the clientCapabilities every request must carry.
	wantCaps string
	// wantInfo, when set, is the clientInfo every request must carry.
	wantInfo string
	// wantLogLevel, when set, is the logLevel every request must carry.
	wantLogLevel string
	// lenient answers violations without reporting them as test failures.
	lenient bool

	mu     sync.Mutex
	log    []modernSeen
	ids    map[string]bool            // every JSON-RPC id seen
	issued map[string]json.RawMessage // decoded requestState -> id of the call it answered
	nonce  int
	// rawEcho records, for each accepted confirm retry, whether the
	// requestState token came back with the exact bytes the fake sent.
	rawEcho []bool
}

// modernSeen is one request the modern fake received.
type modernSeen struct {
	Header http.Header
	Body   []byte
	Msg    Message
	Params map[string]json.RawMessage
	Meta   map[string]json.RawMessage
}

func newModernFake(t testing.TB) *modernFake {
	return &modernFake{t: t, ids: map[string]bool{}, issued: map[string]json.RawMessage{}}
}

func (f *modernFake) requests() []modernSeen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

func (f *modernFake) find(method string) []modernSeen {
	var out []modernSeen
	for _, s := range f.requests() {
		if s.Msg.Method == method {
			out = append(out, s)
		}
	}
	return out
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func modernReply(w http.ResponseWriter, status int, id json.RawMessage, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, "result": v})
}

func modernError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
}

func complete(res map[string]any) map[string]any {
	res["resultType"] = ResultTypeComplete
	res["_meta"] = map[string]any{MetaServerInfo: map[string]any{"name": "fake", "version": "1"}}
	return res
}

// decodeName undoes the =?base64?…?= encoding (written here by hand so
// that the fake does not trust the client's own decoder).
func decodeName(v string) (string, bool) {
	if len(v) >= 11 && strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?=") {
		b, err := base64.StdEncoding.DecodeString(v[9 : len(v)-2])
		return string(b), err == nil
	}
	return v, true
}

func (f *modernFake) violation(w http.ResponseWriter, id json.RawMessage, code int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !f.lenient {
		f.t.Errorf("modern fake: %s", msg)
	}
	modernError(w, http.StatusBadRequest, id, code, msg)
}

func (f *modernFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s := modernSeen{Header: r.Header.Clone(), Body: body}
	_ = json.Unmarshal(body, &s.Msg)
	_ = json.Unmarshal(s.Msg.Params, &s.Params)
	_ = json.Unmarshal(s.Params["_meta"], &s.Meta)
	f.mu.Lock()
	f.log = append(f.log, s)
	f.mu.Unlock()
	m := s.Msg
	id := m.ID

	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		http.Error(w, `{"error":"invalid_token"}`, http.StatusUnauthorized)
		return
	}
	if r.Header.Get("Content-Type") != "application/json" {
		f.violation(w, id, CodeInvalidRequest, "Content-Type %q", r.Header.Get("Content-Type"))
		return
	}
	if acc := r.Header.Get("Accept"); !strings.Contains(acc, "application/json") || !strings.Contains(acc, "text/event-stream") {
		f.violation(w, id, CodeInvalidRequest, "Accept %q", acc)
		return
	}
	if r.Header.Get("Mcp-Session-Id") != "" || r.Header.Get("Last-Event-Id") != "" {
		f.violation(w, id, CodeInvalidRequest, "legacy header on a modern request")
		return
	}
	if !m.IsRequest() {
		f.violation(w, id, CodeInvalidRequest, "not a request: %s", body)
		return
	}
	f.mu.Lock()
	dup := f.ids[string(id)]
	f.ids[string(id)] = true
	f.mu.Unlock()
	if dup {
		f.violation(w, id, CodeInvalidRequest, "id %s reused", id)
		return
	}
	hv := r.Header.Get("MCP-Protocol-Version")
	if hv == "" {
		f.violation(w, id, CodeHeaderMismatch, "missing MCP-Protocol-Version")
		return
	}
	if s.Meta == nil {
		f.violation(w, id, CodeInvalidParams, "missing _meta")
		return
	}
	var pv string
	if json.Unmarshal(s.Meta[MetaProtocolVersion], &pv) != nil {
		f.violation(w, id, CodeInvalidParams, "missing _meta protocolVersion")
		return
	}
	if s.Meta[MetaClientCapabilities] == nil {
		f.violation(w, id, CodeInvalidParams, "missing _meta clientCapabilities")
		return
	}
	if pv != hv {
		f.violation(w, id, CodeHeaderMismatch, "header version %q != _meta %q", hv, pv)
		return
	}
	if pv != ModernProtocolVersion {
		f.violation(w, id, CodeUnsupportedProtocolVersion, "unsupported version %q", pv)
		return
	}
	if f.wantCaps != "" && !jsonEqual(s.Meta[MetaClientCapabilities], []byte(f.wantCaps)) {
		f.violation(w, id, CodeInvalidParams, "clientCapabilities %s, want %s", s.Meta[MetaClientCapabilities], f.wantCaps)
		return
	}
	if f.wantInfo != "" && !jsonEqual(s.Meta[MetaClientInfo], []byte(f.wantInfo)) {
		f.violation(w, id, CodeInvalidParams, "clientInfo %s, want %s", s.Meta[MetaClientInfo], f.wantInfo)
		return
	}
	if f.wantLogLevel != "" && !jsonEqual(s.Meta[MetaLogLevel], []byte(`"`+f.wantLogLevel+`"`)) {
		f.violation(w, id, CodeInvalidParams, "logLevel %s, want %q", s.Meta[MetaLogLevel], f.wantLogLevel)
		return
	}
	if got := r.Header.Get("Mcp-Method"); got != m.Method {
		f.violation(w, id, CodeHeaderMismatch, "Mcp-Method %q, body %q", got, m.Method)
		return
	}
	nameKey := map[string]string{"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}[m.Method]
	rawName, hasName := r.Header["Mcp-Name"]
	switch {
	case nameKey == "" && hasName:
		f.violation(w, id, CodeHeaderMismatch, "Mcp-Name %q on %s", rawName, m.Method)
		return
	case nameKey != "":
		var want string
		_ = json.Unmarshal(s.Params[nameKey], &want)
		got, ok := decodeName(r.Header.Get("Mcp-Name"))
		if !hasName || !ok || got != want {
			f.violation(w, id, CodeHeaderMismatch, "Mcp-Name %q (decoded %q), body %q", rawName, got, want)
			return
		}
	}
	f.serve(w, r, s)
}

func (f *modernFake) serve(w http.ResponseWriter, r *http.Request, s modernSeen) {
	m, id := s.Msg, s.Msg.ID
	switch m.Method {
	case "server/discover":
		modernReply(w, 200, id, complete(map[string]any{
			"supportedVersions": []string{ModernProtocolVersion},
			"capabilities":      map[string]any{"tools": map[string]any{"listChanged": true}},
		}))
	case "tools/list":
		var cursor string
		_ = json.Unmarshal(s.Params["cursor"], &cursor)
		if cursor == "" {
			modernReply(w, 200, id, complete(map[string]any{"tools": []any{map[string]any{"name": "confirm", "inputSchema": map[string]any{"type": "object"}}}, "nextCursor": "p2"}))
		} else {
			modernReply(w, 200, id, complete(map[string]any{"tools": []any{map[string]any{"name": "héllo wörld", "inputSchema": map[string]any{"type": "object"}}}}))
		}
	case "resources/read":
		var uri string
		_ = json.Unmarshal(s.Params["uri"], &uri)
		modernReply(w, 200, id, complete(map[string]any{"contents": []any{map[string]any{"uri": uri, "text": "body of " + uri}}}))
	case "prompts/get":
		modernReply(w, 200, id, complete(map[string]any{"messages": []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": string(s.Params["arguments"])}}}}))
	case "tools/call":
		f.callTool(w, r, s)
	case "subscriptions/listen":
		f.listen(w, r, s)
	default:
		modernError(w, http.StatusNotFound, id, CodeMethodNotFound, "Method not found: "+m.Method)
	}
}

// modernSSE starts an SSE answer and returns a function that writes one
// event with v (raw JSON if it is a string).
func modernSSE(w http.ResponseWriter) func(v any) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	fl.Flush()
	return func(v any) {
		b, ok := v.(string)
		if !ok {
			bb, _ := json.Marshal(v)
			b = string(bb)
		}
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
}

func (f *modernFake) callTool(w http.ResponseWriter, r *http.Request, s modernSeen) {
	id := s.Msg.ID
	var name string
	_ = json.Unmarshal(s.Params["name"], &name)
	switch name {
	case "confirm":
		f.confirm(w, s)
	case "héllo wörld", " padded", "=?base64?abc?=":
		modernReply(w, 200, id, complete(textResult("hi "+name)))
	case "loop":
		f.mu.Lock()
		f.nonce++
		n := f.nonce
		f.mu.Unlock()
		modernReply(w, 200, id, map[string]any{"resultType": ResultTypeInputRequired, "requestState": fmt.Sprint("again-", n)})
	case "fails":
		modernError(w, http.StatusOK, id, CodeInternalError, "tool crashed")
	case "untyped":
		modernReply(w, 200, id, textResult("no resultType"))
	case "weird":
		modernReply(w, 200, id, map[string]any{"resultType": "task", "task": map[string]any{"taskId": "t1"}})
	case "needs_sampling":
		modernReply(w, 200, id, map[string]any{"resultType": ResultTypeInputRequired, "inputRequests": map[string]any{
			"llm": map[string]any{"method": MethodSampling, "params": map[string]any{"messages": []any{}, "maxTokens": 5}},
		}})
	case "rogue":
		send := modernSSE(w)
		send(map[string]any{"jsonrpc": "2.0", "id": "srv-1", "method": MethodElicit, "params": map[string]any{"message": "forbidden"}})
		send(map[string]any{"jsonrpc": "2.0", "id": id, "result": complete(textResult("late"))})
	default:
		modernError(w, http.StatusBadRequest, id, CodeInvalidParams, "Unknown tool: "+name)
	}
}

// The answers the confirm tool expects, and the requests it makes.
const (
	confirmElicitAnswer = `{"action":"accept","content":{"ok":true}}`
	confirmSampleAnswer = `{"role":"assistant","content":{"type":"text","text":"yes"},"model":"m1"}`
	confirmRootsAnswer  = `{"roots":[{"uri":"file:///tmp","name":"tmp"}]}`
	confirmArgs         = `{"project":"alpha"}`
)

// confirm answers the first call with input_required (elicitation,
// sampling and roots in one round) and completes a retry only if it carries
// a new id, the original arguments and _meta, the three answers and the
// state it issued (single use), with the same value byte for byte.
func (f *modernFake) confirm(w http.ResponseWriter, s modernSeen) {
	id := s.Msg.ID
	if !jsonEqual(s.Params["arguments"], []byte(confirmArgs)) {
		f.violation(w, id, CodeInvalidParams, "arguments %s", s.Params["arguments"])
		return
	}
	if !jsonEqual(s.Meta["progressToken"], []byte(`"p-7"`)) {
		f.violation(w, id, CodeInvalidParams, "progressToken lost: %s", s.Params["_meta"])
		return
	}
	rawState, retry := s.Params["requestState"]
	if !retry {
		if s.Params["inputResponses"] != nil {
			f.violation(w, id, CodeInvalidParams, "inputResponses on a first call")
			return
		}
		f.mu.Lock()
		f.nonce++
		raw := mrtrStateRaw(f.nonce)
		var state string
		_ = json.Unmarshal([]byte(raw), &state)
		f.issued[state] = id
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"input_required","inputRequests":{`+
			`"ask":{"method":"elicitation/create","params":{"mode":"form","message":"Delete alpha?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}}},`+
			`"llm":{"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"ok?"}}],"maxTokens":10}},`+
			`"where":{"method":"roots/list","params":{}}},`+
			`"requestState":%s}}`, id, raw)
		return
	}
	var state string
	if err := json.Unmarshal(rawState, &state); err != nil {
		f.violation(w, id, CodeInvalidParams, "requestState %s is not a string", rawState)
		return
	}
	f.mu.Lock()
	firstID, ok := f.issued[state]
	delete(f.issued, state)
	f.mu.Unlock()
	if !ok {
		modernError(w, http.StatusBadRequest, id, CodeInvalidParams, "Invalid or expired requestState")
		return
	}
	// The value is what counts; whether the JSON token also came back with
	// the very bytes the fake sent (no re-encoding) is recorded for tests.
	f.mu.Lock()
	f.rawEcho = append(f.rawEcho, bytes.Contains(s.Body, []byte(`"requestState":`+string(rawState))) &&
		strings.HasPrefix(string(rawState), `"`+mrtrStatePrefixRaw))
	f.mu.Unlock()
	if string(firstID) == string(id) {
		f.violation(w, id, CodeInvalidRequest, "retry reuses id %s", id)
		return
	}
	var answers map[string]json.RawMessage
	_ = json.Unmarshal(s.Params["inputResponses"], &answers)
	if len(answers) != 3 || !jsonEqual(answers["ask"], []byte(confirmElicitAnswer)) ||
		!jsonEqual(answers["llm"], []byte(confirmSampleAnswer)) || !jsonEqual(answers["where"], []byte(confirmRootsAnswer)) {
		f.violation(w, id, CodeInvalidParams, "inputResponses %s", s.Params["inputResponses"])
		return
	}
	send := modernSSE(w)
	send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{"progressToken": "p-7", "progress": 1, "total": 1}})
	send(map[string]any{"jsonrpc": "2.0", "id": id, "result": complete(textResult("deleted alpha"))})
}

// listen acknowledges the filter, sends one notification and keeps the
// stream open until the client closes it.
func (f *modernFake) listen(w http.ResponseWriter, r *http.Request, s modernSeen) {
	id := s.Msg.ID
	var filter map[string]json.RawMessage
	if json.Unmarshal(s.Params["notifications"], &filter) != nil || filter == nil {
		modernError(w, http.StatusBadRequest, id, CodeInvalidParams, "notifications filter required")
		return
	}
	acked := map[string]json.RawMessage{}
	if string(filter["toolsListChanged"]) == "true" {
		acked["toolsListChanged"] = json.RawMessage("true")
	}
	meta := map[string]any{MetaSubscriptionID: id}
	send := modernSSE(w)
	send(map[string]any{"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": map[string]any{"notifications": acked, "_meta": meta}})
	if acked["toolsListChanged"] != nil {
		send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": map[string]any{"_meta": meta}})
	}
	<-r.Context().Done()
}

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
