package mcphandler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/session"
)

// This file is the 2025 Streamable HTTP transport with sessions
// (revisions 2025-03-26, 2025-06-18 and 2025-11-25): the session a POST
// names, batches, the GET stream and its resumption, DELETE, and the era
// seam's implementation for these revisions (sessionsEra).
//
// See https://modelcontextprotocol.io/specification/2025-11-25/basic/transports.

// Protocol revisions served over Streamable HTTP, newest first.
const (
	Version20251125 = "2025-11-25"
	Version20250618 = "2025-06-18"
	Version20250326 = "2025-03-26"
)

var supportedVersions = []string{Version20251125, Version20250618, Version20250326}

func isSupported(v string) bool { return slices.Contains(supportedVersions, v) }

// serveSession serves one POSTed message of the 2025 revisions: initialize
// opens a session; anything else needs one (or stateless mode). A
// request's answer is a JSON body or, once something precedes it, an SSE
// stream logged for resumption.
func (ss *sessions) serveSession(w http.ResponseWriter, rq *request, m *jsonrpc.Message, kind jsonrpc.Kind) {
	if hv := rq.version; hv != "" && !isSupported(hv) {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Bad Request: unsupported MCP-Protocol-Version "+clipEcho(hv))
		return
	}
	if kind == jsonrpc.KindRequest && m.Method == "initialize" {
		rq.st = newStream(w, false, 0)
		ss.initialize(rq, m)
		return
	}
	if !ss.resolveSession(w, rq) {
		return
	}
	switch kind {
	case jsonrpc.KindNotification:
		ss.notification(rq, m)
		w.WriteHeader(http.StatusAccepted)
	case jsonrpc.KindResponse:
		if err := ss.deliverResponse(rq, m); err != nil {
			ss.refuseResponse(w, err)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	default:
		rq.st = newStream(w, ss.primes(rq), ss.cfg.Sessions.SSERetry)
		rq.st.chunk, rq.st.h1 = chunked(rq.r), rq.r.ProtoMajor == 1
		if rq.sess != nil {
			rq.st.setLog(ss.h, rq.sess.ID)
		}
		ss.h.serveRequest(rq, m)
	}
}

// primes reports whether SSE responses to rq start with a priming event:
// for sessions that negotiated 2025-11-25 (whatever version header a
// request carries), and for stateless requests that claim it.
func (ss *sessions) primes(rq *request) bool {
	if rq.sess != nil {
		return rq.sess.ProtocolVersion >= Version20251125
	}
	return rq.version >= Version20251125
}

// resolveSession finds the request's session (or, in stateless mode, only
// settles the protocol version) and sets rq.version to the session's. It
// writes 400 (a version header that contradicts the session), 404 or 503
// and returns false when the request cannot go on.
func (ss *sessions) resolveSession(w http.ResponseWriter, rq *request) bool {
	if ss.cfg.Stateless {
		if rq.version == "" {
			rq.version = Version20250326
		}
		return true
	}
	sid := headerValue(rq.r, hdrSessionID)
	if sid == "" {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Bad Request: Mcp-Session-Id header is required")
		return false
	}
	s, err := (*session.Session)(nil), session.ErrNotFound
	if ss.sessionOf(sid, rq.id) {
		s, err = ss.store.Get(rq.context(), sid)
	}
	if err == nil && !rq.id.hasKey(s.Owner) {
		err = session.ErrNotFound
	}
	switch {
	case errors.Is(err, session.ErrNotFound):
		writeHTTPError(w, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "Not Found: unknown or expired session")
		return false
	case err != nil:
		ss.h.storeUnavailable(w, err)
		return false
	}
	// The version negotiated at initialize decides everything a revision
	// changes (batches, priming events, elicitation formats). Clients must
	// repeat it in MCP-Protocol-Version; a header naming another revision
	// is refused rather than obeyed or ignored.
	if rq.version != "" && rq.version != s.ProtocolVersion {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest,
			"Bad Request: MCP-Protocol-Version "+clipEcho(rq.version)+" is not the session's negotiated version "+s.ProtocolVersion)
		return false
	}
	rq.sess = s
	rq.version = s.ProtocolVersion
	return true
}

