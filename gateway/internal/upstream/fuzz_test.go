package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/internal/canon"
	"github.com/mcphandler/mcphandler/internal/costguard"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// refEvent is an event as refSSE parses it.
type refEvent struct{ name, data, id string }

// refSSE is the HTML standard's event stream parsing, written plainly
// (no bounds, the whole input at once), to check sseReader against:
// the events dispatched, and whether the input ended inside an event.
func refSSE(in []byte) (evs []refEvent, incomplete bool) {
	in = bytes.TrimPrefix(in, bom)
	var lines []string
	start := 0
	for i := 0; i < len(in); i++ {
		if in[i] == '\r' || in[i] == '\n' {
			lines = append(lines, string(in[start:i]))
			if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
				i++
			}
			start = i + 1
		}
	}
	tail := string(in[start:])
	var name, data, lastID string
	pending, hasData := false, false
	for _, line := range lines {
		if line == "" {
			if d := strings.TrimSuffix(data, "\n"); hasData && d != "" {
				evs = append(evs, refEvent{name, d, lastID})
			}
			name, data, pending, hasData = "", "", false, false
			continue
		}
		if line[0] == ':' {
			continue
		}
		pending = true
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "event":
			name = value
		case "data":
			data += value + "\n"
			hasData = true
		case "id":
			if !strings.Contains(value, "\x00") && len(value) <= maxEventID {
				lastID = value
			}
		}
	}
	return evs, pending || tail != ""
}

// FuzzSSE: sseReader dispatches the events the standard's parsing does,
// in order, until a bound stops it; no event or line goes past its bound;
// reading is linear.
func FuzzSSE(f *testing.F) {
	for _, s := range []string{
		"data: {}\n\n", "event: endpoint\ndata: /messages?sessionId=1\n\n",
		"id: 1\nretry: 10\ndata:\n\nid: 2\ndata: x\r\n\r\n", ": keep-alive\n\n", "\xEF\xBB\xBFdata: a\rdata: b\r\r",
		"data: a\n\ndata: b", "data\ndata\n\n", "id: a\x00\ndata: 1\n\n", "data: " + strings.Repeat("x", 100) + "\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Add([]byte(strings.Repeat("data: y\n", 5000) + "\n"))
	f.Add([]byte(strings.Repeat("\r", 40000)))
	const maxLine, maxEvent, total = 80, 160, 64 << 10
	f.Fuzz(func(t *testing.T, in []byte) {
		var evs []event
		var err error
		costguard.Check(t, len(in), func() {
			left := int64(total)
			r := newSSEReader(&limitReader{r: bytes.NewReader(in), left: &left, what: "an SSE stream", max: total}, maxLine, maxEvent)
			evs = evs[:0]
			for {
				var ev event
				if ev, err = r.next(); err != nil {
					return
				}
				evs = append(evs, ev)
			}
		})
		want, incomplete := refSSE(in)
		if len(evs) > len(want) {
			t.Fatalf("%d events, the standard gives %d", len(evs), len(want))
		}
		for i, ev := range evs {
			if len(ev.data) > maxEvent || (refEvent{ev.name, string(ev.data), ev.id}) != want[i] {
				t.Fatalf("event %d: %q %q %q, want %+v", i, ev.name, ev.data, ev.id, want[i])
			}
		}
		switch {
		case errors.Is(err, ErrTooLarge):
			// Stopped by a bound: what came before is a prefix.
		case err == errIncomplete:
			if !incomplete || len(evs) != len(want) {
				t.Fatalf("incomplete after %d of %d events (the standard: incomplete %v)", len(evs), len(want), incomplete)
			}
		case err == io.EOF:
			if incomplete || len(evs) != len(want) {
				t.Fatalf("end after %d of %d events (the standard: incomplete %v)", len(evs), len(want), incomplete)
			}
		default:
			t.Fatalf("err %v", err)
		}
	})
}

// FuzzDecodeMessages: what decodeMessages accepts is JSON within the
// bounds, and each message is a valid request, notification or response
// whose result is an object; decoding is linear.
func FuzzDecodeMessages(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`, `{"jsonrpc":"2.0","id":"a","error":{"code":-32602,"message":"x","data":{}}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`,
		`{"jsonrpc":"2.0","id":"q","method":"elicitation/create","params":{}}`, `[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","method":"x"}]`,
		`[]`, `{"jsonrpc":"2.0","id":1,"result":[]}`, `{"jsonrpc":"2.0","id":null,"result":{}}`, `{"jsonrpc":"2.0","id":1,"result":{},"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"n":1e999}}`, `{"jsonrpc":"2.0","id":1.5,"result":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"n":` + strings.Repeat("1", 1000) + `}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var ms []message
		var err error
		costguard.Check(t, len(in), func() { ms, err = decodeMessages(in) })
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err %v is not ErrMalformed", err)
			}
			return
		}
		if cerr := canon.Check(in, limits); cerr != nil {
			t.Fatalf("accepted what canon refuses: %v", cerr)
		}
		for _, m := range ms {
			switch m.kind {
			case jsonrpc.KindRequest, jsonrpc.KindNotification:
				if m.Method == "" {
					t.Fatal("a request without a method")
				}
			case jsonrpc.KindResponse:
				if !jsonrpc.ValidID(m.ID) || (m.Error == nil && !isObjectBytes(m.Result)) {
					t.Fatalf("a response %s / %s", m.ID, m.Result)
				}
			default:
				t.Fatalf("kind %d", m.kind)
			}
		}
	})
}

// FuzzToolsPage: every tool kept has a valid name and an object
// definition that is one of the listed elements, and no name twice.
func FuzzToolsPage(f *testing.F) {
	for _, s := range []string{
		`{"tools":[{"name":"a","inputSchema":{"type":"object"}},{"name":"b"}],"nextCursor":"c"}`,
		`{"tools":[{"name":"a"},{"name":"a"},"x",1,null,{"name":"bad name"},{"name":""}]}`,
		`{"tools":{}}`, `{"tools":[],"nextCursor":5}`, `{"tools":[],"nextCursor":null}`, `{"tools":[{"NAME":"x","name":"y"}]}`,
		`{"tools":[],"ttlMs":60000,"cacheScope":"public"}`, `{"tools":[],"ttlMs":-1.5e3,"cacheScope":"private"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if checkJSON(in) != nil || !isObjectBytes(in) {
			return
		}
		l := toolList{hinted: true}
		if _, err := l.page(in); err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooMany) {
				t.Fatalf("err %v", err)
			}
			return
		}
		if h := l.hints; !h.Given || h.TTL < 0 || h.TTL > MaxHintTTL || h.TTL%time.Millisecond != 0 {
			t.Fatalf("hints %+v", h)
		}
		seen := map[string]bool{}
		for _, tl := range l.result() {
			if !validName(tl.Name) || !isObject(tl.Def) || seen[tl.Name] || !bytes.Contains(in, tl.Def) {
				t.Fatalf("tool %q %s", tl.Name, tl.Def)
			}
			var def struct{ Name *string }
			if json.Unmarshal(tl.Def, &def) != nil || def.Name == nil {
				t.Fatalf("def %s", tl.Def)
			}
			seen[tl.Name] = true
		}
	})
}

