package redisstore

import (
	"context"
	"sync"
)

// readiness coalesces the PINGs of Ready: at most one is in flight.
type readiness struct {
	mu  sync.Mutex
	cur *readyPing // the PING in flight, nil if none
}

// readyPing is one PING of Ready; err is set before done is closed.
type readyPing struct {
	done chan struct{}
	err  error
}

// Ready reports whether the store can reach Redis now: nil once Redis
// answered a PING, else an error matching session.ErrUnavailable (an
// error reply such as LOADING or NOAUTH included). It needs no request of
// a client, so a readiness probe that calls it (mcphandler's
// Handler.Ready does) notices a Redis that died or froze while nobody
// called, and notices it back.
//
// Each call costs one PING, through the client's pool, bounded by
// [Options.OpTimeout], run by a goroutine of the store so that the
// caller's context does not cut it short: concurrent calls share the PING
// in flight (a flood of probes sends one PING at a time), and a call
// whose ctx ends first returns ctx's error, wrapped, while the PING goes
// on. The PING feeds the circuit breaker like any call, so probes alone
// open it when Redis stops answering ([Options.BreakerThreshold] failures
// in a row; sooner if requests fail too), and while it is open Ready
// fails at once, sending nothing, until the breaker's own PINGs find
// Redis back (within [Options.BreakerMaxBackoff], 1s by default).
//
// On a single server the PING goes to it, behind Sentinel to the master
// the failover client follows, and on a Cluster to one master of
// go-redis's choosing: Ready then shows that this process reaches the
// cluster, not that every shard is up (the slots of a master that died
// fail their calls until its replica takes over). After [Store.Close] it
// fails. Ready is safe for concurrent use.
func (s *Store) Ready(ctx context.Context) error {
	if err := s.br.allow(); err != nil {
		return unavailable("ready", err)
	}
	r := &s.ready
	r.mu.Lock()
	p := r.cur
	if p == nil {
		p = &readyPing{done: make(chan struct{})}
		if !s.bg.start(func() { s.readyPing(p) }) {
			r.mu.Unlock()
			return unavailable("ready", errClosed)
		}
		r.cur = p
	}
	r.mu.Unlock()
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return unavailable("ready", ctx.Err())
	}
}

// readyPing sends the PING of p under the store's own context (ended by
// Close) and OpTimeout, then hands its outcome to every waiter.
func (s *Store) readyPing(p *readyPing) {
	ctx, cancel := s.opCtx(s.ps.ctx)
	err := s.c.Ping(ctx).Err()
	cancel()
	s.observe(s.ps.ctx, err)
	if err != nil {
		p.err = unavailable("ready", err)
	}
	s.ready.mu.Lock()
	s.ready.cur = nil
	s.ready.mu.Unlock()
	close(p.done)
}
