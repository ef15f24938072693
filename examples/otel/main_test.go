package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcphandler/mcphandler/mcptest"
)

// TestSpansAndMetrics: a tools/call of the example's handler is one
// SERVER span, a child of the trace context the client put in
// params._meta, named after the tool, and an operation duration recorded.
func TestSpansAndMetrics(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	h, err := newHandler(tp, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	c := mcptest.New(t, h, mcptest.WithToken("alice"))
	if _, err := c.Initialize(t.Context()); err != nil {
		t.Fatal(err)
	}
	const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	res, err := c.Call(t.Context(), "tools/call", map[string]any{"name": "greet", "arguments": map[string]any{"Name": "Ada"},
		"_meta": map[string]any{"traceparent": "00-" + traceID + "-" + parent + "-01"}})
	if err != nil {
		t.Fatalf("tools/call: %s %v", res, err)
	}
	var call *tracetest.SpanStub
	for deadline := time.Now().Add(5 * time.Second); call == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, s := range spans.GetSpans() { // the span ends once the answer is written
			if s.Name == "tools/call greet" {
				call = &s
			}
		}
	}
	if call == nil || call.SpanContext.TraceID().String() != traceID || call.Parent.SpanID().String() != parent {
		t.Fatalf("no span of the call in the client's trace: %+v", spans.GetSpans())
	}
	if !recorded(t, reader, "tools/call") {
		t.Fatal("no mcp.server.operation.duration of tools/call")
	}
}

// recorded reports whether reader holds an operation duration of method.
func recorded(t *testing.T, reader *sdkmetric.ManualReader, method string) bool {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, _ := m.Data.(metricdata.Histogram[float64])
			for _, dp := range h.DataPoints {
				if v, _ := dp.Attributes.Value("mcp.method.name"); m.Name == "mcp.server.operation.duration" && v.AsString() == method {
					return true
				}
			}
		}
	}
	return false
}

// TestExportsOverOTLP: the providers main builds post spans and metrics
// to the collector OTEL_EXPORTER_OTLP_ENDPOINT names when they shut down.
func TestExportsOverOTLP(t *testing.T) {
	var mu sync.Mutex
	posted := map[string]int{}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		posted[r.URL.Path] += len(b)
		mu.Unlock()
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	tp, mp, shutdown, err := providers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	h, err := newHandler(tp, mp)
	if err != nil {
		t.Fatal(err)
	}
	c := mcptest.New(t, h, mcptest.WithToken("alice"))
	if _, err := c.Initialize(t.Context()); err != nil {
		t.Fatal(err)
	}
	if res, err := c.CallTool(t.Context(), "greet", map[string]any{"Name": "Ada"}); err != nil || res.Text() != "Hello Ada" {
		t.Fatalf("greet: %v %v", res, err)
	}
	h.Close()
	if err := shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if posted["/v1/traces"] == 0 || posted["/v1/metrics"] == 0 {
		t.Fatalf("posted to the collector: %v", posted)
	}
}