// fuzzTransport answers every request in memory: a fuzz upstream. A
// Sessions initialize and the notifications get a well-behaved answer;
// every other POST (Stateless, Sessions) and the GET of a resume, or the
// Legacy stream after its endpoint event and initialize result, get the
// fuzzed Content-Type and body.
type fuzzTransport struct {
	era   Era
	ctype string
	body  []byte
}

func (ft *fuzzTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var m struct {
		ID     json.RawMessage
		Method string
	}
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		_ = json.Unmarshal(b, &m)
	}
	resp := func(code int, ctype string, body []byte) *http.Response {
		h := http.Header{}
		if ctype != "" {
			h.Set("Content-Type", ctype)
		}
		if m.Method == "initialize" {
			h.Set("Mcp-Session-Id", "s1")
		}
		return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(bytes.NewReader(body)), Request: req}
	}
	switch {
	case req.Method == http.MethodDelete:
		return resp(http.StatusOK, "", nil), nil
	case ft.era == Legacy && req.Method == http.MethodGet:
		prefix := "event: endpoint\ndata: /m\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"2024-11-05\",\"capabilities\":{}}}\n\n"
		return resp(http.StatusOK, "text/event-stream", append([]byte(prefix), ft.body...)), nil
	case ft.era == Legacy:
		return resp(http.StatusAccepted, "", nil), nil
	case m.Method == "initialize":
		return resp(http.StatusOK, "application/json", []byte(`{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-11-25","capabilities":{}}}`)), nil
	case req.Method == http.MethodPost && len(m.ID) == 0:
		return resp(http.StatusAccepted, "", nil), nil
	}
	return resp(http.StatusOK, ft.ctype, ft.body), nil
}

// fuzzAsker answers every question at once.
type fuzzAsker struct{}

