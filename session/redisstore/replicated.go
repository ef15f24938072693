package redisstore

import (
	"context"
	"errors"
	"fmt"

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
// to the node its slot map names for key; that node answering MOVED (the
// map is out of date: a failover, a resharding) fails the call, and the
// client is asked to reload its map.
func (s *Store) replicated(ctx context.Context, key string, queue func(p redis.Pipeliner)) error {
	pipelined := s.c.Pipelined
	cc := s.ps.cluster
	if cc != nil {
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return err
		}
		pipelined = node.Pipelined
	}
	var wait *redis.Cmd
	_, err := pipelined(ctx, func(p redis.Pipeliner) error {
		queue(p)
		wait = p.Do(ctx, "wait", s.waitReplicas, s.waitTimeout.Milliseconds())
		return nil
	})
	if err != nil {
		if _, moved := redis.IsMovedError(err); moved && cc != nil {
			cc.ReloadState(ctx)
		}
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
