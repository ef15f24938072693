package otelmcp_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway"
	"github.com/mcphandler/mcphandler/mcptest"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// gatewayOver serves a gateway whose one upstream, "docs", is the handler
// of up (this library with otelmcp) in era, with o's interceptor after
// icps; it returns a client of the gateway, initialized.
func gatewayOver(t *testing.T, o, up *obs, era gateway.Era, icps ...mcphandler.Interceptor) *mcptest.Client {
	t.Helper()
	upSrv := httptest.NewServer(mcphandler.New(up.config()))
	t.Cleanup(upSrv.Close)
	gw, err := gateway.New(gateway.Config{
		Upstreams: func(context.Context, mcphandler.Identity) ([]gateway.Upstream, error) {
			return []gateway.Upstream{{ID: "docs", URL: upSrv.URL, Era: era, CredentialKind: "static", TrustHints: true,
				Header: http.Header{"Authorization": {"Bearer acme-gateway"}}}}, nil
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		// The spans checked are the call's: a watch of the upstream's
		// list would add an initialize of its own at any moment.
		MaxWatches: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	cfg := o.config()
	cfg.ListTools = gw.Tools
	cfg.Interceptors = append(icps, o.icp)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := httptest.NewServer(mcphandler.New(cfg))
	t.Cleanup(srv.Close)
	c := mcptest.Dial(srv.URL, mcptest.WithToken("acme-alice"))
	t.Cleanup(c.Close)
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

// A gateway's call of an upstream tool is a CLIENT span named for the
// tool upstream, child of the request's SERVER span, with the upstream,
// its era and the kind of credentials; the upstream, this library with
// otelmcp too, continues the same trace from the _meta the call carried:
// its spans are the CLIENT span's children. The client's baggage stays at
// the gateway.
func TestUpstreamCallSpan(t *testing.T) {
	for _, tc := range []struct {
		era     gateway.Era
		version string // mcp.protocol.version of the CLIENT span
	}{
		{gateway.EraSessions, ""},
		{gateway.EraStateless, "2026-07-28"},
	} {
		t.Run(string(tc.era), func(t *testing.T) {
			o, up := newObs(t), newObs(t)
			c := gatewayOver(t, o, up, tc.era)
			o.rec.Reset()
			up.rec.Reset()
			raw, err := c.Call(context.Background(), "tools/call", metaParams("docs_echo", map[string]any{
				"traceparent": traceparent, "baggage": remoteBagage}))
			if err != nil || toolResult(t, raw) {
				t.Fatalf("call: %s, %v", raw, err)
			}
			server := o.span(t, "tools/call docs_echo")
			client := o.span(t, "tools/call echo")
			if client.SpanKind() != trace.SpanKindClient || client.Parent().SpanID() != server.SpanContext().SpanID() ||
				client.SpanContext().TraceID().String() != remoteTrace {
				t.Fatalf("CLIENT span: kind %v, parent %v, trace %v; want a child of the SERVER span %v in trace %s",
					client.SpanKind(), client.Parent().SpanID(), client.SpanContext().TraceID(), server.SpanContext().SpanID(), remoteTrace)
			}
			if client.Status().Code == codes.Error || client.EndTime().After(server.EndTime()) {
				t.Errorf("CLIENT span status %v, ends %v after its parent", client.Status(), client.EndTime().Sub(server.EndTime()))
			}
			wantAttrs(t, client, map[string]string{
				"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo", "gen_ai.operation.name": "execute_tool",
				"mcp.protocol.version": tc.version, "mcphandler.upstream": "docs", "mcphandler.upstream.era": string(tc.era),
				"mcphandler.upstream.credential_kind": "static", "error.type": "", "rpc.response.status_code": "",
			})
			upstream := up.span(t, "tools/call echo")
			if p := upstream.Parent(); !p.IsRemote() || p.SpanID() != client.SpanContext().SpanID() || p.TraceID().String() != remoteTrace {
				t.Fatalf("the upstream's span has parent %v, want the CLIENT span %v", p, client.SpanContext())
			}
			if tc.era == gateway.EraSessions {
				if p := up.span(t, "initialize").Parent(); p.SpanID() != client.SpanContext().SpanID() {
					t.Errorf("the upstream's initialize has parent %v, want the CLIENT span", p)
				}
			}
			up.mu.Lock()
			defer up.mu.Unlock()
			if len(up.baggage) != 1 || up.baggage[0] != "" {
				t.Errorf("the upstream tool saw baggage user=%q, want none", up.baggage)
			}
		})
	}
}

// An upstream's isError result is a failed CLIENT span (error.type
// tool_error); another interceptor's OnUpstream, set before otelmcp's,
// keeps running, around otelmcp's.
func TestUpstreamCallSpanFailure(t *testing.T) {
	o, up := newObs(t), newObs(t)
	var outer atomic.Int32
	other := func(ctx context.Context, req *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
		req.OnUpstream = func(ctx context.Context, u *mcphandler.UpstreamCall, next func(context.Context) mcphandler.UpstreamResult) mcphandler.UpstreamResult {
			if trace.SpanFromContext(ctx).SpanContext().IsValid() {
				outer.Add(1) // the SERVER span: otelmcp's CLIENT span is not started yet
			}
			return next(ctx)
		}
		return next(ctx)
	}
	c := gatewayOver(t, o, up, gateway.EraStateless, other)
	raw, err := c.Call(context.Background(), "tools/call", metaParams("docs_sad", nil))
	if err != nil || !toolResult(t, raw) {
		t.Fatalf("call: %s, %v", raw, err)
	}
	client := o.span(t, "tools/call sad")
	if client.Status().Code != codes.Error || client.SpanKind() != trace.SpanKindClient {
		t.Errorf("status %v, kind %v", client.Status(), client.SpanKind())
	}
	wantAttrs(t, client, map[string]string{"error.type": "tool_error", "mcphandler.upstream": "docs"})
	if p := up.span(t, "tools/call sad").Parent(); p.SpanID() != client.SpanContext().SpanID() {
		t.Errorf("the upstream's span has parent %v, want the CLIENT span", p)
	}
	if outer.Load() != 1 {
		t.Errorf("the other interceptor's OnUpstream ran %d times", outer.Load())
	}
}
