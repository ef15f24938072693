package mcphandler

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

// questionStore is a memory store that notes, in order with what a
// question's stream sends, each subscription; Subscribe fails while
// failing is set.
type questionStore struct {
	*session.Memory
	failing atomic.Bool

	mu     sync.Mutex
	events []string
}

func (s *questionStore) note(ev string) {
	s.mu.Lock()
	s.events = append(s.events, ev)
	s.mu.Unlock()
}

func (s *questionStore) Subscribe(ctx context.Context, channel string) (session.Subscription, error) {
	s.note("subscribe " + channel)
	if s.failing.Load() {
		return nil, session.ErrUnavailable
	}
	return s.Memory.Subscribe(ctx, channel)
}

// questionExchange is an Exchange of session "s1" whose stream hands what
// it sends to st's events, and whose caller expires in an hour (its watch
// can be armed; it never fires during the test).
func questionExchange(t *testing.T, h *Handler, st *questionStore) *Exchange {
	t.Helper()
	s := &stream{sink: func(msg []byte) error {
		st.note("send " + string(msg))
		return nil
	}}
	s.caller = &request{h: h, id: Identity{Expires: time.Now().Add(time.Hour)}}
	t.Cleanup(func() {
		if w := s.watch.Load(); w != nil {
			s.mu.Lock()
			w.stopLocked()
			s.mu.Unlock()
		}
	})
	return &Exchange{h: h, st: s, sess: &session.Session{ID: "s1"}, gone: make(chan struct{})}
}

// A question subscribes to its reply channel before its request goes, so
// that no answer is missed; its caller's watch is armed by then; what is
// published on the channel reaches it verified, and a message that does
// not verify is dropped.
func TestQuestionSubscribesSendsAndVerifies(t *testing.T) {
	st := &questionStore{Memory: session.NewMemory()}
	h := hubHandler(st)
	t.Cleanup(func() { h.Close() })
	x := questionExchange(t, h, st)
	ctx := context.Background()

	q, err := newQuestion(ctx, h.bus, x, "q1", mustHear)
	if err != nil {
		t.Fatal(err)
	}
	defer q.close()
	if q.lost == nil || x.st.watch.Load() == nil {
		t.Fatal("the question did not arm its caller's watch")
	}
	if q.gone != x.gone {
		t.Fatal("the question does not end with the client's connection")
	}
	if err := q.send("roots/list", nil); err != nil {
		t.Fatal(err)
	}
	channel := replyChannel("s1", "q1")
	want := []string{"subscribe " + channel, `send {"jsonrpc":"2.0","id":"q1","method":"roots/list"}`}
	st.mu.Lock()
	got := append([]string(nil), st.events...)
	st.mu.Unlock()
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("effects %q, want %q", got, want)
	}

	st.Publish(ctx, channel, []byte(`{"role":"","msg":{}}`)) // unsigned
	if _, err := h.bus.publish(ctx, h.macs.reply, channel, []byte(`{"role":"r"}`)); err != nil {
		t.Fatal(err)
	}
	for _, wantOK := range []bool{false, true} {
		select {
		case b := <-q.replies():
			p, ok := q.open(b)
			if ok != wantOK || ok && !bytes.Equal(p, []byte(`{"role":"r"}`)) {
				t.Fatalf("open = %q, %v; want verified %v", p, ok, wantOK)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no reply")
		}
	}
	q.cancel()
	st.mu.Lock()
	last := st.events[len(st.events)-1]
	st.mu.Unlock()
	if want := `send {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"q1","reason":"the server stopped waiting"}}`; last != want {
		t.Fatalf("cancel sent %q, want %q", last, want)
	}
}

// A question that must hear fails with the store's error when it cannot
// subscribe, and arms nothing; one that may not hear goes on without
// replies, its caller watched.
func TestQuestionSubscriptionFails(t *testing.T) {
	st := &questionStore{Memory: session.NewMemory()}
	st.failing.Store(true)
	h := hubHandler(st)
	t.Cleanup(func() { h.Close() })
	ctx := context.Background()

	x := questionExchange(t, h, st)
	if q, err := newQuestion(ctx, h.bus, x, "q1", mustHear); q != nil || !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("mustHear: got %v, %v; want the store's error", q, err)
	}
	if x.st.watch.Load() != nil {
		t.Fatal("mustHear armed the caller's watch after its subscription failed")
	}

	x = questionExchange(t, h, st)
	q, err := newQuestion(ctx, h.bus, x, "q2", mayNotHear)
	if err != nil || q == nil {
		t.Fatalf("mayNotHear: got %v, %v; want a question", q, err)
	}
	if q.replies() != nil {
		t.Fatal("a question without a subscription has replies")
	}
	if q.lost == nil {
		t.Fatal("mayNotHear did not arm the caller's watch")
	}
	q.close()
	q.close()
}
