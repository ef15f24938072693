package approval

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/internal/sign"
)

// ids returns the ids of list, in order.
func ids(list []*Approval) []string {
	var out []string
	for _, a := range list {
		out = append(out, a.ID)
	}
	return out
}

// inbox reads who's inbox through s, all of it.
func inbox(t *testing.T, s *Store, who Identity) []string {
	t.Helper()
	list, more, err := s.Inbox(context.Background(), who, 0)
	if err != nil || more {
		t.Fatalf("Inbox(%s): more=%v %v", who.Subject, more, err)
	}
	return ids(list)
}

// TestInboxWhoSeesWhat: each person's inbox, read on another replica than
// the one that made the approvals, holds exactly the pending approvals of
// their tenant that the check of a decision admits them to, newest
// first: never another tenant's (not even one whose policy admits any
// tenant), never the asker's own under the four-eyes rule, nothing for a
// role the policy refuses. Decided, withdrawn and expired approvals leave
// it.
func TestInboxWhoSeesWhat(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		maker, reader := b.store(nil), b.store(nil)
		var made []*Approval
		ask := func(asker Identity, p Policy, i int) *Approval {
			req := Request{Asker: asker, Tool: "delete_note", Arguments: fmt.Appendf(nil, `{"id":"n%d"}`, i), Policy: p}
			a := begin(t, maker, req)
			made = append(made, a)
			time.Sleep(2 * time.Millisecond) // distinct creation times
			return a
		}
		adminOnly := Policy{MinRole: "admin"}
		e1 := ask(editor, adminOnly, 1)
		e2 := ask(editor, Policy{}, 2) // four eyes: any other person of acme
		b1 := ask(admin2, Policy{}, 3)
		g1 := ask(Identity{Subject: "gus", Tenant: "globex", Role: "editor"}, Policy{AnyTenant: true}, 4)
		e3 := ask(editor, adminOnly, 5)

		for _, c := range []struct {
			who  Identity
			want []*Approval
		}{
			{admin, []*Approval{e3, b1, e2, e1}},
			{admin2, []*Approval{e3, e2, e1}}, // not their own
			{editor, []*Approval{b1}},         // not their own; admin-only ones refuse an editor
			{viewer, []*Approval{b1, e2}},
			{foreign, []*Approval{g1}},                        // in globex's inbox only, though its policy admits any tenant
			{Identity{Subject: "gus", Tenant: "globex"}, nil}, // its asker
			{Identity{Tenant: "acme"}, nil},                   // no subject
		} {
			got := inbox(t, reader, c.who)
			if !slices.Equal(got, ids(c.want)) {
				t.Errorf("%+v sees %v, want %v", c.who, got, ids(c.want))
			}
			// The same check as a decision's: shown exactly when Check admits.
			for _, a := range made {
				shown := slices.Contains(got, a.ID)
				admitted := a.Asker.Tenant == c.who.Tenant && reader.Check(ctx, a, c.who) == nil
				if shown != admitted {
					t.Errorf("%s for %+v: shown %v, admitted %v", a.ID, c.who, shown, admitted)
				}
			}
		}
		// A decision, a withdrawal, the expiry: out of every inbox.
		if _, err := reader.Decide(ctx, e3.ID, admin, false); err != nil {
			t.Fatal(err)
		}
		if _, err := maker.Withdraw(ctx, e2.ID, editor); err != nil {
			t.Fatal(err)
		}
		if got := inbox(t, reader, admin); !slices.Equal(got, []string{b1.ID, e1.ID}) {
			t.Fatalf("after a decline and a withdrawal: %v", got)
		}
		if got := inbox(t, at(b.store(nil), b1.Expires), admin); len(got) != 0 {
			t.Fatalf("at the expiry: %v", got)
		}
	})
}

