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
	Check(r, 0, func() { runs++; time.Sleep(Budget(0) + 5*time.Millisecond) })
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
			time.Sleep(Budget(0) + 5*time.Millisecond)
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
