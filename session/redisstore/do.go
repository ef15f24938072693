package redisstore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Do runs f, one operation of the caller's own on the store's Redis
// client, the way the store runs its own calls, so that data kept next to
// the store's (rate limits, in package ratelimit) fails as fast as the
// store does:
//
//   - while the circuit breaker is open, Do fails at once with
//     session.ErrUnavailable and does not call f;
//   - f's context ends after timeout, or after [Options.OpTimeout] when
//     timeout is not positive or larger, on top of ctx;
//   - f's error feeds the breaker like the store's own calls: a network
//     error or the end of that bound counts as a failure (so a frozen
//     Redis opens the breaker after BreakerThreshold such calls, as fast
//     as timeout allows), a success or an error reply from Redis resets
//     the count, and nothing counts when ctx itself ended first.
//
// An error of f is returned wrapped so that errors.Is(err,
// session.ErrUnavailable) holds and errors.Is and errors.As still match
// f's error (redis.Nil included). f should make one round trip (a command,
// a script, a pipeline) and return the client's error for it; it must use
// keys of its own, never those of the store's prefix, and must not keep c
// or its context after it returned. Do is safe for concurrent use.
func (s *Store) Do(ctx context.Context, timeout time.Duration, f func(ctx context.Context, c redis.UniversalClient) error) error {
	if err := s.br.allow(); err != nil {
		return unavailable("do", err)
	}
	if timeout <= 0 || timeout > s.opTimeout {
		timeout = s.opTimeout
	}
	octx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := f(octx, s.c)
	s.observe(ctx, err)
	if err != nil {
		return unavailable("do", err)
	}
	return nil
}