// serveBatch answers a JSON-RPC batch, which only 2025-03-26 allows. Each
// member is served in turn and the responses are sent as one JSON array;
// members cannot ask the client anything.
func (ss *sessions) serveBatch(w http.ResponseWriter, rq *request, body []byte) {
	elems, ok := ss.openBatch(w, rq, body)
	if !ok {
		return
	}
	out := []byte{'['}
	n := 0
	for _, e := range elems {
		if resp := ss.serveBatchMember(rq, e); len(resp) > 0 {
			if n > 0 {
				out = append(out, ',')
			}
			out = append(out, resp...)
			n++
		}
	}
	if n == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	out = append(out, ']')
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

// openBatch decodes a batch and finds its session; it answers 400 (a
// version without batches, not JSON, no session, not 2025-03-26, empty or
// malformed), 404 or 503 and
// returns false when the batch cannot be served.
func (ss *sessions) openBatch(w http.ResponseWriter, rq *request, body []byte) ([]json.RawMessage, bool) {
	if hv := rq.version; isStatelessVersion(hv) {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Invalid Request: batches are not accepted in protocol version "+Version20260728)
		return nil, false
	} else if hv != "" && !isSupported(hv) {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Bad Request: unsupported MCP-Protocol-Version "+clipEcho(hv))
		return nil, false
	}
	elems, err := jsonrpc.DecodeBatch(body)
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeParseError, "Parse error")
		return nil, false
	}
	if headerValue(rq.r, hdrSessionID) == "" && !ss.cfg.Stateless {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Invalid Request: batches are not supported")
		return nil, false
	}
	if !ss.resolveSession(w, rq) {
		return nil, false
	}
	if rq.version != Version20250326 {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Invalid Request: batches are only allowed in protocol version 2025-03-26")
		return nil, false
	}
	if err != nil || len(elems) == 0 {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Invalid Request: empty or malformed batch")
		return nil, false
	}
	return elems, true
}

// serveBatchMember serves one member e of a batch and returns its
// response, nil for a notification or a response.
func (ss *sessions) serveBatchMember(rq *request, e []byte) []byte {
	var m jsonrpc.Message
	if err := jsonrpc.Decode(e, &m); err != nil {
		return jsonrpc.AppendError(nil, nil, rpcError(CodeInvalidRequest, "Invalid Request"))
	}
	kind, verr := m.Validate()
	if verr != nil {
		return jsonrpc.AppendError(nil, readableID(m.ID), verr)
	}
	if verr := ss.h.checkID(&m); verr != nil {
		return jsonrpc.AppendError(nil, nil, verr)
	}
	if verr := strictMessage(e, &m); verr != nil {
		return jsonrpc.AppendError(nil, readableID(m.ID), verr)
	}
	switch kind {
	case jsonrpc.KindNotification:
		ss.notification(rq, &m)
		return nil
	case jsonrpc.KindResponse:
		ss.deliverResponse(rq, &m)
		return nil
	}
	if m.Method == "initialize" {
		return jsonrpc.AppendError(nil, m.ID, rpcError(CodeInvalidRequest, "Invalid Request: initialize cannot be batched"))
	}
	rec := &batchWriter{header: http.Header{}}
	sub := *rq
	sub.st = newStream(rec, false, 0)
	sub.st.noSSE = true
	ss.h.serveRequest(&sub, &m)
	return rec.body.Bytes()
}

// batchWriter collects one batch member's response.
type batchWriter struct {
	header http.Header
	body   bytes.Buffer
}

func (b *batchWriter) Header() http.Header { return b.header }

func (b *batchWriter) Write(p []byte) (int, error) { return b.body.Write(p) }

func (b *batchWriter) WriteHeader(int) {}

// errNotWaiting reports a response nobody waits for.
var errNotWaiting = errors.New("mcphandler: no request is waiting for this response")