// TestInboxBounded: reading an inbox reads at most the tenant's bound of
// records (the index holds no more), stops once it has the rows asked
// for and one more, and says that more wait; an index far longer than any
// can be costs no record read at all.
func TestInboxBounded(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		const bound = 40
		cs := &countingStore{Shared: b.replica()}
		s := newTestStore(t, cs, func(c *Config) { c.MaxPendingPerTenant, c.MaxPendingPerIdentity = bound, bound+1 })
		var made []string
		for i := range bound {
			made = append(made, begin(t, s, distinct(i)).ID)
		}
		if _, _, err := s.Begin(ctx, distinct(bound)); !errors.Is(err, ErrTooManyPendingInTenant) {
			t.Fatalf("past the tenant's bound: %v", err)
		}
		cs.reads.Store(0)
		list, more, err := s.Inbox(ctx, admin, 10)
		if err != nil || len(list) != 10 || !more {
			t.Fatalf("10 rows: %d rows, more=%v, %v", len(list), more, err)
		}
		if n := cs.reads.Load(); n > inboxBatch {
			t.Fatalf("10 rows read %d records", n)
		}
		slices.Reverse(made)
		if !slices.Equal(ids(list), made[:10]) {
			t.Fatalf("not the newest first: %v, want %v", ids(list), made[:10])
		}
		for _, who := range []Identity{admin, viewer} { // all to show; none to show
			cs.reads.Store(0)
			list, more, err = s.Inbox(ctx, who, 0)
			if n := cs.reads.Load(); err != nil || more || n > bound {
				t.Fatalf("%s: %d rows, more=%v, %d records read, %v", who.Subject, len(list), more, n, err)
			}
		}
		if len(inbox(t, s, viewer)) != 0 || len(inbox(t, s, admin)) != bound {
			t.Fatal("wrong rows")
		}
		b.put(tenantKey("acme"), make([]byte, 4<<20))
		cs.reads.Store(0)
		if got := inbox(t, s, admin); len(got) != 0 || cs.reads.Load() != 0 {
			t.Fatalf("a huge index: %d rows, %d records read", len(got), cs.reads.Load())
		}
	})
}

// TestPendingPerTenant: the callers of one tenant together hold at most
// Config.MaxPendingPerTenant pending approvals, on every replica; past it
// Begin is refused with an error saying how many and until when, and the
// refused approval does not count against its caller either. Another
// tenant is not affected; a decision frees a place.
func TestPendingPerTenant(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		const max = 5
		mod := func(c *Config) { c.MaxPendingPerTenant = max }
		s1, s2 := b.store(mod), b.store(mod)
		person := func(tenant string, i int) Request {
			r := deleteReq(`{"id":"x"}`)
			r.Asker = Identity{Subject: fmt.Sprintf("p%d", i), Tenant: tenant}
			return r
		}
		var held []*Approval
		for i := range max {
			held = append(held, begin(t, []*Store{s1, s2}[i%2], person("acme", i)))
		}
		for _, s := range []*Store{s1, s2} {
			_, _, err := s.Begin(ctx, person("acme", max))
			if !errors.Is(err, ErrTooManyPendingInTenant) || errors.Is(err, ErrTooManyPending) ||
				!strings.Contains(err.Error(), fmt.Sprintf("%d pending approvals held by the callers of this tenant, at most %d", max, max)) ||
				!strings.Contains(err.Error(), held[0].Expires.UTC().Format("2006-01-02T15:04:05")) {
				t.Fatalf("one more in the tenant: %v", err)
			}
		}
		if live, err := s1.owners.Live(ctx, ownerKey(person("acme", max).Asker)); err != nil || len(live) != 0 {
			t.Fatalf("the refused approval counts against its caller: %v %v", live, err)
		}
		begin(t, s1, person("globex", 0))
		if _, err := s2.Decide(ctx, held[0].ID, admin, true); err != nil {
			t.Fatal(err)
		}
		begin(t, s1, person("acme", max))
	})
}

