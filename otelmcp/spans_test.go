package otelmcp_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/otelmcp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// checkToolSpan asserts the tools/call span of a request whose _meta
// carried traceparent: a SERVER span, child of the remote span, linked to
// the ambient HTTP span, parent of the tool's own span.
func checkToolSpan(t *testing.T, o *obs, s sdktrace.ReadOnlySpan) {
	t.Helper()
	if s.SpanKind() != trace.SpanKindServer {
		t.Errorf("kind %v, want server", s.SpanKind())
	}
	if got := s.Parent(); got.TraceID().String() != remoteTrace || got.SpanID().String() != remoteSpan || !got.IsRemote() {
		t.Errorf("parent %v, want the remote %s/%s from _meta", got, remoteTrace, remoteSpan)
	}
	if got := s.SpanContext().TraceState().String(); got != remoteState {
		t.Errorf("tracestate %q, want %q", got, remoteState)
	}
	http := o.span(t, "HTTP POST")
	if links := s.Links(); len(links) != 1 || !links[0].SpanContext.Equal(http.SpanContext()) {
		t.Errorf("links %v, want the ambient HTTP span %v", links, http.SpanContext())
	}
	work := o.span(t, "echo work")
	if work.Parent().SpanID() != s.SpanContext().SpanID() {
		t.Errorf("the tool's span has parent %v, want the MCP span %v", work.Parent().SpanID(), s.SpanContext().SpanID())
	}
	if s.Status().Code == codes.Error {
		t.Errorf("status %v on success", s.Status())
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.baggage) != 1 || o.baggage[0] != "alice" {
		t.Errorf("the tool saw baggage user=%q, want alice from _meta", o.baggage)
	}
}

func TestSpanFromMetaSessions(t *testing.T) {
	o := newObs(t)
	srv := httptest.NewServer(o.ambient(mcphandler.New(o.config())))
	defer srv.Close()
	c := mcptest.Dial(srv.URL, mcptest.WithToken("acme-alice"))
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	o.rec.Reset()
	raw, err := c.Call(ctx, "tools/call", metaParams("echo", map[string]any{
		"traceparent": traceparent, "tracestate": remoteState, "baggage": remoteBagage}))
	if err != nil || toolResult(t, raw) {
		t.Fatalf("call: %s, %v", raw, err)
	}
	s := o.span(t, "tools/call echo")
	checkToolSpan(t, o, s)
	wantAttrs(t, s, map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo", "gen_ai.operation.name": "execute_tool",
		"mcp.session.id": c.SessionID(), "mcp.protocol.version": c.ProtocolVersion(), "jsonrpc.request.id": "2",
		"mcphandler.tenant": "acme", "mcphandler.outcome": "allowed", "error.type": "", "rpc.response.status_code": "",
	})
	if c.ProtocolVersion() != mcphandler.Version20251125 {
		t.Fatalf("negotiated %q", c.ProtocolVersion())
	}
}

func TestSpanFromMetaStateless(t *testing.T) {
	o := newObs(t)
	srv := httptest.NewServer(o.ambient(mcphandler.New(o.config())))
	defer srv.Close()
	c := mcptest.DialModern(srv.URL, mcptest.WithToken("acme-alice"))
	defer c.Close()
	raw, err := c.Call(context.Background(), "tools/call", metaParams("echo", map[string]any{
		"traceparent": traceparent, "tracestate": remoteState, "baggage": remoteBagage}))
	if err != nil || toolResult(t, raw) {
		t.Fatalf("call: %s, %v", raw, err)
	}
	s := o.span(t, "tools/call echo")
	checkToolSpan(t, o, s)
	wantAttrs(t, s, map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo", "gen_ai.operation.name": "execute_tool",
		"mcp.session.id": "", "mcp.protocol.version": mcphandler.Version20260728,
		"mcphandler.tenant": "acme", "mcphandler.outcome": "allowed",
	})
}

// Without a trace context in _meta, the ambient HTTP span is the parent,
// and nothing is linked.
func TestSpanWithoutMeta(t *testing.T) {
	o := newObs(t)
	srv := httptest.NewServer(o.ambient(mcphandler.New(o.config())))
	defer srv.Close()
	c := mcptest.DialModern(srv.URL, mcptest.WithToken("acme-alice"))
	defer c.Close()
	if _, err := c.CallTool(context.Background(), "echo", nil); err != nil {
		t.Fatal(err)
	}
	s := o.span(t, "tools/call echo")
	http := o.span(t, "HTTP POST")
	if s.Parent().SpanID() != http.SpanContext().SpanID() || len(s.Links()) != 0 {
		t.Fatalf("parent %v links %v, want the HTTP span %v and no link", s.Parent(), s.Links(), http.SpanContext())
	}
}

