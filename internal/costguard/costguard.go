// Package costguard makes fuzz targets and tests fail on inputs whose
// handling costs more CPU than a linear bound allows: every parser that sees
// client bytes must run in time linear in its input with a small constant,
// and a quadratic path shows up as an input that takes far longer per byte
// than the rest.
//
// The bound is deliberately loose (Floor plus PerMB per mebibyte; ten times
// that under the race detector, and PerMB ten times over in a fuzzing
// worker, whose coverage instrumentation slows tight loops) so that it only
// catches algorithmic blowups, never a slow machine: the linear parsers of
// this module run at a few milliseconds per MiB.
package costguard

import (
	"flag"
	"sync"
	"testing"
	"time"
)

const (
	// Floor is the time every input is allowed, whatever its size: it
	// absorbs scheduling and garbage collection pauses.
	Floor = 20 * time.Millisecond
	// PerMB is the time allowed per MiB of input.
	PerMB = 200 * time.Millisecond
)

// Budget returns the time an input of size bytes is allowed.
func Budget(size int) time.Duration { return budget(size, PerMB) }

func budget(size int, perMB time.Duration) time.Duration {
	if fuzzing() {
		perMB *= 10
	}
	b := Floor + time.Duration(float64(perMB)*float64(size)/(1<<20))
	if raceEnabled {
		b *= 10
	}
	return b
}

// fuzzing reports whether this process is a fuzzing worker (go test -fuzz
// runs the instrumented test binary with -test.fuzzworker).
var fuzzing = sync.OnceValue(func() bool {
	f := flag.Lookup("test.fuzzworker")
	return f != nil && f.Value.String() == "true"
})

// Check runs f, which handles an input of size bytes, and fails t when it
// costs more than Budget(size) (see measure for what a cost is). A run over budget is repeated twice and only
// the fastest of the three counts, so a pause of the machine does not fail
// the test. f must be safe to run several times.
func Check(t testing.TB, size int, f func()) {
	t.Helper()
	CheckPerMB(t, size, PerMB, f)
}

// CheckPerMB is Check with perMB allowed per MiB instead of PerMB, for code
// that is linear but slow per byte (such as reflection-based decoding of
// many tiny objects); a quadratic path still shows up as a cost per MiB
// that grows with the size.
func CheckPerMB(t testing.TB, size int, perMB time.Duration, f func()) {
	t.Helper()
	budget := budget(size, perMB)
	best := measure(f)
	for i := 0; i < 2 && best > budget; i++ {
		best = min(best, measure(f))
	}
	if best > budget {
		t.Fatalf("costguard: %d bytes took %v (fastest of 3 runs), over the budget of %v (%v + %v/MiB): handling is not linear in the input",
			size, best, budget, Floor, perMB)
	}
}

// measure returns what f cost: the smaller of the wall time and the CPU
// time the process spent while f ran. On a loaded machine the wall time
// grows by the time f waited for a CPU, which is not a cost of the input;
// the process's CPU time does not, and it still counts every goroutine f
// starts and the garbage collection it causes. Other tests running in
// parallel inflate the CPU time but not the wall time, hence the minimum.
// Both are at least the CPU time of f's own work divided by the number of
// CPUs, so a quadratic path still shows. Where the process's CPU time
// cannot be read, it is the wall time.
func measure(f func()) time.Duration {
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
