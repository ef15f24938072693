package mcptest

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run if a goroutine started by this package outlives
// the tests (go.uber.org/goleak is not a dependency of the module).
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := waitOwnGoroutines(2 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// waitOwnGoroutines waits until no goroutine runs code of this package's
// non-test files and returns the stacks of those still running at the end.
func waitOwnGoroutines(d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var own []string
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			if runsOwnCode(g) && !strings.Contains(g, "TestMain") && !strings.Contains(g, "waitOwnGoroutines") {
				own = append(own, g)
			}
		}
		if len(own) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(own, "\n\n")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runsOwnCode reports whether the goroutine stack g has a frame in a
// non-test file of this package: a stream reader, the SSE reader, a
// server-request handler it started, or anything else of the client.
func runsOwnCode(g string) bool {
	for line := range strings.SplitSeq(g, "\n") {
		file, _, ok := strings.Cut(strings.TrimSpace(line), ".go:")
		if ok && strings.Contains(file, "/mcptest/") && !strings.HasSuffix(file, "_test") {
			return true
		}
	}
	return false
}
