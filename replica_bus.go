package mcphandler

import (
	"context"
	"encoding/json"
	"sync"
)

// replicaBus is what replicas sharing a store tell each other, and what a
// replica must know to act on it:
//
//   - the messages and records they exchange through the store, signed
//     and verified with the Handler's keys (storeauth.go: publish,
//     openMessage, openRecord, publishSession, openSession; notify.go:
//     publishChange, openChange), refused values being logged at a bounded
//     rate;
//   - the requests running here that notifications/cancelled can stop
//     (track, untrack, in dispatch.go), and the cancellations relayed
//     between replicas that stop them (cancel.go: cancel, cancelLocal, and
//     the listener of the cancel channel, which Close stops).
//
// Running requests belong here, not with the streams, because the only
// reason a replica remembers them is that a cancellation may name them,
// from this replica or another one.
//
// It depends on the Handler's Config (the store, MaxRunningPerSession, the
// logger) and its signers (macs), which it shares with the confirms and
// the session ids. It is safe for concurrent use: runMu guards the running
// requests, the canceller has a lock of its own, and macs guards its count
// of refused values.
type replicaBus struct {
	cfg  *Config
	macs *macs // the keys of what replicas exchange (storeauth.go)

	runMu     sync.Mutex         // guards running and runningIn
	running   map[string]running // in-flight requests by session and id
	runningIn map[string]int     // how many of them each session runs
	cancels   canceller          // cancellations from other replicas
}

func newReplicaBus(cfg *Config, m *macs) *replicaBus {
	return &replicaBus{
		cfg:       cfg,
		macs:      m,
		running:   make(map[string]running),
		runningIn: make(map[string]int),
	}
}

// running is an in-flight request that notifications/cancelled can stop.
type running struct {
	cancel context.CancelFunc
	st     *stream
}

// runKey is the key of a running request: its session and JSON-RPC id.
func runKey(sid string, id json.RawMessage) string { return sid + "/" + string(id) }
