package otelmcp_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/otelmcp"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// dropProcessor is a span processor that drops every span it is given:
// the SDK's cost of a recorded span, without a batch processor.
type dropProcessor struct{}

func (dropProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (dropProcessor) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (dropProcessor) Shutdown(context.Context) error                  { return nil }
func (dropProcessor) ForceFlush(context.Context) error                { return nil }

// BenchmarkToolsCall measures one tools/call of a small tool in a live
// 2025 session, in process. Compare the modes with benchstat:
//
//   - off: no interceptor.
//   - otel: otelmcp with the SDK recording every span (batched to an
//     exporter that drops them) and every metric (a manual reader).
//   - otel-sampled-10pct: the same with a tenth of the traces sampled.
//   - own: otelmcp with spans that record but drop what they get, and a
//     no-op meter: otelmcp's own work for a recorded span.
//   - spans-sdk-drop: the SDK's spans, given to a processor that drops
//     them (no batching), a no-op meter.
//   - spans-sdk-batch: the SDK's spans batched to an exporter that drops
//     them, a no-op meter.
//   - metrics-sdk: recording-but-dropping spans, the SDK's metrics.
//   - unsampled: the SDK's spans, none sampled, and the SDK's metrics:
//     what tracing costs a call that is not traced.
//   - sampled-drop: the SDK's spans, every one sampled and dropped as it
//     ends, and the SDK's metrics.
func BenchmarkToolsCall(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode, func(b *testing.B) {
			serveLoop(b, benchHandler(b, mode), benchCall)
		})
	}
}

// BenchmarkToolsCallParallel is BenchmarkToolsCall with as many clients
// as GOMAXPROCS × 16, each in its own session, as the load harness runs
// it: what the interceptor costs when requests contend for what it shares.
func BenchmarkToolsCallParallel(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode, func(b *testing.B) {
			h := benchHandler(b, mode)
			b.SetParallelism(16)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				call := caller(b, h, benchCall)
				for pb.Next() {
					call()
				}
			})
		})
	}
}

// BenchmarkToolsCallModern is BenchmarkToolsCall on the 2026-07-28 path,
// whose every request carries _meta: without a trace context there
// (modern), and with one (modern-traceparent).
func BenchmarkToolsCallModern(b *testing.B) {
	for _, body := range []struct{ name, body string }{{"modern", modernCall}, {"modern-traceparent", modernTracedCall}} {
		for _, mode := range benchModes {
			b.Run(body.name+"/"+mode, func(b *testing.B) {
				call := modernCaller(b, benchHandler(b, mode), body.body)
				b.ReportAllocs()
				for b.Loop() {
					call()
				}
			})
		}
	}
}

var benchModes = []string{"off", "otel", "otel-sampled-10pct", "own", "spans-sdk-drop", "spans-sdk-batch", "metrics-sdk", "unsampled", "sampled-drop"}

// benchHandler is the handler of benchConfig with the interceptor of a
// benchmark mode.
func benchHandler(b *testing.B, mode string) http.Handler {
	cfg := benchConfig()
	if mode != "off" {
		tp, mp := benchProviders(b, mode)
		icp, err := otelmcp.NewInterceptor(otelmcp.WithTracerProvider(tp), otelmcp.WithMeterProvider(mp))
		if err != nil {
			b.Fatal(err)
		}
		cfg.Interceptors = []mcphandler.Interceptor{icp}
	}
	return mcphandler.New(cfg)
}

// benchProviders returns the TracerProvider and MeterProvider of a
// BenchmarkToolsCall mode.
func benchProviders(b *testing.B, mode string) (trace.TracerProvider, metric.MeterProvider) {
	sdkMeter := func() metric.MeterProvider {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		b.Cleanup(func() { mp.Shutdown(context.Background()) })
		return mp
	}
	sdkTracer := func(opts ...sdktrace.TracerProviderOption) trace.TracerProvider {
		tp := sdktrace.NewTracerProvider(opts...)
		b.Cleanup(func() { tp.Shutdown(context.Background()) })
		return tp
	}
	batched := sdktrace.WithBatcher(tracetest.NewNoopExporter())
	switch mode {
	case "otel":
		return sdkTracer(batched), sdkMeter()
	case "otel-sampled-10pct":
		return sdkTracer(batched, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.1)))), sdkMeter()
	case "own":
		return discardTracerProvider{}, metricnoop.NewMeterProvider()
	case "spans-sdk-drop":
		return sdkTracer(sdktrace.WithSpanProcessor(dropProcessor{})), metricnoop.NewMeterProvider()
	case "spans-sdk-batch":
		return sdkTracer(batched), metricnoop.NewMeterProvider()
	case "metrics-sdk":
		return discardTracerProvider{}, sdkMeter()
	case "unsampled":
		return sdkTracer(sdktrace.WithSampler(sdktrace.NeverSample())), sdkMeter()
	case "sampled-drop":
		return sdkTracer(sdktrace.WithSpanProcessor(dropProcessor{})), sdkMeter()
	}
	b.Fatalf("unknown mode %q", mode)
	return nil, nil
}

func serveLoop(b *testing.B, h http.Handler, body string) {
	call := caller(b, h, body)
	b.ReportAllocs()
	for b.Loop() {
		call()
	}
}
