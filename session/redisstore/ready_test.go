package redisstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// awaitReady calls st.Ready until it reports want (ready or not), for at
// most d, and returns how many calls it took. Nothing else calls st.
func awaitReady(t *testing.T, st *Store, want bool, d time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(d)
	for n := 1; ; n++ {
		err := st.Ready(context.Background())
		if err != nil && !errors.Is(err, session.ErrUnavailable) {
			t.Fatalf("Ready: %v, want nil or ErrUnavailable", err)
		}
		if (err == nil) == want {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("Ready after %v: %v, want ready=%v", d, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReadyFollowsRedisWithoutRequests: with no call but Ready, Ready
// turns not ready when Redis is frozen or refuses connections, its probes
// alone open the circuit breaker (after which it answers at once), and it
// turns ready again once Redis answers — the breaker closing by itself.
func TestReadyFollowsRedisWithoutRequests(t *testing.T) {
	p := redistest.NewProxy(t, "")
	c := p.Client(t)
	st := newStoreWith(t, c, Options{Prefix: redistest.Prefix(t, c), OpTimeout: 300 * time.Millisecond})
	awaitReady(t, st, true, 5*time.Second)
	for _, fault := range []struct {
		name         string
		break_, heal func()
	}{
		{"frozen", p.Stall, p.Resume},
		{"refused", func() { p.CutAll(); p.RefuseConnections() }, p.AcceptConnections},
	} {
		t.Run(fault.name, func(t *testing.T) {
			fault.break_()
			awaitReady(t, st, false, 5*time.Second)
			// Probes alone open the breaker: then Ready fails at once.
			deadline := time.Now().Add(10 * time.Second)
			for !st.br.open.Load() {
				if time.Now().After(deadline) {
					t.Fatal("the breaker never opened from Ready's PINGs")
				}
				st.Ready(context.Background())
			}
			if err := st.Ready(context.Background()); !errors.Is(err, errOpen) {
				t.Fatalf("Ready with the breaker open: %v", err)
			}
			fault.heal()
			awaitReady(t, st, true, 5*time.Second)
			if st.br.open.Load() {
				t.Fatal("ready with the breaker open")
			}
		})
	}
}

// TestReadyCoalesces: however many probes arrive while Redis is frozen,
// one PING is in flight; a probe whose context ends first returns then,
// with its context's error, while the PING goes on.
func TestReadyCoalesces(t *testing.T) {
	p := redistest.NewProxy(t, "")
	c := p.Client(t)
	hook := new(redistest.CountingHook)
	c.AddHook(hook)
	st := newStoreWith(t, c, Options{Prefix: redistest.Prefix(t, c), OpTimeout: 3 * time.Second, BreakerThreshold: -1})
	awaitReady(t, st, true, 5*time.Second)
	hook.Reset()
	p.Stall()
	defer p.Resume()
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	start := time.Now()
	for range 50 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			errs <- st.Ready(ctx)
		})
	}
	wg.Wait()
	if el := time.Since(start); el >= 3*time.Second {
		t.Fatalf("probes with 100ms deadlines waited %v, for the PING's OpTimeout", el)
	}
	close(errs)
	for err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, session.ErrUnavailable) {
			t.Fatalf("Ready past its deadline: %v", err)
		}
	}
	if n := hook.Counts().Commands; n != 1 {
		t.Fatalf("50 concurrent probes sent %d commands, want one PING", n)
	}
}

// TestReadyAfterClose: a closed store is not ready, and Ready starts
// nothing (goleak, in TestMain, checks no goroutine is left).
func TestReadyAfterClose(t *testing.T) {
	st := New(redistest.Client(t), Options{Prefix: "unused:"})
	if err := st.Ready(context.Background()); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	st.Close()
	if err := st.Ready(context.Background()); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("Ready after Close: %v", err)
	}
}
