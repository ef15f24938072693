package mcphandler

import (
	"context"
	"time"

	"github.com/mcphandler/mcphandler/internal/ownerindex"
	"github.com/mcphandler/mcphandler/internal/sign"
)

// Each session has an index of its POST streams whose events are logged
// for a resume, event-logs/<session>, signed (purpose "event-logs") and
// kept by package internal/ownerindex: the stream ids, each counting for
// ResumeWindow from the stream's first logged event. It bounds the event
// logs of a session (Config.Limits.MaxResumableStreamsPerSession) across
// replicas: a POST stream is admitted into it when it first needs its id
// (it turns to SSE, or a confirm names it), before anything is logged. A
// stream past the bound, or whose admission the store fails, is served
// whole and live, without a log: no priming event and no event ids, so
// that its client has nothing to resume from (a resume would find no
// log, as after ResumeWindow). A plain JSON answer never pays the index's
// round trips.
//
// A log lives ResumeWindow after its last event, so one whose stream
// runs longer outlives its count; such streams run, and are bounded by
// Config.Limits.MaxRunningPerSession per replica.

// macEventLogs is the purpose of the stream indexes' signatures.
const macEventLogs = "event-logs"

// streamIDLen is the length of a POST stream's id: "p" and 16 hex digits.
const streamIDLen = 17

// validStreamID reports whether id has the shape of a POST stream's id.
func validStreamID(id string) bool {
	if len(id) != streamIDLen || id[0] != 'p' {
		return false
	}
	for i := 1; i < len(id); i++ {
		if c := id[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// newStreamLogs returns the index of logged streams per session.
func newStreamLogs(cfg *Config, secrets [][]byte) (*ownerindex.Index, error) {
	s, err := sign.NewSigner(macEventLogs, secrets...)
	if err != nil {
		return nil, err
	}
	return ownerindex.New(ownerindex.Config{Store: cfg.Store, Signer: s, Max: cfg.Limits.MaxResumableStreamsPerSession,
		ValidID: validStreamID, MaxIDLen: streamIDLen}), nil
}

// admit counts the log of stream against its session's bound, and
// reports whether it may be kept.
func (l *eventLog) admit(stream string) bool {
	until := time.Now().Add(l.ttl).UnixMilli()
	return l.streams.Admit(context.Background(), eventLogsKey(l.sid), stream, until, nil) == nil
}
