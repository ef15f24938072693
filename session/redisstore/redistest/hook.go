package redistest

import (
	"context"
	"maps"
	"net"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// CountingHook is a [redis.Hook] that counts what a client sends, so tests
// and benchmarks can measure "Redis commands per request":
//
//	h := new(redistest.CountingHook)
//	c.AddHook(h)
//	... one request ...
//	got := h.Counts()
//
// A command sent on its own is one command and one round trip; a pipeline
// or MULTI/EXEC transaction is one round trip of all its commands (MULTI
// and EXEC included). A command that go-redis retries after a network
// error counts once, and commands sent on a Pub/Sub connection (SUBSCRIBE,
// PING, ...) do not go through hooks and are not counted. The commands
// go-redis sends to set up a new connection (HELLO, CLIENT SETINFO, AUTH,
// SELECT) do go through hooks and are counted, each as a round trip, and
// Dials tells when that happened: warm the client up (including a
// pipeline, which go-redis may send on connections of its own) before
// measuring.
//
// The zero value is ready to use; it is safe for concurrent use.
type CountingHook struct {
	commands, roundTrips, dials atomic.Int64

	mu     sync.Mutex
	byName map[string]int64
}

// Counts is a snapshot of a [CountingHook].
type Counts struct {
	// Commands is the number of commands sent.
	Commands int64
	// RoundTrips is the number of times the client waited for Redis: one
	// per command sent on its own, one per pipeline or transaction.
	RoundTrips int64
	// Dials is the number of connections opened.
	Dials int64
	// ByName counts commands by lower-case name ("get", "evalsha", ...).
	ByName map[string]int64
}

var _ redis.Hook = (*CountingHook)(nil)

// DialHook implements [redis.Hook].
func (h *CountingHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.dials.Add(1)
		return next(ctx, network, addr)
	}
}

// ProcessHook implements [redis.Hook].
func (h *CountingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.roundTrips.Add(1)
		h.count(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements [redis.Hook].
func (h *CountingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.roundTrips.Add(1)
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (h *CountingHook) count(cmd redis.Cmder) {
	h.commands.Add(1)
	h.mu.Lock()
	if h.byName == nil {
		h.byName = make(map[string]int64)
	}
	h.byName[cmd.Name()]++
	h.mu.Unlock()
}

// Counts returns the counts since the hook was added or last reset.
func (h *CountingHook) Counts() Counts {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Counts{
		Commands:   h.commands.Load(),
		RoundTrips: h.roundTrips.Load(),
		Dials:      h.dials.Load(),
		ByName:     maps.Clone(h.byName),
	}
}

// Reset sets every count back to zero.
func (h *CountingHook) Reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.commands.Store(0)
	h.roundTrips.Store(0)
	h.dials.Store(0)
	clear(h.byName)
}
