package mcphandler_test

import (
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/internal/task"
)

// The input keys a task's runner may not use are the handler's own.
func TestTaskReservedKeyPrefix(t *testing.T) {
	if task.ReservedKeyPrefix != mcphandler.ReservedKeyPrefix {
		t.Fatalf("task.ReservedKeyPrefix %q, mcphandler.ReservedKeyPrefix %q", task.ReservedKeyPrefix, mcphandler.ReservedKeyPrefix)
	}
}
