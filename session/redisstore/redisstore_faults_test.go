package redisstore

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// TestRedisRestart stops Redis under a working store: calls fail fast with
// ErrUnavailable; once Redis is back the same store works again, and a
// subscription made before the outage receives messages again, as go-redis
// reconnects the shared Pub/Sub connection and resubscribes.
func TestRedisRestart(t *testing.T) {
	for _, ap := range []bool{false, true} {
		t.Run(mode(ap), func(t *testing.T) { testRedisRestart(t, Options{OpTimeout: 300 * time.Millisecond, AutoPipeline: ap}) })
	}
}

func testRedisRestart(t *testing.T, opts Options) {
	ctx := context.Background()
	addr, stop, restart := redistest.Start(t)
	c := redistest.ClientAt(t, addr)
	st := New(c, opts)
	defer st.Close()
	other := New(redistest.ClientAt(t, addr), Options{}) // another replica
	defer other.Close()

	if err := st.Create(ctx, sample("s1")); err != nil {
		t.Fatal(err)
	}
	sub, err := st.Subscribe(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if n, err := other.Publish(ctx, "ch", []byte("before")); err != nil || n != 1 {
		t.Fatalf("Publish = %d, %v", n, err)
	}
	recv(t, sub, 5*time.Second)

	stop()
	failFast(t, st)
	failFast(t, st) // again, now that the pools know the connections are gone

	restart()
	// The data is gone (the test server keeps nothing), but the store
	// answers again: not found rather than unavailable.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := st.Get(ctx, "s1")
		if errors.Is(err, session.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store does not recover after Redis restarted: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := st.Create(ctx, sample("s1")); err != nil {
		t.Fatalf("Create after restart: %v", err)
	}

	// The old subscription: publish until the resubscription took effect.
	for {
		n, err := other.Publish(ctx, "ch", []byte("after"))
		if err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the subscription made before the outage is not back: Publish = %d, %v", n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		if got := string(recv(t, sub, 5*time.Second)); got == "after" {
			break
		}
	}
	// New subscriptions work too, on the store that lived through it.
	sub2, err := st.Subscribe(ctx, "ch2")
	if err != nil {
		t.Fatal(err)
	}
	defer sub2.Close()
	if n, err := other.Publish(ctx, "ch2", []byte("new")); err != nil || n != 1 {
		t.Fatalf("Publish to a new subscription = %d, %v", n, err)
	}
	recv(t, sub2, 5*time.Second)
	// And a joiner of the old channel, whose confirmation the outage
	// reset, gets a fresh one.
	sub3, err := st.Subscribe(ctx, "ch")
	if err != nil {
		t.Fatal(err)
	}
	defer sub3.Close()
	if n, err := other.Publish(ctx, "ch", []byte("both")); err != nil || n != 1 {
		t.Fatalf("Publish = %d, %v", n, err)
	}
	recv(t, sub, 5*time.Second)
	recv(t, sub3, 5*time.Second)
}

// TestRedisHung points a store at a server that accepts connections and
// never answers: every call still returns within OpTimeout, and Close does
// not hang either.
func TestRedisHung(t *testing.T) {
	for _, ap := range []bool{false, true} {
		t.Run(mode(ap), func(t *testing.T) { testRedisHung(t, Options{OpTimeout: 300 * time.Millisecond, AutoPipeline: ap}) })
	}
}

func testRedisHung(t *testing.T, opts Options) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	defer func() {
		l.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()

	st := New(redistest.ClientAt(t, l.Addr().String()), opts)
	failFast(t, st)
	start := time.Now()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("Close took %v", el)
	}
}