// deliverResponse hands a client's response to the server request waiting
// for it, on whichever replica it waits. It returns errNotWaiting for a
// response nobody waits for (unknown, answered, or timed-out id), and the
// store's error when the store cannot be reached. An answer to a confirm
// is accepted once only, from the identity and session it was asked of
// (see answerConfirm).
func (ss *sessions) deliverResponse(rq *request, m *jsonrpc.Message) error {
	if rq.sess == nil {
		return errNotWaiting
	}
	var id string
	if err := json.Unmarshal(m.ID, &id); err != nil || !strings.HasPrefix(id, "mcph") {
		return errNotWaiting
	}
	if isConfirmID(id) {
		return ss.h.interceptAnswer(rq, id, m, ss.h.confirms.answerConfirm) // Config.Interceptors (intercept.go)
	}
	resp := jsonrpc.AppendResult(nil, m.ID, m.Result)
	if m.Error != nil {
		resp = jsonrpc.AppendError(nil, m.ID, m.Error)
	}
	b, _ := json.Marshal(reply{Role: rq.id.Role, Msg: resp})
	n, err := ss.h.bus.publish(rq.context(), ss.macs.reply, replyChannel(rq.sess.ID, id), b)
	if err != nil {
		return err
	}
	if n == 0 && !isApprovalAnswer(id) {
		return errNotWaiting
	}
	return nil
}

// isApprovalAnswer reports whether id is the id of an approval's URL
// elicitation (approve_push.go). The client's answer to it decides nothing
// (the person decides on the page, who may be quicker than the client's
// answer); it only lets a waiting call withdraw an approval the client
// declined to open. So it is accepted however late it comes, and wherever
// nobody is counted as waiting (Publish counts only one node on a Redis
// Cluster).
func isApprovalAnswer(id string) bool {
	a, ok := strings.CutPrefix(id, approvalPrefix)
	return ok && approval.ValidID(a)
}

// refuseResponse answers a client's response that was not delivered: 400
// when nobody waits for it, 503 when the store cannot tell.
func (ss *sessions) refuseResponse(w http.ResponseWriter, err error) {
	if errors.Is(err, errNotWaiting) {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Bad Request: no request is waiting for this response")
		return
	}
	ss.h.storeUnavailable(w, err)
}

// serveGET opens the session's server-to-client SSE stream, or resumes a
// POST stream when Last-Event-ID names one. One stream per session is
// served at a time, across replicas; a second one gets 409.
//
// Everything but the wait runs off the request's goroutine (see offStack),
// so that the goroutine an open stream keeps keeps the small stack it had.
//
// Served with a handoff (detach.go), the stream takes its connection over
// from net/http once its header is out.
func (ss *sessions) serveGET(w http.ResponseWriter, r *http.Request) {
	d, _ := w.(*handoff)
	if d != nil {
		r = d.detachable(r)
		defer d.cancel()
	}
	var loop *streamLoop
	var st *stream
	var end func()
	if !offStack(func() bool {
		rq, ok := ss.openGET(w, r)
		if !ok {
			return false
		}
		if last := rq.r.Header.Get("Last-Event-ID"); last != "" && ss.resume(w, rq, last) {
			return false
		}
		loop, st, end = ss.openGETStream(w, rq)
		return loop != nil
	}) {
		return
	}
	over := func() {}
	if d != nil {
		if f := ss.takeOver(d, r, st); f != nil {
			over = f
		}
	}
	defer offStack(func() bool { end(); over(); return true })
	ss.h.streams.runStream(r.Context(), loop)
}

// openGET checks a GET (mode, caller, Accept, version, session) and
// answers the error when one fails. The stream it opens lives while its
// caller stays who it was (see callerCheck).
func (ss *sessions) openGET(w http.ResponseWriter, r *http.Request) (*request, bool) {
	if !ss.sessionMethodAllowed(w, r) {
		return nil, false
	}
	id, ok := ss.h.authenticate(w, r)
	if !ok {
		return nil, false
	}
	if !acceptsAll(r, "text/event-stream") {
		writeHTTPError(w, http.StatusNotAcceptable, jsonrpc.CodeInvalidRequest, "Not Acceptable: Accept must list text/event-stream")
		return nil, false
	}
	hv := strings.TrimSpace(headerValue(r, hdrProtocolVersion))
	if hv != "" && !isSupported(hv) {
		writeHTTPError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Bad Request: unsupported MCP-Protocol-Version "+clipEcho(hv))
		return nil, false
	}
	rq := &request{h: ss.h, r: r, id: id, version: hv, era: eraSessions}
	if !ss.resolveSession(w, rq) {
		return nil, false
	}
	return rq, true
}

