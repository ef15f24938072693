package redisstore

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// script is a Lua script of the store: its source, for EVAL, and its
// digest, for EVALSHA.
type script struct {
	*redis.Script
	src string
}

func newScript(src string) script { return script{redis.NewScript(src), src} }

// process sends cmd to Redis and waits for its reply, at most until ctx is
// done: through the client's pool, or with Options.AutoPipeline through the
// client's autopipeliner, which batches it with the commands of concurrent
// calls. The autopipeliner runs a queued command on a context of its own,
// so the wait is bounded here instead: when ctx ends first, process returns
// ctx's error and the command may still run; cmd must then not be read.
func (s *Store) process(ctx context.Context, cmd redis.Cmder) error {
	if s.ap == nil {
		return s.c.Process(ctx, cmd)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.ap.Submit(ctx, cmd).WaitContext(ctx)
}

// eval runs sc on the key k in one round trip: EVALSHA, and EVAL if Redis
// does not hold the script (it then keeps it, so that happens once per
// server). Its reply is read only when err is nil.
func (s *Store) eval(ctx context.Context, sc script, k string, args ...any) (*redis.Cmd, error) {
	cmd := redis.NewCmd(ctx, append([]any{"evalsha", sc.Hash(), 1, k}, args...)...)
	err := s.process(ctx, cmd)
	if err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT")) {
		cmd = redis.NewCmd(ctx, append([]any{"eval", sc.src, 1, k}, args...)...)
		err = s.process(ctx, cmd)
	}
	return cmd, err
}
