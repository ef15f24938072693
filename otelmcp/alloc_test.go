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
