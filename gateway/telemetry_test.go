package gateway_test

import (
	"context"
	"encoding/json"
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
	"github.com/mcphandler/mcphandler/gateway"
)

// traceUpstream is this library as an upstream of every era (/mcp, and
// /sse with /messages), recording what each JSON-RPC request of a client
// carried: its method, the Traceparent and Authorization headers of the
// HTTP request, and the traceparent of its _meta.
type traceUpstream struct {
	srv    *httptest.Server
	hidden atomic.Bool // "gone" is no longer listed: calling it is an error answer

	mu   sync.Mutex
	seen []traced
}

type traced struct {
	method, header, meta, auth string
}

func newTraceUpstream(t *testing.T) *traceUpstream {
	t.Helper()
	tu := &traceUpstream{}
	slow := func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		time.Sleep(5 * time.Millisecond) // time spent upstream, measurable
		return mcphandler.TextResult("found"), nil
	}
	h := mcphandler.New(mcphandler.Config{
		Name: "upstream", Version: "1",
		Authenticate: func(r *http.Request) (mcphandler.Identity, error) {
			return mcphandler.Identity{Tenant: "gw", Subject: "gateway"}, nil
		},
		ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			tools := []mcphandler.Tool{
				{Name: "search", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true}, Handler: slow},
				{Name: "sad", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
					Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
						return mcphandler.ErrorResult("no"), nil
					}},
			}
			if !tu.hidden.Load() {
				tools = append(tools, mcphandler.Tool{Name: "gone", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true}, Handler: slow})
			}
			return tools, nil
		},
		Interceptors: []mcphandler.Interceptor{func(ctx context.Context, req *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
			if req.Kind == mcphandler.KindRequest {
				var meta struct {
					Traceparent string `json:"traceparent"`
				}
				json.Unmarshal(req.Meta, &meta)
				tu.mu.Lock()
				tu.seen = append(tu.seen, traced{req.Method, req.HTTP.Header.Get("Traceparent"), meta.Traceparent, req.HTTP.Header.Get("Authorization")})
				tu.mu.Unlock()
			}
			return next(ctx)
		}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	sse, msgs := h.LegacySSE("/messages")
	mux.Handle("/sse", sse)
	mux.Handle("/messages", msgs)
	tu.srv = httptest.NewServer(mux)
	t.Cleanup(func() { tu.srv.CloseClientConnections(); tu.srv.Close(); h.Close() })
	return tu
}

// requests returns what the upstream saw since the last call, and forgets
// it.
func (tu *traceUpstream) requests() []traced {
	tu.mu.Lock()
	defer tu.mu.Unlock()
	out := tu.seen
	tu.seen = nil
	return out
}

// upstreams gives every caller the upstream as "docs", in era, with
// static credentials.
func (tu *traceUpstream) upstreams(era gateway.Era) gateway.UpstreamsFunc {
	u := tu.srv.URL + "/mcp"
	if era == gateway.EraLegacy {
		u = tu.srv.URL + "/sse"
	}
	return func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
		return []gateway.Upstream{{ID: "docs", URL: u, Era: era, CredentialKind: "static",
			Header: http.Header{"Authorization": {"Bearer upstream-" + id.Tenant}}}}, nil
	}
}

