package otelmcp

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// A session counts as open until it was idle for the TTL; a request of a
// session forgotten that way does not bring it back (its record has
// expired in the store too), and only an initialize adds one.
func TestSessionsIdleForTTL(t *testing.T) {
	m := newTestMetrics(t, 50*time.Millisecond)
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	m.seen("a", "2025-11-25", true, at(0))
	m.seen("b", "2025-11-25", true, at(0))
	m.seen("c", "2025-11-25", false, at(0)) // not created here: not counted
	if n := m.openSessions(at(40)); n != 2 {
		t.Fatalf("%d open sessions, want 2", n)
	}
	m.seen("a", "", false, at(45))
	if n := m.openSessions(at(50)); n != 2 {
		t.Fatalf("%d open sessions at exactly the TTL, want 2", n)
	}
	if n := m.openSessions(at(51)); n != 1 {
		t.Fatalf("%d open sessions once b was idle for the TTL, want 1", n)
	}
	m.seen("b", "", false, at(60))
	if n := m.openSessions(at(60)); n != 1 {
		t.Fatalf("%d open sessions after a request of a forgotten session, want 1", n)
	}
	if n := m.openSessions(at(96)); n != 0 {
		t.Fatalf("%d open sessions, want 0", n)
	}
}

// Requests sweep idle sessions by themselves, at most once a second,
// without anyone reading the gauge.
func TestSessionsSweptByRequests(t *testing.T) {
	m := newTestMetrics(t, 10*time.Millisecond)
	t0 := time.Unix(1000, 0)
	m.seen("a", "", true, t0)
	m.seen("b", "", true, t0.Add(500*time.Millisecond)) // a sweep ran at t0: none within the second
	if n := m.nsessions.Load(); n != 2 {
		t.Fatalf("%d sessions kept, want 2", n)
	}
	m.seen("b", "", false, t0.Add(1500*time.Millisecond))
	if _, ok := m.sessions.Load("a"); ok || m.nsessions.Load() != 1 {
		t.Fatalf("a idle for 1.5 s was kept by the requests' sweep (%d kept)", m.nsessions.Load())
	}
}

// A client that opens sessions without end cannot grow what the metrics
// keep past maxSessions; once one ends, a new one is kept again.
func TestSessionsBounded(t *testing.T) {
	m := newTestMetrics(t, time.Hour)
	now := time.Now()
	for i := range maxSessions + 100 {
		m.seen(fmt.Sprint("s", i), "2025-11-25", true, now)
	}
	if n := m.openSessions(now); n != maxSessions {
		t.Fatalf("%d open sessions, want the bound %d", n, maxSessions)
	}
	kept := 0
	m.sessions.Range(func(any, any) bool { kept++; return true })
	if kept != maxSessions {
		t.Fatalf("%d sessions kept, want %d", kept, maxSessions)
	}
	m.sessionEnded(context.Background(), "s0", "", time.Time{})
	m.seen("new", "2025-11-25", true, now)
	if _, ok := m.sessions.Load("new"); !ok || m.openSessions(now) != maxSessions {
		t.Fatalf("a session was not kept once there was room (%d open)", m.openSessions(now))
	}
}

// Requests, DELETEs, sweeps and reads of the gauge at once keep the count
// equal to the sessions kept (run with -race).
func TestSessionsConcurrent(t *testing.T) {
	m := newTestMetrics(t, 5*time.Millisecond)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				sid := fmt.Sprint(g, "-", i%50)
				now := time.Now()
				switch i % 7 {
				case 0:
					m.sessionEnded(context.Background(), sid, "2025-11-25", time.Time{})
				case 1:
					m.openSessions(now)
				default:
					m.seen(sid, "2025-11-25", i%3 == 0, now)
				}
			}
		})
	}
	wg.Wait()
	kept := 0
	m.sessions.Range(func(any, any) bool { kept++; return true })
	if n := m.nsessions.Load(); n != int64(kept) {
		t.Fatalf("count %d, but %d sessions kept", n, kept)
	}
	time.Sleep(10 * time.Millisecond)
	if n := m.openSessions(time.Now()); n != 0 {
		t.Fatalf("%d open sessions after all went idle", n)
	}
}
