package ratelimit

import (
	"context"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/session/redisstore"
)

// redisBackend keeps the buckets in Redis through redis_rate, one script
// call per limit per call, run by the store's Do: bounded by timeout and
// refused at once while the store's circuit breaker is open.
type redisBackend struct {
	st      *redisstore.Store
	prefix  string
	timeout time.Duration
}

func (r *redisBackend) allow(ctx context.Context, id string, lim *limit) (bool, time.Duration, error) {
	key := r.prefix + "{" + id + "}"
	var res *redis_rate.Result
	err := r.st.Do(ctx, r.timeout, func(ctx context.Context, c redis.UniversalClient) error {
		var err error
		res, err = redis_rate.NewLimiter(c).Allow(ctx, key, lim.rl)
		return err
	})
	if err != nil {
		return false, 0, err
	}
	if res.Allowed > 0 {
		return true, 0, nil
	}
	return false, clampRetry(res.RetryAfter, lim), nil
}

// clampRetry bounds the wait a refusal of lim asks for to one interval
// (Period/Rate), the most a bucket the limiter wrote can ask: a bucket
// holds the time its next call is due, at most one Burst ahead, and a
// refused call waits for one interval at most. A value the limiter did
// not write — a time centuries ahead, or one too large for redis_rate's
// conversion to a Duration, which comes out negative or huge depending
// on the processor — asks for that interval too.
func clampRetry(retry time.Duration, lim *limit) time.Duration {
	if retry <= 0 || retry > lim.interval {
		return lim.interval
	}
	return retry
}
