package approval

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/internal/sign"
	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// TestPendingPerIdentity: one identity holds at most the default number
// of pending approvals, on every replica; past it Begin is refused with
// an error saying how many and until when. The same call repeated while
// pending is not another approval; another identity is not affected; an
// approval decided or expired stops counting, one the caller withdrew
// counts until its expiry.
func TestPendingPerIdentity(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		s1, s2 := b.store(nil), b.store(nil)
		const max = 20
		var held []*Approval
		for i := range max {
			held = append(held, begin(t, []*Store{s1, s2}[i%2], distinct(i)))
		}
		// The same call again finds its approval.
		if a, created, err := s2.Begin(ctx, distinct(3)); err != nil || created || a.ID != held[3].ID {
			t.Fatalf("the same call while pending: %+v created=%v %v", a, created, err)
		}
		for _, s := range []*Store{s1, s2} {
			_, _, err := s.Begin(ctx, distinct(max))
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d pending approvals held, at most %d", max, max)) ||
				!strings.Contains(err.Error(), held[0].Expires.UTC().Format("2006-01-02T15:04:05")) {
				t.Fatalf("one more pending approval: %v", err)
			}
		}
		other := deleteReq(`{"id":"n1"}`)
		other.Asker = Identity{Subject: "ed", Tenant: "globex"}
		begin(t, s1, other)
		// Approved, declined or expired: a place each.
		if _, err := s2.Decide(ctx, held[0].ID, admin, true); err != nil {
			t.Fatal(err)
		}
		begin(t, s1, distinct(max))
		if _, err := s1.Decide(ctx, held[1].ID, admin, false); err != nil {
			t.Fatal(err)
		}
		begin(t, s2, distinct(max+1))
		if _, _, err := s1.Begin(ctx, distinct(max+2)); !errors.Is(err, ErrTooManyPending) {
			t.Fatalf("one more pending approval after two were decided: %v", err)
		}
		// Withdrawn by the caller: it counts until its expiry.
		if _, err := s1.Withdraw(ctx, held[2].ID, editor); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s2.Begin(ctx, distinct(max+2)); !errors.Is(err, ErrTooManyPending) {
			t.Fatalf("one more pending approval after a withdrawal: %v", err)
		}
		late := at(b.store(nil), held[2].Expires)
		begin(t, late, distinct(max+2))
	})
}

// TestPendingConcurrent: concurrent Begins of distinct calls of one
// identity, on four replicas, never leave more than the bound pending.
func TestPendingConcurrent(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		const max = 20
		var made, refused atomic.Int64
		var wg sync.WaitGroup
		for r := range 4 {
			s := b.store(nil)
			for i := range 12 {
				wg.Go(func() {
					if _, _, err := s.Begin(ctx, distinct(r*100+i)); err == nil {
						made.Add(1)
					} else {
						refused.Add(1)
					}
				})
			}
		}
		wg.Wait()
		if made.Load() != max || refused.Load() != 48-max {
			t.Fatalf("%d made, %d refused; want %d and %d", made.Load(), refused.Load(), max, 48-max)
		}
	})
}

// countingStore counts the reads of approval records.
type countingStore struct {
	Shared
	reads atomic.Int64
}

func (c *countingStore) Load(ctx context.Context, key string) ([]byte, error) {
	if strings.HasPrefix(key, "approval/") {
		c.reads.Add(1)
	}
	return c.Shared.Load(ctx, key)
}

// TestPendingIndexRepaired: an index that still counts approvals no
// longer pending (a removal lost to a store failure, or an old copy of
// the index written back) is repaired at the bound from the records it
// names; an entry whose record was never written stops counting after a
// grace. The records are read at most once per recheck for one caller,
// whoever keeps asking.
func TestPendingIndexRepaired(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		cs := &countingStore{Shared: b.replica()}
		s := newTestStore(t, cs, nil)
		var held []*Approval
		for i := range DefaultMaxPendingPerIdentity {
			held = append(held, begin(t, s, distinct(i)))
		}
		restore := b.snapshot(ownerKey(editor))
		if _, err := s.Decide(ctx, held[0].ID, admin, false); err != nil {
			t.Fatal(err)
		}
		restore() // the decided approval is back in the index
		cs.reads.Store(0)
		begin(t, s, distinct(100))
		if n := cs.reads.Load(); n < DefaultMaxPendingPerIdentity || n > DefaultMaxPendingPerIdentity+2 {
			t.Fatalf("the repair read %d records, want about %d", n, DefaultMaxPendingPerIdentity)
		}
		// At the bound again: the repair just ran, and nobody asking reads
		// the records again before recheck.
		cs.reads.Store(0)
		for i := range 10 {
			if _, _, err := s.Begin(ctx, distinct(200+i)); !errors.Is(err, ErrTooManyPending) {
				t.Fatalf("past the bound: %v", err)
			}
		}
		if n := cs.reads.Load(); n > 10 { // the binding's lookups only
			t.Fatalf("refusals read %d records", n)
		}
		// Entries whose records were never written (a replica died between
		// the two writes): they count for admitGrace.
		other := Identity{Subject: "ghost", Tenant: "acme"}
		now := time.Now()
		for range DefaultMaxPendingPerIdentity {
			if err := s.admit(ctx, other, newID(), now.Add(DefaultTTL).UnixMilli()); err != nil {
				t.Fatal(err)
			}
		}
		req := distinct(0)
		req.Asker = other
		if _, _, err := s.Begin(ctx, req); !errors.Is(err, ErrTooManyPending) {
			t.Fatalf("within the grace: %v", err)
		}
		begin(t, at(newTestStore(t, b.replica(), nil), now.Add(admitGrace+time.Millisecond)), req)
	})
}

