package mcphandler

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"time"
)

// A session's GET stream lives as long as its client stays, doing nothing
// most of the time. Kept on its HTTP request, an open stream holds all
// that net/http keeps for a request in progress: the connection's 4 KB
// read and write buffers, the response's 2 KB buffer, the request and
// response, the request's goroutine and the goroutine net/http reads the
// connection with, about 27 KB in all. On HTTP/1.x the handler instead
// takes the connection over (http.Hijacker) once the stream's header is
// out, and lets net/http return: what stays is the connection, the
// request (for Config.Authenticate to run again), the stream's own state,
// the stream's loop and one goroutine that waits to read the connection,
// which tells when the client leaves.
//
// The request is served on a goroutine of its own (the stream's), and the
// request's goroutine waits until the stream took the connection over or
// the request was answered. Config.Interceptors run on the stream's
// goroutine: they see the stream from its start to its end, as before.
// Config.Sessions.KeepStreamRequests turns this off.

// handoff is the http.ResponseWriter the GET request is served with while
// it may hand its connection over. It passes everything on to the
// response, and lets go of it once the stream took the connection over, so
// that the interceptors' closures, which hold the handoff, do not keep the
// response and its buffers alive.
type handoff struct {
	w        http.ResponseWriter // nil once detached
	released chan struct{}       // closed when the request's goroutine may return
	once     sync.Once
	detached bool // the stream owns the connection (set before released closes)
	panicked any  // a panic on the stream's goroutine before it detached

	// Set by detachable: the end of the stream's context, and what stops
	// the request's end from ending it.
	cancel context.CancelFunc
	unlink func() bool
}

func (d *handoff) Header() http.Header         { return d.w.Header() }
func (d *handoff) Write(b []byte) (int, error) { return d.w.Write(b) }
func (d *handoff) WriteHeader(code int)        { d.w.WriteHeader(code) }

// Unwrap lets http.ResponseController reach the response.
func (d *handoff) Unwrap() http.ResponseWriter { return d.w }

func (d *handoff) release() { d.once.Do(func() { close(d.released) }) }

