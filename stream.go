package mcphandler

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcphandler/mcphandler/internal/ownerindex"
	"github.com/mcphandler/mcphandler/internal/sign"
	"github.com/mcphandler/mcphandler/session"
)

// errStreamClosed reports a message that could not be sent because the
// request's response is complete or the client went away.
var errStreamClosed = errors.New("mcphandler: response stream closed")

// Kinds of logged SSE events, the first byte of each log entry.
const (
	evPriming = 'P' // the priming event: an id and no data
	evMessage = 'M' // a notification or request before the response
	evFinal   = 'F' // the response: the stream is complete
)

// stream is the reply path of one HTTP request. A POST's stream starts as a
// plain JSON response and switches to Server-Sent Events the first time
// something must be sent before the final message; a GET's stream is SSE
// from the start. Every method is safe for concurrent use: a tool handler
// may report progress from its own goroutines.
//
// The events of a POST's SSE stream in a session are also appended to the
// store's event log (and published live), so that a client whose
// connection ended can resume the stream on any replica with a GET that
// carries Last-Event-ID.
type stream struct {
	mu     sync.Mutex // guards everything below
	w      http.ResponseWriter
	rc     http.ResponseController // by value: one allocation less per request
	sse    bool                    // the SSE header was written
	done   bool                    // the final message was written
	gone   bool                    // the connection ended or was closed: events are only logged
	noSSE  bool                    // a batch member: only the final JSON value may be sent
	id     string                  // stream id, the prefix of its event ids (lazy)
	seq    uint64
	prime  bool          // send a priming event (2025-11-25 sessions)
	retry  time.Duration // the retry field of the priming event
	status int           // HTTP status of a JSON final message
	quiet  bool          // the request was cancelled: send no final message
	chunk  bool          // HTTP/1.1: the SSE body is chunked
	h1     bool          // HTTP/1.x: the connection can be taken over
	// closing: the SSE header said "Connection: close", so that the client
	// sends no further request on the connection (see streamConn.end).
	closing bool
	// conn, once set, is the connection the stream took over from
	// net/http (detach.go): events go straight to it, and w and rc are
	// no longer used.
	conn *streamConn
	// sink, when set, takes every message instead of the HTTP response:
	// the legacy transport publishes them to the session's stream.
	sink func(msg []byte) error
	// log, when set, keeps the events for resumption; a session's POST
	// stream points it at logv (see setLog).
	log  *eventLog
	logv eventLog
	// caller, set by serveRequest, is the request whose caller the stream
	// re-checks (reauth.go); nil for a stream that is not a POST's
	// response (a GET's, a replica's that finishes a call it took over).
	caller *request
	watch  atomic.Pointer[callerWatch] // armed by the first wait (or a failure); nil until then
	mark   writerMark                  // of the entries this stream writes (sequence.go)
	// noIDs: a session's POST stream past its bound of logged streams
	// (stream_bound.go): its events carry no id, since none can be resumed.
	noIDs bool
}

// eventLog is where a session's POST streams keep their events. Each
// entry (the mark of its writer, see sequence.go, its kind, then the
// message) is signed for its log's key, and its live copy ("<seq>
// <entry>") for its channel, so that nothing but a replica can add an
// event a resumed stream would deliver, and a genuine one copied or moved
// is not delivered twice or out of order.
type eventLog struct {
	store   session.Store
	sid     string
	ttl     time.Duration
	mac     *sign.Signer
	streams *ownerindex.Index // bounds the session's logs (stream_bound.go)
}

// eventLog returns the event log of session sid's POST streams.
func (ss *streams) eventLog(sid string) *eventLog {
	return &eventLog{store: ss.cfg.Store, sid: sid, ttl: ss.cfg.Sessions.ResumeWindow, mac: ss.bus.macs.event, streams: ss.streamLogs}
}

// suppress drops the final message: the client cancelled the request.
func (s *stream) suppress() {
	s.mu.Lock()
	s.quiet = true
	s.mu.Unlock()
}

// chunked reports whether net/http frames the streamed body of a response
// to r in chunks: on HTTP/1.1 and later, when no length is set.
func chunked(r *http.Request) bool { return r.ProtoAtLeast(1, 1) }

func newStream(w http.ResponseWriter, prime bool, retry time.Duration) *stream {
	return &stream{w: w, rc: *http.NewResponseController(w), prime: prime, retry: retry, status: http.StatusOK}
}

// setLog makes s keep its events in session sid's event log, held in s
// itself: a request answered as JSON allocates nothing for a log it does
// not use.
func (s *stream) setLog(h *Handler, sid string) {
	s.logv = eventLog{store: h.cfg.Store, sid: sid, ttl: h.cfg.Sessions.ResumeWindow, mac: h.macs.event, streams: h.streamLogs}
	s.log = &s.logv
}

