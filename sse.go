package mcphandler

import (
	"context"
	"net/http"
	"time"
)

// setSSEHeaders writes the header of an event stream (status 200). Every
// stream of the handler starts with it: a POST's response that switched to
// SSE, the session's GET stream, a resumed stream and the 2024-11-05
// stream.
func setSSEHeaders(w http.ResponseWriter) {
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	hdr.Del("Content-Length")
	w.WriteHeader(http.StatusOK)
}

// sseWriter writes events on a stream whose header went out, flushing each
// one. It is not safe for concurrent use: each long-lived stream has one
// goroutine, its loop (see runStream).
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// startSSE writes the event-stream header and returns the stream's writer.
func startSSE(w http.ResponseWriter) *sseWriter {
	setSSEHeaders(w)
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

// raw writes b and flushes it.
func (s *sseWriter) raw(b []byte) error {
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}

// event writes msg as one event named name ("" for the default "message"
// type) with the given id (none if empty).
func (s *sseWriter) event(name string, id, msg []byte) error {
	b := make([]byte, 0, len(msg)+len(id)+48)
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	return s.raw(appendEvent(b, id, msg))
}

// comment writes an SSE comment line, the keep-alive of every stream.
func (s *sseWriter) comment() error { return s.raw([]byte(":\n\n")) }

// streamLoop describes what a long-lived stream waits for. Each callback
// runs on the loop's goroutine; one that returns false ends the stream. A
// nil channel never fires.
type streamLoop struct {
	keepAlive func() bool // every Config.Sessions.KeepAlive

	poll   time.Duration // if > 0, onPoll runs this often
	onPoll func() bool

	msgs  <-chan []byte     // the stream's own messages; closed ends the stream
	onMsg func([]byte) bool //

	changes  <-chan *change     // published list and resource changes (watchChanges)
	onChange func(*change) bool //

	caller *callerCheck // checked every keep-alive and at its expiry; nil: none
}

// runStream is the one loop of every long-lived stream (the session's GET
// stream, a resumed POST stream, subscriptions/listen and the 2024-11-05
// stream). It returns when ctx ends, a channel closes, a callback returns
// false or the caller check fails (see callerCheck).
func (ss *streams) runStream(ctx context.Context, l *streamLoop) {
	tick := time.NewTicker(ss.cfg.Sessions.KeepAlive)
	defer tick.Stop()
	defer l.caller.stop()
	var poll <-chan time.Time
	if l.poll > 0 {
		t := time.NewTicker(l.poll)
		defer t.Stop()
		poll = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if !offStack(func() bool { return l.caller.recheck() && l.keepAlive() }) {
				return
			}
		case <-l.caller.expired():
			return
		case <-poll:
			if !offStack(l.onPoll) {
				return
			}
		case b, ok := <-l.msgs:
			if !ok || !offStack(func() bool { return l.onMsg(b) }) {
				return
			}
		case b, ok := <-l.changes:
			if !ok || !offStack(func() bool { return l.onChange(b) }) {
				return
			}
		}
	}
}

// subscribedFn reports, for changeMessage, whether session sid subscribed
// to a resource URI (read from the store each time: the subscription may
// have been made on another replica).
func (ss *streams) subscribedFn(ctx context.Context, sid string) func(uri string) bool {
	return func(uri string) bool {
		s, err := ss.cfg.Store.Get(ctx, sid)
		return err == nil && indexOf(s.Subscriptions, uri) >= 0
	}
}

// offStack runs f on a goroutine of its own and waits for it; a panic in f
// is raised again on the caller's goroutine. A goroutine's stack grows to
// the deepest call it made and stays that size while it is blocked: the
// calls of an event (the store's client, net/http's writes,
// Config.Authenticate) run here so that a stream's goroutine, which waits
// for the stream's life, keeps the stack of its wait (a few KB instead of
// 8 KB per open stream). It costs a goroutine start per event.
func offStack(f func() bool) bool {
	var ok bool
	var p any
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { p = recover() }()
		ok = f()
	}()
	<-done
	if p != nil {
		panic(p)
	}
	return ok
}
