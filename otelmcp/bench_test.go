package otelmcp_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/otelmcp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Flush()                      {}

// BenchmarkToolsCall measures one tools/call of a small tool in a live
// 2025 session, in process, without interceptors ("off") and with otelmcp
// recording every span (batched to an exporter that drops them) and every
// metric ("otel"), or a tenth of the traces and every metric. Compare them
// with benchstat.
func BenchmarkToolsCall(b *testing.B) {
	for _, mode := range []string{"off", "otel", "otel-sampled-10pct"} {
		b.Run(mode, func(b *testing.B) {
			cfg := mcphandler.Config{
				Authenticate: func(*http.Request) (mcphandler.Identity, error) {
					return mcphandler.Identity{Tenant: "acme", Subject: "alice"}, nil
				},
				ListTools: func(context.Context) ([]mcphandler.Tool, error) {
					return []mcphandler.Tool{{Name: "echo", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
						Handler: func(_ context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
							return mcphandler.TextResult(string(call.Arguments)), nil
						}}}, nil
				},
			}
			if mode != "off" {
				ratio := 1.0
				if mode == "otel-sampled-10pct" {
					ratio = 0.1
				}
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()),
					sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))))
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				b.Cleanup(func() { tp.Shutdown(context.Background()); mp.Shutdown(context.Background()) })
				icp, err := otelmcp.NewInterceptor(otelmcp.WithTracerProvider(tp), otelmcp.WithMeterProvider(mp))
				if err != nil {
					b.Fatal(err)
				}
				cfg.Interceptors = []mcphandler.Interceptor{icp}
			}
			serveLoop(b, mcphandler.New(cfg), `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
		})
	}
}

func serveLoop(b *testing.B, h http.Handler, body string) {
	w := &discardWriter{h: http.Header{}}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`
	req, _ := http.NewRequest("POST", "/", strings.NewReader(init))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	h.ServeHTTP(w, req)
	req.Header.Set("Mcp-Session-Id", w.h.Get("Mcp-Session-Id"))
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	rd := strings.NewReader(body)
	req.ContentLength = int64(len(body))
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		req.Body = io.NopCloser(rd)
		clear(w.h)
		w.code = 0
		h.ServeHTTP(w, req)
		if w.code != 200 {
			b.Fatalf("status %d", w.code)
		}
	}
}
