package mcphandler_test

// A session's GET stream on HTTP/1.x takes its connection over from
// net/http (detach.go). These tests hold the promises that change brings
// from the client's side of a raw connection: the body stays valid HTTP,
// the client's leaving (or misbehaving, or not reading) ends the stream
// and frees its claim at once, Handler.Close and the server's Shutdown end
// it cleanly, and the interceptors still see the whole stream.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/session"
)

// rawStream is a GET stream read from a raw connection.
type rawStream struct {
	c    net.Conn
	resp *http.Response
	body *bufio.Reader
}

// openRaw sends a GET for session sid over a new connection to addr with
// the given protocol ("HTTP/1.1", "HTTP/1.0") and returns the stream, or
// the response if its status is not 200.
func openRaw(t *testing.T, addr, sid, token, proto string) *rawStream {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET / %s\r\nHost: %s\r\nAccept: text/event-stream\r\nAuthorization: Bearer %s\r\n"+
		"Mcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-06-18\r\n\r\n", proto, addr, token, sid)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "GET"})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Time{})
	return &rawStream{c: c, resp: resp, body: bufio.NewReader(resp.Body)}
}

// until reads the body until a line containing want, within d.
func (s *rawStream) until(want string, d time.Duration) error {
	s.c.SetReadDeadline(time.Now().Add(d))
	defer s.c.SetReadDeadline(time.Time{})
	for {
		line, err := s.body.ReadString('\n')
		if strings.Contains(line, want) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// end reads the body to its end within d and reports how it ended: nil
// for a well-formed end (the last chunk, or the connection closed for an
// unchunked body).
func (s *rawStream) end(d time.Duration) error {
	s.c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, s.body)
	return err
}

// streamOn serves h, opens a session of acme-viewer and its GET stream
// on HTTP/1.1, and returns the server's address, the session and the
// stream.
func streamOn(t *testing.T, h *mcphandler.Handler) (addr, sid string, s *rawStream) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	addr = srv.Listener.Addr().String()
	sid = rawSession(t, srv.Client(), srv.URL, "acme-viewer")
	if s = openRaw(t, addr, sid, "acme-viewer", "HTTP/1.1"); s.resp.StatusCode != 200 {
		t.Fatalf("GET: %d", s.resp.StatusCode)
	}
	return addr, sid, s
}

// claimFree reports whether a new GET stream for sid can be opened within
// d, retrying while the session's stream is still claimed (409).
func claimFree(t *testing.T, addr, sid, token string, d time.Duration) bool {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		s := openRaw(t, addr, sid, token, "HTTP/1.1")
		if s.resp.StatusCode == 200 {
			s.c.Close()
			return true
		}
		s.c.Close()
		if s.resp.StatusCode != http.StatusConflict {
			t.Fatalf("GET: %d, want 200 or 409", s.resp.StatusCode)
		}
	}
	return false
}

// The stream's body stays valid HTTP after the handler took the
// connection: chunked on HTTP/1.1 (keep-alives and events are chunks, and
// the end of the session ends the body with its last chunk, which
// io.Copy through net/http's reader reports as a clean end), close-delimited on
// HTTP/1.0.
func TestDetachedStreamIsValidHTTP(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/1.0"} {
		t.Run(proto, func(t *testing.T) {
			h := detachHost(t, 50*time.Millisecond)
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			addr := srv.Listener.Addr().String()
			sid := rawSession(t, srv.Client(), srv.URL, "acme-viewer")
			s := openRaw(t, addr, sid, "acme-viewer", proto)
			if s.resp.StatusCode != 200 || s.resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("GET: %d %q", s.resp.StatusCode, s.resp.Header.Get("Content-Type"))
			}
			if chunked := len(s.resp.TransferEncoding) == 1 && s.resp.TransferEncoding[0] == "chunked"; chunked != (proto == "HTTP/1.1") {
				t.Fatalf("%s: Transfer-Encoding %q", proto, s.resp.TransferEncoding)
			}
			// Keep-alives, a few of them, then an event.
			for range 3 {
				if err := s.until(":", time.Second); err != nil {
					t.Fatalf("keep-alive: %v", err)
				}
			}
			if err := h.NotifyToolsChanged(context.Background(), mcphandler.TenantOf("acme")); err != nil {
				t.Fatal(err)
			}
			if err := s.until("notifications/tools/list_changed", 2*time.Second); err != nil {
				t.Fatalf("notification: %v", err)
			}
			req, _ := http.NewRequest("DELETE", srv.URL, nil)
			req.Header.Set("Authorization", "Bearer acme-viewer")
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
			resp, err := srv.Client().Do(req)
			if err != nil || resp.StatusCode != http.StatusNoContent {
				t.Fatalf("DELETE: %v %v", resp, err)
			}
			resp.Body.Close()
			if err := s.end(2 * time.Second); err != nil {
				t.Fatalf("the stream of a deleted session did not end cleanly: %v", err)
			}
		})
	}
}

