package redisstore

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// newStore returns a store on the test Redis under a prefix of its own,
// closed and emptied when the test ends.
func newStore(t testing.TB) *Store {
	t.Helper()
	c := redistest.Client(t)
	return newStoreOn(t, c, redistest.Prefix(t, c))
}

// newStoreOn returns a store of c under prefix, closed when the test ends.
func newStoreOn(t testing.TB, c redis.UniversalClient, prefix string) *Store {
	t.Helper()
	return newStoreWith(t, c, Options{Prefix: prefix})
}

// newStoreWith returns a store of c with opts, closed when the test ends.
func newStoreWith(t testing.TB, c redis.UniversalClient, opts Options) *Store {
	t.Helper()
	st := New(c, opts)
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}

// mode names a subtest of a store with or without Options.AutoPipeline.
func mode(autoPipeline bool) string {
	if autoPipeline {
		return "AutoPipeline"
	}
	return "Pool"
}

func sample(id string) *session.Session {
	return &session.Session{
		ID:              id,
		Owner:           "4:acme/alice",
		ProtocolVersion: "2025-11-25",
		ClientName:      "client",
		ClientVersion:   "1.0",
		Capabilities:    session.CapElicitationForm | session.CapSampling,
		TTL:             time.Minute,
	}
}

// recv returns the next message of sub, failing the test after d.
func recv(t testing.TB, sub session.Subscription, d time.Duration) []byte {
	t.Helper()
	select {
	case b, ok := <-sub.C():
		if !ok {
			t.Fatal("subscription closed")
		}
		return b
	case <-time.After(d):
		t.Fatalf("no message within %v", d)
		return nil
	}
}

// quiet fails the test if sub receives anything within d.
func quiet(t testing.TB, sub session.Subscription, d time.Duration) {
	t.Helper()
	select {
	case b := <-sub.C():
		t.Fatalf("unexpected message %q", b)
	case <-time.After(d):
	}
}
