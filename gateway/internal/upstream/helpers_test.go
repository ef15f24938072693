package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
)

// lib is the library itself serving as the upstream: every era on one
// server (/mcp, and the legacy /sse + /messages), with a log of the HTTP
// requests it received.
type lib struct {
	srv *httptest.Server
	h   *mcphandler.Handler

	mu   sync.Mutex
	reqs []seen
}

// seen is one HTTP request the upstream received.
type seen struct {
	method, path string
	header       http.Header
}

// newLib serves cfg (Authenticate defaults to anonymous) with the
// library's tools plus extra.
func newLib(t *testing.T, cfg mcphandler.Config) *lib {
	t.Helper()
	if cfg.Authenticate == nil {
		cfg.Authenticate = mcphandler.InsecureAnonymous
	}
	l := &lib{}
	l.h = mcphandler.New(cfg)
	mux := http.NewServeMux()
	mux.Handle("/mcp", l.h)
	sse, msgs := l.h.LegacySSE("/messages")
	mux.Handle("/sse", sse)
	mux.Handle("/messages", msgs)
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.reqs = append(l.reqs, seen{r.Method, r.URL.Path, r.Header.Clone()})
		l.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		l.srv.CloseClientConnections()
		l.srv.Close()
		l.h.Close()
	})
	return l
}

// requests returns the requests received so far.
func (l *lib) requests() []seen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]seen(nil), l.reqs...)
}

// count counts the requests of method to path.
func (l *lib) count(method, path string) int {
	n := 0
	for _, r := range l.requests() {
		if r.method == method && r.path == path {
			n++
		}
	}
	return n
}

// endpoint is the upstream as era speaks it (Probe: on /mcp).
func (l *lib) endpoint(era upstream.Era) upstream.Endpoint {
	u := l.srv.URL + "/mcp"
	if era == upstream.Legacy {
		u = l.srv.URL + "/sse"
	}
	return upstream.Endpoint{URL: u, Era: era, Timeout: 10 * time.Second}
}

// eras are the ways a test reaches the library: each era forced, and
// found by Detect.
var eras = []struct {
	name string
	era  upstream.Era
	path string
}{
	{"sessions", upstream.Sessions, "/mcp"},
	{"stateless", upstream.Stateless, "/mcp"},
	{"legacy", upstream.Legacy, "/sse"},
	{"probe-stateless", upstream.Probe, "/mcp"},
	{"probe-legacy", upstream.Probe, "/sse"},
}

func (l *lib) at(era upstream.Era, path string) upstream.Endpoint {
	return upstream.Endpoint{URL: l.srv.URL + path, Era: era, Timeout: 10 * time.Second}
}

// allCaps declares every question a client can answer.
var allCaps = json.RawMessage(`{"elicitation":{"form":{}},"sampling":{},"roots":{}}`)

// tools returns the library's tools: tools plus the ones every test uses.
func tools(extra ...mcphandler.Tool) func(context.Context) ([]mcphandler.Tool, error) {
	ts := append([]mcphandler.Tool{greet, askColor, sample, roots}, extra...)
	return func(context.Context) ([]mcphandler.Tool, error) { return ts, nil }
}

var greet = mcphandler.Tool{
	Name: "greet", Description: "says hello",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`),
	Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		var a struct{ Name string }
		_ = json.Unmarshal(call.Arguments, &a)
		return mcphandler.TextResult("Hello " + a.Name), nil
	},
}

// askColor asks the human for a color and answers with what it got.
var askColor = mcphandler.Tool{
	Name: "ask_color", Description: "asks for a color",
	Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		res, err := call.Elicit(ctx, mcphandler.ElicitRequest{
			Key: "color", Message: "Which color?",
			Schema: elicitation.NewSchema().String("color", elicitation.Required()),
		})
		if err != nil {
			return nil, err
		}
		if res.Action != elicitation.Accept {
			return mcphandler.TextResult("not answered: " + string(res.Action)), nil
		}
		return mcphandler.TextResult(fmt.Sprint("color=", res.Content["color"])), nil
	},
}

// sample asks the client's model.
var sample = mcphandler.Tool{
	Name: "sample", Description: "samples",
	Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		raw, err := call.CreateMessage(ctx, map[string]any{
			"messages":  []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "hi"}}},
			"maxTokens": 10,
		})
		if err != nil {
			return nil, err
		}
		var r struct {
			Content struct{ Text string }
		}
		_ = json.Unmarshal(raw, &r)
		return mcphandler.TextResult("model said " + r.Content.Text), nil
	},
}

// roots lists the client's roots.
var roots = mcphandler.Tool{
	Name: "roots", Description: "lists roots",
	Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		rs, err := call.ListRoots(ctx)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, r := range rs {
			names = append(names, r.URI)
		}
		return mcphandler.TextResult("roots " + strings.Join(names, ",")), nil
	},
}

// asker answers the upstream's questions as a downstream client would,
// and records what it was asked and told.
type asker struct {
	mu      sync.Mutex
	asked   []string // methods
	notes   []string // notification methods
	answer  func(method string, params json.RawMessage) (json.RawMessage, error)
	onNote  func(method string, params json.RawMessage)
	params  []json.RawMessage
	noteRaw []json.RawMessage
}

func (a *asker) Ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	a.mu.Lock()
	a.asked = append(a.asked, method)
	a.params = append(a.params, params)
	a.mu.Unlock()
	if a.answer != nil {
		return a.answer(method, params)
	}
	switch method {
	case "elicitation/create":
		return json.RawMessage(`{"action":"accept","content":{"color":"teal"}}`), nil
	case "sampling/createMessage":
		return json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"bonjour"},"model":"m"}`), nil
	case "roots/list":
		return json.RawMessage(`{"roots":[{"uri":"file:///src"}]}`), nil
	}
	return nil, &upstream.RPCError{Code: -32601, Message: "no"}
}

func (a *asker) Notify(ctx context.Context, method string, params json.RawMessage) {
	a.mu.Lock()
	a.notes = append(a.notes, method)
	a.noteRaw = append(a.noteRaw, params)
	a.mu.Unlock()
	if a.onNote != nil {
		a.onNote(method, params)
	}
}

func (a *asker) askedMethods() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.asked...)
}

func (a *asker) notified() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.notes...)
}

// text returns the text of a CallToolResult's first content block.
func text(t *testing.T, res json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct{ Type, Text string }
		IsError bool
	}
	if err := json.Unmarshal(res, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("result %s: %v", res, err)
	}
	return r.Content[0].Text
}

// within fails t unless f returns within d.
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("did not return within %v", d)
	}
}

// isStatus reports whether err is a *StatusError with code.
func isStatus(err error, code int) bool {
	var se *upstream.StatusError
	return errors.As(err, &se) && se.StatusCode == code
}
