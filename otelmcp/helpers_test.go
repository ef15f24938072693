package otelmcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/otelmcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// obs is one replica's telemetry: spans recorded in memory, metrics read
// by hand.
type obs struct {
	rec    *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	icp    mcphandler.Interceptor

	mu      sync.Mutex
	baggage []string // the baggage member "user" each tool run saw
}

func newObs(t testing.TB, opts ...otelmcp.Option) *obs {
	t.Helper()
	o := &obs{rec: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	o.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(o.rec))
	o.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(o.reader))
	t.Cleanup(func() { o.tp.Shutdown(context.Background()); o.mp.Shutdown(context.Background()) })
	icp, err := otelmcp.NewInterceptor(append([]otelmcp.Option{otelmcp.WithTracerProvider(o.tp), otelmcp.WithMeterProvider(o.mp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	o.icp = icp
	return o
}

// config is a handler with an echo tool (which starts a span of its own),
// a tool whose result is an error, a destructive tool that asks first, a
// tool that fails, and a prompt.
func (o *obs) config() mcphandler.Config {
	destructive := true
	tools := []mcphandler.Tool{
		{Name: "echo", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true}, Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			_, span := o.tp.Tracer("tool").Start(ctx, "echo work")
			span.End()
			o.mu.Lock()
			o.baggage = append(o.baggage, baggage.FromContext(ctx).Member("user").Value())
			o.mu.Unlock()
			return mcphandler.TextResult("ok"), nil
		}},
		{Name: "sad", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true}, Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			return mcphandler.ErrorResult("nope"), nil
		}},
		{Name: "delete_thing", Annotations: &mcphandler.ToolAnnotations{DestructiveHint: &destructive},
			Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				_, span := o.tp.Tracer("tool").Start(ctx, "delete work")
				span.End()
				return mcphandler.TextResult("deleted"), nil
			}},
		{Name: "broken", Annotations: &mcphandler.ToolAnnotations{DestructiveHint: &destructive},
			Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				return nil, errors.New("disk on fire")
			}},
	}
	return mcphandler.Config{
		Authenticate: func(r *http.Request) (mcphandler.Identity, error) {
			tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			tenant, _, _ := strings.Cut(tok, "-")
			return mcphandler.Identity{Tenant: tenant, Subject: tok}, nil
		},
		ListTools:  func(context.Context) ([]mcphandler.Tool, error) { return tools, nil },
		BeforeCall: mcphandler.ConfirmDestructive(nil),
		ListPrompts: func(context.Context) ([]mcphandler.Prompt, error) {
			return []mcphandler.Prompt{{Name: "greet"}}, nil
		},
		GetPrompt: func(context.Context, *mcphandler.PromptRequest) (*mcphandler.PromptResult, error) {
			return &mcphandler.PromptResult{Messages: []mcphandler.PromptMessage{{Role: "user", Content: mcphandler.TextContent("hi")}}}, nil
		},
		Interceptors: []mcphandler.Interceptor{o.icp},
	}
}

// ambient wraps h in HTTP middleware that starts a span per request, as
// otelhttp does.
func (o *obs) ambient(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := o.tp.Tracer("http").Start(r.Context(), "HTTP "+r.Method, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// spans returns the ended spans named name.
func (o *obs) spans(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range o.rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// span returns the one ended span named name, waiting for it a little:
// a span ends after its response was written.
func (o *obs) span(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	s := o.spans(name)
	for deadline := time.Now().Add(2 * time.Second); len(s) == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		s = o.spans(name)
	}
	if len(s) != 1 {
		var names []string
		for _, s := range o.rec.Ended() {
			names = append(names, s.Name())
		}
		t.Fatalf("%d spans named %q; spans: %v", len(s), name, names)
	}
	return s[0]
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value.Emit()
	}
	return m
}

// wantAttrs fails unless s has every attribute of want (an empty value:
// must be absent).
func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[string]string) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		g, ok := got[attribute.Key(k)]
		if v == "" && ok {
			t.Errorf("span %q: attribute %s = %q, want absent", s.Name(), k, g)
		}
		if v != "" && g != v {
			t.Errorf("span %q: attribute %s = %q, want %q (all: %v)", s.Name(), k, g, v, got)
		}
	}
}

// events returns the events of s named name, with their confirm id.
func events(s sdktrace.ReadOnlySpan, name string) []string {
	var ids []string
	for _, e := range s.Events() {
		if e.Name != name {
			continue
		}
		for _, kv := range e.Attributes {
			if kv.Key == otelmcp.ConfirmIDKey {
				ids = append(ids, kv.Value.AsString())
			}
		}
	}
	return ids
}

