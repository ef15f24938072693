package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// LegacyProtocolVersion is the protocol version of the HTTP+SSE transport,
// which a [LegacyClient] asks for at initialize unless
// [WithProtocolVersion] says otherwise.
const LegacyProtocolVersion = "2024-11-05"

// ErrNotConnected is returned by the methods of a [LegacyClient] that need
// the SSE stream before [LegacyClient.Connect] (or after
// [LegacyClient.Close]).
var ErrNotConnected = errors.New("mcptest: the legacy client is not connected (call Connect or Initialize)")

// LegacyClient is a client for the 2024-11-05 HTTP+SSE transport: a GET
// opens an SSE stream whose first event (event: endpoint) names the message
// URL; every client message is POSTed there and accepted with 202; every
// response, server request and notification arrives on the stream as an
// event: message.
//
// While connected the client owns one goroutine that reads the stream: it
// hands responses to the waiting [LegacyClient.Call], records
// notifications (calling the [WithNotificationHandler] handler on that
// goroutine), and answers server requests (elicitation/create,
// sampling/createMessage, roots/list, ping) with the configured handlers,
// each on a goroutine of its own, by POSTing the response.
// [LegacyClient.Close] ends them all and waits for them; a handler should
// return when its context ends.
//
// A LegacyClient is safe for concurrent use by multiple goroutines.
type LegacyClient struct {
	sseURL string
	hc     *http.Client
	cfg    config
	nextID atomic.Int64

	connectMu sync.Mutex // serializes Connect and Close

	mu       sync.Mutex
	conn     *legacyConn
	version  string
	notes    []Notification
	requests []Message
	errs     []error
}

// legacyConn is one open SSE stream and its reader.
type legacyConn struct {
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

// NewLegacy starts an [httptest.Server] for h, closed when the test ends,
// and returns a 2024-11-05 HTTP+SSE client whose SSE endpoint is ssePath on
// that server. It does not connect. The client is closed when the test
// ends, before the server.
func NewLegacy(t testing.TB, h http.Handler, ssePath string, opts ...Option) *LegacyClient {
	t.Helper()
	cfg := newConfig(opts)
	c := newLegacyClient(cfg.serve(t, h, ssePath), cfg)
	t.Cleanup(c.Close)
	return c
}

// DialLegacy returns a 2024-11-05 HTTP+SSE client for the SSE endpoint at
// sseURL, for example "http://127.0.0.1:8080/sse". It does not contact the
// server.
func DialLegacy(sseURL string, opts ...Option) *LegacyClient {
	cfg := newConfig(opts)
	cfg.httpClient = cfg.httpClientOrOwn()
	return newLegacyClient(sseURL, cfg)
}

func newLegacyClient(sseURL string, cfg config) *LegacyClient {
	if !cfg.versionSet {
		cfg.version = LegacyProtocolVersion
	}
	return &LegacyClient{sseURL: sseURL, hc: cfg.httpClient, cfg: cfg}
}

// SSEURL returns the URL of the SSE endpoint.
func (c *LegacyClient) SSEURL() string { return c.sseURL }

// MessageURL returns the absolute message URL the server named in its
// endpoint event, or "" when not connected.
func (c *LegacyClient) MessageURL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return ""
	}
	return c.conn.msgURL
}

// ProtocolVersion returns the version the server chose at initialize, ""
// before.
func (c *LegacyClient) ProtocolVersion() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// Notifications returns a copy of the server notifications received so far,
// in order of arrival.
func (c *LegacyClient) Notifications() []Notification {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.notes)
}

// ClearNotifications forgets the notifications received so far.
func (c *LegacyClient) ClearNotifications() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notes = nil
}

// ServerRequests returns a copy of the server requests received so far, in
// order of arrival.
func (c *LegacyClient) ServerRequests() []Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.requests)
}

// Errors returns the protocol problems the stream reader met so far and
// could not return to a caller: event data that is not JSON-RPC, responses
// with an unknown id, and failures to POST the answer to a server request.
func (c *LegacyClient) Errors() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.errs)
}