// TestPendingPerTenantConcurrent: concurrent Begins of distinct callers of
// one tenant, on four replicas, never leave more than the tenant's bound
// pending, nor in its index.
func TestPendingPerTenantConcurrent(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		const max = 20
		var made, refused atomic.Int64
		var wg sync.WaitGroup
		var stores []*Store
		for r := range 4 {
			s := b.store(func(c *Config) { c.MaxPendingPerTenant = max })
			stores = append(stores, s)
			for i := range 12 {
				wg.Go(func() {
					req := deleteReq(`{"id":"x"}`)
					req.Asker = Identity{Subject: fmt.Sprintf("p%d-%d", r, i), Tenant: "acme"}
					_, _, err := s.Begin(ctx, req)
					switch {
					case err == nil:
						made.Add(1)
					case errors.Is(err, ErrTooManyPendingInTenant):
						refused.Add(1)
					default:
						t.Error(err)
					}
				})
			}
		}
		wg.Wait()
		if made.Load() != max || refused.Load() != 48-max {
			t.Fatalf("%d made, %d refused; want %d and %d", made.Load(), refused.Load(), max, 48-max)
		}
		if got := inbox(t, stores[3], admin); len(got) != max {
			t.Fatalf("the inbox shows %d, want %d", len(got), max)
		}
	})
}

// TestInboxTampered: what the store returns is client input. A tenant
// index that is garbage, signed with other keys or copied from another
// tenant reads as empty (an empty inbox; the bound counts again from
// there), and an index entry naming another tenant's approval (as only a
// bug could write: it is signed) never shows it.
func TestInboxTampered(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		s := b.store(func(c *Config) { c.MaxPendingPerTenant = 2 })
		globex := deleteReq(`{"id":"g"}`)
		globex.Asker = Identity{Subject: "gus", Tenant: "globex"}
		globex.Policy = Policy{AnyTenant: true}
		g := begin(t, s, globex)
		copied, err := s.cfg.Store.Load(ctx, tenantKey("globex"))
		if err != nil {
			t.Fatal(err)
		}
		other, err := sign.NewSigner("approval-tenant", []byte("another key of 32 bytes at least!"))
		if err != nil {
			t.Fatal(err)
		}
		asker := 0
		for name, raw := range map[string][]byte{
			"garbage":          []byte("{}"),
			"other keys":       other.Sign(tenantKey("acme"), fmt.Appendf(nil, `{"e":[{"i":%q,"x":%d}]}`, g.ID, g.Expires.UnixMilli())),
			"another tenant's": copied,
		} {
			b.put(tenantKey("acme"), raw)
			if got := inbox(t, s, admin); len(got) != 0 {
				t.Fatalf("%s: the inbox shows %v", name, got)
			}
			n := 0
			for range 3 {
				asker++
				req := deleteReq(`{"id":"x"}`)
				req.Asker = Identity{Subject: fmt.Sprintf("p%d", asker), Tenant: "acme"}
				if _, _, err := s.Begin(ctx, req); err == nil {
					n++
				} else if !errors.Is(err, ErrTooManyPendingInTenant) {
					t.Fatalf("%s: %v", name, err)
				}
			}
			if n != 2 {
				t.Fatalf("%s: %d approvals made, want 2", name, n)
			}
		}
		// A genuine acme index that names globex's approval.
		b.put(tenantKey("acme"), []byte("x"))
		if err := s.tenants.Admit(ctx, tenantKey("acme"), g.ID, g.Expires.UnixMilli(), nil); err != nil {
			t.Fatal(err)
		}
		if got := inbox(t, s, admin); len(got) != 0 {
			t.Fatalf("acme's inbox shows globex's approval: %v", got)
		}
	})
}

// TestInboxWithoutEntry: an approval without an entry in its tenant's
// index (made by an earlier release, or whose entry a store failure lost)
// is in no inbox, and is still decided through its own page.
func TestInboxWithoutEntry(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		s := b.store(nil)
		a := begin(t, s, distinct(1))
		if got := inbox(t, s, admin); !slices.Equal(got, []string{a.ID}) {
			t.Fatalf("inbox %v", got)
		}
		if err := s.tenants.Remove(ctx, tenantKey("acme"), a.ID); err != nil {
			t.Fatal(err)
		}
		if got := inbox(t, s, admin); len(got) != 0 {
			t.Fatalf("inbox %v", got)
		}
		if _, err := s.Decide(ctx, a.ID, admin, true); err != nil {
			t.Fatal(err)
		}
	})
}