// sessionMethodAllowed answers 405 to a GET or DELETE that has no session
// to address: the server is stateless, or the request is 2026-07-28's.
func (ss *sessions) sessionMethodAllowed(w http.ResponseWriter, r *http.Request) bool {
	if ss.cfg.Stateless || isStatelessVersion(strings.TrimSpace(headerValue(r, hdrProtocolVersion))) {
		w.Header().Set("Allow", "POST")
		writeHTTPError(w, http.StatusMethodNotAllowed, jsonrpc.CodeInvalidRequest, "Method not allowed: the server is stateless")
		return false
	}
	return true
}

// openGETStream opens the session's standalone stream and returns its
// loop, the stream and what ends it, or a nil loop when it answered an
// error. Each
// message must go on exactly one stream, so the stream claims the session
// in the store; the claim is renewed with every keep-alive, and a dead
// holder's lapses after two.
func (ss *sessions) openGETStream(w http.ResponseWriter, rq *request) (*streamLoop, *stream, func()) {
	ctx, sid := rq.context(), rq.sess.ID
	claim, claimTTL := []byte(randText()), ss.getStreamTTL()
	if !ss.claimGETStream(w, ctx, sid, claim, claimTTL) {
		return nil, nil, nil
	}
	release := func() {
		ss.store.CompareAndSwap(context.WithoutCancel(ctx), getStreamKey(sid), claim, nil, time.Millisecond)
	}
	sub, changes, ok := ss.subscribeStream(w, ctx, sid, rq.id)
	if !ok {
		release()
		return nil, nil, nil
	}
	end := func() { ss.closeStream(sub, changes); release() }
	st, err := ss.startGETStream(w, rq)
	if err != nil {
		end()
		return nil, nil, nil
	}
	subscribed := ss.h.streams.subscribedFn(ctx, sid)
	var order msgOrder
	return &streamLoop{
		caller:    ss.h.streams.checkCaller(rq.r, rq.id),
		keepAlive: ss.renewGETStream(ctx, st, sid, claim, claimTTL),
		msgs:      sub.C(),
		onMsg: func(b []byte) bool {
			msg, ok := ss.h.bus.openSession(sid, &order, b)
			return !ok || !bytes.Equal(msg, sessionEnded) && st.send(msg) == nil
		},
		changes: changes.c,
		onChange: func(c *change) bool {
			msg := changeMessage(c, rq.id, subscribed)
			return msg == nil || st.send(msg) == nil
		},
	}, st, end
}

// renewGETStream is the keep-alive of session sid's standalone stream st:
// a comment, then the claim's renewal; it reports false when either fails
// (the claim lapsed and another stream took over). A store error keeps
// the stream.
func (ss *sessions) renewGETStream(ctx context.Context, st *stream, sid string, claim []byte, ttl time.Duration) func() bool {
	return func() bool {
		if st.comment() != nil {
			return false
		}
		ok, err := ss.store.CompareAndSwap(ctx, getStreamKey(sid), claim, claim, ttl)
		return err != nil || ok
	}
}

// startGETStream starts the SSE response of a session's standalone
// stream; its event ids start with "g", never taken for a POST stream's.
// A stream that may take its connection over (served with a handoff,
// HTTP/1.x) closes the connection when it ends, and says so in its header.
func (ss *sessions) startGETStream(w http.ResponseWriter, rq *request) (*stream, error) {
	st := newStream(w, ss.primes(rq), ss.cfg.Sessions.SSERetry)
	st.chunk = chunked(rq.r)
	st.id = "g" + randText()
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := w.(*handoff); ok {
		st.closeAfterLocked()
	}
	return st, st.startSSELocked()
}

// getStreamTTL is the lifetime of a GET stream's claim (getStreamKey): a
// dead holder's lapses after two missed keep-alives.
func (ss *sessions) getStreamTTL() time.Duration { return 2 * ss.cfg.Sessions.KeepAlive }

