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
	return false, res.RetryAfter, nil
}