// serveGETRequest serves a GET: on its own goroutine when its connection
// can be taken over (HTTP/1.x), else on the request's.
func (ss *sessions) serveGETRequest(w http.ResponseWriter, r *http.Request) {
	if ss.cfg.Sessions.KeepStreamRequests || r.ProtoMajor != 1 {
		ss.h.interceptHTTP(w, r, KindStream, ss.serveGET) // Config.Interceptors (intercept.go)
		return
	}
	// Watch the server's Shutdown before the stream's header goes out: a
	// Shutdown that begins once the client may have seen it must end the
	// stream, whenever it takes its connection over.
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	ss.detached.watch(srv)
	d := &handoff{w: w, released: make(chan struct{})}
	go func() {
		defer d.release()
		defer func() {
			if p := recover(); p != nil {
				if !d.detached {
					d.panicked = p // raised again on the request's goroutine
					return
				}
				ss.cfg.Logger.Error("mcphandler: panic on a GET stream", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			}
		}()
		ss.h.interceptHTTP(d, r, KindStream, ss.serveGET)
	}()
	<-d.released
	if d.panicked != nil {
		panic(d.panicked)
	}
}

// streamConn is a connection a stream took over: it writes each event as
// one chunk of the response's body (when the response is chunked), with a
// deadline.
type streamConn struct {
	c       net.Conn
	chunk   bool          // HTTP/1.1: frame each write as a chunk
	closing bool          // the header said "Connection: close"
	timeout time.Duration // a write that cannot complete in it fails
}

// write writes b, which must not be empty (an empty chunk ends the body).
func (c *streamConn) write(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	c.c.SetWriteDeadline(time.Now().Add(c.timeout))
	if !c.chunk {
		_, err := c.c.Write(b)
		return err
	}
	buf := make([]byte, 0, len(b)+20)
	buf = strconv.AppendUint(buf, uint64(len(b)), 16)
	buf = append(buf, "\r\n"...)
	buf = append(buf, b...)
	buf = append(buf, "\r\n"...)
	_, err := c.c.Write(buf)
	return err
}

// end closes the connection, ending a chunked body with its last chunk
// only if the header told the client the connection would close
// ("Connection: close"). A client reuses a connection whose response ended
// cleanly unless told otherwise: a clean end without that header would
// have it send its next request on a connection being closed, a request
// lost. Left unterminated, the body is a broken connection to the client,
// which it never reuses. (A close-delimited body, HTTP/1.0, ends with the
// connection either way.)
func (c *streamConn) end() {
	if c.chunk && c.closing {
		c.c.SetWriteDeadline(time.Now().Add(time.Second))
		c.c.Write([]byte("0\r\n\r\n"))
	}
	c.c.Close()
}

// detachable returns r with a context of the stream's own, which ends
// with the request until the stream takes the connection over (see
// takeOver), or when d.cancel is called. It keeps r's values.
func (d *handoff) detachable(r *http.Request) *http.Request {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	d.cancel, d.unlink = cancel, context.AfterFunc(r.Context(), cancel)
	return r.WithContext(ctx)
}

// takeOver takes st's connection from net/http and lets the request's
// goroutine return. From then on st writes to the connection, a goroutine
// reads it to cancel the stream when the client leaves (or sends anything:
// nothing may follow a GET whose response never ends), and Handler.Close
// and the http.Server's Shutdown cancel it. It returns what ends the
// connection once the stream is over, or nil if net/http keeps the
// connection (HTTP/2, a ResponseWriter that cannot be hijacked): the
// stream then stays on its request.
func (ss *sessions) takeOver(d *handoff, r *http.Request, st *stream) func() {
	st.mu.Lock()
	defer st.mu.Unlock()
	c, buffered, err := st.hijackLocked(ss.cfg.Sessions.KeepAlive)
	if err != nil {
		return nil
	}
	cancel := d.cancel
	st.conn = c
	st.w, st.rc = nil, http.ResponseController{} // let the response and its buffers go
	d.unlink()                                   // the request's end no longer ends the stream
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	reg := ss.detached.add(srv, cancel)
	if buffered.Buffered() > 0 {
		cancel()
	}
	go func() {
		var b [1]byte
		c.c.Read(b[:]) // the client left, or sent what a stream cannot take
		cancel()
	}()
	d.w, d.detached = nil, true
	d.release()
	return func() {
		st.mu.Lock()
		st.gone = true
		st.conn.end()
		st.mu.Unlock()
		ss.detached.remove(reg)
	}
}

// detachedStreams are the streams that took their connection over, which
// net/http neither closes nor waits for: Handler.Close ends them all, an
// http.Server's Shutdown those it served.
type detachedStreams struct {
	mu      sync.Mutex
	closed  bool
	streams map[*detachedStream]struct{}
	// servers are those whose Shutdown ends their streams, each true once
	// its Shutdown began; kept (a handler is mounted on few).
	servers map[*http.Server]bool
	wg      sync.WaitGroup
}

type detachedStream struct {
	srv    *http.Server
	cancel context.CancelFunc
}

// watch makes srv's Shutdown end the streams taken from it, those that
// take their connection over after it began included. An http.Server runs
// its Shutdown hooks once, when Shutdown begins, so srv must be watched
// before a stream of it may be seen by its client: a GET is, before it is
// served.
func (ds *detachedStreams) watch(srv *http.Server) {
	if srv == nil {
		return
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if _, ok := ds.servers[srv]; ok {
		return
	}
	if ds.servers == nil {
		ds.servers = make(map[*http.Server]bool)
	}
	ds.servers[srv] = false
	srv.RegisterOnShutdown(func() {
		ds.mu.Lock()
		ds.servers[srv] = true
		ds.mu.Unlock()
		ds.cancel(srv)
	})
}

// add registers a stream of srv (nil if unknown) ended by cancel; after
// close, or once srv's Shutdown began, it cancels the stream and returns
// nil.
func (ds *detachedStreams) add(srv *http.Server, cancel context.CancelFunc) *detachedStream {
	s := &detachedStream{srv: srv, cancel: cancel}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.closed || srv != nil && ds.servers[srv] {
		cancel()
		return nil
	}
	ds.wg.Add(1)
	if ds.streams == nil {
		ds.streams = make(map[*detachedStream]struct{})
	}
	ds.streams[s] = struct{}{}
	return s
}

func (ds *detachedStreams) remove(s *detachedStream) {
	if s == nil {
		return
	}
	ds.mu.Lock()
	delete(ds.streams, s)
	ds.mu.Unlock()
	ds.wg.Done()
}

// cancel ends the streams of srv, or all of them if srv is nil.
func (ds *detachedStreams) cancel(srv *http.Server) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	for s := range ds.streams {
		if srv == nil || s.srv == srv {
			s.cancel()
		}
	}
}

// close ends every stream, and those that detach later, and waits until
// they are over.
func (ds *detachedStreams) close() {
	ds.mu.Lock()
	ds.closed = true
	ds.mu.Unlock()
	ds.cancel(nil)
	ds.wg.Wait()
}
