package task

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: Close stops the
// signal dispatcher, and a Listener's Close its reader.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/mcphandler/mcphandler/internal/task.(*Run).check"))
}
