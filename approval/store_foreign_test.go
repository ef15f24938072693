package approval

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// TestForeignTypes: an approval's record, and the index of a call's
// approval, replaced in Redis by a value of every type: the approval is
// unknown to every method, as for a record that does not verify
// (TestForgedRecords), and the next Begin of the call makes a new
// approval and indexes it, as it does over a garbage index. Nothing
// answers with the store's unavailability, and the store's breaker, which
// opens at the first failure it counts, stays closed.
func TestForeignTypes(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	sh := redisstore.New(redistest.Client(t), redisstore.Options{Prefix: prefix,
		BreakerThreshold: 1, BreakerMinBackoff: time.Hour, BreakerMaxBackoff: time.Hour})
	t.Cleanup(func() { sh.Close() })
	s := newTestStore(t, sh, nil)
	replace := func(key, typ string) {
		t.Helper()
		k := prefix + "{" + key + "}:r"
		if c.Exists(ctx, k).Val() != 1 {
			t.Fatalf("nothing to replace at %s", k)
		}
		redistest.Replace(t, c, k, typ)
	}
	for _, typ := range redistest.Types {
		t.Run(typ, func(t *testing.T) {
			req := deleteReq(`{"id":"` + typ + `"}`)
			a := begin(t, s, req)
			replace(recordKey(a.ID), typ)
			if _, err := s.Get(ctx, a.ID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get of a record that is a %s: %v", typ, err)
			}
			if _, err := s.Decide(ctx, a.ID, admin, true); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Decide of a record that is a %s: %v", typ, err)
			}
			if _, err := s.Consume(ctx, a.ID, editor, req.Tool, req.Arguments); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Consume of a record that is a %s: %v", typ, err)
			}
			short, cancel := context.WithTimeout(ctx, time.Second)
			_, err := s.Wait(short, a.ID)
			cancel()
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("Wait on a record that is a %s: %v", typ, err)
			}
			b := begin(t, s, req) // the index names a record that is gone
			if b.ID == a.ID {
				t.Fatal("the same approval again")
			}

			_, digest, err := s.check(&req)
			if err != nil {
				t.Fatal(err)
			}
			replace(bindingKey(req.Asker, req.Tool, digest), typ)
			n := begin(t, s, req)
			if n.ID == b.ID {
				t.Fatalf("Begin over an index that is a %s returned the approval it no longer names", typ)
			}
			if again, created, err := s.Begin(ctx, req); err != nil || created || again.ID != n.ID {
				t.Fatalf("Begin after one over an index that was a %s: %+v, %v, %v; want %s", typ, again, created, err, n.ID)
			}
		})
	}
}
