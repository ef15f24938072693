package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// BenchmarkListMerged measures a 2026-07-28 tools/list of 1000 tools
// served in one page, side by side: by a Handler whose ListTools returns
// them (local), and by a gateway that merges them from 5 upstreams of 200
// tools each, from its cache (the upstreams' lists are fresh for 10 min),
// as the Handler's own ListTools. Both are served in-process, the answer
// written nowhere; B/op-like sizes are reported as bytes/list.
func BenchmarkListMerged(b *testing.B) {
	const nUp, perUp = 5, 200
	def := func(name string, i int) mcphandler.Tool {
		return mcphandler.Tool{Name: name, Description: fmt.Sprintf("Dummy tool number %d.", i),
			InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string","description":"An input string."}},"required":["x"]}`),
			Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				return mcphandler.TextResult("ok"), nil
			}}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var local []mcphandler.Tool
	ups := make([]gateway.Upstream, nUp)
	for u := range nUp {
		tools := make([]mcphandler.Tool, perUp)
		for i := range tools {
			tools[i] = def(fmt.Sprintf("u%d_tool_%04d", u, i), u*perUp+i)
			local = append(local, def(tools[i].Name, u*perUp+i))
		}
		h := mcphandler.New(mcphandler.Config{Authenticate: mcphandler.InsecureAnonymous, Logger: quiet,
			CacheTTL: 10 * time.Minute, Limits: mcphandler.Limits{PageSize: perUp},
			ListTools: func(context.Context) ([]mcphandler.Tool, error) { return tools, nil }})
		srv := httptest.NewServer(h)
		b.Cleanup(func() { srv.Close(); h.Close() })
		// The upstream's own names are served (aliased to themselves), as
		// the local Handler's.
		aliases := make(map[string]string, perUp)
		for _, t := range tools {
			aliases[t.Name] = t.Name
		}
		ups[u] = gateway.Upstream{ID: fmt.Sprintf("u%d", u), URL: srv.URL, Aliases: aliases}
	}
	gw, err := gateway.New(gateway.Config{Logger: quiet, ListTTL: 10 * time.Minute, MaxWatches: -1,
		Upstreams: func(context.Context, mcphandler.Identity) ([]gateway.Upstream, error) { return ups, nil }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { gw.Close() })
	for _, c := range []struct {
		name  string
		tools func(context.Context) ([]mcphandler.Tool, error)
	}{
		{"local", func(context.Context) ([]mcphandler.Tool, error) { return local, nil }},
		{"gateway", gw.Tools},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := mcphandler.New(mcphandler.Config{Authenticate: mcphandler.InsecureAnonymous, Logger: quiet,
				Limits: mcphandler.Limits{PageSize: nUp * perUp}, ListTools: c.tools})
			defer h.Close()
			const body = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{` +
				`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
				`"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}`
			serve := func(w http.ResponseWriter) {
				req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("MCP-Protocol-Version", "2026-07-28")
				req.Header.Set("Mcp-Method", "tools/list")
				h.ServeHTTP(w, req)
			}
			rec := httptest.NewRecorder()
			serve(rec) // the gateway lists its upstreams once: the loop is served from its cache
			var res struct {
				Result struct{ Tools []json.RawMessage } `json:"result"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || len(res.Result.Tools) != nUp*perUp {
				b.Fatalf("%d tools, %v: %.300s", len(res.Result.Tools), err, rec.Body.String())
			}
			w := &countingWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				serve(w)
			}
			b.ReportMetric(float64(rec.Body.Len()), "bytes/list")
		})
	}
}

// countingWriter is a ResponseWriter that writes nothing.
type countingWriter struct {
	h http.Header
	n int
}

func (w *countingWriter) Header() http.Header         { return w.h }
func (w *countingWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
func (w *countingWriter) WriteHeader(int)             {}
func (w *countingWriter) Flush()                      {}