// claimGETStream claims session sid's standalone stream for claim; it
// answers 409 when another stream holds it, 503 when the store fails.
func (ss *sessions) claimGETStream(w http.ResponseWriter, ctx context.Context, sid string, claim []byte, ttl time.Duration) bool {
	ok, err := ss.store.PutIfAbsent(ctx, getStreamKey(sid), claim, ttl)
	switch {
	case err != nil:
		ss.h.storeUnavailable(w, err)
		return false
	case !ok:
		writeHTTPError(w, http.StatusConflict, jsonrpc.CodeInvalidRequest, "Conflict: only one GET stream per session is allowed")
		return false
	}
	return true
}

// subscribeStream subscribes a stream of caller id's session sid to the
// session's channel and registers it for the published changes (see
// watchChanges), answering 503 when the store fails. The stream ends both
// with closeStream.
func (ss *sessions) subscribeStream(w http.ResponseWriter, ctx context.Context, sid string, id Identity) (sub session.Subscription, changes *changeWatch, ok bool) {
	sub, err := ss.store.Subscribe(ctx, sessionChannel(sid))
	if err != nil {
		ss.h.storeUnavailable(w, err)
		return nil, nil, false
	}
	if changes, err = ss.h.streams.watchChanges(ctx, id); err != nil {
		sub.Close()
		ss.h.storeUnavailable(w, err)
		return nil, nil, false
	}
	return sub, changes, true
}

// closeStream ends what subscribeStream started.
func (ss *sessions) closeStream(sub session.Subscription, changes *changeWatch) {
	ss.h.streams.unwatchChanges(changes)
	sub.Close()
}

// serveDELETE ends the session: later requests with its id get 404 on every
// replica, and its open GET streams end.
func (ss *sessions) serveDELETE(w http.ResponseWriter, r *http.Request) {
	if !ss.sessionMethodAllowed(w, r) {
		return
	}
	id, ok := ss.h.authenticate(w, r)
	if !ok {
		return
	}
	rq := &request{h: ss.h, r: r, id: id, version: strings.TrimSpace(headerValue(r, hdrProtocolVersion)), era: eraSessions}
	if !ss.resolveSession(w, rq) {
		return
	}
	if err := ss.store.Delete(r.Context(), rq.sess.ID); err != nil {
		ss.h.storeUnavailable(w, err)
		return
	}
	interceptionFrom(r.Context()).sessionEnded(rq.sess, id) // for Config.Interceptors (intercept.go)
	ss.h.bus.publishSession(r.Context(), rq.sess.ID, nil, sessionEnded)
	w.WriteHeader(http.StatusNoContent)
}

// resume serves a GET that carries Last-Event-ID for one of the session's
// POST streams: the logged events after that id, then the live ones, until
// the stream's response. It reports false when last names no logged
// stream of this session, so that the GET opens the standalone stream.
//
// Every entry and live copy is verified (see eventLog); one that does not
// verify is dropped. The live copies only bring events sooner: the log is
// read again every confirmPoll, so a lost message costs latency. Meanwhile
// the confirm the stream carries, if any, is looked after (watchConfirm):
// a call whose asker or runner is gone is finished or reported here.
//
// See https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#resumability-and-redelivery.
func (ss *sessions) resume(w http.ResponseWriter, rq *request, last string) bool {
	streamID, after, ok := parseLastEventID(last)
	if !ok {
		return false
	}
	ctx, sid := rq.context(), rq.sess.ID
	rs := &resumed{ss: ss, channel: eventChannel(sid, streamID), key: eventKey(sid, streamID), streamID: streamID, seen: after}
	live, err := ss.store.Subscribe(ctx, rs.channel)
	if err != nil {
		return false
	}
	defer live.Close()
	evs, err := ss.events(ctx, rs.key, 0)
	if err != nil || len(evs) == 0 || ss.logEnded(evs) {
		return false // unknown or expired: not ours to resume
	}
	rs.sw = startSSE(w)
	rs.sw.rc.Flush()
	if rs.writeAll(evs) {
		return true
	}
	ss.h.streams.runStream(ctx, &streamLoop{
		caller:    ss.h.streams.checkCaller(rq.r, rq.id),
		keepAlive: func() bool { return rs.sw.comment() == nil },
		poll:      ss.ct.poll,
		onPoll: func() bool {
			ss.h.confirms.watchConfirm(rq, streamID)
			return rs.poll(ctx)
		},
		msgs:  live.C(),
		onMsg: func(b []byte) bool { return rs.live(ctx, b) },
	})
	return true
}