// notifying notifies tenant acme's sessions that their tools changed,
// pausing for pause after each, until the returned stop is called.
func notifying(h *mcphandler.Handler, pause time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			h.NotifyToolsChanged(context.Background(), mcphandler.TenantOf("acme"))
			time.Sleep(pause)
		}
	})
	return func() { close(done); wg.Wait() }
}

// The client leaves, by closing its connection or by half-closing it,
// right after the header, after events, or while events are being sent.
// The stream's claim on the session must be freed at once, not when it
// lapses (KeepAlive is an hour here), so that the client's next GET is not
// refused.
func TestDetachedStreamClientLeaves(t *testing.T) {
	for _, tc := range []struct {
		name  string
		leave func(s *rawStream)
		busy  bool // notifications are sent while the client leaves
	}{
		{"close after the header", func(s *rawStream) { s.c.Close() }, false},
		{"close-write after the header", func(s *rawStream) { s.c.(*net.TCPConn).CloseWrite() }, false},
		{"close after an event", func(s *rawStream) { s.until("list_changed", 2*time.Second); s.c.Close() }, true},
		{"reset while events are sent", func(s *rawStream) { s.c.(*net.TCPConn).SetLinger(0); s.c.Close() }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := detachHost(t, time.Hour)
			addr, sid, s := streamOn(t, h)
			stop := func() {}
			if tc.busy {
				stop = notifying(h, time.Millisecond)
			}
			tc.leave(s)
			ok := claimFree(t, addr, sid, "acme-viewer", 3*time.Second)
			stop()
			if !ok {
				t.Fatal("the session's stream stayed claimed after its client left")
			}
		})
	}
}

// The client sends bytes after its GET: a pipelined request, or a flood.
// Nothing may follow a request whose response never ends, so the stream
// ends (its claim freed) and the handler reads no more of it.
func TestDetachedStreamClientSends(t *testing.T) {
	for _, tc := range []struct {
		name string
		send []byte
	}{
		{"pipelined request", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"one byte", []byte("x")},
		{"a MiB", make([]byte, 1<<20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := detachHost(t, time.Hour)
			addr, sid, s := streamOn(t, h)
			go s.c.Write(tc.send) // blocks once the server stops reading
			if err := s.end(3 * time.Second); err != nil {
				t.Fatalf("the stream did not end cleanly: %v", err)
			}
			if !claimFree(t, addr, sid, "acme-viewer", 3*time.Second) {
				t.Fatal("the session's stream stayed claimed")
			}
		})
	}
}

// smallBuffers accepts connections with a small send buffer, so that a
// client that stops reading blocks the server's writes after a few KB.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// The client keeps its connection open but stops reading while
// notifications keep coming: the server's writes block. A write that
// cannot complete within KeepAlive ends the stream and frees its claim;
// without that deadline the stream, its goroutines and its claim would be
// held for as long as the client wished.
func TestDetachedStreamClientStopsReading(t *testing.T) {
	const keepAlive = 300 * time.Millisecond
	h := detachHost(t, keepAlive)
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	sid := rawSession(t, srv.Client(), srv.URL, "acme-viewer")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nAuthorization: Bearer acme-viewer\r\n"+
		"Mcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-06-18\r\n\r\n", addr, sid)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReaderSize(c, 16), &http.Request{Method: "GET"}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET: %v %v", resp, err)
	}
	if s := openRaw(t, addr, sid, "acme-viewer", "HTTP/1.1"); s.resp.StatusCode != http.StatusConflict {
		t.Fatalf("a second GET while the stream is open: %d, want 409", s.resp.StatusCode)
	}
	// Read no more. Notify until the server's writes block and its
	// stream ends, which frees the claim.
	stop := notifying(h, 0)
	ok := claimFree(t, addr, sid, "acme-viewer", 10*time.Second)
	stop()
	if !ok {
		t.Fatal("a client that stopped reading kept its stream claimed for 10s")
	}
}

