package record

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

// Lease is one process's claim to be responsible for a record while it
// works on it (waits for an answer, runs a tool): a random token under its
// own key that lasts TTL unless renewed. Keep renews it every TTL/3 until
// Stop or Release; a process that finds it absent ([Lapsed]) may take it,
// and the work, over. The token carries no decision: a forged or deleted
// lease can delay or move who finishes the work, never make anything run
// twice, because every transition of the record is a Swap.
//
// A Lease's methods are safe for concurrent use.
type Lease struct {
	store session.Records
	key   string
	token []byte
	ttl   time.Duration

	mu      sync.Mutex // guards the fields below
	timer   *time.Timer
	after   func(context.Context, error)
	stopped bool
}

// Take claims key with token for ttl if nobody holds it. It returns nil,
// with no error, when someone does. The lease is not renewed until Keep.
func Take(ctx context.Context, store session.Records, key, token string, ttl time.Duration) (*Lease, error) {
	l := &Lease{store: store, key: key, token: []byte(token), ttl: ttl}
	ok, err := store.PutIfAbsent(context.WithoutCancel(ctx), key, l.token, ttl)
	if err != nil || !ok {
		return nil, err
	}
	return l, nil
}

// Keep renews the lease every TTL/3 until Stop or Release. A renewal that
// finds the lease lapsed takes it back if nobody else did. after, if not
// nil, runs after each renewal (outside the lease's lock: it may call
// Stop), with a context that ends by the next renewal and the error of the
// renewal's store call (nil when it renewed or took the lease back).
func (l *Lease) Keep(after func(ctx context.Context, err error)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || l.timer != nil {
		return
	}
	l.after = after
	l.timer = time.AfterFunc(l.ttl/3, l.renew)
}

func (l *Lease) renew() {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
	defer cancel()
	ok, err := l.store.CompareAndSwap(ctx, l.key, l.token, l.token, l.ttl)
	if err == nil && !ok {
		// It lapsed: take it back if nobody else did. Whoever holds it,
		// every transition of the record stays a Swap.
		_, err = l.store.PutIfAbsent(ctx, l.key, l.token, l.ttl)
	}
	after := l.after
	l.mu.Unlock()
	if after != nil {
		after(ctx, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.timer = time.AfterFunc(l.ttl/3, l.renew)
	}
}

// Token is the lease's token, which the holder records in the transitions
// it makes.
func (l *Lease) Token() string { return string(l.token) }

// Stop stops renewing: the lease lapses TTL after its last renewal. It is
// safe to call more than once, and on a nil Lease.
func (l *Lease) Stop() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if l.timer != nil {
		l.timer.Stop()
	}
}

// Release stops renewing and drops the lease, if it is still this one's.
// It is safe to call more than once, and on a nil Lease.
func (l *Lease) Release() {
	if l == nil {
		return
	}
	l.Stop()
	l.store.CompareAndSwap(context.Background(), l.key, l.token, l.token, time.Millisecond)
}

// Lapsed reports whether nobody holds the lease under key (false when the
// store cannot tell now).
func Lapsed(ctx context.Context, store session.Records, key string) bool {
	_, err := store.Load(ctx, key)
	return errors.Is(err, session.ErrNotFound)
}