func (c *LegacyClient) addErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, err)
}

// current returns the open connection, or ErrNotConnected.
func (c *LegacyClient) current() (*legacyConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil, ErrNotConnected
	}
	return c.conn, nil
}

// newRequest builds a request with Authorization, the given defaults, the
// WithHeader headers and hdr (an only value "" removes a header).
func (c *LegacyClient) newRequest(ctx context.Context, method, u string, body []byte, defaults, hdr http.Header) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if c.cfg.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.token)
	}
	applyHeaders(req.Header, defaults, c.cfg.header, hdr)
	return req, nil
}

// Connect opens the SSE stream with a GET carrying Accept:
// text/event-stream and waits for the endpoint event, whose data (a
// relative or absolute URL) is resolved against the SSE URL. The first
// event with data must be the endpoint event. ctx bounds only the wait;
// the stream lives until [LegacyClient.Close] or until the server ends it.
// Connecting while connected is an error, unless the stream has ended.
func (c *LegacyClient) Connect(ctx context.Context) error {
	c.connectMu.Lock()
	defer c.connectMu.Unlock()
	c.mu.Lock()
	old := c.conn
	c.mu.Unlock()
	if old != nil {
		select {
		case <-old.done:
			c.closeConn(old)
		default:
			return errors.New("mcptest: the legacy client is already connected")
		}
	}
	base, err := url.Parse(c.sseURL)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	fail := func(err error) error {
		stop()
		cancel()
		if ctx.Err() != nil {
			return fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return err
	}
	req, err := c.newRequest(sctx, http.MethodGet, c.sseURL, nil, http.Header{"Accept": {"text/event-stream"}}, nil)
	if err != nil {
		return fail(err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fail(err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return fail(newHTTPError(resp))
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); !strings.EqualFold(ct, "text/event-stream") {
		defer resp.Body.Close()
		return fail(fmt.Errorf("mcptest: GET answered with Content-Type %q, want text/event-stream: %w", resp.Header.Get("Content-Type"), newHTTPError(resp)))
	}
	r := NewSSEReader(resp.Body)
	var ev Event
	for {
		ev, err = r.Next()
		if err != nil {
			resp.Body.Close()
			return fail(fmt.Errorf("mcptest: the SSE stream ended before the endpoint event: %w", err))
		}
		if ev.HasData || ev.Name != "" {
			break
		}
	}
	if ev.Name != "endpoint" {
		resp.Body.Close()
		return fail(fmt.Errorf("mcptest: the first SSE event is %q with data %q, want the endpoint event", ev.Name, truncate([]byte(ev.Data))))
	}
	ref, err := url.Parse(strings.TrimSpace(ev.Data))
	if err != nil || strings.TrimSpace(ev.Data) == "" {
		resp.Body.Close()
		return fail(fmt.Errorf("mcptest: the endpoint event's data %q is not a URL: %v", ev.Data, err))
	}
	if !stop() {
		// ctx ended, and cancel has run or is running.
		resp.Body.Close()
		cancel()
		return ctx.Err()
	}
	conn := &legacyConn{
		msgURL:  base.ResolveReference(ref).String(),
		ctx:     sctx,
		cancel:  cancel,
		body:    resp.Body,
		done:    make(chan struct{}),
		waiters: map[string]chan *Message{},
	}
	c.mu.Lock()
	c.conn = conn
	c.mu.Unlock()
	go c.read(conn, r)
	return nil
}

// read is the stream reader goroutine of conn.
func (c *LegacyClient) read(conn *legacyConn, r *SSEReader) {
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
			c.addErr(fmt.Errorf("mcptest: SSE message event data is not JSON-RPC: %q", truncate([]byte(ev.Data))))
			continue
		}
		for i := range msgs {
			c.dispatch(conn, &msgs[i])
		}
	}
}

// dispatch handles one message read from the stream.
func (c *LegacyClient) dispatch(conn *legacyConn, m *Message) {
	switch {
	case m.IsResponse():
		key := string(bytes.TrimSpace(m.ID))
		conn.mu.Lock()
		ch := conn.waiters[key]
		delete(conn.waiters, key)
		conn.mu.Unlock()
		if ch == nil {
			c.addErr(fmt.Errorf("mcptest: response with unexpected id %s: %s", key, mustJSON(m)))
			return
		}
		ch <- m
	case m.IsRequest():
		c.mu.Lock()
		c.requests = append(c.requests, *m)
		c.mu.Unlock()
		conn.wg.Add(1)
		go func() {
			defer conn.wg.Done()
			c.answer(conn, m)
		}()
	case m.IsNotification():
		c.mu.Lock()
		c.notes = append(c.notes, Notification{Method: m.Method, Params: m.Params})
		c.mu.Unlock()
		if c.cfg.onNotify != nil {
			c.cfg.onNotify(m.Method, m.Params)
		}
	default:
		c.addErr(fmt.Errorf("mcptest: invalid JSON-RPC message: %s", mustJSON(m)))
	}
}

// answer runs the handler for a server request and POSTs the response.
func (c *LegacyClient) answer(conn *legacyConn, m *Message) {
	res, rpcErr := runHandler(conn.ctx, c.cfg.handlers, m.Method, m.Params)
	body, err := json.Marshal(wireResponse{JSONRPC: "2.0", ID: m.ID, Result: res, Error: rpcErr})
	if err == nil {
		err = c.post(conn.ctx, conn, body, nil)
	}
	if err != nil {
		c.addErr(fmt.Errorf("mcptest: answering server request %s %s: %w", m.Method, m.ID, err))
	}
}

// post POSTs body to the message URL and requires 202 Accepted.
func (c *LegacyClient) post(ctx context.Context, conn *legacyConn, body []byte, hdr http.Header) error {
	resp, err := c.postRaw(ctx, conn, body, hdr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return newHTTPError(resp)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return nil
}

func (c *LegacyClient) postRaw(ctx context.Context, conn *legacyConn, body []byte, hdr http.Header) (*http.Response, error) {
	req, err := c.newRequest(ctx, http.MethodPost, conn.msgURL, body, http.Header{"Content-Type": {"application/json"}}, hdr)
	if err != nil {
		return nil, err
	}
	return c.hc.Do(req)
}

// Post sends body to the message URL in a raw POST with Content-Type:
// application/json, Authorization and the WithHeader headers, and returns
// the response as is; the caller must close its body. A name in hdr
// replaces the default value; a name whose only value is "" removes the
// header. Whatever the server sends in answer arrives on the stream.
func (c *LegacyClient) Post(ctx context.Context, body []byte, hdr http.Header) (*http.Response, error) {
	conn, err := c.current()
	if err != nil {
		return nil, err
	}
	return c.postRaw(ctx, conn, body, hdr)
}

// Notify POSTs a client notification and requires 202 Accepted; any other
// status comes back as *[HTTPError].
func (c *LegacyClient) Notify(ctx context.Context, method string, params any) error {
	conn, err := c.current()
	if err != nil {
		return err
	}
	p, err := marshalParams(params)
	if err != nil {
		return err
	}
	body, err := json.Marshal(wireRequest{JSONRPC: "2.0", Method: method, Params: p})
	if err != nil {
		return err
	}
	return c.post(ctx, conn, body, nil)
}

// Call POSTs one JSON-RPC request with a fresh integer id, requires 202
// Accepted, and waits for the response with that id on the stream. A
// JSON-RPC error comes back as *[RPCError]; a status other than 202 as
// *[HTTPError]. If ctx ends first, the client sends notifications/cancelled
// (see [WithCancelNotifications]) and returns ctx.Err(). If the stream ends
// first, the error says why. params nil sends no params member.
func (c *LegacyClient) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	conn, err := c.current()
	if err != nil {
		return nil, err
	}
	p, err := marshalParams(params)
	if err != nil {
		return nil, err
	}
	id := c.nextID.Add(1)
	key := idKey(id)
	body, err := json.Marshal(wireRequest{JSONRPC: "2.0", ID: json.RawMessage(key), Method: method, Params: p})
	if err != nil {
		return nil, err
	}
	ch := make(chan *Message, 1)
	conn.mu.Lock()
	conn.waiters[key] = ch
	conn.mu.Unlock()
	defer func() {
		conn.mu.Lock()
		delete(conn.waiters, key)
		conn.mu.Unlock()
	}()
	if err := c.post(ctx, conn, body, nil); err != nil {
		return nil, err
	}
	var m *Message
	select {
	case m = <-ch:
	case <-conn.done:
		select {
		case m = <-ch:
		default:
			conn.mu.Lock()
			err := conn.err
			conn.mu.Unlock()
			return nil, fmt.Errorf("%w: the SSE stream ended: %w", ErrNoResponse, err)
		}
	case <-ctx.Done():
		if c.cfg.cancelNotify && method != "initialize" {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
			_ = c.Notify(cctx, "notifications/cancelled", map[string]any{"requestId": id, "reason": ctx.Err().Error()})
			cancel()
		}
		return nil, ctx.Err()
	}
	if m.Error != nil {
		return nil, m.Error
	}
	if m.Result == nil {
		return nil, fmt.Errorf("mcptest: %s: response has neither result nor error", method)
	}
	return m.Result, nil
}

// Initialize connects if needed, sends initialize with protocolVersion
// "2024-11-05" (or the [WithProtocolVersion] one), the capabilities and the
// clientInfo, stores the version the server chose, and then sends
// notifications/initialized.
func (c *LegacyClient) Initialize(ctx context.Context) (*InitializeResult, error) {
	if _, err := c.current(); err != nil {
		if err := c.Connect(ctx); err != nil {
			return nil, err
		}
	}
	raw, err := c.Call(ctx, "initialize", map[string]any{
		"protocolVersion": c.cfg.version,
		"capabilities":    c.cfg.capabilities(),
		"clientInfo":      Implementation{Name: c.cfg.clientName, Version: c.cfg.clientVersion},
	})
	if err != nil {
		return nil, err
	}
	var res InitializeResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("mcptest: decoding initialize result %s: %w", truncate(raw), err)
	}
	res.Raw = raw
	if res.ProtocolVersion == "" {
		return &res, fmt.Errorf("mcptest: initialize result has no protocolVersion: %s", truncate(raw))
	}
	c.mu.Lock()
	c.version = res.ProtocolVersion
	c.mu.Unlock()
	if err := c.Notify(ctx, "notifications/initialized", nil); err != nil {
		return &res, fmt.Errorf("mcptest: notifications/initialized: %w", err)
	}
	return &res, nil
}

