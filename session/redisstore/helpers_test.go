package redisstore

import (
	"context"
	"errors"
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

// calls exercises every method of st once; each returns its error.
func calls(st *Store) map[string]func(ctx context.Context) error {
	return map[string]func(ctx context.Context) error{
		"Create": func(ctx context.Context) error { return st.Create(ctx, sample("new")) },
		"Get":    func(ctx context.Context) error { _, err := st.Get(ctx, "s1"); return err },
		"Update": func(ctx context.Context) error { return st.Update(ctx, sample("s1")) },
		"Delete": func(ctx context.Context) error { return st.Delete(ctx, "s1") },
		"Publish": func(ctx context.Context) error {
			_, err := st.Publish(ctx, "ch", []byte("x"))
			return err
		},
		"Subscribe": func(ctx context.Context) error {
			sub, err := st.Subscribe(ctx, "another")
			if err == nil {
				sub.Close()
			}
			return err
		},
		"PutIfAbsent": func(ctx context.Context) error {
			_, err := st.PutIfAbsent(ctx, "k", []byte("v"), time.Minute)
			return err
		},
		"Load": func(ctx context.Context) error { _, err := st.Load(ctx, "k"); return err },
		"CompareAndSwap": func(ctx context.Context) error {
			_, err := st.CompareAndSwap(ctx, "k", []byte("v"), []byte("w"), time.Minute)
			return err
		},
		"AppendEvent": func(ctx context.Context) error {
			_, err := st.AppendEvent(ctx, "log", []byte("e"), time.Minute)
			return err
		},
		"EventsAfter": func(ctx context.Context) error { _, err := st.EventsAfter(ctx, "log", 0); return err },
	}
}

// failFast checks that every call fails with ErrUnavailable within the
// store's OpTimeout plus a margin.
func failFast(t *testing.T, st *Store) {
	t.Helper()
	const margin = 500 * time.Millisecond
	for name, call := range calls(st) {
		start := time.Now()
		err := call(context.Background())
		el := time.Since(start)
		if !errors.Is(err, session.ErrUnavailable) {
			t.Errorf("%s with Redis down: %v, want ErrUnavailable", name, err)
		}
		if el > st.opTimeout+margin {
			t.Errorf("%s with Redis down took %v, more than OpTimeout %v + %v", name, el, st.opTimeout, margin)
		}
	}
}

// pollUntil calls ok every few milliseconds until it reports true, and
// fails the test after d.
func pollUntil(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

// setup creates sessions under prefix through a store of its own, with
// the default OpTimeout, so that a loaded machine does not fail a test
// before its faults begin.
func setup(t *testing.T, prefix string, ids ...string) {
	t.Helper()
	st := newStoreOn(t, redistest.Client(t), prefix)
	for _, id := range ids {
		if err := st.Create(context.Background(), sample(id)); err != nil {
			t.Fatal(err)
		}
	}
}

// The golden session, and its records as this version and as version 1
// (the bytes the version-1 encoder wrote for it) encode it.
var (
	goldenSession = session.Session{
		ID: "g", Owner: "4:acme/alice", ProtocolVersion: "2025-11-25", ClientName: "client", ClientVersion: "1.0",
		Capabilities: session.CapElicitationForm | session.CapSampling | session.CapRootsListChanged,
		Initialized:  true, LogLevel: "info", Subscriptions: []string{"file:///a"}, TTL: time.Minute,
	}
	goldenV1 = "\x0160000:13:\f4:acme/alice\n2025-11-25\x06client\x031.0" +
		"%" + // form|sampling|roots.listChanged as bits 0, 2 and 5
		"\x80\xe0\xba\x84\xbf\x03\x01\x04info\x01\tfile:///a"
	goldenV2 = "\x0260000:13:\f4:acme/alice\n2025-11-25\x06client\x031.0" +
		"\x03\x10elicitation.form\x08sampling\x11roots.listChanged" +
		"\x80\xe0\xba\x84\xbf\x03\x01\x04info\x01\tfile:///a"
	goldenEmptyV1 = "\x011800000:1:\x00\x00\x00\x00\x00\x00\x00\x00\x00"
	goldenEmptyV2 = "\x021800000:1:\x00\x00\x00\x00\x00\x00\x00\x00\x00"
)