// collect reads the metrics.
func (o *obs) collect(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := o.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// Fixed remote trace context, as a client puts it in params._meta.
const (
	remoteTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	remoteSpan   = "00f067aa0ba902b7"
	traceparent  = "00-" + remoteTrace + "-" + remoteSpan + "-01"
	remoteState  = "vendor=opaque"
	remoteBagage = "user=alice"
)

func metaParams(name string, meta map[string]any) map[string]any {
	return map[string]any{"name": name, "arguments": map[string]any{}, "_meta": meta}
}

func toolResult(t *testing.T, raw json.RawMessage) (isError bool) {
	t.Helper()
	var r struct {
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	return r.IsError
}

// histogram returns the data points of the float64 histogram name.
func histogram(t *testing.T, ms map[string]metricdata.Metrics, name string) []metricdata.HistogramDataPoint[float64] {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is %T, want a float64 histogram", name, m.Data)
	}
	if m.Unit != "s" {
		t.Errorf("%s unit %q, want s", name, m.Unit)
	}
	for _, p := range h.DataPoints {
		if !slices.Equal(p.Bounds, otelmcp.DurationBuckets) {
			t.Errorf("%s bounds %v, want the conventions' %v", name, p.Bounds, otelmcp.DurationBuckets)
		}
	}
	return h.DataPoints
}

func value(set attribute.Set, k string) string {
	v, _ := set.Value(attribute.Key(k))
	return v.Emit()
}

// eventually waits for cond (the metrics of a request are recorded after
// its response was written).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Flush()                      {}

// discardTracerProvider's spans say they record, carry a valid span
// context and drop everything given to them: with it, a benchmark measures
// what the interceptor itself does for a recorded span (its attributes,
// events, contexts), without the SDK's cost.
type discardTracerProvider struct{ noop.TracerProvider }

type discardTracer struct{ noop.Tracer }

type discardSpan struct{ noop.Span }

var theDiscardSpan = &discardSpan{}

func (discardTracerProvider) Tracer(string, ...trace.TracerOption) trace.Tracer {
	return discardTracer{}
}

func (discardTracer) Start(ctx context.Context, _ string, _ ...trace.SpanStartOption) (context.Context, trace.Span) {
	return trace.ContextWithSpan(ctx, theDiscardSpan), theDiscardSpan
}

func (*discardSpan) IsRecording() bool { return true }

func (*discardSpan) SpanContext() trace.SpanContext { return discardSC }

var discardSC = func() trace.SpanContext {
	tid, _ := trace.TraceIDFromHex(remoteTrace)
	sid, _ := trace.SpanIDFromHex(remoteSpan)
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
}()

const benchCall = `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`

// modernCall is a 2026-07-28 tools/call of echo with its _meta;
// modernTracedCall the same with a client's trace context.
const (
	modernCall = `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}`
	modernTracedCall = `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"},"traceparent":"` + traceparent + `"}}}`
)

// benchConfig serves a small tool, echo, to tenant acme.
func benchConfig() mcphandler.Config {
	return mcphandler.Config{
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
}

// caller opens a 2025 session on h and returns a func that serves body in
// it, in process, failing tb unless it is answered 200.
func caller(tb testing.TB, h http.Handler, body string) func() {
	w := &discardWriter{h: http.Header{}}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`
	req, _ := http.NewRequest("POST", "/", strings.NewReader(init))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	h.ServeHTTP(w, req)
	req.Header.Set("Mcp-Session-Id", w.h.Get("Mcp-Session-Id"))
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	return replay(tb, h, req, w, body)
}

// replay returns a func that serves req with body on h, answered to w,
// failing tb unless it is answered 200.
func replay(tb testing.TB, h http.Handler, req *http.Request, w *discardWriter, body string) func() {
	rd := strings.NewReader(body)
	req.ContentLength = int64(len(body))
	return func() {
		rd.Reset(body)
		req.Body = io.NopCloser(rd)
		clear(w.h)
		w.code = 0
		h.ServeHTTP(w, req)
		if w.code != 200 {
			tb.Fatalf("status %d", w.code)
		}
	}
}

// modernCaller returns a func that serves the 2026-07-28 tools/call of
// echo in body on h, in process, failing tb unless it is answered 200.
func modernCaller(tb testing.TB, h http.Handler, body string) func() {
	req, _ := http.NewRequest("POST", "/", nil)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "echo")
	return replay(tb, h, req, &discardWriter{h: http.Header{}}, body)
}
