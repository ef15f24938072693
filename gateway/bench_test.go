package gateway_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway"
	"github.com/mcphandler/mcphandler/mcptest"
)

// BenchmarkCall measures one tools/call of a read-only upstream tool by a
// 2025 client over HTTP, made directly to the upstream and through the
// gateway, side by side, for each era the gateway speaks upstream. The
// gateway's list comes from its cache; a 2025 upstream costs a session
// per call (initialize, initialized, the call, DELETE), or, kept
// PerSession in the gateway's memory store, one store read and the call.
func BenchmarkCall(b *testing.B) {
	up := newUpstream(b, upstreamTool{name: "search", readOnly: true})
	run := func(b *testing.B, url, name string) {
		c := mcptest.Dial(url, mcptest.WithToken("acme-admin"))
		defer c.Close()
		ctx := context.Background()
		if _, err := c.Initialize(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if res, err := c.CallTool(ctx, name, map[string]any{"q": "x"}); err != nil || res.IsError {
				b.Fatal(res, err)
			}
		}
	}
	b.Run("direct", func(b *testing.B) { run(b, up.srv.URL, "search") })
	for _, c := range []struct {
		name string
		era  gateway.Era
		mode gateway.SessionMode
	}{
		{"gateway-" + string(gateway.EraStateless), gateway.EraStateless, gateway.PerCall},
		{"gateway-" + string(gateway.EraSessions), gateway.EraSessions, gateway.PerCall},
		{"gateway-" + string(gateway.EraSessions) + "-per-session", gateway.EraSessions, gateway.PerSession},
	} {
		b.Run(c.name, func(b *testing.B) {
			gh := newGateway(b, gateway.Config{MaxWatches: 256, // the default: the upstream is watched, as in production
				Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
					return []gateway.Upstream{{ID: "docs", URL: up.srv.URL, Era: c.era, Sessions: c.mode}}, nil
				}})
			srv := httptest.NewServer(gh.h)
			defer srv.Close()
			run(b, srv.URL, "docs_search")
		})
	}
}

// BenchmarkCallParallel is BenchmarkCall's direct and 2026-07-28 calls
// made by 16 clients per CPU at once, as a loaded gateway sees them: the
// gateway's connections to the upstream are reused only if it keeps
// enough of them idle between calls.
func BenchmarkCallParallel(b *testing.B) {
	up := newUpstream(b, upstreamTool{name: "search", readOnly: true})
	run := func(b *testing.B, url, name string) {
		ctx := context.Background()
		b.ReportAllocs()
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			c := mcptest.Dial(url, mcptest.WithToken("acme-admin"))
			defer c.Close()
			if _, err := c.Initialize(ctx); err != nil {
				b.Error(err)
				return
			}
			for pb.Next() {
				if res, err := c.CallTool(ctx, name, map[string]any{"q": "x"}); err != nil || res.IsError {
					b.Error(res, err)
					return
				}
			}
		})
	}
	b.Run("direct", func(b *testing.B) { run(b, up.srv.URL, "search") })
	b.Run("gateway-"+string(gateway.EraStateless), func(b *testing.B) {
		gh := newGateway(b, gateway.Config{MaxWatches: 256,
			Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
				return []gateway.Upstream{{ID: "docs", URL: up.srv.URL, Era: gateway.EraStateless}}, nil
			}})
		srv := httptest.NewServer(gh.h)
		defer srv.Close()
		run(b, srv.URL, "docs_search")
	})
}
