package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// LegacyProtocolVersion is the protocol version of the HTTP+SSE transport,
// which an [SSE] client asks for at initialize unless
// [WithProtocolVersion] says otherwise.
const LegacyProtocolVersion = "2024-11-05"

// ErrNotConnected is returned by the methods of an [SSE] client that need
// the SSE stream before [Client.Connect] (or after [Client.Close]).
var ErrNotConnected = errors.New("mcptest: the legacy client is not connected (call Connect or Initialize)")

// sseWire is the [SSE] era, the 2024-11-05 HTTP+SSE transport: a GET opens
// an SSE stream whose first event (event: endpoint) names the message URL;
// every client message is POSTed there and accepted with 202; every
// response, server request and notification arrives on the stream as an
// event: message.
//
// While connected the wire owns one goroutine that reads the stream: it
// hands responses to the waiting call, records notifications (calling the
// [WithNotificationHandler] handler on that goroutine), and answers server
// requests with the configured handlers, each on a goroutine of its own,
// by POSTing the response. close ends them all and waits for them.
type sseWire struct {
	c         *Client
	connectMu sync.Mutex // serializes Connect and Close
	conn      *sseConn   // guarded by c.mu
}

// sseConn is one open SSE stream and its reader.
type sseConn struct {
	msgURL string
	ctx    context.Context // the GET's context, cancelled by Close
	cancel context.CancelFunc
	body   io.ReadCloser
	done   chan struct{} // closed when the reader returns
	wg     sync.WaitGroup

	mu      sync.Mutex
	waiters map[string]chan *Message
	err     error // why the reader stopped, set before done is closed
}

// target is the message URL for a POST (with Content-Type:
// application/json), and the SSE URL for any other method (with Accept:
// text/event-stream for a GET).
func (w *sseWire) target(method string, _ []byte, _ bool) (string, http.Header, error) {
	if method != http.MethodPost {
		h := http.Header{}
		if method == http.MethodGet {
			h.Set("Accept", "text/event-stream")
		}
		return w.c.url, h, nil
	}
	conn, err := w.current()
	if err != nil {
		return "", nil, err
	}
	return conn.msgURL, http.Header{"Content-Type": {"application/json"}}, nil
}

func (w *sseWire) params(params any) (json.RawMessage, error) { return marshalParams(params) }

func (w *sseWire) next(context.Context, string, json.RawMessage, json.RawMessage, int) (json.RawMessage, error) {
	return nil, nil
}

// beforeInitialize connects if needed.
func (w *sseWire) beforeInitialize(ctx context.Context) error {
	if _, err := w.current(); err == nil {
		return nil
	}
	return w.c.Connect(ctx)
}

// current returns the open connection, or ErrNotConnected.
func (w *sseWire) current() (*sseConn, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if w.conn == nil {
		return nil, ErrNotConnected
	}
	return w.conn, nil
}

// MessageURL returns the absolute message URL the server named in the
// endpoint event of the [SSE] era, or "" when not connected (or for
// another era).
func (c *Client) MessageURL() string {
	w, ok := c.wire.(*sseWire)
	if !ok {
		return ""
	}
	conn, err := w.current()
	if err != nil {
		return ""
	}
	return conn.msgURL
}