// resumed is the state of a resumed POST stream.
type resumed struct {
	ss       *sessions
	sw       *sseWriter
	channel  string // the live copies' channel
	key      string // the event log
	streamID string
	seen     uint64   // the last event sent, or passed over
	order    logOrder // of the entries read so far, from the first
	newest   int64    // the newest mark's time of the entries read (Unix ms); 0: none marked
}

// poll writes the entries of the log after the last one sent, and reports
// whether the stream goes on. A log without an entry for ResumeWindow is
// one the store drops: its writer is gone (its replica stopped mid-call),
// or it writes its response where no resumption reads it. The stream ends;
// a confirm's is finished by watchConfirm instead.
func (rs *resumed) poll(ctx context.Context) bool {
	evs, err := rs.ss.events(ctx, rs.key, rs.seen)
	if err != nil {
		return true
	}
	if rs.writeAll(evs) {
		return false
	}
	return time.Since(rs.lastAt()) <= rs.ss.cfg.Sessions.ResumeWindow
}

// lastAt is when the newest entry read was written: now when none carried
// a time (an earlier release's), which never ends a stream.
func (rs *resumed) lastAt() time.Time {
	if rs.newest == 0 {
		return time.Now()
	}
	return time.UnixMilli(rs.newest)
}

// write sends one logged entry, unless the client had it (seq up to the
// Last-Event-ID it resumed after) or it is out of its writer's order (a
// copy, or moved: see sequence.go). It reports final once the stream is
// over — its response sent now, or one the client had — and !ok when the
// connection failed.
func (rs *resumed) write(seq uint64, entry []byte) (final, ok bool) {
	m, rest := readMark(entry)
	if m.marked {
		rs.newest = max(rs.newest, m.at)
	}
	fresh := len(rest) > 0 && rs.order.take(m)
	if seq <= rs.seen {
		return fresh && rest[0] == evFinal, true
	}
	rs.seen = seq
	if !fresh || rest[0] != evMessage && rest[0] != evFinal {
		return false, true
	}
	id := strconv.AppendUint(append([]byte(rs.streamID), '-'), seq, 10)
	if rs.sw.event("", id, rest[1:]) != nil {
		return false, false
	}
	return rest[0] == evFinal, true
}

// logEnded reports whether the event log evs (verified, in order) ended
// ResumeWindow after its last entry, as the store would have dropped it:
// kept longer (its TTL rewritten), it is not resumed. Entries without a
// mark (earlier releases) carry no time and count as new.
func (ss *sessions) logEnded(evs []session.Event) bool {
	var last int64
	for _, ev := range evs {
		m, _ := readMark(ev.Data)
		if !m.marked {
			return false
		}
		last = max(last, m.at)
	}
	return time.Since(time.UnixMilli(last)) > ss.cfg.Sessions.ResumeWindow
}

// writeAll sends the entries evs; it reports true when the stream is over.
func (rs *resumed) writeAll(evs []session.Event) bool {
	for _, ev := range evs {
		if final, ok := rs.write(ev.Seq, ev.Data); final || !ok {
			return true
		}
	}
	return false
}

// live sends the event of a verified live copy b, reading the log instead
// when an earlier event's copy was lost. It reports false when the stream
// is over.
func (rs *resumed) live(ctx context.Context, b []byte) bool {
	p, ok := rs.ss.h.bus.openMessage(rs.ss.macs.event, rs.channel, b)
	if !ok {
		return true
	}
	sp := bytes.IndexByte(p, ' ')
	seq, err := strconv.ParseUint(string(p[:max(sp, 0)]), 10, 64)
	if sp < 0 || err != nil {
		return true
	}
	if seq > rs.seen+1 {
		evs, err := rs.ss.events(ctx, rs.key, rs.seen)
		return err != nil || !rs.writeAll(evs)
	}
	final, ok := rs.write(seq, p[sp+1:])
	return !final && ok
}

