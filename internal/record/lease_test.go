package record

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

const testLease = 300 * time.Millisecond

// eventually polls f until it holds, failing the test after d.
func eventually(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !f(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("after %v: %s", d, what)
		}
	}
}

func holder(t *testing.T, st session.Records, key string) string {
	t.Helper()
	b, err := st.Load(ctxT(t), key)
	if errors.Is(err, session.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLeaseOneHolder(t *testing.T) {
	eachStore(t, func(t *testing.T, w *world) {
		ctx := ctxT(t)
		const n = 8
		var mu sync.Mutex
		var got []*Lease
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := Take(ctx, w.store, "lease/one", string(rune('a'+i)), testLease)
				if err != nil {
					t.Error(err)
				}
				if l != nil {
					mu.Lock()
					got = append(got, l)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(got) != 1 {
			t.Fatalf("%d takers hold the lease, want 1", len(got))
		}
		l := got[0]
		if h := holder(t, w.store, "lease/one"); h != l.Token() {
			t.Fatalf("the store says %q holds it, Take said %q", h, l.Token())
		}
		if Lapsed(ctx, w.store, "lease/one") {
			t.Fatal("Lapsed while held")
		}
		l.Release()
		l.Release() // twice is fine
		(*Lease)(nil).Release()
		(*Lease)(nil).Stop()
		// Release gives the lease the store's shortest lifetime.
		eventually(t, time.Second, "held after Release", func() bool { return Lapsed(ctx, w.store, "lease/one") })
		if l, err := Take(ctx, w.store, "lease/one", "next", testLease); l == nil || err != nil {
			t.Fatalf("Take after Release = %v, %v", l, err)
		}
	})
}

// A kept lease outlives its TTL; a stopped one lapses, and a released one
// at once.
func TestLeaseKeep(t *testing.T) {
	eachStore(t, func(t *testing.T, w *world) {
		ctx := ctxT(t)
		l, err := Take(ctx, w.store, "lease/keep", "me", testLease)
		if l == nil || err != nil {
			t.Fatal(l, err)
		}
		var renewals atomic.Int32
		l.Keep(func(context.Context, error) { renewals.Add(1) })
		time.Sleep(3 * testLease)
		if Lapsed(ctx, w.store, "lease/keep") {
			t.Fatal("a kept lease lapsed")
		}
		if renewals.Load() < 2 {
			t.Fatalf("%d renewals in 3 TTLs", renewals.Load())
		}
		l.Stop()
		eventually(t, 3*testLease, "a stopped lease never lapsed", func() bool { return Lapsed(ctx, w.store, "lease/keep") })
		n := renewals.Load()
		time.Sleep(testLease / 2)
		if renewals.Load() != n {
			t.Fatal("renewed after Stop")
		}
	})
}

// A renewal that finds its lease gone takes it back; one that finds
// another holder leaves it to them.
func TestLeaseLapsedAndTaken(t *testing.T) {
	eachStore(t, func(t *testing.T, w *world) {
		ctx := ctxT(t)
		mine, _ := Take(ctx, w.store, "lease/back", "mine", testLease)
		mine.Keep(nil)
		defer mine.Release()
		b, _ := w.store.Load(ctx, "lease/back")
		// Something deletes it (it lapsed while the store was away).
		w.store.CompareAndSwap(ctx, "lease/back", b, b, time.Millisecond)
		time.Sleep(5 * time.Millisecond)
		eventually(t, 2*testLease, "the lease was not taken back", func() bool { return holder(t, w.store, "lease/back") == "mine" })

		theirs, _ := Take(ctx, w.store, "lease/theirs", "first", testLease)
		theirs.Stop() // its holder died
		eventually(t, 3*testLease, "never lapsed", func() bool { return Lapsed(ctx, w.store, "lease/theirs") })
		next, _ := Take(ctx, w.store, "lease/theirs", "second", testLease)
		if next == nil {
			t.Fatal("could not take a lapsed lease")
		}
		next.Keep(nil)
		defer next.Release()
		theirs.Release() // the dead holder's late release drops nothing
		time.Sleep(testLease)
		if h := holder(t, w.store, "lease/theirs"); h != "second" {
			t.Fatalf("held by %q", h)
		}
	})
}

// The hook after each renewal may stop the lease (no deadlock), and is
// told when the store failed.
func TestLeaseHook(t *testing.T) {
	st := &failing{Records: session.NewMemory()}
	ctx := ctxT(t)
	l, _ := Take(ctx, st, "lease/hook", "me", testLease)
	errs := make(chan error, 16)
	l.Keep(func(ctx context.Context, err error) {
		errs <- err
		if err != nil {
			l.Stop()
		}
	})
	if err := <-errs; err != nil {
		t.Fatalf("first renewal: %v", err)
	}
	st.set(true)
	for err := range errs {
		if errors.Is(err, errDown) {
			break
		}
	}
	time.Sleep(testLease)
	if len(errs) != 0 {
		t.Fatalf("renewed after the hook stopped the lease: %v", <-errs)
	}
	l.Release()
}