func (fuzzAsker) Ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{"action":"accept","content":{}}`), nil
}

func (fuzzAsker) Notify(ctx context.Context, method string, params json.RawMessage) {}

// FuzzCallToolAnswer: whatever an upstream answers a tools/call with, in
// any era, CallTool returns within its Timeout, and what it returns is a
// result object within the bounds, without the hop's envelope.
func FuzzCallToolAnswer(f *testing.F) {
	for _, c := range []struct {
		era   byte
		ctype string
		body  string
	}{
		{0, "application/json", `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"x"}]}}`},
		{0, "text/event-stream", "id: 1\ndata:\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"q\",\"method\":\"elicitation/create\",\"params\":{}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[]}}\n\n"},
		{0, "text/event-stream", "retry: 1\nid: 7\ndata:\n\n"},
		{1, "application/json", `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{}}}}`},
		{1, "application/json", `{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{}}},"requestState":"s"}}`},
		{1, "text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"upstream-call\",\"progress\":1}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602,\"message\":\"no\"}}\n\n"},
		{2, "", "data: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[]}}\n\n"},
		{2, "", "data: {\"jsonrpc\":\"2.0\",\"id\":\"r\",\"method\":\"roots/list\"}\n\n"},
		{0, "text/html", `<html>`},
	} {
		f.Add(c.era, c.ctype, []byte(c.body))
	}
	f.Fuzz(func(t *testing.T, era byte, ctype string, body []byte) {
		ft := &fuzzTransport{era: []Era{Sessions, Stateless, Legacy}[int(era)%3], ctype: ctype, body: body}
		ep := Endpoint{URL: "http://upstream.test/mcp", Era: ft.era, HTTP: &http.Client{Transport: ft},
			Timeout: 100 * time.Millisecond, MaxResponseBytes: 64 << 10}
		caps := json.RawMessage(`{"elicitation":{},"roots":{}}`)
		start := time.Now()
		res, err := CallTool(context.Background(), ep, caps, "t", nil, fuzzAsker{})
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("took %v", d)
		}
		if err != nil {
			if res != nil {
				t.Fatal("a result with an error")
			}
			return
		}
		if canon.Check(res, limits) != nil || !isObjectBytes(res) {
			t.Fatalf("result %s", res)
		}
		m := members(res)
		if _, ok := m["resultType"]; ok {
			t.Fatalf("result keeps resultType: %s", res)
		}
		if meta, ok := m["_meta"]; ok && bytes.Contains(meta, []byte(reservedMeta)) {
			for k := range members(meta) {
				if strings.HasPrefix(k, reservedMeta) {
					t.Fatalf("result keeps %s", k)
				}
			}
		}
	})
}

// FuzzInputRequired: whatever an input_required result holds,
// parseInputRequired returns ErrMalformed or ErrTooMany, or input requests
// in key order, each with a method the client declared, params an object
// or nil, and a state that is a JSON string within its bound, all taken
// from the result as sent; in time linear in the result.
func FuzzInputRequired(f *testing.F) {
	for _, s := range []string{
		`{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"message":"m"}}},"requestState":"s"}`,
		`{"requestState":"only"}`, `{"inputRequests":{}}`, `{"inputRequests":null,"requestState":"x\u0000"}`,
		`{"inputRequests":{"b":{"method":"roots/list"},"a":{"method":"sampling/createMessage","params":null}}}`,
		`{"inputRequests":{"a":{"method":"tasks/get"}}}`, `{"inputRequests":[],"requestState":1}`,
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, in []byte, formOnly bool) {
		if checkJSON(in) != nil || !isObjectBytes(in) {
			return
		}
		capsJSON := `{"elicitation":{},"sampling":{},"roots":{}}`
		if formOnly {
			capsJSON = `{"elicitation":{}}`
		}
		caps, err := parseCaps(json.RawMessage(capsJSON))
		if err != nil {
			t.Fatal(err)
		}
		var ir InputRequired
		costguard.Check(t, len(in), func() { ir, err = parseInputRequired(in, caps) })
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooMany) {
				t.Fatalf("err %v", err)
			}
			return
		}
		if len(ir.Requests) == 0 && ir.State == nil || len(ir.Requests) > maxAsks {
			t.Fatalf("%d requests, state %s", len(ir.Requests), ir.State)
		}
		if ir.State != nil {
			if _, ok := jsonrpc.String(ir.State); !ok || len(ir.State) > maxRequestState || !bytes.Contains(in, ir.State) {
				t.Fatalf("state %s", ir.State)
			}
		}
		for i, r := range ir.Requests {
			if i > 0 && ir.Requests[i-1].Key >= r.Key {
				t.Fatalf("keys out of order: %q then %q", ir.Requests[i-1].Key, r.Key)
			}
			if !caps.allows(r.Method) || r.Params != nil && (!isObjectBytes(r.Params) || !bytes.Contains(in, r.Params)) {
				t.Fatalf("request %+v", r)
			}
		}
	})
}
