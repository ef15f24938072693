package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// notReplicatedError is the error of a write that fewer replicas than
// Options.WaitReplicas acknowledged within Options.WaitTimeout. The write
// itself was applied by the master.
type notReplicatedError struct {
	acked, want int64
}

func (e *notReplicatedError) Error() string {
	return fmt.Sprintf("write acknowledged by %d of the %d replicas required within the wait timeout (the master applied it)", e.acked, e.want)
}

func isNotReplicated(err error) bool {
	var e *notReplicatedError
	return errors.As(err, &e)
}

// replicated runs the commands queue adds to a pipeline, followed by
// WAIT WaitReplicas WaitTimeout, in one round trip on one connection to
// the master that serves key — WAIT counts the replicas that acknowledged
// what that connection wrote. It returns the first error of the
// commands, or a *notReplicatedError if WAIT counted too few replicas.
//
// On a cluster the connection is one of the cluster client's connections
// to the node its slot map names for key; if that node answers MOVED (the
// map is out of date: a failover, a resharding), the client reloads its
// map and the commands are sent once more, to the node Redis named. ASK
// (a slot being migrated) fails the call.
func (s *Store) replicated(ctx context.Context, key string, queue func(p redis.Pipeliner)) error {
	cc := s.ps.cluster
	if cc == nil {
		return s.replicatedOn(ctx, s.c, queue)
	}
	node, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return err
	}
	err = s.replicatedOn(ctx, node, queue)
	addr, moved := redis.IsMovedError(err)
	if !moved {
		return err
	}
	// The slot map is out of date (a failover, a resharding): MOVED
	// wrote nothing. Reload it, wait until it names the node Redis
	// named, and try that node once.
	cc.ReloadState(ctx)
	for {
		if node, err = cc.MasterForKey(ctx, key); err == nil && node.Options().Addr == addr {
			return s.replicatedOn(ctx, node, queue)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redis: MOVED %s, and the cluster client's slot map did not follow: %w", addr, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// replicatedOn is replicated on the client c of one server.
func (s *Store) replicatedOn(ctx context.Context, c redis.Cmdable, queue func(p redis.Pipeliner)) error {
	var wait *redis.Cmd
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		queue(p)
		wait = p.Do(ctx, "wait", s.waitReplicas, s.waitTimeout.Milliseconds())
		return nil
	})
	if err != nil {
		return err
	}
	n, err := wait.Int64()
	if err != nil {
		return err
	}
	if n < s.waitReplicas {
		return &notReplicatedError{acked: n, want: s.waitReplicas}
	}
	return nil
}

// replicatedScript runs script on key like replicated, with EVALSHA, and
// with EVAL if Redis does not have the script.
func (s *Store) replicatedScript(ctx context.Context, script *redis.Script, key string, args ...any) (*redis.Cmd, error) {
	var cmd *redis.Cmd
	err := s.replicated(ctx, key, func(p redis.Pipeliner) { cmd = script.EvalSha(ctx, p, []string{key}, args...) })
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		err = s.replicated(ctx, key, func(p redis.Pipeliner) { cmd = script.Eval(ctx, p, []string{key}, args...) })
	}
	return cmd, err
}