// ListTools lists all tools, following nextCursor until the last page.
func (c *LegacyClient) ListTools(ctx context.Context) ([]Tool, error) {
	return listTools(ctx, c)
}

// CallTool calls a tool. args is encoded as the arguments member; nil sends
// none. A tool failure is a result with IsError set, not an error.
func (c *LegacyClient) CallTool(ctx context.Context, name string, args any) (*ToolResult, error) {
	return callTool(ctx, c, name, args)
}

// closeConn ends conn's stream and waits for its reader and the handlers
// it started.
func (c *LegacyClient) closeConn(conn *legacyConn) {
	conn.cancel()
	conn.body.Close()
	<-conn.done
	conn.wg.Wait()
	c.mu.Lock()
	if c.conn == conn {
		c.conn = nil
	}
	c.mu.Unlock()
}

// Close closes the SSE stream, waits for the reader goroutine and the
// server-request handlers to finish, and closes the idle connections of the
// HTTP client. Calls waiting for a response fail. It is safe to call more
// than once; [LegacyClient.Connect] may open a new stream afterwards.
func (c *LegacyClient) Close() {
	c.connectMu.Lock()
	defer c.connectMu.Unlock()
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	if conn != nil {
		c.closeConn(conn)
	}
	c.hc.CloseIdleConnections()
}
