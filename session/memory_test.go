package session_test

import (
	"testing"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/sessiontest"
)

func TestMemoryConformance(t *testing.T) {
	sessiontest.Run(t, func(*testing.T) session.Store { return session.NewMemory() })
}