// events returns the verified entries of the event log key after seq
// after; entries that do not verify are dropped.
func (ss *sessions) events(ctx context.Context, key string, after uint64) ([]session.Event, error) {
	evs, err := ss.store.EventsAfter(ctx, key, after)
	if err != nil {
		return nil, err
	}
	out := evs[:0]
	for _, ev := range evs {
		if p, ok := ss.h.bus.openRecord(ss.macs.event, key, ev.Data); ok {
			out = append(out, session.Event{Seq: ev.Seq, Data: p})
		}
	}
	return out, nil
}

// parseLastEventID splits the Last-Event-ID of an event of a POST stream,
// "<stream>-<seq>", into the stream id and the sequence number after which
// to resume. Stream ids are "p" and 16 lowercase hex digits (see
// stream.streamID), so anything else — including a header of any length
// that merely looks alike — is not a POST stream's id and reports false,
// without reaching the store. Its cost is linear in len(last).
func parseLastEventID(last string) (streamID string, after uint64, ok bool) {
	const idLen = 17 // "p" + 16 hex digits
	if len(last) < idLen+2 || len(last) > idLen+21 || last[0] != 'p' || last[idLen] != '-' {
		return "", 0, false
	}
	for _, c := range []byte(last[1:idLen]) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", 0, false
		}
	}
	seq := last[idLen+1:]
	if seq[0] == '+' {
		return "", 0, false
	}
	after, err := strconv.ParseUint(seq, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return last[:idLen], after, true
}

// sessionsEra is the era seam for the 2025 Streamable HTTP revisions, with
// a session or in stateless mode.
type sessionsEra struct{}

func (sessionsEra) methods() map[string]method { return sessionsMethods }

// decorate writes the _meta members AddListMeta added, if any: a list
// result's only decoration in these eras.
func (sessionsEra) decorate(rq *request, dst []byte) []byte {
	if m := rq.listMeta(); m != nil {
		dst = append(dst, `"_meta":{`...)
		dst = append(dst, m...)
		dst = append(dst, "},"...)
	}
	return dst
}

func (sessionsEra) errorStatus(*request, Code)                       {}
func (sessionsEra) checkCall(*request, *Tool, []byte) *jsonrpc.Error { return nil }
func (sessionsEra) codeResourceNotFound() Code                       { return CodeResourceNotFound }

func (sessionsEra) rounds(*request, *Exchange, *jsonrpc.Message, string, []byte) bool { return true }