// A _meta whose trace context is malformed, of the wrong type, huge or
// nested is not a parent: the request is served, under the ambient span.
func TestSpanBadMeta(t *testing.T) {
	huge := make([]byte, 64<<10)
	for i := range huge {
		huge[i] = 'a'
	}
	for name, meta := range map[string]map[string]any{
		"malformed":  {"traceparent": "00-zz-yy-01"},
		"zero trace": {"traceparent": "00-00000000000000000000000000000000-" + remoteSpan + "-01"},
		"number":     {"traceparent": 42},
		"nested":     {"traceparent": map[string]any{"traceparent": traceparent}},
		"huge":       {"traceparent": string(huge), "tracestate": string(huge), "baggage": string(huge)},
		"version ff": {"traceparent": "ff-" + remoteTrace + "-" + remoteSpan + "-01"},
	} {
		t.Run(name, func(t *testing.T) {
			o := newObs(t)
			srv := httptest.NewServer(o.ambient(mcphandler.New(o.config())))
			defer srv.Close()
			c := mcptest.DialModern(srv.URL, mcptest.WithToken("acme-alice"))
			defer c.Close()
			raw, err := c.Call(context.Background(), "tools/call", metaParams("echo", meta))
			if err != nil || toolResult(t, raw) {
				t.Fatalf("call: %s, %v", raw, err)
			}
			s := o.span(t, "tools/call echo")
			http := o.span(t, "HTTP POST")
			if s.Parent().SpanID() != http.SpanContext().SpanID() || s.SpanContext().TraceID() != http.SpanContext().TraceID() {
				t.Fatalf("parent %v, want the HTTP span %v", s.Parent(), http.SpanContext())
			}
			if got := o.baggage; len(got) != 1 || got[0] != "" {
				t.Fatalf("baggage %q from a bad _meta", got)
			}
		})
	}
}

func TestSpanFailures(t *testing.T) {
	for _, era := range []mcptest.Era{mcptest.Sessions, mcptest.Stateless} {
		t.Run(era.String(), func(t *testing.T) {
			o := newObs(t)
			srv := httptest.NewServer(mcphandler.New(o.config()))
			defer srv.Close()
			c := mcptest.Dial(srv.URL, mcptest.WithEra(era), mcptest.WithToken("acme-alice"))
			defer c.Close()
			ctx := context.Background()
			if era == mcptest.Sessions {
				if _, err := c.Initialize(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// isError: tool_error, no JSON-RPC code.
			if res, err := c.CallTool(ctx, "sad", nil); err != nil || !res.IsError {
				t.Fatalf("sad: %+v %v", res, err)
			}
			s := o.span(t, "tools/call sad")
			wantAttrs(t, s, map[string]string{"error.type": otelmcp.ErrorTypeToolError, "rpc.response.status_code": "", "mcphandler.outcome": "allowed"})
			if s.Status().Code != codes.Error {
				t.Errorf("status %v, want error", s.Status())
			}
			// An unknown tool: the JSON-RPC code. Its name, the client's,
			// is an attribute but not part of the span name (the
			// conventions name a span by its method when the target is not
			// of low cardinality).
			if _, err := c.CallTool(ctx, "nosuch", nil); err == nil {
				t.Fatal("unknown tool served")
			}
			s = o.span(t, "tools/call")
			wantAttrs(t, s, map[string]string{"error.type": "-32602", "rpc.response.status_code": "-32602", "mcphandler.outcome": "not_found",
				"gen_ai.tool.name": "nosuch"})
			if s.Status().Code != codes.Error {
				t.Errorf("status %v, want error", s.Status())
			}
			// An unknown method: _OTHER, as the handler gives it; the
			// status message names it.
			if _, err := c.Call(ctx, "nosuch/method", map[string]any{}); err == nil {
				t.Fatal("unknown method served")
			}
			s = o.span(t, mcphandler.Other)
			wantAttrs(t, s, map[string]string{"mcp.method.name": mcphandler.Other, "error.type": "-32601"})
			if !strings.Contains(s.Status().Description, "nosuch/method") {
				t.Errorf("status %v, want the method named", s.Status())
			}
			if len(o.spans("nosuch/method")) != 0 {
				t.Error("a span named by the client's method")
			}
			// A prompt: named by it.
			if _, err := c.Call(ctx, "prompts/get", map[string]any{"name": "greet"}); err != nil {
				t.Fatal(err)
			}
			wantAttrs(t, o.span(t, "prompts/get greet"), map[string]string{"gen_ai.prompt.name": "greet", "error.type": "", "gen_ai.tool.name": ""})
		})
	}
}

// Methods the conventions do not know are emitted as they are.
func TestSpanModernMethods(t *testing.T) {
	o := newObs(t)
	srv := httptest.NewServer(mcphandler.New(o.config()))
	defer srv.Close()
	c := mcptest.DialModern(srv.URL, mcptest.WithToken("acme-alice"))
	defer c.Close()
	if _, err := c.Call(context.Background(), "server/discover", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	wantAttrs(t, o.span(t, "server/discover"), map[string]string{"mcp.method.name": "server/discover", "mcp.protocol.version": mcphandler.Version20260728})
}

func TestSpanWithoutTenant(t *testing.T) {
	o := newObs(t, otelmcp.WithoutTenant())
	srv := httptest.NewServer(mcphandler.New(o.config()))
	defer srv.Close()
	c := mcptest.DialModern(srv.URL, mcptest.WithToken("acme-alice"))
	defer c.Close()
	if _, err := c.CallTool(context.Background(), "echo", nil); err != nil {
		t.Fatal(err)
	}
	wantAttrs(t, o.span(t, "tools/call echo"), map[string]string{"mcphandler.tenant": "", "gen_ai.tool.name": "echo"})
}

// initialize gets a span too, with the session it made.
func TestSpanInitialize(t *testing.T) {
	o := newObs(t)
	srv := httptest.NewServer(mcphandler.New(o.config()))
	defer srv.Close()
	c := mcptest.Dial(srv.URL, mcptest.WithToken("acme-alice"))
	defer c.Close()
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantAttrs(t, o.span(t, "initialize"), map[string]string{"mcp.session.id": c.SessionID(), "mcp.protocol.version": mcphandler.Version20251125, "jsonrpc.request.id": "1"})
}