// TestPendingIndexTampered: an index that is garbage, signed with other
// keys, copied from another caller, or far longer than any index can be
// reads as empty and is replaced; the bound holds again from there.
func TestPendingIndexTampered(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		s := b.store(func(c *Config) { c.MaxPendingPerIdentity = 2 })
		other := Identity{Subject: "someone", Tenant: "acme"}
		o := deleteReq(`{"id":"o"}`)
		o.Asker = other
		begin(t, s, o)
		copied, err := s.cfg.Store.Load(ctx, ownerKey(other))
		if err != nil {
			t.Fatal(err)
		}
		foreign, err := sign.NewSigner("approval-owner", []byte("another key of 32 bytes at least!"))
		if err != nil {
			t.Fatal(err)
		}
		call := 0
		for name, raw := range map[string][]byte{
			"garbage":          []byte("{}"),
			"other keys":       foreign.Sign(ownerKey(editor), []byte(`{"e":[]}`)),
			"another caller's": copied,
			"huge":             make([]byte, 4<<20),
		} {
			b.put(ownerKey(editor), raw)
			n := 0
			for range 3 {
				call++
				if _, _, err := s.Begin(ctx, distinct(call)); err == nil {
					n++
				} else if !errors.Is(err, ErrTooManyPending) {
					t.Fatalf("%s: %v", name, err)
				}
			}
			if n != 2 {
				t.Fatalf("%s: %d approvals made, want 2", name, n)
			}
		}
	})
}

// recordingStore notes the keys of the approval records written.
type recordingStore struct {
	Shared
	mu   sync.Mutex
	keys []string
}

func (r *recordingStore) PutIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if strings.HasPrefix(key, "approval/") {
		r.mu.Lock()
		r.keys = append(r.keys, key)
		r.mu.Unlock()
	}
	return r.Shared.PutIfAbsent(ctx, key, value, ttl)
}

// TestPendingRaceLeavesOne: concurrent Begins of one new call, on eight
// replicas, agree on one approval; the records the losers wrote are
// deleted at once and do not count, so that repeating one call at once
// many times costs no more than one approval.
func TestPendingRaceLeavesOne(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		var stores []*Store
		var rec []*recordingStore
		for range 8 {
			r := &recordingStore{Shared: b.replica()}
			rec = append(rec, r)
			stores = append(stores, newTestStore(t, r, nil))
		}
		for round := range 5 {
			var won sync.Map
			var wg sync.WaitGroup
			for _, s := range stores {
				wg.Go(func() {
					a, _, err := s.Begin(ctx, distinct(round))
					if err != nil {
						t.Error(err)
						return
					}
					won.Store(a.ID, true)
				})
			}
			wg.Wait()
			n := 0
			won.Range(func(any, any) bool { n++; return true })
			if n != 1 {
				t.Fatalf("round %d: %d approvals for one call", round, n)
			}
		}
		time.Sleep(20 * time.Millisecond)
		live, err := stores[0].owners.Live(ctx, ownerKey(editor))
		if err != nil || len(live) != 5 {
			t.Fatalf("%d approvals count, want 5 (%v)", len(live), err)
		}
		kept := 0
		for _, r := range rec {
			for _, k := range r.keys {
				if _, err := r.Shared.Load(ctx, k); err == nil {
					kept++
				}
			}
		}
		if kept != 5 {
			t.Fatalf("%d approval records kept, want 5", kept)
		}
	})
}

// TestPendingStoreFails: the connection to Redis is cut on every write of
// a record (SET: the new approval's record, after its admission), then on
// every script (EVALSHA: the admission itself). The Begin fails with the
// store's error, the caller is never above the bound, and the place comes
// back: at once when the removal got through, else once the entry's grace
// passed.
func TestPendingStoreFails(t *testing.T) {
	ctx := context.Background()
	proxy := redistest.NewProxy(t, "")
	prefix := redistest.Prefix(t, redistest.Client(t))
	st := redisstore.New(proxy.Client(t), redisstore.Options{Prefix: prefix, OpTimeout: 300 * time.Millisecond, BreakerThreshold: -1})
	t.Cleanup(func() { st.Close() })
	s := newTestStore(t, st, func(c *Config) { c.MaxPendingPerIdentity = 3 })
	for i := range 2 {
		begin(t, s, distinct(i))
	}
	for _, cut := range []string{"SET", "EVALSHA"} {
		proxy.CutOnCommand(cut, -1)
		if _, _, err := s.Begin(ctx, distinct(10)); !errors.Is(err, session.ErrUnavailable) {
			t.Fatalf("cut on %s: %v, want the store's error", cut, err)
		}
		proxy.ClearCuts()
		live, err := s.owners.Live(ctx, ownerKey(editor))
		if err != nil || len(live) > 3 {
			t.Fatalf("after the cut on %s: %d entries, %v", cut, len(live), err)
		}
		now := time.Now()
		if len(live) == 3 {
			now = now.Add(admitGrace + recheck)
		}
		begin(t, at(newTestStore(t, st, func(c *Config) { c.MaxPendingPerIdentity = 3 }), now), distinct(20+len(cut)))
		if _, _, err := s.Begin(ctx, distinct(30+len(cut))); !errors.Is(err, ErrTooManyPending) {
			t.Fatalf("past the bound after the cut on %s: %v", cut, err)
		}
		// Make room for the next round.
		a, _, _ := s.Begin(ctx, distinct(20+len(cut)))
		if _, err := s.Decide(ctx, a.ID, admin, false); err != nil {
			t.Fatal(err)
		}
	}
}
