package approval

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/internal/canon"
	"github.com/mcphandler/mcphandler/internal/sign"
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
	f.Cleanup(func() { s.Close() })
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

// FuzzStored signs arbitrary payloads as a replica would (one with a bug,
// or another version) and feeds them, and the raw bytes unsigned, to what
// reads the store: as an approval's record, as a caller's pending index,
// as a tenant's pending index (the inbox's) and as a transition heard
// from another replica. Nothing panics; an accepted record keeps its
// state's invariants; an inbox shows only pending approvals of its
// tenant that its reader may decide; nothing remembered is
// pending; a caller never holds more than the bound.
func FuzzStored(f *testing.F) {
	now := time.Now().UnixMilli()
	rec := func(st State, extra string) []byte {
		return fmt.Appendf(nil, `{"st":%q,"ask":{"sub":"ed","ten":"acme"},"tool":"t","dg":"%064x","args":{},"pol":{},"c":%d,"ex":%d%s}`,
			st, 0, now, now+60_000, extra)
	}
	f.Add(rec(Pending, ""), true)
	f.Add(rec(Approved, `,"by":{"sub":"ada","ten":"acme"},"at":1`), true)
	f.Add(rec(Used, `,"by":{"sub":"ada","ten":"acme"},"at":1`), true)
	f.Add(fmt.Appendf(nil, `{"e":[{"i":"%s","x":%d}]}`, strings.Repeat("a", IDLen), now+60_000), true)
	f.Add(fmt.Appendf(nil, `{"id":"%s","st":"used","end":%d}`, strings.Repeat("a", IDLen), now+60_000), true)
	f.Add([]byte(`{"st":"approved"`), false)
	f.Fuzz(func(t *testing.T, payload []byte, signed bool) {
		mem := session.NewMemory()
		s, err := New(Config{Store: mem, Keys: testKeys, URL: "u/", MaxPendingPerIdentity: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx := context.Background()
		id := strings.Repeat("a", IDLen)
		ed := Identity{Subject: "ed", Tenant: "acme"}
		ownerSigner, _ := sign.NewSigner("approval-owner", testKeys...)
		tenantSigner, _ := sign.NewSigner("approval-tenant", testKeys...)
		// acme's index genuinely names the record; globex's is the payload.
		if err := s.tenants.Admit(ctx, tenantKey("acme"), id, time.Now().Add(time.Minute).UnixMilli(), nil); err != nil {
			t.Fatal(err)
		}
		for key, signer := range map[string]*sign.Signer{recordKey(id): s.mac, ownerKey(ed): ownerSigner, tenantKey("globex"): tenantSigner} {
			raw := payload
			if signed {
				raw = signer.Sign(key, payload)
			}
			mem.PutIfAbsent(ctx, key, raw, time.Minute)
		}
		if a, err := s.Get(ctx, id); err == nil {
			if !a.State.valid() || a.Asker.Subject == "" || (a.State == Approved || a.State == Used) && a.DecidedBy.Subject == "" {
				t.Fatalf("accepted %q as %+v", payload, a)
			}
		}
		// The inboxes show only what the record and the policy allow.
		for _, who := range []Identity{{Subject: "ada", Tenant: "acme"}, {Subject: "eve", Tenant: "globex"}, ed} {
			list, _, err := s.Inbox(ctx, who, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range list {
				if a.State != Pending || a.Asker.Tenant != who.Tenant || s.Check(ctx, a, who) != nil || !a.Expires.After(time.Now()) {
					t.Fatalf("the inbox of %+v over %q shows %+v", who, payload, a)
				}
			}
		}
		s.Decide(ctx, id, Identity{Subject: "ada", Tenant: "acme"}, true)
		s.Consume(ctx, id, ed, "t", []byte(`{}`))
		s.Withdraw(ctx, id, ed)
		// Heard from another replica.
		s.listen(ctx)
		msg := payload
		if signed {
			msg = s.mac.SignMessage(stateChannel, time.Now(), payload)
		}
		mem.Publish(ctx, stateChannel, msg)
		if s.seen.known(id) == Pending {
			t.Fatal("remembered a pending approval")
		}
		made := 0
		for i := range 3 {
			if _, created, err := s.Begin(ctx, Request{Asker: ed, Tool: "t", Arguments: fmt.Appendf(nil, "%d", i)}); err == nil && created {
				made++
			} else if err != nil && !errors.Is(err, ErrTooManyPending) {
				t.Fatalf("Begin over %q: %v", payload, err)
			}
		}
		if made > 1 {
			t.Fatalf("%d pending approvals made over index %q, bound 1", made, payload)
		}
	})
}
