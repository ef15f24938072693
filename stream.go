package mcphandler

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// errStreamClosed reports a message that could not be sent because the
// request's response is complete or the client went away.
var errStreamClosed = errors.New("mcphandler: response stream closed")

// stream is the reply path of one HTTP request. A POST's stream starts as a
// plain JSON response and switches to Server-Sent Events the first time
// something must be sent before the final message; a GET's stream is SSE
// from the start. Every method is safe for concurrent use: a tool handler
// may report progress from its own goroutines.
type stream struct {
	mu     sync.Mutex // guards everything below
	w      http.ResponseWriter
	rc     *http.ResponseController
	sse    bool   // the SSE header was written
	done   bool   // the final message was written, or writing failed
	noSSE  bool   // a batch member: only the final JSON value may be sent
	id     string // stream id, the prefix of its event ids (lazy)
	seq    uint64
	prime  bool          // send a priming event (2025-11-25 clients)
	retry  time.Duration // the retry field of the priming event
	status int           // HTTP status of a JSON final message
	quiet  bool          // the request was cancelled: send no final message
}

// suppress drops the final message: the client cancelled the request.
func (s *stream) suppress() {
	s.mu.Lock()
	s.quiet = true
	s.mu.Unlock()
}

func newStream(w http.ResponseWriter, prime bool, retry time.Duration) *stream {
	return &stream{w: w, rc: http.NewResponseController(w), prime: prime, retry: retry, status: http.StatusOK}
}

// startSSELocked writes the event-stream header and, for clients that
// support polling, a priming event carrying an id and the retry delay.
func (s *stream) startSSELocked() error {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Del("Content-Length")
	s.w.WriteHeader(http.StatusOK)
	s.sse = true
	if s.prime {
		b := make([]byte, 0, 64)
		b = append(b, "id: "...)
		b = s.appendNextID(b)
		b = append(b, "\nretry: "...)
		b = strconv.AppendInt(b, s.retry.Milliseconds(), 10)
		b = append(b, "\ndata: \n\n"...)
		if _, err := s.w.Write(b); err != nil {
			return err
		}
	}
	return s.rc.Flush()
}

func (s *stream) appendNextID(b []byte) []byte {
	if s.id == "" {
		var r [8]byte
		rand.Read(r[:])
		s.id = hex.EncodeToString(r[:])
	}
	s.seq++
	b = append(b, s.id...)
	b = append(b, '-')
	return strconv.AppendUint(b, s.seq, 10)
}

// writeEventLocked writes msg as one SSE event with an id. A message that
// contains newlines is split over several data lines, which the reader
// joins back with newlines.
func (s *stream) writeEventLocked(msg []byte) error {
	b := make([]byte, 0, len(msg)+48)
	b = append(b, "id: "...)
	b = s.appendNextID(b)
	b = append(b, '\n')
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
	b = append(b, "\n\n"...)
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}

// send writes a message that precedes the final one (a notification or a
// server-to-client request), switching the response to SSE if needed.
func (s *stream) send(msg []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || s.noSSE {
		return errStreamClosed
	}
	if !s.sse {
		if err := s.startSSELocked(); err != nil {
			s.done = true
			return err
		}
	}
	if err := s.writeEventLocked(msg); err != nil {
		s.done = true
		return err
	}
	return nil
}

// finish writes the final message: as the JSON body if nothing was sent
// before, else as the last event of the stream.
func (s *stream) finish(msg []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return errStreamClosed
	}
	s.done = true
	if s.quiet {
		// A cancelled request gets no response: end an empty stream.
		if !s.sse {
			return s.startSSELocked()
		}
		return nil
	}
	if s.sse {
		return s.writeEventLocked(msg)
	}
	h := s.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(msg)))
	s.w.WriteHeader(s.status)
	if _, err := s.w.Write(msg); err != nil {
		return err
	}
	// Flush now: OnCall and any other work after the answer must not
	// delay the client.
	return s.rc.Flush()
}

// closed reports whether nothing more can be sent.
func (s *stream) closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// comment writes an SSE comment line, used as a keep-alive.
func (s *stream) comment() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || !s.sse {
		return errStreamClosed
	}
	if _, err := s.w.Write([]byte(":\n\n")); err != nil {
		s.done = true
		return err
	}
	return s.rc.Flush()
}
