package redisstore

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

func TestCodecRoundTrip(t *testing.T) {
	for _, s := range []*session.Session{
		{ID: "empty"},
		sample("s1"),
		{
			ID: "full", Owner: "4:acme/alice", ProtocolVersion: "2025-11-25",
			ClientName: "ünïcødé", ClientVersion: strings.Repeat("v", 300),
			Capabilities: math.MaxUint16, Initialized: true, LogLevel: "emergency",
			Subscriptions: []string{"file:///a", "", "x://\x00\xff"}, TTL: -time.Nanosecond,
		},
		{ID: "ttl", TTL: math.MaxInt64},
	} {
		rec := encodeSession(s)
		got, err := decodeSession(s.ID, string(rec))
		if err != nil {
			t.Fatalf("%s: %v", s.ID, err)
		}
		if fmt.Sprintf("%#v", *got) != fmt.Sprintf("%#v", *s) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", *got, *s)
		}
	}
}

// TestCodecSize: the record stays compact.
func TestCodecSize(t *testing.T) {
	s := sample("s1")
	s.Subscriptions = []string{"file:///project/README.md"}
	rec := encodeSession(s)
	if len(rec) > 90 {
		t.Fatalf("record of %d bytes: %q", len(rec), rec)
	}
	t.Logf("%d bytes: %q", len(rec), rec)
}

// FuzzDecode: no input makes decoding panic, and what decodes re-encodes
// to a record that decodes to the same session.
func FuzzDecode(f *testing.F) {
	f.Add(string(encodeSession(sample("s1"))))
	s := sample("s2")
	s.Subscriptions = []string{"a", "b"}
	s.Initialized = true
	f.Add(string(encodeSession(s)))
	f.Add("\x0160000:0:")
	f.Add("\x01" + "1:1:\x00")
	f.Fuzz(func(t *testing.T, v string) {
		s, err := decodeSession("id", v)
		if err != nil {
			return
		}
		again, err := decodeSession("id", string(encodeSession(s)))
		if err != nil || fmt.Sprintf("%#v", *again) != fmt.Sprintf("%#v", *s) {
			t.Fatalf("%q decodes to %#v, which re-encodes to %#v, %v", v, *s, again, err)
		}
	})
}