// Handler.Close ends every stream that took its connection over (net/http
// does not know them any more), cleanly, and returns once they are over.
// A stream opened after Close ends at once.
func TestDetachedStreamsEndOnClose(t *testing.T) {
	h := detachHost(t, time.Hour)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	var streams []*rawStream
	for _, tok := range []string{"acme-viewer", "acme-admin", "globex-editor"} {
		s := openRaw(t, addr, rawSession(t, srv.Client(), srv.URL, tok), tok, "HTTP/1.1")
		if s.resp.StatusCode != 200 {
			t.Fatalf("GET: %d", s.resp.StatusCode)
		}
		streams = append(streams, s)
	}
	later := rawSession(t, srv.Client(), srv.URL, "acme-viewer")
	h.Close()
	for i, s := range streams {
		if err := s.end(time.Second); err != nil {
			t.Fatalf("stream %d after Close: %v", i, err)
		}
	}
	s := openRaw(t, addr, later, "acme-viewer", "HTTP/1.1")
	if s.resp.StatusCode == 200 {
		if err := s.end(time.Second); err != nil {
			t.Fatalf("stream opened after Close: %v", err)
		}
	}
}

// An http.Server's Shutdown ends the streams the handler took from that
// server, cleanly, and does not wait for them; a stream the same handler
// serves for another server stays open.
func TestDetachedStreamsEndOnShutdown(t *testing.T) {
	h := detachHost(t, time.Hour)
	one, two := httptest.NewServer(h), httptest.NewServer(h)
	t.Cleanup(two.Close)
	s1 := openRaw(t, one.Listener.Addr().String(), rawSession(t, one.Client(), one.URL, "acme-viewer"), "acme-viewer", "HTTP/1.1")
	s2 := openRaw(t, two.Listener.Addr().String(), rawSession(t, two.Client(), two.URL, "acme-admin"), "acme-admin", "HTTP/1.1")
	if s1.resp.StatusCode != 200 || s2.resp.StatusCode != 200 {
		t.Fatalf("GET: %d, %d", s1.resp.StatusCode, s2.resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := one.Config.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := s1.end(2 * time.Second); err != nil {
		t.Fatalf("the stream of the server shut down: %v", err)
	}
	if err := h.NotifyToolsChanged(context.Background(), mcphandler.TenantOf("acme")); err != nil {
		t.Fatal(err)
	}
	if err := s2.until("list_changed", 2*time.Second); err != nil {
		t.Fatalf("the other server's stream: %v", err)
	}
}

// The server's Shutdown begins at every instant around the one its first
// stream takes its connection over: just as the client sees the header
// (the stream may not have taken the connection yet, and no stream of that
// server is known), or a little later. An http.Server runs its Shutdown
// hooks once, when Shutdown begins: a stream that detaches after that
// must still end, at once, not when its client or session does.
func TestDetachedStreamShutdownAroundTakeOver(t *testing.T) {
	for _, delay := range []time.Duration{0, 5 * time.Microsecond, 10 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond, time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			for range 15 {
				h := detachHost(t, time.Hour)
				srv := httptest.NewServer(h)
				sid := rawSession(t, srv.Client(), srv.URL, "acme-viewer")
				s := openRaw(t, srv.Listener.Addr().String(), sid, "acme-viewer", "HTTP/1.1")
				if s.resp.StatusCode != 200 {
					t.Fatalf("GET: %d", s.resp.StatusCode)
				}
				time.Sleep(delay)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := srv.Config.Shutdown(ctx)
				cancel()
				if err != nil {
					t.Fatalf("Shutdown: %v", err)
				}
				if err := s.end(2 * time.Second); err != nil {
					t.Fatalf("the stream of a server shut down %v after its header: %v", delay, err)
				}
				srv.Close()
			}
		})
	}
}

// inFlight counts the requests whose ServeHTTP has not returned.
type inFlight struct {
	h http.Handler
	n atomic.Int64
}

func (f *inFlight) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.n.Add(1)
	defer f.n.Add(-1)
	f.h.ServeHTTP(w, r)
}

// opaque hides the ResponseWriter's other interfaces but Flush, as some
// middleware does: the stream cannot take the connection and stays on its
// request.
type opaque struct{ http.ResponseWriter }

