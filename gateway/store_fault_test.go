package gateway_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

// failingStore is a store whose Records fail while down: the store cut
// or unreachable mid-operation.
type failingStore struct {
	session.Store
	down atomic.Bool
}

var errStoreDown = errors.New("store down")

func (s *failingStore) Load(ctx context.Context, key string) ([]byte, error) {
	if s.down.Load() {
		return nil, errStoreDown
	}
	return s.Store.Load(ctx, key)
}

func (s *failingStore) PutIfAbsent(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	if s.down.Load() {
		return false, errStoreDown
	}
	return s.Store.PutIfAbsent(ctx, key, v, ttl)
}

func (s *failingStore) CompareAndSwap(ctx context.Context, key string, old, v []byte, ttl time.Duration) (bool, error) {
	if s.down.Load() {
		return false, errStoreDown
	}
	return s.Store.CompareAndSwap(ctx, key, old, v, ttl)
}

// A store that fails costs the lists their sharing, never the lists: a
// replica serves what it kept, and lists the upstream itself when it kept
// nothing; when the store is back, what it writes is shared again.
func TestListStoreFailing(t *testing.T) {
	u := newHinted(t, time.Minute)
	st := &failingStore{Store: session.NewMemory()}
	a := hintedGateway(t, u, st, nil)
	st.down.Store(true)
	expect(t, connect(t, a.h, "acme-viewer"), []string{"docs_read_acme"}, "docs", "ok//-")
	n := u.lists.Load()
	expect(t, connect(t, a.h, "acme-admin"), []string{"docs_read_acme"}, "docs", "ok//-") // its own copy
	if u.lists.Load() != n {
		t.Fatalf("%d lists upstream while the replica kept one", u.lists.Load()-n)
	}
	b := hintedGateway(t, u, st, nil) // nothing kept, store down: lists it itself
	expect(t, connect(t, b.h, "acme-viewer"), []string{"docs_read_acme"}, "docs", "ok//-")
	st.down.Store(false)
	expect(t, connect(t, hintedGateway(t, u, st, nil).h, "globex-editor"), []string{"docs_read_globex"}, "docs", "ok//-")
	n = u.lists.Load()
	expect(t, connect(t, hintedGateway(t, u, st, nil).h, "globex-editor"), []string{"docs_read_globex"}, "docs", "ok//-")
	if u.lists.Load() != n {
		t.Fatal("the store, back, did not share a list")
	}
}

// A pinned upstream's approvals that cannot be read leave its tools out:
// a store that fails never serves a definition unchecked, nor asks the
// host as if it were new; back, the approved definition is served again.
func TestPinnedStoreFailing(t *testing.T) {
	u := newDrifting(t)
	st := &failingStore{Store: session.NewMemory()}
	a := &asked{}
	gh := pinnedGateway(t, u, st, a)
	if got := names(t, connect(t, gh.h, "acme-admin")); !slices.Equal(got, []string{"docs_search"}) {
		t.Fatalf("first sight: %v", got)
	}
	st.down.Store(true)
	n := len(a.all())
	fresh := pinnedGateway(t, u, st, a) // a replica that read no approvals yet
	if got := names(t, connect(t, fresh.h, "acme-admin")); len(got) != 0 || len(a.all()) != n {
		t.Fatalf("store down: listed %v, the host asked %d times", got, len(a.all())-n)
	}
	st.down.Store(false)
	if got := names(t, connect(t, fresh.h, "acme-admin")); !slices.Equal(got, []string{"docs_search"}) || len(a.all()) != n {
		t.Fatalf("store back: listed %v, the host asked %d times", got, len(a.all())-n)
	}
}
