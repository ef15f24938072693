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
