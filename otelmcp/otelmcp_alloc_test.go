package otelmcp_test

import (
	"net/http"
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
	base, with := tracedAllocs(t, caller, benchCall)
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
	base, with := tracedAllocs(t, modernCaller, modernCall)
	if with-base > 13 {
		t.Fatalf("a traced 2026-07-28 call allocates %v times, %v more than without interceptor; want at most 13 more", with, with-base)
	}
	// With a client's trace context in _meta (it was 48 while _meta was
	// decoded into a map): the carrier, its strings, the link, the remote
	// span context in the context.
	base, with = tracedAllocs(t, modernCaller, modernTracedCall)
	if with-base > 21 {
		t.Fatalf("a traced 2026-07-28 call with traceparent allocates %v times, %v more than without interceptor; want at most 21 more", with, with-base)
	}
}

// tracedAllocs returns the allocations of body served (by the func
// newCaller makes) without interceptor and with otelmcp, its spans
// recording but keeping nothing, its meter a no-op.
func tracedAllocs(t *testing.T, newCaller func(testing.TB, http.Handler, string) func(), body string) (base, with float64) {
	off := newCaller(t, mcphandler.New(benchConfig()), body)
	icp, err := otelmcp.NewInterceptor(otelmcp.WithTracerProvider(discardTracerProvider{}), otelmcp.WithMeterProvider(metricnoop.NewMeterProvider()))
	if err != nil {
		t.Fatal(err)
	}
	cfg := benchConfig()
	cfg.Interceptors = []mcphandler.Interceptor{icp}
	traced := newCaller(t, mcphandler.New(cfg), body)
	return testing.AllocsPerRun(200, off), testing.AllocsPerRun(200, traced)
}
