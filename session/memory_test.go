package session_test

import (
	"testing"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/sessiontest"
)

func TestMemoryConformance(t *testing.T) {
	sessiontest.Run(t, func(*testing.T) session.Store { return session.NewMemory() })
}

// TestComposedConformance: a Store composed of parts, each from another
// Memory, passes the whole suite, and each part's suite runs on its own.
func TestComposedConformance(t *testing.T) {
	sessiontest.Run(t, func(*testing.T) session.Store {
		return struct {
			session.Sessions
			session.PubSub
			session.Records
			session.EventLog
		}{session.NewMemory(), session.NewMemory(), session.NewMemory(), session.NewMemory()}
	})
	t.Run("Parts", func(t *testing.T) {
		sessiontest.RunRecords(t, func(*testing.T) session.Records { return session.NewMemory() })
		sessiontest.RunEventLog(t, func(*testing.T) session.EventLog { return session.NewMemory() })
	})
}