// streamID returns the stream's id (the prefix of its event ids), choosing
// it now if the stream has not started yet; "" for an unlogged stream.
func (s *stream) streamID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil {
		return ""
	}
	s.idLocked()
	if s.log == nil {
		return ""
	}
	return s.id
}

// idLocked chooses the stream's id if it has none. A logged stream is
// then counted against its session's bound (stream_bound.go): past it,
// it is not logged, and its events carry no id.
func (s *stream) idLocked() {
	if s.id != "" {
		return
	}
	var r [8]byte
	rand.Read(r[:])
	s.id = "p" + hex.EncodeToString(r[:])
	if s.log != nil && !s.log.admit(s.id) {
		s.log, s.prime, s.noIDs = nil, false, true
	}
}

// startSSELocked writes the event-stream header and, for clients that
// support polling, a priming event carrying an id and the retry delay.
func (s *stream) startSSELocked() error {
	s.idLocked() // before the header: it may take the priming event away
	setSSEHeaders(s.w)
	s.sse = true
	if s.prime {
		b := make([]byte, 0, 64)
		b = append(b, "id: "...)
		b = s.appendID(b, s.nextSeq(evPriming, nil))
		b = append(b, "\nretry: "...)
		b = strconv.AppendInt(b, s.retry.Milliseconds(), 10)
		b = append(b, "\ndata: \n\n"...)
		if _, err := s.w.Write(b); err != nil {
			return err
		}
	}
	return s.rc.Flush()
}

// nextSeq numbers the next event: by the store's log when the stream is
// logged (then the event is also published to resuming readers), else
// locally.
func (s *stream) nextSeq(kind byte, msg []byte) uint64 {
	if s.log == nil {
		s.seq++
		return s.seq
	}
	ctx := context.Background()
	entry := s.mark.appendNext(make([]byte, 0, markLen+1+len(msg)), time.Now())
	entry = append(append(entry, kind), msg...)
	key := eventKey(s.log.sid, s.id)
	seq, err := s.log.store.AppendEvent(ctx, key, s.log.mac.Sign(key, entry), s.log.ttl)
	if err != nil {
		s.seq++
		return s.seq
	}
	s.seq = seq
	live := strconv.AppendUint(nil, seq, 10)
	channel := eventChannel(s.log.sid, s.id)
	s.log.store.Publish(ctx, channel, s.log.mac.SignMessage(channel, time.Now(), append(append(live, ' '), entry...)))
	return seq
}

func (s *stream) appendID(b []byte, seq uint64) []byte {
	b = append(b, s.id...)
	b = append(b, '-')
	return strconv.AppendUint(b, seq, 10)
}

// appendEvent appends msg as one SSE event with the given id. A message
// that contains newlines is split over several data lines, which the
// reader joins back with newlines.
func appendEvent(b []byte, id []byte, msg []byte) []byte {
	if len(id) > 0 {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	for {
		i := bytes.IndexByte(msg, '\n')
		b = append(b, "data: "...)
		if i < 0 {
			b = append(b, bytes.TrimSuffix(msg, []byte{'\r'})...)
			break
		}
		b = append(b, bytes.TrimSuffix(msg[:i], []byte{'\r'})...)
		b = append(b, '\n')
		msg = msg[i+1:]
	}
	return append(b, "\n\n"...)
}

// writeEventLocked numbers msg, logs it if the stream is logged, and
// writes it unless the connection is gone.
func (s *stream) writeEventLocked(kind byte, msg []byte) error {
	seq := s.nextSeq(kind, msg)
	if s.gone {
		if s.log != nil {
			return nil // kept for the client's resume
		}
		return errStreamClosed
	}
	var id []byte
	if !s.noIDs {
		id = s.appendID(make([]byte, 0, 32), seq)
	}
	if err := s.outLocked(appendEvent(make([]byte, 0, len(msg)+48), id, msg)); err != nil {
		return s.lostLocked(err)
	}
	return nil
}

// outLocked writes b to the client and flushes it: through net/http, or
// straight to the connection once the stream took it over.
func (s *stream) outLocked(b []byte) error {
	if s.conn != nil {
		return s.conn.write(b)
	}
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}

// lostLocked records that the connection failed. A logged stream goes on
// in its log.
func (s *stream) lostLocked(err error) error {
	s.gone = true
	if s.log != nil {
		return nil
	}
	return err
}

// send writes a message that precedes the final one (a notification or a
// server-to-client request), switching the response to SSE if needed.
func (s *stream) send(msg []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || s.noSSE {
		return errStreamClosed
	}
	if s.sink != nil {
		return s.sink(msg)
	}
	if !s.sse {
		if err := s.startSSELocked(); err != nil {
			return s.lostLocked(err)
		}
	}
	return s.writeEventLocked(evMessage, msg)
}

// finish writes the final message: as the JSON body if nothing was sent
// before, else as the last event of the stream. A message whose caller
// fails the check of the final message (see stream.callerFailure) does
// not go: the stream ends with the failure instead.
func (s *stream) finish(msg []byte) error {
	f := s.callerFailure(false)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return errStreamClosed
	}
	if f != nil {
		s.loseLocked(f)
		return errStreamClosed
	}
	return s.finishLocked(msg, nil)
}