func (o opaque) Flush() { o.ResponseWriter.(http.Flusher).Flush() }

// Whether the stream took its connection: a detached stream's request
// returns at once, while the interceptors still see the stream from its
// start to its end; with KeepStreamRequests, on HTTP/2, and behind a
// ResponseWriter that cannot be hijacked, the request stays in progress.
// Every way, the stream works: events arrive and it ends with its session.
func TestDetachedStreamWhen(t *testing.T) {
	for _, tc := range []struct {
		name     string
		keep     bool
		http2    bool
		wrap     bool
		detached bool
	}{
		{"HTTP/1.1", false, false, false, true},
		{"KeepStreamRequests", true, false, false, false},
		{"HTTP/2", false, true, false, false},
		{"ResponseWriter without Hijack", false, false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ended atomic.Int64 // GET streams the interceptor saw end
			h := detachHost(t, time.Hour, func(c *mcphandler.Config) {
				c.Sessions.KeepStreamRequests = tc.keep
				c.Interceptors = []mcphandler.Interceptor{func(ctx context.Context, req *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
					res := next(ctx)
					if req.Kind == mcphandler.KindStream {
						ended.Add(1)
					}
					return res
				}}
			})
			f := &inFlight{h: h}
			var hh http.Handler = f
			if tc.wrap {
				hh = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.ServeHTTP(opaque{w}, r) })
			}
			srv := httptest.NewUnstartedServer(hh)
			if tc.http2 {
				srv.EnableHTTP2 = true
				srv.StartTLS()
			} else {
				srv.Start()
			}
			t.Cleanup(srv.Close)
			hc := srv.Client()
			sid := rawSession(t, hc, srv.URL, "acme-viewer")
			req, _ := http.NewRequest("GET", srv.URL, nil)
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Authorization", "Bearer acme-viewer")
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
			resp, err := hc.Do(req)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("GET: %v %v", resp, err)
			}
			defer resp.Body.Close()
			if tc.http2 != (resp.ProtoMajor == 2) {
				t.Fatalf("served over %s", resp.Proto)
			}
			// A stream that may take its connection over says that the
			// connection closes with it (a ResponseWriter that cannot be
			// hijacked is found out only after the header); one kept on its
			// request leaves the connection to net/http, which reuses it.
			// HTTP/2 has no Connection header.
			if mayDetach := !tc.keep && !tc.http2; resp.Close != mayDetach || tc.http2 && resp.Header.Get("Connection") != "" {
				t.Fatalf("Connection %q (close %v), want close %v", resp.Header.Get("Connection"), resp.Close, mayDetach)
			}
			// A detached stream's request returns once the stream took the
			// connection, just after its header went out: wait for it.
			want := map[bool]int64{true: 0, false: 1}[tc.detached]
			for deadline := time.Now().Add(2 * time.Second); f.n.Load() != want && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond)
			if got := f.n.Load(); got != want {
				t.Fatalf("%d requests in progress while the stream is open, want %d", got, want)
			}
			if ended.Load() != 0 {
				t.Fatal("the interceptor saw the open stream end")
			}
			if err := h.NotifyToolsChanged(context.Background(), mcphandler.TenantOf("acme")); err != nil {
				t.Fatal(err)
			}
			body := bufio.NewReader(resp.Body)
			for {
				line, err := body.ReadString('\n')
				if err != nil {
					t.Fatalf("no notification: %v", err)
				}
				if strings.Contains(line, "list_changed") {
					break
				}
			}
			del, _ := http.NewRequest("DELETE", srv.URL, nil)
			del.Header = req.Header.Clone()
			del.Header.Del("Accept")
			if r, err := hc.Do(del); err != nil || r.StatusCode != http.StatusNoContent {
				t.Fatalf("DELETE: %v %v", r, err)
			}
			if _, err := io.Copy(io.Discard, body); err != nil && !(tc.http2 && errors.Is(err, io.EOF)) {
				t.Fatalf("the stream did not end cleanly: %v", err)
			}
			for deadline := time.Now().Add(2 * time.Second); ended.Load() == 0 && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			if ended.Load() != 1 {
				t.Fatal("the interceptor did not see the stream end")
			}
		})
	}
}

