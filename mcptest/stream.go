package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
)

// newStream returns a stream over the SSE body of resp; the caller starts
// its goroutine with go s.run() once it has registered it. release is called
// when run returns.
func newStream(ctx context.Context, cancel context.CancelFunc, resp *http.Response, lastEventID string, reqID json.RawMessage, release func(*Stream)) *Stream {
	return &Stream{
		ctx:     ctx,
		resp:    resp,
		cancel:  cancel,
		items:   make(chan Event),
		done:    make(chan struct{}),
		exited:  make(chan struct{}),
		lastID:  lastEventID,
		reqID:   reqID,
		release: release,
	}
}

// Stream is an open SSE stream: the GET stream of a [Sessions] client
// ([Client.OpenStream], [Client.Resume]), or the response stream of a
// [Stateless] subscriptions/listen request ([Client.Listen]). It is safe
// for concurrent use.
type Stream struct {
	release func(*Stream)   // called when run returns
	reqID   json.RawMessage // id of the request the stream answers, if any
	ctx     context.Context // the stream's context: the caller's, plus cancel
	resp    *http.Response
	cancel  context.CancelFunc
	items   chan Event
	done    chan struct{} // closed by Close
	exited  chan struct{} // closed when run returns
	once    sync.Once

	mu       sync.Mutex
	lastID   string
	err      error // terminal error, set by run before it closes items
	final    Event // partial event that came with ErrIncompleteEvent
	hasFinal bool
}

// run reads events and hands them to Next until the body ends, the stream
// is closed or its context ends. It never waits to hand over the terminal
// error: that is left in s.err for Next.
func (s *Stream) run() {
	// In reverse order: items, then the owner's registration, then exited,
	// so that whoever waits for exited sees the stream deregistered.
	defer close(s.exited)
	defer s.release(s)
	defer close(s.items)
	r := NewSSEReader(s.resp.Body)
	for {
		ev, err := r.Next()
		if err != nil {
			s.mu.Lock()
			s.err = err
			if errors.Is(err, ErrIncompleteEvent) {
				s.final, s.hasFinal = ev, true
			}
			s.mu.Unlock()
			return
		}
		select {
		case s.items <- ev:
		case <-s.done:
			return
		case <-s.ctx.Done():
			s.mu.Lock()
			s.err = s.ctx.Err()
			s.mu.Unlock()
			return
		}
	}
}

// Header returns the header of the HTTP response that opened the stream.
func (s *Stream) Header() http.Header { return s.resp.Header }

// RequestID returns the JSON-RPC id of the request whose response the
// stream is (the subscriptions/listen request of [Client.Listen]), or nil
// for a GET stream.
func (s *Stream) RequestID() json.RawMessage { return s.reqID }

// LastEventID returns the id of the last event with an id that Next
// returned (or the id the stream was resumed from), for [Client.Resume].
func (s *Stream) LastEventID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastID
}

// Next waits for the next event. It returns io.EOF when the server ended
// the stream, [ErrIncompleteEvent] (with the partial event) if it ended
// inside an event, ctx.Err() if ctx ends first (the stream stays usable),
// and [ErrStreamClosed] after Close. Once the stream has ended, every call
// returns the same error.
//
// Next does not answer server requests; pass them to
// [Client.HandleRequest] or answer them with [Client.Respond].
func (s *Stream) Next(ctx context.Context) (Event, error) {
	select {
	case <-s.done:
		return Event{}, ErrStreamClosed
	default:
	}
	select {
	case <-s.done:
		return Event{}, ErrStreamClosed
	case <-ctx.Done():
		return Event{}, ctx.Err()
	case ev, ok := <-s.items:
		s.mu.Lock()
		defer s.mu.Unlock()
		if !ok {
			if s.hasFinal {
				ev, s.hasFinal = s.final, false
			}
			if ev.HasID {
				s.lastID = ev.ID
			}
			return ev, s.err
		}
		if ev.HasID {
			s.lastID = ev.ID
		}
		return ev, nil
	}
}

// Close ends the stream and waits for its reading goroutine to finish. It
// is safe to call more than once.
func (s *Stream) Close() error {
	s.once.Do(func() {
		close(s.done)
		s.cancel()
		s.resp.Body.Close()
		<-s.exited
	})
	return nil
}
