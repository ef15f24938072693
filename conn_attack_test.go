package mcphandler_test

// An HTTP/1.x client reuses a connection once a response on it ended
// cleanly, unless the response said "Connection: close". A connection the
// handler closes itself (a GET stream that took its connection over, a
// POST stream closed early by Exchange.CloseStream) must therefore either
// have said so in its header or end its body uncleanly: else the client
// sends its next request on a connection the server is closing, and that
// request is lost (EOF, connection reset, "server closed idle connection").
// These tests end streams every way a stream ends and look at the next
// request: through Go's http.Client, and on a raw connection that writes
// it right after the body's end unless the close was announced.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

// connEnv is a server with one session of token and what ends its GET
// stream.
type connEnv struct {
	h     *mcphandler.Handler
	srv   *httptest.Server
	tt    *tokenTable
	token string
	sid   string
	other *http.Client // for requests that are not the client's own
}

// streamEnd is one way a session's GET stream ends.
type streamEnd struct {
	name  string
	edit  func(*mcphandler.Config) // optional
	token string                   // the stream's caller; "acme-viewer" if empty
	end   func(t *testing.T, e *connEnv)
	// fresh: the way ends the handler or server, so that each round needs
	// a new one.
	fresh bool
	// shutsDown: the server no longer answers after it, so that only the
	// announcement can be checked, not a next request.
	shutsDown bool
	// detachedOnly: it ends only streams that took their connection over
	// (Handler.Close leaves requests in progress alone).
	detachedOnly bool
}

// shortLived is the token table of these tests: users, plus "acme-short",
// an identity whose credentials expire 50ms after each authentication.
type shortLived struct{ *tokenTable }

func (s shortLived) authenticate(r *http.Request) (mcphandler.Identity, error) {
	if r.Header.Get("Authorization") == "Bearer acme-short" {
		return mcphandler.Identity{Tenant: "acme", Subject: "dave", Role: "viewer", Expires: time.Now().Add(50 * time.Millisecond)}, nil
	}
	return s.tokenTable.authenticate(r)
}

func streamEnds() []streamEnd {
	return []streamEnd{
		{name: "DELETE", end: func(t *testing.T, e *connEnv) {
			req, _ := http.NewRequest("DELETE", e.srv.URL, nil)
			req.Header.Set("Authorization", "Bearer "+e.token)
			req.Header.Set("Mcp-Session-Id", e.sid)
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
			resp, err := e.other.Do(req)
			if err != nil {
				t.Fatalf("DELETE: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				t.Fatalf("DELETE: %d", resp.StatusCode)
			}
		}},
		{name: "Handler.Close", fresh: true, detachedOnly: true, end: func(t *testing.T, e *connEnv) { e.h.Close() }},
		{name: "Shutdown", fresh: true, shutsDown: true, end: func(t *testing.T, e *connEnv) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			e.srv.Config.Shutdown(ctx)
		}},
		{name: "evicted", edit: func(c *mcphandler.Config) { c.Limits.MaxSessionsPerIdentity = 1 }, end: func(t *testing.T, e *connEnv) {
			rawSession(t, e.other, e.srv.URL, e.token) // one session too many: the oldest ends
		}},
		{name: "caller revoked", fresh: true, edit: func(c *mcphandler.Config) { c.Sessions.KeepAlive = 20 * time.Millisecond }, end: func(t *testing.T, e *connEnv) {
			e.tt.set(func(ids map[string]mcphandler.Identity) { delete(ids, e.token) })
		}},
		{name: "credentials expire", token: "acme-short", end: func(t *testing.T, e *connEnv) {}},
	}
}

