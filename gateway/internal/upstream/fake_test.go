package upstream_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
)

// fake is a hand-written upstream, for what the library never sends: its
// answer decides each request; what it leaves (returns false for) gets a
// well-behaved 2025 server's answer: initialize agrees on version with
// session id "s1", notifications and responses are accepted, DELETE ends
// the session.
type fake struct {
	srv     *httptest.Server
	version string
	answer  func(w http.ResponseWriter, r *http.Request, m rpc) bool

	mu   sync.Mutex
	msgs []rpc // every message POSTed
	dels int
}

// rpc is one JSON-RPC message POSTed to the fake, with its headers.
type rpc struct {
	Method string          `json:"method"`
	ID     json.RawMessage `json:"id"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
	header http.Header
}

func newFake(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, m rpc) bool) *fake {
	t.Helper()
	f := &fake{version: "2025-11-25", answer: answer}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		f.srv.CloseClientConnections()
		f.srv.Close()
	})
	return f
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	var m rpc
	if r.Method == http.MethodPost {
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &m)
		m.header = r.Header.Clone()
		f.mu.Lock()
		f.msgs = append(f.msgs, m)
		f.mu.Unlock()
	}
	if f.answer != nil && f.answer(w, r, m) {
		return
	}
	switch {
	case r.Method == http.MethodDelete:
		f.mu.Lock()
		f.dels++
		f.mu.Unlock()
	case r.Method != http.MethodPost:
		w.WriteHeader(http.StatusMethodNotAllowed)
	case m.Method == "initialize":
		w.Header().Set("Mcp-Session-Id", "s1")
		writeJSON(w, m.ID, `{"protocolVersion":"`+f.version+`","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`)
	case len(m.ID) == 0 || m.Method == "":
		w.WriteHeader(http.StatusAccepted)
	default:
		writeJSON(w, m.ID, `{"content":[{"type":"text","text":"ok"}]}`)
	}
}

// methods returns the methods of the messages POSTed ("" for responses).
func (f *fake) methods() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, m := range f.msgs {
		out = append(out, m.Method)
	}
	return out
}

// posted returns the messages POSTed.
func (f *fake) posted() []rpc {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]rpc(nil), f.msgs...)
}

func (f *fake) deletes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dels
}

// endpoint is the fake as era speaks it, with short bounds.
func (f *fake) endpoint(era upstream.Era) upstream.Endpoint {
	return upstream.Endpoint{URL: f.srv.URL, Era: era, Timeout: 5 * time.Second}
}

// writeJSON answers with one JSON-RPC result.
func writeJSON(w http.ResponseWriter, id json.RawMessage, result string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
}

// startSSE writes an SSE response's header.
func startSSE(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

// event writes one SSE event of data and flushes it.
func event(w http.ResponseWriter, data string) {
	fmt.Fprintf(w, "data: %s\n\n", data)
	w.(http.Flusher).Flush()
}

// is reports whether the message is a request of method.
func (m rpc) is(method string) bool { return m.Method == method && len(m.ID) > 0 }

// countOf counts the items equal to s.
func countOf(items []string, s string) int {
	n := 0
	for _, it := range items {
		if it == s {
			n++
		}
	}
	return n
}

// big returns n bytes of c.
func big(c string, n int) string { return strings.Repeat(c, n) }