// The client hangs up at every instant around the one the stream takes its
// connection over (just after its header went out): before, the request's
// end must end the stream; after, the connection's reader must. Either way
// the claim is freed at once (KeepAlive is an hour).
func TestDetachedStreamHangUpAroundTakeOver(t *testing.T) {
	for _, delay := range []time.Duration{0, 10 * time.Microsecond, 100 * time.Microsecond, time.Millisecond, 5 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			h := detachHost(t, time.Hour)
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			addr := srv.Listener.Addr().String()
			sid := rawSession(t, srv.Client(), srv.URL, "acme-viewer")
			for range 10 {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nAuthorization: Bearer acme-viewer\r\n"+
					"Mcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-06-18\r\n\r\n", addr, sid)
				// Hang up once the first byte of the answer arrives, after delay.
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				c.Read(make([]byte, 1))
				time.Sleep(delay)
				c.Close()
				if !claimFree(t, addr, sid, "acme-viewer", 3*time.Second) {
					t.Fatalf("the claim stayed after a hang-up %v after the header", delay)
				}
			}
		})
	}
}

// Handler.Close runs while streams are opening: each stream either ends
// cleanly once it took its connection or never detaches, Close returns,
// and no stream's goroutine outlives it (goleak, in TestMain, checks the
// rest).
func TestDetachedStreamsCloseWhileOpening(t *testing.T) {
	h := detachHost(t, time.Hour)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	const n = 12
	sids := make([]string, n)
	for i := range sids {
		sids[i] = rawSession(t, srv.Client(), srv.URL, "acme-viewer")
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nAuthorization: Bearer acme-viewer\r\n"+
				"Mcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-06-18\r\n\r\n", addr, sids[i])
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "GET"})
			if err != nil {
				t.Errorf("stream %d: %v", i, err)
				return
			}
			if resp.StatusCode != 200 {
				return // refused while closing: nothing was opened
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				t.Errorf("stream %d did not end cleanly after Close: %v", i, err)
			}
		})
	}
	time.Sleep(time.Millisecond)
	done := make(chan struct{})
	go func() { h.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while streams were opening")
	}
	wg.Wait()
}

// Another identity's token on a raw HTTP/1.1 GET for acme-viewer's session:
// refused as an unknown session, before anything is detached or claimed,
// so the owner's own stream opens.
func TestDetachedStreamOtherIdentity(t *testing.T) {
	h := detachHost(t, time.Hour)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	sid := rawSession(t, srv.Client(), srv.URL, "acme-viewer")
	for _, tok := range []string{"globex-editor", "acme-admin"} {
		if s := openRaw(t, addr, sid, tok, "HTTP/1.1"); s.resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s's GET for another's session: %d, want 404", tok, s.resp.StatusCode)
		}
	}
	if s := openRaw(t, addr, sid, "acme-viewer", "HTTP/1.1"); s.resp.StatusCode != 200 {
		t.Fatalf("the owner's GET: %d", s.resp.StatusCode)
	}
}

// slowReleases is a memory store whose CompareAndSwap (a stream's claim
// renewal and release) takes delay.
type slowReleases struct {
	*session.Memory
	delay time.Duration
}

func (s slowReleases) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	time.Sleep(s.delay)
	return s.Memory.CompareAndSwap(ctx, key, old, new, ttl)
}

// The store is slow when a detached stream ends: its client leaves and,
// separately, Handler.Close ends another. The claim is freed once the slow
// release completes (not lost, not left to lapse), and Close waits for it.
func TestDetachedStreamSlowStoreAtEnd(t *testing.T) {
	const delay = 300 * time.Millisecond
	h := detachHost(t, time.Hour, func(c *mcphandler.Config) {
		c.Store = slowReleases{session.NewMemory(), delay}
		c.StateKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	})
	addr, sid, s := streamOn(t, h)
	s.c.Close()
	start := time.Now()
	if !claimFree(t, addr, sid, "acme-viewer", 3*time.Second) {
		t.Fatal("the claim stayed after its client left, with a slow store")
	}
	if d := time.Since(start); d < delay/2 {
		t.Fatalf("the claim was free after %v, before the release (%v) could complete", d, delay)
	}
	_, _, s2 := streamOn(t, h)
	start = time.Now()
	h.Close()
	if d := time.Since(start); d < delay/2 {
		t.Fatalf("Close returned after %v, before the stream's release (%v)", d, delay)
	}
	if err := s2.end(time.Second); err != nil {
		t.Fatalf("the stream Close ended: %v", err)
	}
}
