package approval

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/mcphandler/mcphandler/internal/canon"
	"github.com/mcphandler/mcphandler/session"
)

// FuzzBinding: for any arguments a client sends, the approval binds their
// canonical form: the same value written any way finds and consumes it,
// once, and a call whose arguments differ from them never does.
func FuzzBinding(f *testing.F) {
	for _, s := range [][2]string{{`{"id":"n1"}`, `{ "id" : "n\u0031" }`}, {`{"a":1,"b":[1.0]}`, `{"b":[1],"a":1e0}`},
		{`null`, ``}, {`{"id":"a","id":"b"}`, `{"id":"b"}`}, {`[1,2]`, `[2,1]`}, {`"x"`, `"y"`}} {
		f.Add(s[0], s[1])
	}
	s, err := New(Config{Store: session.NewMemory(), Keys: testKeys, URL: "u/"})
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	who := Identity{Subject: "ed", Tenant: "acme"}
	f.Fuzz(func(t *testing.T, args, other string) {
		a, _, err := s.Begin(ctx, Request{Asker: who, Tool: "t", Arguments: []byte(args), Policy: Policy{AnyTenant: true}})
		if err != nil {
			return // refused input: nothing to bind
		}
		if a.State == Pending {
			if _, err := s.Decide(ctx, a.ID, Identity{Subject: "ada", Tenant: "acme"}, true); err != nil {
				t.Fatal(err)
			}
		}
		_, err = s.Consume(ctx, a.ID, who, "t", []byte(other))
		same := err == nil
		if c, cerr := canon.Canonical([]byte(other)); same != (cerr == nil && bytes.Equal(c, a.Arguments)) {
			t.Fatalf("args %q, other %q: consumed=%v, but canonical forms %q and %q", args, other, same, a.Arguments, c)
		}
		if err != nil && !errors.Is(err, ErrMismatch) {
			t.Fatalf("consume: %v", err)
		}
		if _, err := s.Consume(ctx, a.ID, who, "t", a.Arguments); same && !errors.Is(err, ErrUsed) || !same && err != nil {
			t.Fatalf("args %q other %q: consume of the canonical form after same=%v: %v", args, other, same, err)
		}
	})
}