// progressToken reads params._meta.progressToken, only when the params
// mention it at all.
func (sessionsEra) progressToken(_ *request, m *jsonrpc.Message) json.RawMessage {
	if !containsKey(m.Params, `"progressToken"`) {
		return nil
	}
	var p struct {
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	json.Unmarshal(m.Params, &p)
	return p.Meta.ProgressToken
}

// exchange: the POST is the stream, so the client is gone when its
// connection ends.
func (sessionsEra) exchange(rq *request, x *Exchange, meta json.RawMessage) {
	x.gone = rq.context().Done()
	sessionExchange(rq, x, meta)
}

// sessionExchange sets the capabilities and log level the session
// recorded, and the progress token of the params' _meta.
func sessionExchange(rq *request, x *Exchange, meta json.RawMessage) {
	if rq.sess != nil {
		x.caps = rq.sess.Capabilities
		x.logLevel = LogLevel(rq.sess.LogLevel)
	}
	if len(meta) > 0 {
		rq.info.meta = meta
		var mp metaParams
		if json.Unmarshal(meta, &mp) == nil {
			x.progressToken = mp.ProgressToken
		}
	}
}

// negotiate picks the revision to speak: the client's if supported, else
// the newest supported.
func negotiate(requested string) string {
	if isSupported(requested) {
		return requested
	}
	return supportedVersions[0]
}

// initializeParams are the params of initialize, in both transports with
// sessions.
type initializeParams struct {
	ProtocolVersion string     `json:"protocolVersion"`
	Capabilities    clientCaps `json:"capabilities"`
	ClientInfo      struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"clientInfo"`
}

// initialize answers the initialize request and, unless stateless, opens a
// session bound to the caller and returns its id in Mcp-Session-Id.
//
// See https://modelcontextprotocol.io/specification/2025-11-25/basic/lifecycle.
func (ss *sessions) initialize(rq *request, m *jsonrpc.Message) {
	if ss.h.intercept(rq, m, true, serveInitialize) { // Config.Interceptors (intercept.go) call back in
		return
	}
	var p initializeParams
	if len(m.Params) > 0 {
		if err := json.Unmarshal(m.Params, &p); err != nil {
			rq.fail(m.ID, invalidParams("Invalid params: "+jsonError(err)))
			return
		}
	}
	if p.ProtocolVersion == "" {
		rq.fail(m.ID, invalidParams("Invalid params: protocolVersion is required"))
		return
	}
	version := negotiate(p.ProtocolVersion)
	rq.version = version
	rq.info = &reqInfo{identity: rq.id, request: rq.r, version: version, caps: p.Capabilities.flags()}
	rq.ctx = context.WithValue(rq.context(), ctxKey{}, rq.info)
	if !ss.cfg.Stateless {
		s, err := ss.createSession(rq, &p, version)
		if err != nil {
			rq.storeFailed(m, err)
			return
		}
		rq.st.w.Header().Set("Mcp-Session-Id", s.ID)
	}
	ss.h.caps.initializeResult(rq, m, version)
}

// serveInitialize is initialize as Config.Interceptors call it back
// (intercept takes a function of the Handler; a func without captures
// allocates nothing).
func serveInitialize(h *Handler, rq *request, m *jsonrpc.Message) { h.sessions.initialize(rq, m) }

// createSession stores the new session of an initialize (p) that settled
// on version, and admits it under Config.Limits.MaxSessionsPerIdentity.
func (ss *sessions) createSession(rq *request, p *initializeParams, version string) (*session.Session, error) {
	s := &session.Session{
		ID:              ss.newSessionID(rq.id),
		Owner:           rq.id.key(),
		ProtocolVersion: version,
		ClientName:      clip(p.ClientInfo.Name, ss.cfg.Limits.MaxClientInfoBytes),
		ClientVersion:   clip(p.ClientInfo.Version, ss.cfg.Limits.MaxClientInfoBytes),
		Capabilities:    p.Capabilities.flags(),
		TTL:             ss.cfg.Sessions.TTL,
		Created:         time.Now(),
	}
	err := ss.store.Create(rq.ctx, s)
	if err == nil {
		err = ss.admit(rq.ctx, rq.id, s)
	}
	return s, err
}

// admit enforces Config.Limits.MaxSessionsPerIdentity once the session s of id
// is created: the store ends id's oldest sessions beyond the limit, and
// their streams are told to end. The zero identity is not limited. If the
// store fails, s is deleted again and the error returned.
func (ss *sessions) admit(ctx context.Context, id Identity, s *session.Session) error {
	if id.Tenant == "" && id.Subject == "" {
		return nil
	}
	ended, err := ss.store.Admit(ctx, s, ss.cfg.Limits.MaxSessionsPerIdentity)
	for _, sid := range ended {
		ss.h.bus.publishSession(ctx, sid, nil, sessionEnded)
	}
	if err != nil {
		ss.store.Delete(context.WithoutCancel(ctx), s.ID)
	}
	return err
}

// setLevel serves logging/setLevel: it sets the session's minimum log
// level (2026-07-28 has no such method: a request carries its level).
func (ss *sessions) setLevel(rq *request, m *jsonrpc.Message) {
	var p struct {
		Level LogLevel `json:"level"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil || p.Level == "" {
		rq.fail(m.ID, invalidParams("Invalid params: level is required"))
		return
	}
	if _, ok := logLevels[p.Level]; !ok {
		rq.fail(m.ID, invalidParams("Invalid params: unknown log level "+quoteEcho(string(p.Level))))
		return
	}
	if rq.sess != nil {
		rq.sess.LogLevel = string(p.Level)
		if err := ss.store.Update(rq.ctx, rq.sess); err != nil {
			rq.storeFailed(m, err)
			return
		}
	}
	rq.reply(m.ID, emptyResult)
}
