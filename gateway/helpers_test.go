package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/gateway"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
)

// The downstream callers, as the quickstart's.
var users = map[string]mcphandler.Identity{
	"acme-viewer":   {Tenant: "acme", Subject: "alice", Role: "viewer"},
	"acme-admin":    {Tenant: "acme", Subject: "bob", Role: "admin"},
	"globex-editor": {Tenant: "globex", Subject: "carol", Role: "editor"},
}

func bearer(r *http.Request) (mcphandler.Identity, error) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if id, ok := users[tok]; ok {
		return id, nil
	}
	return mcphandler.Identity{}, errors.New("bad token")
}

// fakeUpstream is an MCP server (this library) whose tools are counted and
// which records what reached it: the credentials of each request and the
// client capabilities it was told.
type fakeUpstream struct {
	srv   *httptest.Server
	h     *mcphandler.Handler
	calls sync.Map // tool name -> *atomic.Int64

	mu       sync.Mutex
	auth     []string               // Authorization of every request
	methods  []string               // the JSON-RPC method of every POST
	caps     []session.Capabilities // told, per tool run
	failList atomic.Bool            // answer every request with 500
}

// upstreamTool is a tool of a fake upstream: read-only or not; ask makes
// it elicit a confirmation mid-call.
type upstreamTool struct {
	name     string
	readOnly bool
	ask      bool
}

func newUpstream(t testing.TB, tools ...upstreamTool) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{}
	u.h = mcphandler.New(mcphandler.Config{
		Name: "upstream", Version: "1",
		Authenticate: func(r *http.Request) (mcphandler.Identity, error) {
			u.mu.Lock()
			u.auth = append(u.auth, r.Header.Get("Authorization"))
			u.mu.Unlock()
			tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			return mcphandler.Identity{Tenant: tok, Subject: "gateway"}, nil
		},
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			out := make([]mcphandler.Tool, 0, len(tools))
			for _, ut := range tools {
				out = append(out, u.tool(ut))
			}
			return out, nil
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u.failList.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		if r.Method == http.MethodPost {
			m := postedMethod(r)
			u.mu.Lock()
			u.methods = append(u.methods, m)
			u.mu.Unlock()
		}
		u.h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { u.srv.Close(); u.h.Close() })
	return u
}

func (u *fakeUpstream) tool(ut upstreamTool) mcphandler.Tool {
	return mcphandler.Tool{
		Name:        ut.name,
		Description: "upstream tool " + ut.name,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
		Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: ut.readOnly},
		Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			u.mu.Lock()
			u.caps = append(u.caps, call.Exchange.ClientCapabilities())
			u.mu.Unlock()
			answer := ""
			if ut.ask {
				res, err := call.Elicit(ctx, mcphandler.ElicitRequest{Message: "Sure?",
					Schema: elicitation.NewSchema().Boolean("sure", elicitation.Required())})
				if err != nil {
					return nil, err
				}
				answer = " answer=" + string(res.Action)
			}
			// Counted once it acts: a 2026-07-28 upstream's handler runs
			// again for each input_required round, up to its question.
			v, _ := u.calls.LoadOrStore(ut.name, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
			id := call.Identity.Tenant
			return mcphandler.TextResult(ut.name + " ran for " + id + " args=" + string(call.Arguments) + answer), nil
		},
	}
}

func (u *fakeUpstream) count(name string) int64 {
	v, _ := u.calls.LoadOrStore(name, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

func (u *fakeUpstream) sawMethod(method string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return countMethod(u.methods, method)
}

// postedMethod returns the JSON-RPC method of the POST r, leaving its
// body to be read again.
func postedMethod(r *http.Request) string {
	body, _ := io.ReadAll(r.Body)
	var m struct {
		Method string `json:"method"`
	}
	json.Unmarshal(body, &m)
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	return m.Method
}

// countMethod is how many of methods are method.
func countMethod(methods []string, method string) int {
	n := 0
	for _, m := range methods {
		if m == method {
			n++
		}
	}
	return n
}

func (u *fakeUpstream) sawAuth() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.auth...)
}

// gatewayHost is a Handler in front of upstreams: each upstream's tools
// as <id>_<name>, viewers seeing only the read-only ones, the others
// confirmed before they are forwarded (the examples/gateway policy).
type gatewayHost struct {
	gw     *gateway.Gateway
	h      *mcphandler.Handler
	events chan mcphandler.CallEvent
}

func newGateway(t testing.TB, cfg gateway.Config, mods ...func(*mcphandler.Config)) *gatewayHost {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.MaxWatches == 0 {
		// Watches are tested in watch_test.go; here their requests would
		// be counted among those of the lists and calls under test.
		cfg.MaxWatches = -1
	}
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	gh := &gatewayHost{gw: gw, events: make(chan mcphandler.CallEvent, 100)}
	hcfg := mcphandler.Config{
		Name: "gateway", Version: "1",
		Authenticate: bearer,
		Roles:        []string{"viewer", "editor", "admin"},
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			tools, err := gw.Tools(ctx)
			for i := range tools {
				if a := tools[i].Annotations; a == nil || !a.ReadOnlyHint {
					tools[i].MinRole = "editor"
				}
			}
			return tools, err
		},
		BeforeCall: func(ctx context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
			if a := call.Tool.Annotations; a == nil || !a.ReadOnlyHint {
				return mcphandler.Confirm("Forward " + call.Tool.Name + "?"), nil
			}
			return mcphandler.Allow(), nil
		},
		OnCall: func(ev mcphandler.CallEvent) {
			select {
			case gh.events <- ev:
			default: // a benchmark does not read them
			}
		},
		ConfirmTimeout: 5 * time.Second,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, mod := range mods {
		mod(&hcfg)
	}
	gh.h = mcphandler.New(hcfg)
	t.Cleanup(func() { gh.h.Close() })
	return gh
}

// upstreamsFor gives every caller the upstreams, with its tenant's
// credentials there: Bearer upstream-<tenant>.
func upstreamsFor(ups map[string]*fakeUpstream, era gateway.Era) gateway.UpstreamsFunc {
	return func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
		var out []gateway.Upstream
		for name, u := range ups {
			out = append(out, gateway.Upstream{ID: name, URL: u.srv.URL, Era: era,
				Header: http.Header{"Authorization": {"Bearer upstream-" + id.Tenant}}})
		}
		return out, nil
	}
}

func connect(t *testing.T, h http.Handler, token string, opts ...mcptest.Option) *mcptest.Client {
	t.Helper()
	c := mcptest.New(t, h, append([]mcptest.Option{mcptest.WithToken(token)}, opts...)...)
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

func toolNames(t *testing.T, c *mcptest.Client) []string {
	t.Helper()
	tools, err := c.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(tools))
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	return names
}

// answerer answers every elicitation (accepting the gateway's confirm
// and the upstream's question, or with action when set) and records the
// messages asked.
type answerer struct {
	mu     sync.Mutex
	asked  []string
	action string
}

func (a *answerer) handler() mcptest.ElicitationHandler {
	return func(ctx context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		a.mu.Lock()
		a.asked = append(a.asked, p.Message)
		a.mu.Unlock()
		if a.action != "" {
			return mcptest.ElicitResult{Action: a.action}, nil
		}
		if strings.HasPrefix(p.Message, "Forward ") { // the gateway's own confirm
			return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		}
		return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"sure": true}}, nil
	}
}

func (a *answerer) questions() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.asked...)
}

func resultText(res *mcptest.ToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}
