package costguard

import (
	"testing"
	"time"
)

// recorder is a testing.TB that records a failure instead of stopping.
type recorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = true
	r.msg = format
}

func TestCheck(t *testing.T) {
	r := &recorder{TB: t}
	Check(r, 1<<20, func() {})
	if r.failed {
		t.Fatal("an instant run failed the guard")
	}
	runs := 0
	r = &recorder{TB: t}
	Check(r, 0, func() { runs++; burn(Budget(0) + 5*time.Millisecond) })
	if !r.failed {
		t.Fatal("a run over budget passed the guard")
	}
	if runs != 3 {
		t.Fatalf("a run over budget ran %d times, want 3", runs)
	}
	// One slow run among fast ones is a pause, not a cost.
	runs = 0
	r = &recorder{TB: t}
	Check(r, 0, func() {
		runs++
		if runs == 1 {
			burn(Budget(0) + 5*time.Millisecond)
		}
	})
	if r.failed || runs != 2 {
		t.Fatalf("one slow run: failed %v after %d runs, want a pass after 2", r.failed, runs)
	}
}

func TestBudget(t *testing.T) {
	if got, want := Budget(1<<20)-Budget(0), PerMB; !raceEnabled && got != want {
		t.Fatalf("Budget(1 MiB) - Budget(0) = %v, want %v", got, want)
	}
}

// burn keeps a CPU busy until both the wall time and the process's CPU
// time have advanced by at least d.
func burn(d time.Duration) {
	start := time.Now()
	cpu0, ok := processCPU()
	for x := 0; ; x++ {
		if x%1024 != 0 {
			continue
		}
		cpu, _ := processCPU()
		if time.Since(start) >= d && (!ok || cpu-cpu0 >= d) {
			return
		}
	}
}

// TestWaitingIsNotACost: a run that waits (as a run does on a loaded
// machine, for a CPU) costs what it computed, not the time it waited.
func TestWaitingIsNotACost(t *testing.T) {
	if _, ok := processCPU(); !ok {
		t.Skip("the process's CPU time cannot be read here")
	}
	r := &recorder{TB: t}
	runs := 0
	Check(r, 0, func() { runs++; time.Sleep(Budget(0) + 50*time.Millisecond) })
	if r.failed || runs != 1 {
		t.Fatalf("a run that only waited: failed %v after %d runs, want a pass after 1", r.failed, runs)
	}
	if got := measure(func() { burn(30 * time.Millisecond) }); got < 30*time.Millisecond {
		t.Fatalf("30 ms of computing measured as %v", got)
	}
}