// newConnEnv serves a handler for way w and opens a session of its caller.
func newConnEnv(t *testing.T, w streamEnd, keep bool) *connEnv {
	t.Helper()
	tt := newTokenTable()
	h := detachHost(t, time.Hour, func(c *mcphandler.Config) {
		c.Authenticate = shortLived{tt}.authenticate
		c.Sessions.KeepStreamRequests = keep
		if w.edit != nil {
			w.edit(c)
		}
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &connEnv{h: h, srv: srv, tt: tt, token: w.token, other: &http.Client{Transport: &http.Transport{}}}
	t.Cleanup(e.other.CloseIdleConnections)
	if e.token == "" {
		e.token = "acme-viewer"
	}
	e.sid = rawSession(t, e.other, srv.URL, e.token)
	return e
}

// getRequest is the GET that opens session sid's stream.
func getRequest(url, token, sid string) *http.Request {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	return req
}

// initializeRequest is a POST that needs no session: the next request.
func initializeRequest(url string) *http.Request {
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"next","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer acme-admin")
	return req
}

// The reported failure, every way a GET stream ends: Go's http.Client,
// with one connection per host so that the stream's is the one reused,
// opens the stream, the stream ends, and the client POSTs at once. No
// POST may fail at the transport. The rounds make the race (the client
// takes the connection back before it saw the server close it) show.
func TestAttackNextRequestAfterStreamEnds(t *testing.T) {
	rounds := 60
	if testing.Short() {
		rounds = 15
	}
	ways := append(streamEnds(), streamEnd{name: "client closes", end: func(*testing.T, *connEnv) {}})
	for _, w := range ways {
		if w.shutsDown {
			continue // a shut-down server answers no next request: see TestAttackConnectionFate
		}
		t.Run(w.name, func(t *testing.T) {
			failed := 0
			var first error
			var e *connEnv
			var hc *http.Client
			for i := range rounds {
				if e == nil || w.fresh {
					e = newConnEnv(t, w, false)
					hc = &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
					t.Cleanup(hc.CloseIdleConnections)
				} else {
					e.sid = rawSession(t, e.other, e.srv.URL, e.token)
				}
				// Warm the client's one connection, so that the GET reuses it.
				if resp, err := hc.Do(initializeRequest(e.srv.URL)); err != nil {
					t.Fatalf("round %d: warming: %v", i, err)
				} else {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				resp, err := hc.Do(getRequest(e.srv.URL, e.token, e.sid))
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("round %d: GET: %v %v", i, resp, err)
				}
				if w.name == "client closes" {
					resp.Body.Close()
				} else {
					w.end(t, e)
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				next, err := hc.Do(initializeRequest(e.srv.URL))
				if err != nil {
					if failed++; first == nil {
						first = err
					}
					continue
				}
				io.Copy(io.Discard, next.Body)
				next.Body.Close()
				if next.StatusCode != 200 {
					t.Fatalf("round %d: next POST: %d", i, next.StatusCode)
				}
			}
			if failed > 0 {
				t.Fatalf("%d of %d POSTs after the stream ended failed at the transport, first: %v", failed, rounds, first)
			}
		})
	}
}

// The same for a POST's stream that the tool closes early (SSE polling),
// before anything was sent on it and after a progress notification: Go's
// http.Client reads the stream to its end (the second one breaks: the
// connection could not be announced closed any more) and POSTs at once on
// its one connection. No POST may fail at the transport.
func TestAttackNextRequestAfterCloseStream(t *testing.T) {
	rounds := 60
	if testing.Short() {
		rounds = 15
	}
	for _, tool := range []string{"close_now", "close_after_progress"} {
		t.Run(tool, func(t *testing.T) {
			h := detachHost(t, time.Hour, closeTools)
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
			t.Cleanup(hc.CloseIdleConnections)
			sid := rawSessionAt(t, hc, srv.URL, "acme-viewer", "2025-11-25")
			failed := 0
			var first error
			for i := range rounds {
				req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+tool+`","_meta":{"progressToken":1}}}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Authorization", "Bearer acme-viewer")
				req.Header.Set("Mcp-Session-Id", sid)
				req.Header.Set("MCP-Protocol-Version", "2025-11-25")
				resp, err := hc.Do(req)
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("round %d: tools/call: %v %v", i, resp, err)
				}
				if _, err := io.Copy(io.Discard, resp.Body); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("round %d: the closed stream: %v", i, err)
				}
				resp.Body.Close()
				next, err := hc.Do(initializeRequest(srv.URL))
				if err != nil {
					if failed++; first == nil {
						first = err
					}
					continue
				}
				io.Copy(io.Discard, next.Body)
				next.Body.Close()
			}
			if failed > 0 {
				t.Fatalf("%d of %d POSTs after a stream closed early failed at the transport, first: %v", failed, rounds, first)
			}
		})
	}
}

// wire is one raw HTTP/1.x connection.
type wire struct {
	c  net.Conn
	br *bufio.Reader
}

func dialWire(t *testing.T, addr string) *wire {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &wire{c: c, br: bufio.NewReader(c)}
}

// send writes a request for "/" (its header lines given as "Name:
// value") and reads the response's header.
func (w *wire) send(method, proto string, lines []string, body string) (*http.Response, error) {
	return w.sendTo(method, "/", proto, lines, body)
}

// sendTo is send for another path.
func (w *wire) sendTo(method, path, proto string, lines []string, body string) (*http.Response, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s\r\nHost: 127.0.0.1\r\n", method, path, proto)
	for _, l := range lines {
		b.WriteString(l + "\r\n")
	}
	if body != "" || method == "POST" {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n" + body)
	w.c.SetDeadline(time.Now().Add(5 * time.Second))
	defer w.c.SetDeadline(time.Time{})
	if _, err := io.WriteString(w.c, b.String()); err != nil {
		return nil, err
	}
	return http.ReadResponse(w.br, &http.Request{Method: method})
}

// postLines are the header lines of a POST of token in session sid ("" for
// none).
func postLines(token, sid string) []string {
	l := []string{"Content-Type: application/json", "Accept: application/json, text/event-stream", "Authorization: Bearer " + token}
	if sid != "" {
		l = append(l, "Mcp-Session-Id: "+sid, "MCP-Protocol-Version: 2025-11-25")
	}
	return l
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// Fates of a connection once a response on it ended.
const (
	fateAborted = "aborted" // the body did not end cleanly: no client reuses it
	fateClosed  = "closed"  // the header said Connection: close, and the server closed it
	fateKept    = "kept"    // the next request on it was answered
)

// fate reads resp's body to its end (within d) and tells what became of
// the connection, failing t if the server closed it without telling (the
// client's next request, sent at once, found it closed) or kept one it
// said it would close.
func (w *wire) fate(t *testing.T, resp *http.Response, d time.Duration, next bool) string {
	t.Helper()
	f, _ := w.fateBody(t, resp, d, next)
	return f
}

// fateBody is fate, which also returns what the body held.
func (w *wire) fateBody(t *testing.T, resp *http.Response, d time.Duration, next bool) (string, []byte) {
	t.Helper()
	w.c.SetReadDeadline(time.Now().Add(d))
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	w.c.SetReadDeadline(time.Time{})
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("the body did not end within %v", d)
	case err != nil:
		return fateAborted, body
	case resp.Close:
		w.c.SetReadDeadline(time.Now().Add(3 * time.Second))
		n, err := w.br.Read(make([]byte, 1))
		if n > 0 || errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the response said Connection: close, yet the connection stayed open (%d bytes, %v)", n, err)
		}
		return fateClosed, body
	case !next:
		t.Fatal("the response kept its connection, on a server that is shut down")
	}
	r, err := w.send("POST", "HTTP/1.1", postLines("acme-admin", ""), initializeBody)
	if err != nil {
		t.Fatalf("the response kept its connection (no Connection: close), yet the next request on it failed: %v", err)
	}
	io.Copy(io.Discard, r.Body)
	if r.StatusCode != 200 {
		t.Fatalf("the next request on the connection: %d", r.StatusCode)
	}
	return fateKept, body
}

// Every way a session's GET stream ends, on a raw connection: a stream
// that took its connection over says Connection: close in its header
// (HTTP/1.1; on HTTP/1.0, with or without keep-alive asked, the body is
// close-delimited), so that no client sends a request on it after its
// last chunk; with KeepStreamRequests net/http keeps the connection, and
// the next request on it is answered.
func TestAttackConnectionFate(t *testing.T) {
	protos := []struct {
		name  string
		proto string
		lines []string
		keep  bool // KeepStreamRequests
		want  string
	}{
		{"HTTP/1.1", "HTTP/1.1", nil, false, fateClosed},
		{"HTTP/1.0", "HTTP/1.0", nil, false, fateClosed},
		{"HTTP/1.0 keep-alive", "HTTP/1.0", []string{"Connection: keep-alive"}, false, fateClosed},
		{"HTTP/1.1 KeepStreamRequests", "HTTP/1.1", nil, true, fateKept},
	}
	for _, w := range streamEnds() {
		for _, p := range protos {
			if (w.shutsDown || w.detachedOnly) && p.keep {
				continue // net/http closes its own connections on Shutdown; Close ends no request
			}
			t.Run(w.name+"/"+p.name, func(t *testing.T) {
				e := newConnEnv(t, w, p.keep)
				c := dialWire(t, e.srv.Listener.Addr().String())
				resp, err := c.send("GET", p.proto, append([]string{"Accept: text/event-stream", "Authorization: Bearer " + e.token,
					"Mcp-Session-Id: " + e.sid, "MCP-Protocol-Version: 2025-06-18"}, p.lines...), "")
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("GET: %v %v", resp, err)
				}
				w.end(t, e)
				if got := c.fate(t, resp, 3*time.Second, !w.shutsDown); got != p.want {
					t.Fatalf("the connection was %s, want %s", got, p.want)
				}
			})
		}
	}
}

// closeTools are the tools of TestAttackConnectionFateOtherAnswers: one
// that closes its POST's stream first thing, one that reports progress
// (so that the SSE header is out) and then closes it, and one that only
// reports progress; each returns its result 100ms later.
func closeTools(c *mcphandler.Config) {
	tool := func(name string, progress, closeStream bool) mcphandler.Tool {
		return mcphandler.Tool{Name: name, Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
			Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				if progress {
					call.Progress(1, 2, "half")
				}
				if closeStream {
					if err := call.CloseStream(); err != nil {
						return nil, err
					}
				}
				time.Sleep(100 * time.Millisecond)
				return mcphandler.TextResult(name + " done"), nil
			}}
	}
	tools := c.ListTools
	c.ListTools = func(ctx context.Context) ([]mcphandler.Tool, error) {
		ts, err := tools(ctx)
		return append(ts, tool("close_now", false, true), tool("close_after_progress", true, true), tool("progress", true, false)), err
	}
}

// lastEventID is the id of the last SSE event in body.
func lastEventID(body []byte) string {
	r := mcptest.NewSSEReader(bytes.NewReader(body))
	for {
		if _, err := r.Next(); err != nil {
			return r.LastEventID()
		}
	}
}

// The other answers whose connection may not be reused, on a raw
// connection: a POST stream closed early by Exchange.CloseStream (before
// its SSE header went out, which then says Connection: close; after, when
// the header can no longer say it, the body is left unterminated), on
// HTTP/1.1 and HTTP/1.0; the legacy transport's 202 (its request is served
// after the answer, on the connection's goroutine); the 408 of a slow
// body. And those whose connection net/http keeps: a plain answer, a POST
// stream that ends normally, a resumed stream, a refused GET, the legacy
// transport's stream. Every one either tells the client not to reuse the
// connection or answers its next request on it. A stream closed early is
// then resumed with its Last-Event-ID and brings the tool's result.
func TestAttackConnectionFateOtherAnswers(t *testing.T) {
	setup := func(t *testing.T) (addr string, e *connEnv) {
		t.Helper()
		tt := newTokenTable()
		h := detachHost(t, 20*time.Millisecond, closeTools, func(c *mcphandler.Config) {
			c.Authenticate = tt.authenticate
			c.Limits.ReadBodyTimeout = 100 * time.Millisecond
			c.Limits.MaxBodyBytes = 4 << 10
		})
		mux, legacy := http.NewServeMux(), legacyMux(h)
		mux.Handle("/", h)
		mux.Handle("/sse", legacy)
		mux.Handle("/messages", legacy)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		e = &connEnv{h: h, srv: srv, tt: tt, token: "acme-viewer", other: &http.Client{Transport: &http.Transport{}}}
		t.Cleanup(e.other.CloseIdleConnections)
		return srv.Listener.Addr().String(), e
	}
	call := func(tool string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","_meta":{"progressToken":1}}}`
	}
	// resume GETs session sid's stream after last on a connection of its
	// own, which the stream's end keeps; it returns what the stream held.
	resume := func(t *testing.T, addr, sid, last string) string {
		t.Helper()
		c := dialWire(t, addr)
		resp, err := c.send("GET", "HTTP/1.1", []string{"Accept: text/event-stream", "Authorization: Bearer acme-viewer",
			"Mcp-Session-Id: " + sid, "MCP-Protocol-Version: 2025-11-25", "Last-Event-ID: " + last}, "")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("resuming after %q: %v %v", last, resp, err)
		}
		f, body := c.fateBody(t, resp, 5*time.Second, true)
		if f != fateKept {
			t.Fatalf("the resumed stream's connection was %s, want %s", f, fateKept)
		}
		return string(body)
	}
	for _, tc := range []struct {
		name, proto, tool string
		want              string
	}{
		{"CloseStream first", "HTTP/1.1", "close_now", fateClosed},
		{"CloseStream after progress", "HTTP/1.1", "close_after_progress", fateAborted},
		{"CloseStream first, HTTP/1.0", "HTTP/1.0", "close_now", fateClosed},
		{"CloseStream after progress, HTTP/1.0", "HTTP/1.0", "close_after_progress", fateClosed},
		{"POST stream that ends", "HTTP/1.1", "progress", fateKept},
		{"POST JSON answer", "HTTP/1.1", "read", fateKept},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, e := setup(t)
			sid := rawSessionAt(t, e.other, e.srv.URL, "acme-viewer", "2025-11-25")
			c := dialWire(t, addr)
			resp, err := c.send("POST", tc.proto, postLines("acme-viewer", sid), call(tc.tool))
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("POST: %v %v", resp, err)
			}
			got, body := c.fateBody(t, resp, 5*time.Second, true)
			if got != tc.want {
				t.Fatalf("the connection was %s, want %s", got, tc.want)
			}
			if done := tc.tool + " done"; tc.tool != "read" && !strings.Contains(string(body), done) {
				// Closed early: the result comes by resuming.
				last := lastEventID(body)
				if last == "" {
					t.Fatalf("no event id before the stream closed: %q", body)
				}
				if all := resume(t, addr, sid, last); !strings.Contains(all, done) {
					t.Fatalf("the resumed stream lacks the result: %q", all)
				}
			}
		})
	}
	t.Run("refused GET", func(t *testing.T) {
		addr, e := setup(t)
		sid := rawSession(t, e.other, e.srv.URL, "acme-viewer")
		open := dialWire(t, addr)
		get := []string{"Accept: text/event-stream", "Authorization: Bearer acme-viewer", "Mcp-Session-Id: " + sid, "MCP-Protocol-Version: 2025-06-18"}
		if resp, err := open.send("GET", "HTTP/1.1", get, ""); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET: %v %v", resp, err)
		}
		c := dialWire(t, addr)
		resp, err := c.send("GET", "HTTP/1.1", get, "")
		if err != nil || resp.StatusCode != http.StatusConflict {
			t.Fatalf("second GET: %v %v", resp, err)
		}
		if got := c.fate(t, resp, time.Second, true); got != fateKept {
			t.Fatalf("the connection was %s, want %s", got, fateKept)
		}
	})
	// Bodies the handler does not read to their end: what net/http does
	// with the connection after the refusal. The header's framing line and
	// the body are written as given.
	chunk := fmt.Sprintf("%x\r\n%s\r\n", 4<<10, strings.Repeat(" ", 4<<10))
	for _, tc := range []struct {
		name, framing, body string
		status              int
		want                string
	}{
		{"slow body", "Content-Length: 100", "{", http.StatusRequestTimeout, fateClosed},
		// Its length announced: refused unread, and net/http discards it.
		{"body too large", fmt.Sprintf("Content-Length: %d", 8<<10), strings.Repeat(" ", 8<<10), http.StatusRequestEntityTooLarge, fateKept},
		// Chunked: cut at the limit, and the rest is never read.
		{"chunked body too large", "Transfer-Encoding: chunked", strings.Repeat(chunk, 4), http.StatusRequestEntityTooLarge, fateClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, _ := setup(t)
			c := dialWire(t, addr)
			fmt.Fprintf(c.c, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
				"Accept: application/json, text/event-stream\r\nAuthorization: Bearer acme-viewer\r\n%s\r\n\r\n%s", tc.framing, tc.body)
			c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(c.br, &http.Request{Method: "POST"})
			if err != nil || resp.StatusCode != tc.status {
				t.Fatalf("POST: %v %v, want %d", resp, err, tc.status)
			}
			if got := c.fate(t, resp, time.Second, true); got != tc.want {
				t.Fatalf("the connection was %s, want %s", got, tc.want)
			}
		})
	}
	t.Run("legacy transport", func(t *testing.T) {
		addr, e := setup(t)
		stream := dialWire(t, addr)
		resp, err := stream.sendTo("GET", "/sse", "HTTP/1.1", []string{"Accept: text/event-stream", "Authorization: Bearer acme-viewer"}, "")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("legacy GET: %v %v", resp, err)
		}
		// The endpoint event names the session's message path.
		events := mcptest.NewSSEReader(resp.Body)
		stream.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		ev, err := events.Next()
		stream.c.SetReadDeadline(time.Time{})
		if err != nil || ev.Name != "endpoint" {
			t.Fatalf("endpoint event: %+v %v", ev, err)
		}
		post := dialWire(t, addr)
		accepted, err := post.sendTo("POST", ev.Data, "HTTP/1.1", postLines("acme-viewer", ""), initializeBody)
		if err != nil || accepted.StatusCode != http.StatusAccepted {
			t.Fatalf("legacy POST: %v %v", accepted, err)
		}
		if got := post.fate(t, accepted, time.Second, true); got != fateClosed {
			t.Fatalf("the 202's connection was %s, want %s", got, fateClosed)
		}
		// The caller is revoked: its stream ends at the next keep-alive, on
		// its request; net/http keeps the connection.
		e.tt.set(func(ids map[string]mcphandler.Identity) { delete(ids, "acme-viewer") })
		if got := stream.fate(t, resp, 3*time.Second, true); got != fateKept {
			t.Fatalf("the legacy stream's connection was %s, want %s", got, fateKept)
		}
	})
}