// tracedGateway is a gateway host with interceptors, whose OnCall events
// go to events.
func tracedGateway(t *testing.T, ups gateway.UpstreamsFunc, icps ...mcphandler.Interceptor) (*mcphandler.Handler, chan mcphandler.CallEvent) {
	t.Helper()
	gw, err := gateway.New(gateway.Config{Upstreams: ups, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		MaxWatches: -1}) // the requests seen are the call's (watch_test.go tests watches)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	events := make(chan mcphandler.CallEvent, 10)
	h := mcphandler.New(mcphandler.Config{
		Name: "gateway", Version: "1",
		Authenticate: bearer,
		ListTools:    gw.Tools,
		OnCall:       func(ev mcphandler.CallEvent) { events <- ev },
		Interceptors: icps,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	t.Cleanup(func() { h.Close() })
	return h, events
}

// injector is an interceptor that wraps upstream calls the way a tracing
// one does: it adds a traceparent to the headers and the _meta of the
// call, and tries what it must not do — replace the host's credentials,
// set a protocol header or a protocol _meta key.
type injector struct {
	mu    sync.Mutex
	calls []mcphandler.UpstreamCall
	ends  []mcphandler.UpstreamResult
}

const testTraceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

func (in *injector) intercept(ctx context.Context, req *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
	req.OnUpstream = func(ctx context.Context, u *mcphandler.UpstreamCall, next func(context.Context) mcphandler.UpstreamResult) mcphandler.UpstreamResult {
		u.Header = http.Header{"Traceparent": {testTraceparent}, "Authorization": {"Bearer interceptor"}, "Mcp-Method": {"forged"}}
		u.Meta = map[string]string{"traceparent": testTraceparent, "progressToken": "forged"}
		res := next(ctx)
		in.mu.Lock()
		in.calls, in.ends = append(in.calls, *u), append(in.ends, res)
		in.mu.Unlock()
		return res
	}
	return next(ctx)
}

func (in *injector) last(t *testing.T) (mcphandler.UpstreamCall, mcphandler.UpstreamResult) {
	t.Helper()
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.calls) == 0 {
		t.Fatal("OnUpstream was not called")
	}
	return in.calls[len(in.calls)-1], in.ends[len(in.ends)-1]
}

// An interceptor's OnUpstream wraps the call upstream in every era: what
// it adds reaches every request of the call, in the HTTP headers and in
// _meta, without replacing the host's credentials or the protocol's
// headers; OnCall's event names the upstream, its era and the kind of
// credentials, with the time spent upstream within the call's.
func TestUpstreamCallIntercepted(t *testing.T) {
	for _, tc := range []struct {
		name string
		era  gateway.Era
		want string // UpstreamEra
	}{
		{"detected", gateway.EraDetect, "2026-07-28"},
		{"2025", gateway.EraSessions, "2025"},
		{"2026-07-28", gateway.EraStateless, "2026-07-28"},
		{"2024-11-05", gateway.EraLegacy, "2024-11-05"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tu := newTraceUpstream(t)
			in := &injector{}
			h, events := tracedGateway(t, tu.upstreams(tc.era), in.intercept)
			c := connect(t, h, "acme-admin")
			toolNames(t, c)
			tu.requests() // the list's
			start := time.Now()
			res, err := c.CallTool(context.Background(), "docs_search", map[string]any{"q": "x"})
			if err != nil || res.IsError {
				t.Fatalf("%+v %v", res, err)
			}
			seen := tu.requests()
			calls := 0
			for _, r := range seen {
				if r.header != testTraceparent || r.auth != "Bearer upstream-acme" {
					t.Errorf("%s: traceparent %q, Authorization %q", r.method, r.header, r.auth)
				}
				if r.method == "tools/call" || r.method == "initialize" {
					if r.meta != testTraceparent {
						t.Errorf("%s: _meta traceparent %q", r.method, r.meta)
					}
				}
				if r.method == "tools/call" {
					calls++
				}
			}
			if calls != 1 {
				t.Fatalf("the upstream saw %+v", seen)
			}
			u, end := in.last(t)
			if u.Upstream != "docs" || u.Era != tc.want || u.CredentialKind != "static" || u.Method != "tools/call" || u.Name != "search" ||
				end != (mcphandler.UpstreamResult{}) {
				t.Fatalf("OnUpstream saw %+v, ended %+v", u, end)
			}
			ev := <-events
			// OnCall runs once the result is on its way, so the call's
			// duration is bounded by the time until its event arrived,
			// not by the time until the client read the result.
			took := time.Since(start)
			if ev.Tool != "docs_search" || ev.Upstream != "docs" || ev.UpstreamEra != tc.want || ev.CredentialKind != "static" {
				t.Fatalf("event %+v", ev)
			}
			if ev.UpstreamDuration < 5*time.Millisecond || ev.UpstreamDuration > ev.Duration || ev.Duration > took {
				t.Fatalf("upstream %v, call %v, seen by the client %v", ev.UpstreamDuration, ev.Duration, took)
			}
		})
	}
}

// Without interceptors OnCall still learns of the upstream call, and
// nothing of a trace goes upstream.
func TestUpstreamCallReportedWithoutInterceptors(t *testing.T) {
	tu := newTraceUpstream(t)
	h, events := tracedGateway(t, tu.upstreams(gateway.EraSessions))
	c := connect(t, h, "acme-admin")
	if _, err := c.CallTool(context.Background(), "docs_search", nil); err != nil {
		t.Fatal(err)
	}
	for _, r := range tu.requests() {
		if r.header != "" || r.meta != "" {
			t.Errorf("%s carried a trace context: %+v", r.method, r)
		}
	}
	ev := <-events
	if ev.Upstream != "docs" || ev.UpstreamEra != "2025" || ev.CredentialKind != "static" || ev.UpstreamDuration <= 0 || ev.UpstreamDuration > ev.Duration {
		t.Fatalf("event %+v", ev)
	}
}

// How the upstream call ended reaches the interceptors: an isError
// result, the upstream's error answer with its code and words; a
// credential kind the host spelled wrong is _OTHER.
func TestUpstreamCallOutcome(t *testing.T) {
	tu := newTraceUpstream(t)
	in := &injector{}
	kind := "Static Token"
	h, events := tracedGateway(t, func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
		return []gateway.Upstream{{ID: "docs", URL: tu.srv.URL + "/mcp", Era: gateway.EraStateless, CredentialKind: kind}}, nil
	}, in.intercept)
	c := connect(t, h, "acme-admin")
	ctx := context.Background()

	if res, err := c.CallTool(ctx, "docs_sad", nil); err != nil || !res.IsError {
		t.Fatalf("%+v %v", res, err)
	}
	if _, end := in.last(t); end != (mcphandler.UpstreamResult{IsError: true}) {
		t.Fatalf("isError ended %+v", end)
	}
	if ev := <-events; ev.CredentialKind != mcphandler.Other || !ev.IsError {
		t.Fatalf("event %+v", ev)
	}

	toolNames(t, c) // listed, then gone upstream: the list is kept
	tu.hidden.Store(true)
	if res, err := c.CallTool(ctx, "docs_gone", nil); err != nil || !res.IsError {
		t.Fatalf("%+v %v", res, err)
	}
	if _, end := in.last(t); end.ErrorCode != mcphandler.CodeInvalidParams || end.ErrorClass != mcphandler.ClassInternal ||
		!strings.Contains(end.ErrorMessage, "gone") {
		t.Fatalf("error answer ended %+v", end)
	}
	<-events
}
