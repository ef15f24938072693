package mcphandler

import (
	"strings"
	"testing"
)

// A session id verifies for the identity it was minted for only: not for
// another tenant or subject, not with a character changed, not cut or
// extended, not as minted by an earlier release (no tag); and it is
// visible ASCII.
func TestSessionIDNamesItsOwner(t *testing.T) {
	h := New(Config{})
	alice := Identity{Tenant: "acme", Subject: "alice"}
	sid := h.sessions.newSessionID(alice)
	if len(sid) != sessionIDLen || !h.sessions.sessionOf(sid, alice) {
		t.Fatalf("%q does not verify for its owner", sid)
	}
	for _, other := range []Identity{{Tenant: "acme", Subject: "bob"}, {Tenant: "evil", Subject: "alice"}, {Tenant: "acme/alice"}, {}} {
		if h.sessions.sessionOf(sid, other) {
			t.Errorf("%q verifies for %+v", sid, other)
		}
	}
	for i := range sid {
		b := []byte(sid)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		if h.sessions.sessionOf(string(b), alice) {
			t.Errorf("changed at %d: verifies", i)
		}
	}
	for _, bad := range []string{sid[:len(sid)-1], sid + "A", sid[:sessionRandLen], "", strings.ToLower(sid)} {
		if h.sessions.sessionOf(bad, alice) {
			t.Errorf("%q verifies", bad)
		}
	}
	if New(Config{}).sessions.sessionOf(sid, alice) {
		t.Error("verifies under another handler's keys")
	}
}

// Whatever a client sends as a session id, sessionOf answers without
// panicking, and only for an id minted for that identity.
func FuzzSessionID(f *testing.F) {
	h := New(Config{StateKeys: [][]byte{[]byte("0123456789abcdef0123456789abcdef")}})
	alice := Identity{Tenant: "acme", Subject: "alice"}
	minted := h.sessions.sessionID("ABCDEFGHIJKLMNOPQRSTUVWXYZ", alice)
	f.Add(minted, "acme", "alice")
	f.Add(strings.Repeat("A", sessionIDLen), "", "")
	f.Add(strings.Repeat("=", sessionIDLen), "acme", "alice")
	f.Fuzz(func(t *testing.T, sid, tenant, subject string) {
		id := Identity{Tenant: tenant, Subject: subject}
		if h.sessions.sessionOf(sid, id) && (sid != minted || tenant != "acme" || subject != "alice") {
			t.Fatalf("%q verifies for %+v", sid, id)
		}
	})
}

func TestSessionOfAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	h := New(Config{})
	alice := Identity{Tenant: "acme", Subject: "alice"}
	sid := h.sessions.newSessionID(alice)
	if n := testing.AllocsPerRun(100, func() { h.sessions.sessionOf(sid, alice) }); n != 0 {
		t.Fatalf("sessionOf allocates %v times", n)
	}
}
