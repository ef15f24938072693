package mcphandler

import "github.com/mcphandler/mcphandler/session"

// sessions is the transport of the protocol revisions that have sessions:
// the 2025 Streamable HTTP transport (transport_sessions.go: a POST's
// session, batches, the GET stream and its resumption, DELETE,
// initialize) and the 2024-11-05 HTTP+SSE transport (transport_legacy.go).
// It owns the session records' life (created at initialize or when a
// legacy stream opens, admitted under Config.Limits.MaxSessionsPerIdentity,
// deleted by DELETE or when the legacy stream ends), the session ids that
// name their owner (sessionid.go), the claim on each session's one GET
// stream, and the GET streams that took their connection over from
// net/http (detached, detach.go), which Handler.Close ends.
//
// It depends on the configuration, the session store (records, claims,
// channels, event logs), the MACs of session ids, of replies and of
// event logs, and the confirm machinery's periods (a resumed stream
// re-reads its log every poll). Everything else it reaches through h, the
// Handler that composes it, as its dispatcher: a message, once its session
// is settled, is served by request dispatch (serveRequest, intercept), and
// initialize is answered by what the server declares
// (caps.initializeResult); a stream runs on the streams' loop and their
// published messages and changes (runStream, checkCaller, watchChanges,
// publishSession, openSession, …), an answer to a confirm
// goes to the confirms (answerConfirm, watchConfirm), and the checks and
// answers every transport shares stay on Handler (authenticate,
// checkOrigin, readBody, decodeMessage, storeUnavailable, …). Those are
// plain method calls on h, not fields of func type: a call through a func
// value hides its callee from escape analysis, so the request, its
// message and its stream would move to the heap on every request.
//
// It is built once by New and safe for concurrent use: every field but
// detached is read-only after New, and detached has its own lock.
type sessions struct {
	cfg   *Config
	store session.Store
	macs  *macs         // sid: session ids; reply: answers to the server's requests; event: event logs
	ct    *confirmTimes // poll: how often a resumed stream re-reads its log

	detached detachedStreams // GET streams that took their connection over (detach.go)

	h *Handler // the dispatcher (see above)
}

// newSessions returns the transport of h, whose configuration and MACs
// are set.
func newSessions(h *Handler) *sessions {
	return &sessions{cfg: &h.cfg, store: h.cfg.Store, macs: h.macs, ct: &h.confirms.ct, h: h}
}