// finishLocked writes the final message msg; f, when the caller failed,
// gives the HTTP answer's status and headers.
func (s *stream) finishLocked(msg []byte, f *callerFailure) error {
	s.done = true
	if w := s.watch.Load(); w != nil {
		w.stopLocked()
	}
	if s.sink != nil {
		if s.quiet {
			return nil
		}
		return s.sink(msg)
	}
	if s.quiet {
		// A cancelled request gets no response: end an empty stream.
		if !s.sse {
			return s.startSSELocked()
		}
		return nil
	}
	if s.sse {
		return s.writeEventLocked(evFinal, msg)
	}
	h, status := s.w.Header(), 0
	if f != nil {
		// The request's goroutine may still set s.status: a failure found
		// by the watch's timer does not read it.
		f.setHeader(h)
		status = f.status
	} else {
		status = s.status
	}
	h[hdrContentType] = []string{"application/json"} // h.Set, without canonicalising the names
	h["Content-Length"] = []string{strconv.Itoa(len(msg))}
	s.w.WriteHeader(status)
	if _, err := s.w.Write(msg); err != nil {
		return err
	}
	// Flush now: OnCall and any other work after the answer must not
	// delay the client.
	return s.rc.Flush()
}

// closeConn ends the HTTP response now while the request goes on: the
// stream becomes SSE (with its priming event), the connection is taken
// over and closed, and later events are only logged for the client's
// resume. It needs a logged stream on HTTP/1.x.
//
// The connection is closed, not given back to net/http (the request goes
// on), so the client must not send another request on it. When the SSE
// header is still to be written, it says "Connection: close" and the body
// ends cleanly. When it went out before (something was sent first), it
// cannot say so any more: the body is left unterminated, which the client
// sees as a broken connection (one it resumes from, and never reuses),
// where a clean end would have let it send its next request on a
// connection being closed. See streamConn.end.
func (s *stream) closeConn() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log != nil && s.sink == nil && !s.noSSE && !s.done {
		s.idLocked() // a stream past its session's bound is not logged
	}
	if s.log == nil || s.sink != nil || s.noSSE || s.done {
		return errors.New("mcphandler: this stream cannot be resumed")
	}
	if s.gone {
		return nil
	}
	if !s.sse {
		if s.h1 {
			s.closeAfterLocked()
		}
		if err := s.startSSELocked(); err != nil {
			return s.lostLocked(err)
		}
	}
	c, _, err := s.hijackLocked(time.Second)
	if err != nil {
		return err
	}
	c.end()
	s.gone = true
	return nil
}

// hijackLocked takes the connection of s, whose SSE header went out, from
// net/http (see detach.go), framed as net/http framed the body: chunked
// unless the request is HTTP/1.0 or the header opted out with
// Transfer-Encoding: identity. It also returns what net/http had read of
// the connection past the request. Nothing may be written through s.w
// after it.
func (s *stream) hijackLocked(timeout time.Duration) (*streamConn, *bufio.Reader, error) {
	chunk := s.chunk && s.w.Header().Get("Transfer-Encoding") != "identity"
	conn, brw, err := s.rc.Hijack()
	if err != nil {
		return nil, nil, err
	}
	return &streamConn{c: conn, chunk: chunk, closing: s.closing, timeout: timeout}, brw.Reader, nil
}

// closeAfterLocked makes the header, still to be written, tell the client
// that the connection closes after this response ("Connection: close";
// HTTP/1.x only: HTTP/2 forbids the header). net/http closes it then too,
// if the stream is not taken over after all.
func (s *stream) closeAfterLocked() {
	s.w.Header().Set("Connection", "close")
	s.closing = true
}

// comment writes an SSE comment line, used as a keep-alive.
func (s *stream) comment() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || !s.sse || s.gone {
		return errStreamClosed
	}
	if err := s.outLocked([]byte(":\n\n")); err != nil {
		s.gone = true
		return err
	}
	return nil
}
