package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// TestSubscribeThenPublish: a Publish from another replica right after
// Subscribe returned is always received, and one right after Close
// returned never counts this replica. Fresh channels every round, so each
// Subscribe and each Close is a SUBSCRIBE/UNSUBSCRIBE on the wire.
func TestSubscribeThenPublish(t *testing.T) {
	ctx := context.Background()
	c1, c2 := redistest.Client(t), redistest.Client(t)
	prefix := redistest.Prefix(t, c1)
	a, b := newStoreOn(t, c1, prefix), newStoreOn(t, c2, prefix)
	for i := range 200 {
		ch := fmt.Sprint("ch", i)
		sub, err := a.Subscribe(ctx, ch)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := b.Publish(ctx, ch, []byte(ch)); err != nil || n != 1 {
			t.Fatalf("round %d: Publish right after Subscribe = %d, %v", i, n, err)
		}
		if got := recv(t, sub, 5*time.Second); string(got) != ch {
			t.Fatalf("round %d: received %q", i, got)
		}
		sub.Close()
		if n, err := b.Publish(ctx, ch, []byte("late")); err != nil || n != 0 {
			t.Fatalf("round %d: Publish right after Close = %d, %v", i, n, err)
		}
	}
}

// TestSubscriptionChurn races Subscribe and Close on a few channels from
// many goroutines; whatever the interleaving, the reference counts and the
// Redis subscriptions must end consistent.
func TestSubscriptionChurn(t *testing.T) {
	ctx := context.Background()
	c1, c2 := redistest.Client(t), redistest.Client(t)
	prefix := redistest.Prefix(t, c1)
	a, b := newStoreOn(t, c1, prefix), newStoreOn(t, c2, prefix)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 30 {
				ch := fmt.Sprint("ch", (g+i)%3)
				sub, err := a.Subscribe(ctx, ch)
				if err != nil {
					t.Error(err)
					return
				}
				if i%2 == 0 {
					// A message published now may reach it or not
					// (others share the channel); it must not block.
					b.Publish(ctx, ch, []byte("x"))
				}
				sub.Close()
			}
		})
	}
	wg.Wait()
	for i := range 3 {
		ch := fmt.Sprint("ch", i)
		if n, err := b.Publish(ctx, ch, []byte("x")); err != nil || n != 0 {
			t.Fatalf("after churn, %s has %d receivers (%v), want 0", ch, n, err)
		}
		sub, err := a.Subscribe(ctx, ch)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := b.Publish(ctx, ch, []byte("y")); err != nil || n != 1 {
			t.Fatalf("after churn, Publish to a new subscriber = %d, %v", n, err)
		}
		if got := recv(t, sub, 5*time.Second); string(got) != "y" {
			t.Fatalf("got %q", got)
		}
		sub.Close()
	}
	checkLeftovers(t, a)
}

// checkLeftovers fails the test if st holds a channel (other than its
// shards' probe channels) or a barrier.
func checkLeftovers(t *testing.T, st *Store) {
	t.Helper()
	st.ps.mu.Lock()
	defer st.ps.mu.Unlock()
	for _, sh := range st.ps.shards {
		sh.mu.Lock()
		chans, barriers := len(sh.chans), len(sh.barriers)
		if sh.chans[sh.probe] != nil {
			chans--
		}
		sh.mu.Unlock()
		if chans != 0 || barriers != 0 {
			t.Fatalf("leftover state: %d channels, %d barriers", chans, barriers)
		}
	}
}

// TestSlowSubscriber: a subscriber that does not read loses messages beyond
// its buffer, and neither blocks the dispatcher nor delays the others.
func TestSlowSubscriber(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	slow, err := st.Subscribe(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fast, err := st.Subscribe(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	const n = SubscriptionBuffer + 50
	for i := range n {
		if _, err := st.Publish(ctx, "ch", fmt.Append(nil, i)); err != nil {
			t.Fatal(err)
		}
		if got := recv(t, fast, 5*time.Second); string(got) != fmt.Sprint(i) {
			t.Fatalf("fast subscriber got %q, want %d", got, i)
		}
	}
	if len(slow.C()) != SubscriptionBuffer {
		t.Fatalf("slow subscriber holds %d messages, want %d", len(slow.C()), SubscriptionBuffer)
	}
	for i := range SubscriptionBuffer {
		if got := <-slow.C(); string(got) != fmt.Sprint(i) {
			t.Fatalf("slow subscriber got %q, want the first messages in order", got)
		}
	}
}

// TestMessagesAreCopies: each subscriber gets its own slice.
func TestMessagesAreCopies(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	a, _ := st.Subscribe(ctx, "ch")
	defer a.Close()
	b, _ := st.Subscribe(ctx, "ch")
	defer b.Close()
	st.Publish(ctx, "ch", []byte("abc"))
	ma, mb := recv(t, a, 5*time.Second), recv(t, b, 5*time.Second)
	ma[0] = 'X'
	if string(mb) != "abc" {
		t.Fatalf("subscribers share a message: %q", mb)
	}
}

// TestClose: Close stops the dispatcher goroutine and the Pub/Sub
// connection, closes open subscriptions, and leaves the rest working.
func TestClose(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	// Warm the client's pool so its own goroutines (if any) are not
	// counted against the store.
	c.Ping(ctx)
	ignore := goleak.IgnoreCurrent()

	st := New(c, Options{Prefix: prefix})
	sub, err := st.Subscribe(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, ignore)
	if _, ok := <-sub.C(); ok {
		t.Fatal("a subscription is still open after Close")
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Subscribe(ctx, "ch"); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("Subscribe after Close = %v, want ErrUnavailable", err)
	}
	if n, err := st.Publish(ctx, "ch", nil); err != nil || n != 0 {
		t.Fatalf("Publish after Close = %d, %v; want 0 (the connection is gone)", n, err)
	}
	if err := st.Create(ctx, sample("s1")); err != nil {
		t.Fatalf("Create after Close: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	// A store that never subscribed has nothing to stop.
	if err := New(c, Options{Prefix: prefix}).Close(); err != nil {
		t.Fatal(err)
	}
}
