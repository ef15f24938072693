package redisstore

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// errOpen is the error of a call the breaker refused.
var errOpen = errors.New("redis unreachable, call not sent (circuit breaker open)")

// breaker fails calls at once while Redis is known to be unreachable.
//
// Closed, it lets every call through and counts the calls in a row that
// failed for a network reason (see observe); threshold of them open it.
// Open, every call fails at once with errOpen, and one goroutine owned by
// the Store (probe) PINGs Redis, one PING at a time, after minBackoff and
// then twice as long after each failure, up to maxBackoff. The first
// answer closes it. A call already under way when the breaker opened may
// still succeed, which only resets the count.
type breaker struct {
	threshold              int32 // 0: the breaker is off
	minBackoff, maxBackoff time.Duration

	open     atomic.Bool
	failures atomic.Int32 // calls in a row that failed for a network reason
	off      atomic.Bool  // set by Close: no goroutine may probe any more
}

// allow returns errOpen while the breaker is open.
func (b *breaker) allow() error {
	if b.open.Load() {
		return errOpen
	}
	return nil
}

// isReply reports whether err is an error reply from Redis (WRONGTYPE, a
// script error, redis.Nil, ...): Redis answered, so it is reachable.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// observe feeds the outcome of one call to the breaker; ctx is the
// caller's context, before OpTimeout was added to it. A success or an
// error reply resets the count of failures; a call the caller gave up on
// (its context ended), or that failed because the store or the client was
// closed, says nothing about Redis and is not counted; any other error (a
// refused or broken connection, a timeout of OpTimeout, a pool timeout) is
// a failure.
//
// On a cluster a network failure also asks the client to reload its slot
// map: go-redis reloads it on MOVED, or every minute, but not when a node
// stops answering, so without this the slots of a master that died would
// keep failing after its replica took over.
func (s *Store) observe(ctx context.Context, err error) {
	if err != nil && s.ps.cluster != nil && !isReply(err) && !isNotReplicated(err) && ctx.Err() == nil {
		s.ps.cluster.ReloadState(context.Background())
	}
	b := &s.br
	if b.threshold <= 0 {
		return
	}
	switch {
	case err == nil || isReply(err) || isNotReplicated(err):
		if b.failures.Load() != 0 {
			b.failures.Store(0)
		}
	case ctx.Err() != nil, errors.Is(err, errClosed), errors.Is(err, redis.ErrClosed):
	default:
		if b.failures.Add(1) >= b.threshold && !b.off.Load() && b.open.CompareAndSwap(false, true) {
			if !s.bg.start(s.probe) {
				b.open.Store(false) // closed meanwhile: nobody could close it again
			}
		}
	}
}

// probe is the goroutine that runs while the breaker is open: it PINGs
// Redis on the backoff schedule until Redis answers, then closes the
// breaker and returns. Close stops it.
func (s *Store) probe() {
	b := &s.br
	d := b.minBackoff
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-s.ps.quit:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.ps.ctx, s.opTimeout)
		err := s.c.Ping(ctx).Err()
		cancel()
		if err == nil || isReply(err) {
			b.failures.Store(0)
			b.open.Store(false)
			return
		}
		d = min(2*d, b.maxBackoff)
		t.Reset(d)
	}
}
