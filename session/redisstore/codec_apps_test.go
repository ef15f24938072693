package redisstore

import (
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

// TestCodecKeepsAppsCapability: a session whose client declared MCP Apps
// keeps that capability through the store, by its name.
func TestCodecKeepsAppsCapability(t *testing.T) {
	s := session.Session{ID: "a", Owner: "4:acme/alice", ProtocolVersion: "2025-11-25",
		Capabilities: session.CapUIApps | session.CapRoots, TTL: time.Minute}
	rec := encodeSession(&s)
	got, err := decodeSession("a", string(rec))
	if err != nil {
		t.Fatal(err)
	}
	if got.Capabilities != s.Capabilities {
		t.Fatalf("capabilities %v, want %v (record %q)", got.Capabilities, s.Capabilities, rec)
	}
}
