package mcphandler

import "time"

// This file is the schema of what replicas share through the session
// store: every record kind, key, channel and lifetime the handler writes
// (sessions themselves, and the per-identity session list, are the
// store's: see package session). SPEC.md's storage table lists the same
// rows, and TestStoreSchema holds the two together. Records and messages
// that decide anything are signed for their key or channel (storeauth.go).

// # Records

// confirmKey names the record of a 2025 confirm (confirmRecord), kept
// confirmTTL after its last transition.
func confirmKey(id string) string { return "confirm/" + id }

// confirmOfKey names the pointer from a POST stream to the confirm it
// carries, for a resumed stream (watchConfirm); kept confirmOfTTL.
func confirmOfKey(sid, stream string) string { return "confirm-of/" + sid + "/" + stream }

// leaseKey names the lease of the replica responsible for a confirm
// (asking, or running it): a random token, leaseTTL, renewed every
// leaseTTL/3.
func leaseKey(id string) string { return "lease/" + id }

// nonceKey names the record of a 2026-07-28 confirm (nonceRecord), kept
// confirmTTL after its last transition.
func nonceKey(nonce string) string { return "nonce/" + nonce }

// eventKey names the event log of a session's POST stream, kept
// Config.Sessions.ResumeWindow after its last event.
func eventKey(sid, streamID string) string { return "events/" + sid + "/" + streamID }

// eventLogsKey names the index of a session's logged POST streams
// (stream_bound.go), kept until its last entry stops counting: ResumeWindow.
func eventLogsKey(sid string) string { return "event-logs/" + sid }

// confirmOwnerKey (confirm_owner.go) names the index of an identity's
// confirm records, confirm-owner/<digest>, kept until its last entry stops
// counting: confirmCount.

// getStreamKey names the claim of a session's standalone GET stream,
// 2 × Config.Sessions.KeepAlive, renewed by the stream.
func getStreamKey(sid string) string { return "getstream/" + sid }

// Tasks (tasks.go) keep their records through package internal/task,
// whose keys and channels are these (record.go, signal.go there):
//
//	task/<id>                 the task (status, owner digest, result), signed (purpose "task"):
//	                          Config.Tasks.TTL + ResultRetention from its creation at most
//	task-lease/<id>           the runner's lease, a random token: Lease (5 s), renewed every Lease/3
//	task-owner/<digest>       an identity's task ids (Config.Tasks.MaxPerIdentity), signed ("task-owner"):
//	                          until its newest task stops counting
//	task-signal               channel: cancel and input wake-ups to the runner, signed, dated
//	task-status/<tenant>      channel: every visible change of a tenant's tasks, signed, dated

// # Channels

// eventChannel carries the live copies of a POST stream's events, for the
// streams that resume it.
func eventChannel(sid, streamID string) string { return "live/" + sid + "/" + streamID }

// replyChannel names the store channel on which the client's answer to the
// server request id of session sid is delivered, whichever replica gets it.
func replyChannel(sid, id string) string { return "reply/" + sid + "/" + id }

// sessionChannel carries messages for a session's GET stream.
func sessionChannel(sid string) string { return "session/" + sid }

// sessionEnded, published on a session's channel, closes its GET streams.
var sessionEnded = []byte("\x00ended")

// cancelChannel carries notifications/cancelled between replicas: the
// replica that receives one for a request it does not run publishes the
// request's key, and the replica running it cancels it.
const cancelChannel = "cancel"

// notifyChannel carries change notifications to the streams of every
// replica; each stream keeps those whose target matches its caller.
const notifyChannel = "notify"

// # Lifetimes

// Lifetimes and periods of the confirm machinery.
const (
	// confirmLinger is how long a confirm's record outlives its
	// ConfirmTimeout, so that a late answer, a replay or a retry finds it
	// decided instead of absent.
	confirmLinger = time.Minute
	// leaseTTL is how long the claim of the replica responsible for a
	// confirm (asking, or running it) lasts without renewal. It is renewed
	// every leaseTTL/3; a replica that finds it lapsed may take over.
	leaseTTL = 5 * time.Second
	// confirmPoll is how often a waiting asker re-reads its record (the
	// Pub/Sub reply only wakes it sooner: a lost message costs latency,
	// never correctness), and how often a resumed stream checks the
	// confirm it carries.
	confirmPoll = time.Second
	// clockSkew is how far replica clocks may disagree. An asker that
	// cannot reach the store at its deadline keeps trying until this long
	// after it, when no other replica accepts an answer any more.
	clockSkew = 2 * time.Second
)

// confirmTTL is the lifetime of a confirm's record from its last write.
func (cs *confirms) confirmTTL() time.Duration { return cs.cfg.ConfirmTimeout + cs.ct.linger }

// confirmOfTTL is the lifetime of the pointer from a stream to its confirm.
func (cs *confirms) confirmOfTTL() time.Duration {
	return cs.confirmTTL() + cs.cfg.Sessions.ResumeWindow
}
