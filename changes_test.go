package mcphandler

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

// endingStore is a memory store whose notify subscriptions the test can
// end, and whose Subscribe to notify fails while failing is set.
type endingStore struct {
	*session.Memory
	failing atomic.Bool
	calls   atomic.Int32

	mu   sync.Mutex
	subs []session.Subscription
}

func (s *endingStore) Subscribe(ctx context.Context, channel string) (session.Subscription, error) {
	if channel != notifyChannel {
		return s.Memory.Subscribe(ctx, channel)
	}
	s.calls.Add(1)
	if s.failing.Load() {
		return nil, session.ErrUnavailable
	}
	sub, err := s.Memory.Subscribe(ctx, channel)
	s.mu.Lock()
	s.subs = append(s.subs, sub)
	s.mu.Unlock()
	return sub, err
}

// end closes every notify subscription, as a store that lost it would.
func (s *endingStore) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sub := range s.subs {
		sub.Close()
	}
}

func hubHandler(st session.Store) *Handler {
	return New(Config{Store: st, Logger: slog.New(slog.DiscardHandler), StateKeys: [][]byte{[]byte("0123456789abcdef0123456789abcdef")},
		ListTools: func(context.Context) ([]Tool, error) { return nil, nil }})
}

// Fifty streams of one tenant share one subscription, and a forged
// notification is checked once, not once per stream; when the last stream
// leaves, the subscription is closed.
func TestChangeHubVerifiesOnce(t *testing.T) {
	st := &endingStore{Memory: session.NewMemory()}
	h := hubHandler(st)
	ctx := context.Background()
	var ws []*changeWatch
	for range 50 {
		w, err := h.streams.watchChanges(ctx, Identity{Tenant: "acme", Subject: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	if n := st.calls.Load(); n != 1 {
		t.Fatalf("50 streams subscribed %d times, want once", n)
	}
	// The first drop is logged, which resets the count; the second counts.
	for range 2 {
		st.Memory.Publish(ctx, notifyChannel, []byte(`{"m":"notifications/tools/list_changed","t":"acme"}`))
	}
	if err := h.NotifyToolsChanged(ctx, TenantOf("acme")); err != nil {
		t.Fatal(err)
	}
	for i, w := range ws {
		select {
		case c := <-w.c:
			if c.Method != "notifications/tools/list_changed" {
				t.Fatalf("stream %d got %+v", i, c)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("stream %d got nothing", i)
		}
	}
	h.macs.mu.Lock()
	dropped := h.macs.dropped
	h.macs.mu.Unlock()
	if dropped != 1 {
		t.Fatalf("the second forged notification was dropped %d times, want once", dropped)
	}
	for _, w := range ws {
		h.streams.unwatchChanges(w)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n, _ := st.Memory.Publish(ctx, notifyChannel, []byte("x"))
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5s after the last stream left, %d subscribers remain", n)
		}
	}
}

// The store ends the hub's subscription, and cannot subscribe again for a
// while: a stream that registers meanwhile is refused, the one registered
// all along gets the next notification once the store recovers.
func TestChangeHubResubscribes(t *testing.T) {
	st := &endingStore{Memory: session.NewMemory()}
	h := hubHandler(st)
	ctx := context.Background()
	w, err := h.streams.watchChanges(ctx, Identity{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.streams.unwatchChanges(w)
	st.failing.Store(true)
	st.end()
	for deadline := time.Now().Add(5 * time.Second); st.calls.Load() < 3; {
		if time.Now().After(deadline) {
			t.Fatal("the hub did not try to subscribe again")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := h.streams.watchChanges(ctx, Identity{Tenant: "acme"}); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("a stream registered while the store fails: %v, want ErrUnavailable", err)
	}
	st.failing.Store(false)
	for deadline := time.Now().Add(5 * time.Second); ; {
		if err := h.NotifyToolsChanged(ctx, TenantOf("acme")); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w.c:
			return
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no notification after the store recovered")
		}
	}
}
