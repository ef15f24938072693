package mcphandler

import "github.com/mcphandler/mcphandler/internal/ownerindex"

// streams is what every long-lived stream of the Handler shares, whatever
// its transport (the session's GET stream, a resumed POST stream,
// subscriptions/listen, the 2024-11-05 stream):
//
//   - the one loop each of them runs (sse.go: runStream), and what a
//     session's stream asks the store about (subscribedFn);
//   - the change hub (changes.go: watchChanges, relayChanges,
//     dispatchChanges), the replica's one subscription to published
//     changes, which it verifies through the bus and hands to the streams
//     of their target's tenant;
//   - the re-authentication of whatever outlives its request's
//     credentials (reauth.go: checkCaller on a stream's loop, recheck and
//     recheckWait for a waiting POST, authFailure for how a failed caller
//     is answered);
//   - subscriptions/listen (listen.go), whose filter is agreed by the
//     catalog and the tasks, reached through the request's Handler
//     (rq.h) as every method handler reaches them;
//   - the event log of a session's POST streams (stream.go: eventLog).
//
// It depends on the Handler's Config (the store, KeepAlive, Authenticate,
// Challenge, the bounds of a listen filter, the logger), on the replicaBus
// (the signed change notifications and the event log's key) and on the
// index that bounds a session's event logs (stream_bound.go). It is safe
// for concurrent use: the hub has a lock of its own, and everything else
// it holds is set in New and only read afterwards. Each stream's loop runs
// on the stream's goroutine (see runStream).
type streams struct {
	cfg        *Config
	bus        *replicaBus       // opens the published changes; signs event logs
	streamLogs *ownerindex.Index // bounds each session's event logs

	changes changeHub // change notifications for the streams held here
}

func newStreams(cfg *Config, bus *replicaBus, streamLogs *ownerindex.Index) *streams {
	return &streams{cfg: cfg, bus: bus, streamLogs: streamLogs}
}
