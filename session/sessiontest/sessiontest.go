// Package sessiontest checks that a [session.Store] implementation behaves
// as the handler relies on, in the style of testing/fstest: every store,
// the in-memory one and the Redis one alike, runs [Run] in its tests.
package sessiontest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

// Run runs the conformance suite against stores made by newStore. Each
// subtest gets a fresh store; stores that share a backend should use a
// distinct key prefix per call so subtests do not see each other's data.
func Run(t *testing.T, newStore func(t *testing.T) session.Store) {
	t.Run("CreateGet", func(t *testing.T) { testCreateGet(t, newStore(t)) })
	t.Run("GetReturnsCopy", func(t *testing.T) { testCopy(t, newStore(t)) })
	t.Run("Update", func(t *testing.T) { testUpdate(t, newStore(t)) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, newStore(t)) })
	t.Run("DuplicateID", func(t *testing.T) { testDuplicate(t, newStore(t)) })
	t.Run("IdleExpiry", func(t *testing.T) { testExpiry(t, newStore(t)) })
	t.Run("GetExtendsLifetime", func(t *testing.T) { testTouch(t, newStore(t)) })
	t.Run("PublishSubscribe", func(t *testing.T) { testPubSub(t, newStore(t)) })
	t.Run("PublishWithoutSubscriber", func(t *testing.T) { testNoSubscriber(t, newStore(t)) })
	t.Run("SubscriptionClose", func(t *testing.T) { testClose(t, newStore(t)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, newStore(t)) })
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

func testCreateGet(t *testing.T, st session.Store) {
	ctx := context.Background()
	want := sample("s1")
	if err := st.Create(ctx, want); err != nil {
		t.Fatalf("Create: %v", err)
	}
	got, err := st.Get(ctx, "s1")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if fmt.Sprint(*got) != fmt.Sprint(*want) {
		t.Fatalf("Get = %+v, want %+v", *got, *want)
	}
	if _, err := st.Get(ctx, "missing"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Get(missing) error = %v, want ErrNotFound", err)
	}
}

func testCopy(t *testing.T, st session.Store) {
	ctx := context.Background()
	s := sample("s1")
	s.Subscriptions = []string{"a://1"}
	if err := st.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	s.Subscriptions[0] = "changed"
	got, _ := st.Get(ctx, "s1")
	got.LogLevel = "debug"
	got.Subscriptions[0] = "changed too"
	again, _ := st.Get(ctx, "s1")
	if again.LogLevel != "" || again.Subscriptions[0] != "a://1" {
		t.Fatalf("store shares memory with its callers: %+v", again)
	}
}

func testUpdate(t *testing.T, st session.Store) {
	ctx := context.Background()
	if err := st.Create(ctx, sample("s1")); err != nil {
		t.Fatal(err)
	}
	s, _ := st.Get(ctx, "s1")
	s.Initialized = true
	s.LogLevel = "warning"
	s.Subscriptions = []string{"x://1", "x://2"}
	if err := st.Update(ctx, s); err != nil {
		t.Fatalf("Update: %v", err)
	}
	got, _ := st.Get(ctx, "s1")
	if !got.Initialized || got.LogLevel != "warning" || !slices.Equal(got.Subscriptions, s.Subscriptions) {
		t.Fatalf("after Update: %+v", got)
	}
	if got.Owner != "4:acme/alice" || got.ProtocolVersion != "2025-11-25" {
		t.Fatalf("Update lost immutable fields: %+v", got)
	}
	if err := st.Update(ctx, sample("missing")); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Update(missing) = %v, want ErrNotFound", err)
	}
}

func testDelete(t *testing.T, st session.Store) {
	ctx := context.Background()
	if err := st.Create(ctx, sample("s1")); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, "s1"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := st.Get(ctx, "s1"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Get after Delete = %v, want ErrNotFound", err)
	}
	if err := st.Delete(ctx, "s1"); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	s := sample("s1")
	if err := st.Update(ctx, s); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Update after Delete = %v, want ErrNotFound", err)
	}
}

func testDuplicate(t *testing.T, st session.Store) {
	ctx := context.Background()
	if err := st.Create(ctx, sample("s1")); err != nil {
		t.Fatal(err)
	}
	other := sample("s1")
	other.Owner = "7:globex/carol"
	if err := st.Create(ctx, other); err == nil {
		t.Fatal("Create with a taken id succeeded")
	}
	got, _ := st.Get(ctx, "s1")
	if got.Owner != "4:acme/alice" {
		t.Fatalf("a duplicate Create replaced the session: owner %q", got.Owner)
	}
}

func testExpiry(t *testing.T, st session.Store) {
	ctx := context.Background()
	s := sample("s1")
	s.TTL = 100 * time.Millisecond
	if err := st.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond)
	if _, err := st.Get(ctx, "s1"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Get after TTL = %v, want ErrNotFound", err)
	}
}

func testTouch(t *testing.T, st session.Store) {
	ctx := context.Background()
	s := sample("s1")
	s.TTL = 300 * time.Millisecond
	if err := st.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		time.Sleep(150 * time.Millisecond)
		if _, err := st.Get(ctx, "s1"); err != nil {
			t.Fatalf("a session in use expired: %v", err)
		}
	}
}

func recv(t *testing.T, sub session.Subscription) []byte {
	t.Helper()
	select {
	case b := <-sub.C():
		return b
	case <-time.After(5 * time.Second):
		t.Fatal("no message within 5s")
		return nil
	}
}

func testPubSub(t *testing.T, st session.Store) {
	ctx := context.Background()
	a, err := st.Subscribe(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := st.Subscribe(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	other, _ := st.Subscribe(ctx, "other")
	defer other.Close()
	n, err := st.Publish(ctx, "ch", []byte("one"))
	if err != nil || n != 2 {
		t.Fatalf("Publish = %d, %v; want 2 receivers", n, err)
	}
	st.Publish(ctx, "ch", []byte("two"))
	for _, s := range []session.Subscription{a, b} {
		if got := string(recv(t, s)); got != "one" {
			t.Fatalf("first message %q", got)
		}
		if got := string(recv(t, s)); got != "two" {
			t.Fatalf("second message %q", got)
		}
	}
	select {
	case m := <-other.C():
		t.Fatalf("another channel received %q", m)
	case <-time.After(50 * time.Millisecond):
	}
}

func testNoSubscriber(t *testing.T, st session.Store) {
	n, err := st.Publish(context.Background(), "nobody", []byte("x"))
	if err != nil || n != 0 {
		t.Fatalf("Publish with no subscriber = %d, %v; want 0, nil", n, err)
	}
}

func testClose(t *testing.T, st session.Store) {
	ctx := context.Background()
	sub, err := st.Subscribe(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sub.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if n, _ := st.Publish(ctx, "ch", []byte("x")); n != 0 {
		t.Fatalf("a closed subscription was counted: %d", n)
	}
	for range sub.C() {
	}
}

func testConcurrent(t *testing.T, st session.Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			id := fmt.Sprintf("c%d", i)
			if err := st.Create(ctx, sample(id)); err != nil {
				t.Error(err)
				return
			}
			for range 20 {
				s, err := st.Get(ctx, id)
				if err != nil {
					t.Error(err)
					return
				}
				s.LogLevel = "info"
				if err := st.Update(ctx, s); err != nil {
					t.Error(err)
				}
			}
			st.Delete(ctx, id)
		})
	}
	wg.Wait()
}