// Connect opens the SSE stream of the [SSE] era with a GET carrying
// Accept: text/event-stream and waits for the endpoint event, whose data
// (a relative or absolute URL) is resolved against the SSE URL. The first
// event with data must be the endpoint event. ctx bounds only the wait;
// the stream lives until [Client.Close] or until the server ends it.
// Connecting while connected is an error, unless the stream has ended.
// Other eras have no stream to connect ([errors.ErrUnsupported]).
func (c *Client) Connect(ctx context.Context) error {
	w, ok := c.wire.(*sseWire)
	if !ok {
		return c.unsupported("Connect")
	}
	w.connectMu.Lock()
	defer w.connectMu.Unlock()
	w.c.mu.Lock()
	old := w.conn
	w.c.mu.Unlock()
	if old != nil {
		select {
		case <-old.done:
			w.closeConn(old)
		default:
			return errors.New("mcptest: the legacy client is already connected")
		}
	}
	conn, r, err := w.open(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	w.conn = conn
	c.mu.Unlock()
	go w.read(conn, r)
	return nil
}

// open sends the GET and reads the endpoint event. The stream it opens
// outlives ctx, which bounds only the wait.
func (w *sseWire) open(ctx context.Context) (*sseConn, *SSEReader, error) {
	base, err := url.Parse(w.c.url)
	if err != nil {
		return nil, nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	fail := func(err error) (*sseConn, *SSEReader, error) {
		stop()
		cancel()
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, nil, err
	}
	req, err := w.c.request(sctx, http.MethodGet, nil, nil, false)
	if err != nil {
		return fail(err)
	}
	resp, err := w.c.hc.Do(req)
	if err != nil {
		return fail(err)
	}
	if err := wantEventStream(resp, "GET"); err != nil {
		return fail(err)
	}
	r := NewSSEReader(resp.Body)
	ref, err := readEndpoint(r)
	if err != nil {
		resp.Body.Close()
		return fail(err)
	}
	if !stop() {
		// ctx ended, and cancel has run or is running.
		resp.Body.Close()
		cancel()
		return nil, nil, ctx.Err()
	}
	return &sseConn{
		msgURL:  base.ResolveReference(ref).String(),
		ctx:     sctx,
		cancel:  cancel,
		body:    resp.Body,
		done:    make(chan struct{}),
		waiters: map[string]chan *Message{},
	}, r, nil
}

// readEndpoint reads the first event with data or a name, which must be
// the endpoint event, and returns the URL it names.
func readEndpoint(r *SSEReader) (*url.URL, error) {
	var ev Event
	for {
		var err error
		if ev, err = r.Next(); err != nil {
			return nil, fmt.Errorf("mcptest: the SSE stream ended before the endpoint event: %w", err)
		}
		if ev.HasData || ev.Name != "" {
			break
		}
	}
	if ev.Name != "endpoint" {
		return nil, fmt.Errorf("mcptest: the first SSE event is %q with data %q, want the endpoint event", ev.Name, truncate([]byte(ev.Data)))
	}
	ref, err := url.Parse(strings.TrimSpace(ev.Data))
	if err != nil || strings.TrimSpace(ev.Data) == "" {
		return nil, fmt.Errorf("mcptest: the endpoint event's data %q is not a URL: %v", ev.Data, err)
	}
	return ref, nil
}

// read is the stream reader goroutine of conn.
func (w *sseWire) read(conn *sseConn, r *SSEReader) {
	defer close(conn.done)
	defer conn.body.Close()
	for {
		ev, err := r.Next()
		if err != nil {
			if conn.ctx.Err() != nil {
				err = fmt.Errorf("%w (%v)", ErrStreamClosed, err)
			}
			conn.mu.Lock()
			conn.err = err
			conn.mu.Unlock()
			return
		}
		if (ev.Name != "" && ev.Name != "message") || ev.Data == "" {
			continue
		}
		msgs := ev.Messages()
		if msgs == nil {
			w.c.addErr(fmt.Errorf("mcptest: SSE message event data is not JSON-RPC: %q", truncate([]byte(ev.Data))))
			continue
		}
		for i := range msgs {
			w.dispatch(conn, &msgs[i])
		}
	}
}

// dispatch handles one message read from the stream.
func (w *sseWire) dispatch(conn *sseConn, m *Message) {
	switch {
	case m.IsResponse():
		key := string(bytes.TrimSpace(m.ID))
		conn.mu.Lock()
		ch := conn.waiters[key]
		delete(conn.waiters, key)
		conn.mu.Unlock()
		if ch == nil {
			w.c.addErr(fmt.Errorf("mcptest: response with unexpected id %s: %s", key, mustJSON(m)))
			return
		}
		ch <- m
	case m.IsRequest():
		w.c.noteRequest(m)
		conn.wg.Go(func() { w.answer(conn, m) })
	case m.IsNotification():
		w.c.note(m)
	default:
		w.c.addErr(fmt.Errorf("mcptest: invalid JSON-RPC message: %s", mustJSON(m)))
	}
}

// answer runs the handler for a server request and POSTs the response to
// the message URL of the stream that carried the request.
func (w *sseWire) answer(conn *sseConn, m *Message) {
	res, rpcErr := runHandler(conn.ctx, w.c.cfg.handlers, m.Method, m.Params)
	body, err := encodeJSON(wireResponse{JSONRPC: "2.0", ID: m.ID, Result: res, Error: rpcErr})
	if err == nil {
		err = w.post(conn.ctx, conn, body)
	}
	if err != nil {
		w.c.addErr(fmt.Errorf("mcptest: answering server request %s %s: %w", m.Method, m.ID, err))
	}
}

// post POSTs body to the message URL of conn and requires 202 Accepted.
func (w *sseWire) post(ctx context.Context, conn *sseConn, body []byte) error {
	req, err := w.c.newRequest(ctx, http.MethodPost, conn.msgURL, body, http.Header{"Content-Type": {"application/json"}}, nil)
	if err != nil {
		return err
	}
	resp, err := w.c.hc.Do(req)
	if err != nil {
		return err
	}
	return expect202(resp)
}

// roundTrip POSTs the request, requires 202 Accepted, and waits for the
// response with its id on the stream. If ctx ends first, it sends
// notifications/cancelled (see [WithCancelNotifications]) and returns
// ctx.Err(). If the stream ends first, the error says why.
func (w *sseWire) roundTrip(ctx context.Context, id int64, _ string, body []byte, init bool) (*Message, http.Header, error) {
	conn, err := w.current()
	if err != nil {
		return nil, nil, err
	}
	key := idKey(id)
	ch := make(chan *Message, 1)
	conn.mu.Lock()
	conn.waiters[key] = ch
	conn.mu.Unlock()
	defer func() {
		conn.mu.Lock()
		delete(conn.waiters, key)
		conn.mu.Unlock()
	}()
	if err := w.post(ctx, conn, body); err != nil {
		return nil, nil, err
	}
	select {
	case m := <-ch:
		return m, nil, nil
	case <-conn.done:
		select {
		case m := <-ch:
			return m, nil, nil
		default:
			conn.mu.Lock()
			err := conn.err
			conn.mu.Unlock()
			return nil, nil, fmt.Errorf("%w: the SSE stream ended: %w", ErrNoResponse, err)
		}
	case <-ctx.Done():
		if !init {
			w.c.sendCancel(ctx, id, ctx.Err())
		}
		return nil, nil, ctx.Err()
	}
}

// closeConn ends conn's stream and waits for its reader and the handlers
// it started.
func (w *sseWire) closeConn(conn *sseConn) {
	conn.cancel()
	conn.body.Close()
	<-conn.done
	conn.wg.Wait()
	w.c.mu.Lock()
	if w.conn == conn {
		w.conn = nil
	}
	w.c.mu.Unlock()
}

// close closes the SSE stream, if open, and waits for the reader goroutine
// and the server-request handlers to finish.
func (w *sseWire) close() {
	w.connectMu.Lock()
	defer w.connectMu.Unlock()
	w.c.mu.Lock()
	conn := w.conn
	w.c.mu.Unlock()
	if conn != nil {
		w.closeConn(conn)
	}
}
