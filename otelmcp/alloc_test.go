package otelmcp_test

import (
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/otelmcp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
)

// TestTracedCallAllocations holds what otelmcp and the interceptor chain
// allocate for a recorded tools/call, apart from any SDK: with spans that
// record but keep nothing and a no-op meter, at most 11 allocations more
// than the same call without interceptor (the handler's state of the
// operation, its context and the request carrying it, the span's start
// time, the log ids and confirm-step hook, the request id's text).
func TestTracedCallAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	off := caller(t, mcphandler.New(benchConfig()), benchCall)
	icp, err := otelmcp.NewInterceptor(otelmcp.WithTracerProvider(discardTracerProvider{}), otelmcp.WithMeterProvider(metricnoop.NewMeterProvider()))
	if err != nil {
		t.Fatal(err)
	}
	cfg := benchConfig()
	cfg.Interceptors = []mcphandler.Interceptor{icp}
	traced := caller(t, mcphandler.New(cfg), benchCall)
	base, with := testing.AllocsPerRun(200, off), testing.AllocsPerRun(200, traced)
	if with-base > 11 {
		t.Fatalf("a traced call allocates %v times, %v more than without interceptor; want at most 11 more", with, with-base)
	}
}

// TestTracedModernCallAllocations is TestTracedCallAllocations on the
// 2026-07-28 path, whose every request carries _meta (here without a
// trace context): at most 13 allocations more than the same call without
// interceptor (it was 40 while _meta and the params were decoded for the
// interceptor on every request).
func TestTracedModernCallAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	off := modernCaller(t, mcphandler.New(benchConfig()), modernCall)
	icp, err := otelmcp.NewInterceptor(otelmcp.WithTracerProvider(discardTracerProvider{}), otelmcp.WithMeterProvider(metricnoop.NewMeterProvider()))
	if err != nil {
		t.Fatal(err)
	}
	cfg := benchConfig()
	cfg.Interceptors = []mcphandler.Interceptor{icp}
	traced := modernCaller(t, mcphandler.New(cfg), modernCall)
	base, with := testing.AllocsPerRun(200, off), testing.AllocsPerRun(200, traced)
	if with-base > 13 {
		t.Fatalf("a traced 2026-07-28 call allocates %v times, %v more than without interceptor; want at most 13 more", with, with-base)
	}
}
