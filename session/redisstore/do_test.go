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

// TestDo: Do runs the caller's operation on the store's client, within
// the timeout it asked for (never more than OpTimeout), and wraps its
// errors so that they match both session.ErrUnavailable and themselves.
func TestDo(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t, c)
	st := New(c, Options{Prefix: prefix, OpTimeout: time.Second})
	t.Cleanup(func() { st.Close() })
	key := prefix + "own"

	for _, tc := range []struct {
		timeout, want time.Duration
	}{{300 * time.Millisecond, 300 * time.Millisecond}, {0, time.Second}, {time.Hour, time.Second}} {
		err := st.Do(ctx, tc.timeout, func(ctx context.Context, got redis.UniversalClient) error {
			if got != c {
				t.Error("Do did not pass the store's client")
			}
			dl, ok := ctx.Deadline()
			if left := time.Until(dl); !ok || left > tc.want || left < tc.want-100*time.Millisecond {
				t.Errorf("timeout %v: f's deadline is %v away (set %v), want about %v", tc.timeout, left, ok, tc.want)
			}
			return got.Set(ctx, key, "v", time.Minute).Err()
		})
		if err != nil {
			t.Fatalf("Do: %v", err)
		}
	}
	err := st.Do(ctx, 0, func(ctx context.Context, c redis.UniversalClient) error {
		return c.Get(ctx, prefix+"missing").Err()
	})
	if !errors.Is(err, session.ErrUnavailable) || !errors.Is(err, redis.Nil) {
		t.Fatalf("Do of a GET of a missing key: %v, want ErrUnavailable wrapping redis.Nil", err)
	}
	if st.br.failures.Load() != 0 {
		t.Fatal("an answer from Redis counted as a failure")
	}
}

// TestDoSharesTheBreaker: operations run through Do open the store's
// breaker when they time out (at their own, shorter timeout), are refused
// at once while it is open — as are the store's own calls — and work
// again when Redis answers. Callers that gave up count for nothing.
func TestDoSharesTheBreaker(t *testing.T) {
	ctx := context.Background()
	p := redistest.NewProxy(t, "")
	prefix := redistest.Prefix(t, redistest.Client(t))
	st := New(p.Client(t), Options{Prefix: prefix, OpTimeout: 5 * time.Second,
		BreakerMinBackoff: 20 * time.Millisecond, BreakerMaxBackoff: 50 * time.Millisecond})
	t.Cleanup(func() { st.Close() })
	setup(t, prefix, "s1")
	ping := func(ctx context.Context, c redis.UniversalClient) error { return c.Ping(ctx).Err() }
	if err := st.Do(ctx, 0, ping); err != nil {
		t.Fatal(err)
	}

	p.Stall()
	gone, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	for range 2 * DefaultBreakerThreshold {
		if err := st.Do(gone, time.Second, ping); err == nil {
			t.Fatal("a PING through a frozen proxy succeeded")
		}
	}
	if st.br.open.Load() {
		t.Fatal("calls whose caller gave up opened the breaker")
	}
	const timeout = 50 * time.Millisecond
	for i := range DefaultBreakerThreshold {
		start := time.Now()
		err := st.Do(ctx, timeout, ping)
		if took := time.Since(start); !errors.Is(err, session.ErrUnavailable) || took > time.Second {
			t.Fatalf("Do %d on a frozen Redis: %v after %v, want ErrUnavailable after about %v", i, err, took, timeout)
		}
	}
	if !st.br.open.Load() {
		t.Fatalf("%d timeouts of Do did not open the breaker", DefaultBreakerThreshold)
	}
	called := false
	start := time.Now()
	err := st.Do(ctx, timeout, func(context.Context, redis.UniversalClient) error { called = true; return nil })
	if called || !errors.Is(err, session.ErrUnavailable) || time.Since(start) > timeout/2 {
		t.Fatalf("Do with the breaker open: called %v, %v after %v", called, err, time.Since(start))
	}
	start = time.Now()
	if _, err := st.Get(ctx, "s1"); !errors.Is(err, session.ErrUnavailable) || time.Since(start) > timeout/2 {
		t.Fatalf("Get with the breaker open: %v after %v", err, time.Since(start))
	}
	p.Resume()
	pollUntil(t, 5*time.Second, "Do once Redis answers", func() bool { return st.Do(ctx, timeout, ping) == nil })
}
