package mcphandler

import "testing"

// TestIdentityHasKey holds hasKey to key(): every identity has its own
// key and no other, whatever its tenant and subject hold (separators,
// digits, empty parts), and a key one byte longer or shorter is not it.
func TestIdentityHasKey(t *testing.T) {
	ids := []Identity{
		{}, {Tenant: "acme", Subject: "alice"}, {Tenant: "acme/alice"}, {Subject: "acme/alice"},
		{Tenant: "1:a", Subject: "b"}, {Tenant: "1", Subject: ":a/b"}, {Tenant: "a", Subject: "/"},
		{Tenant: "acme", Subject: "alic"}, {Tenant: "acm", Subject: "ealice"}, {Tenant: "4:acme/alice"},
		{Tenant: string(make([]byte, 123)), Subject: "x"}, {Tenant: "é", Subject: "\x00"},
	}
	for i, a := range ids {
		k := a.key()
		for _, bad := range []string{"", k[:len(k)-1], k + "x", "x" + k, k[1:]} {
			if a.hasKey(bad) {
				t.Errorf("%+v has key %q, its key is %q", a, bad, k)
			}
		}
		for j, b := range ids {
			if got, want := b.hasKey(k), i == j || b.key() == k; got != want {
				t.Errorf("%+v hasKey(%q) = %v, want %v", b, k, got, want)
			}
		}
	}
}

func FuzzIdentityHasKey(f *testing.F) {
	f.Add("acme", "alice", "4:acme/alice")
	f.Add("", "", "0:/")
	f.Add("1", ":a/b", "1:1/:a/b")
	f.Fuzz(func(t *testing.T, tenant, subject, k string) {
		id := Identity{Tenant: tenant, Subject: subject}
		if got, want := id.hasKey(k), id.key() == k; got != want {
			t.Fatalf("hasKey(%q) = %v, key() is %q", k, got, id.key())
		}
		if !id.hasKey(id.key()) {
			t.Fatalf("%+v does not have its own key", id)
		}
	})
}
