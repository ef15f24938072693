package otelmcp

import (
	"flag"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
)

// checkLinear runs f, which handles an input of size bytes, and fails t
// when it takes longer than a bound linear in size: costFloor plus
// costPerMB per MiB (ten times that under the race detector, and the
// per-MiB part ten times over in a fuzzing worker, whose instrumentation
// slows tight loops). The bound is loose on purpose, so that it catches a
// quadratic path, never a slow machine. A run over the bound is repeated
// twice and only the fastest counts; a run's cost is the smaller of its
// wall time and the process's CPU time, so that waiting for a CPU on a
// loaded machine does not count. f must be safe to run several times.
//
// It is the check the core module runs on its parsers, kept here so that
// this module's tests use the public API of mcphandler only.
func checkLinear(t testing.TB, size int, f func()) {
	t.Helper()
	perMB := costPerMB
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		perMB *= 10
	}
	budget := costFloor + time.Duration(float64(perMB)*float64(size)/(1<<20))
	if raceBuild {
		budget *= 10
	}
	best := runCost(f)
	for i := 0; i < 2 && best > budget; i++ {
		best = min(best, runCost(f))
	}
	if best > budget {
		t.Fatalf("%d bytes took %v (fastest of 3 runs), over the budget of %v (%v + %v/MiB): handling is not linear in the input",
			size, best, budget, costFloor, perMB)
	}
}

const (
	costFloor = 20 * time.Millisecond  // allowed any input: scheduling and GC pauses
	costPerMB = 200 * time.Millisecond // allowed per MiB of input
)

// runCost returns the smaller of the wall time f took and the CPU time the
// process spent meanwhile (the wall time alone where that cannot be read).
func runCost(f func()) time.Duration {
	cpu0, ok0 := processCPU()
	start := time.Now()
	f()
	wall := time.Since(start)
	cpu1, ok1 := processCPU()
	if !ok0 || !ok1 {
		return wall
	}
	return min(wall, cpu1-cpu0)
}

func newTestMetrics(t testing.TB, ttl time.Duration) *metrics {
	t.Helper()
	m, err := newMetrics(metricnoop.NewMeterProvider(), ttl)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
