package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Wire header names. HTTP header names ignore case; Go sends them in
// canonical form.
const (
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderLastEventID     = "Last-Event-Id"
)

const (
	acceptBoth     = "application/json, text/event-stream"
	maxErrorBody   = 1 << 20
	maxIdleResumes = 100
	cancelTimeout  = 2 * time.Second
)

// Client is an MCP client for tests, speaking the protocol era chosen with
// [WithEra]: [Sessions] (the default), [Stateless] or [SSE]. Every era has
// the same method set; a method that has no meaning in the client's era
// fails with an error matching [errors.ErrUnsupported], as its
// documentation says. It is safe for concurrent use by multiple
// goroutines.
type Client struct {
	url    string // the endpoint; for SSE, the SSE URL
	hc     *http.Client
	cfg    config
	wire   wire
	nextID atomic.Int64
	rounds atomic.Int64

	mu        sync.Mutex // guards the fields below
	sessionID string
	version   string
	notes     []Notification
	requests  []Message
	errs      []error
	streams   map[*Stream]struct{}
}

// ModernClient is the Client of the [Stateless] era, which [NewModern] and
// [DialModern] return.
//
// Deprecated: use [Client]; it is the same type.
type ModernClient = Client

// LegacyClient is the Client of the [SSE] era, which [NewLegacy] and
// [DialLegacy] return.
//
// Deprecated: use [Client]; it is the same type.
type LegacyClient = Client

// New starts an [httptest.Server] for h, closed when the test ends, and
// returns a client for its endpoint: path "/" unless [WithPath] says
// otherwise (for the [SSE] era, the SSE endpoint). The client is closed
// when the test ends, before the server. It does not contact the server.
func New(t testing.TB, h http.Handler, opts ...Option) *Client {
	t.Helper()
	cfg := newConfig(opts)
	c := newClient(cfg.serve(t, h, cfg.path), cfg)
	t.Cleanup(c.Close)
	return c
}

// Dial returns a client for the MCP endpoint at url, for example
// "http://127.0.0.1:8080/mcp" (for the [SSE] era, the SSE endpoint, such
// as "http://127.0.0.1:8080/sse"). It does not contact the server.
func Dial(url string, opts ...Option) *Client {
	cfg := newConfig(opts)
	cfg.httpClient = cfg.httpClientOrOwn()
	return newClient(url, cfg)
}

// NewModern is [New] with [WithEra]([Stateless]).
func NewModern(t testing.TB, h http.Handler, opts ...Option) *Client {
	t.Helper()
	return New(t, h, slices.Concat(opts, []Option{WithEra(Stateless)})...)
}

// DialModern is [Dial] with [WithEra]([Stateless]).
func DialModern(url string, opts ...Option) *Client {
	return Dial(url, slices.Concat(opts, []Option{WithEra(Stateless)})...)
}

// NewLegacy is [New] with [WithEra]([SSE]) and [WithPath](ssePath): a
// 2024-11-05 HTTP+SSE client whose SSE endpoint is ssePath on the test
// server. It does not connect.
func NewLegacy(t testing.TB, h http.Handler, ssePath string, opts ...Option) *Client {
	t.Helper()
	return New(t, h, slices.Concat(opts, []Option{WithPath(ssePath), WithEra(SSE)})...)
}

// DialLegacy is [Dial] with [WithEra]([SSE]): a 2024-11-05 HTTP+SSE client
// for the SSE endpoint at sseURL. It does not contact the server.
func DialLegacy(sseURL string, opts ...Option) *Client {
	return Dial(sseURL, slices.Concat(opts, []Option{WithEra(SSE)})...)
}

func newClient(url string, cfg config) *Client {
	c := &Client{url: url, hc: cfg.httpClient, cfg: cfg, streams: map[*Stream]struct{}{}}
	switch cfg.era {
	case Stateless:
		if !cfg.versionSet {
			c.cfg.version = ModernProtocolVersion
		}
		c.version = c.cfg.version
		c.wire = &statelessWire{c: c}
	case SSE:
		if !cfg.versionSet {
			c.cfg.version = LegacyProtocolVersion
		}
		c.wire = &sseWire{c: c}
	default:
		c.wire = &sessionsWire{c: c}
	}
	return c
}

// Era returns the client's protocol era.
func (c *Client) Era() Era { return c.cfg.era }

// URL returns the endpoint URL: for the [SSE] era, the SSE URL.
func (c *Client) URL() string { return c.url }

// SSEURL returns the URL of the SSE endpoint of the [SSE] era; it is
// [Client.URL].
func (c *Client) SSEURL() string { return c.url }

// SessionID returns the session id the server assigned at initialize, or
// the one set with [Client.SetSessionID]; "" if none. Only the [Sessions]
// era has one.
func (c *Client) SessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID
}

// SetSessionID replaces the session id sent in Mcp-Session-Id by the
// [Sessions] era; "" stops sending the header.
func (c *Client) SetSessionID(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sessionID = id
}

// ProtocolVersion returns the protocol version the client speaks: for the
// [Sessions] and [SSE] eras, the one negotiated at initialize ("" before);
// for [Stateless], the one it sends in MCP-Protocol-Version and in _meta.
// [Client.SetProtocolVersion] replaces it.
func (c *Client) ProtocolVersion() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// SetProtocolVersion replaces the version the client sends in
// MCP-Protocol-Version (and, for [Stateless], in _meta); "" stops sending
// it.
func (c *Client) SetProtocolVersion(v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version = v
}

// Capabilities returns the client capabilities the client declares: at
// initialize, or in every request's _meta for [Stateless].
func (c *Client) Capabilities() json.RawMessage { return c.cfg.capabilities() }

// Rounds returns how many round trips the last [Client.Call] (or typed
// helper) that returned took: 1 when the first answer was final, which it
// always is but for [Stateless] input_required results.
func (c *Client) Rounds() int { return int(c.rounds.Load()) }

// Notifications returns a copy of the server notifications read from
// response streams so far, in order of arrival (for [SSE], from the SSE
// stream). Notifications read from a [Stream] are not recorded.
func (c *Client) Notifications() []Notification {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.notes)
}

// ClearNotifications forgets the notifications received so far.
func (c *Client) ClearNotifications() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notes = nil
}

// ServerRequests returns a copy of the server requests (elicitation/create,
// ping, …) received so far on response streams (for [SSE], on the SSE
// stream), in order of arrival.
func (c *Client) ServerRequests() []Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.requests)
}

// Errors returns the protocol problems met so far that could not be
// returned to a caller: for [SSE], event data that is not JSON-RPC,
// responses with an unknown id, and failures to POST the answer to a
// server request. Other eras return every problem to the caller.
func (c *Client) Errors() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.errs)
}

func (c *Client) addErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, err)
}

// note records a server notification and passes it to the
// WithNotificationHandler handler.
func (c *Client) note(m *Message) {
	c.mu.Lock()
	c.notes = append(c.notes, Notification{Method: m.Method, Params: m.Params})
	c.mu.Unlock()
	if c.cfg.onNotify != nil {
		c.cfg.onNotify(m.Method, m.Params)
	}
}

// noteRequest records a server request.
func (c *Client) noteRequest(m *Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests = append(c.requests, *m)
}

// track registers an open stream, so that Close closes it, and starts its
// goroutine.
func (c *Client) track(s *Stream) {
	c.mu.Lock()
	c.streams[s] = struct{}{}
	c.mu.Unlock()
	go s.run()
}

func (c *Client) untrack(s *Stream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.streams, s)
}

// Close closes every open [Stream], the [SSE] stream (waiting for its
// reader and for the handlers of the server requests it read), and the
// idle connections of the HTTP client. Calls waiting for a response on the
// SSE stream fail. It is safe to call more than once, and the client stays
// usable afterwards ([Client.Connect] may open a new SSE stream).
func (c *Client) Close() {
	c.mu.Lock()
	streams := make([]*Stream, 0, len(c.streams))
	for s := range c.streams {
		streams = append(streams, s)
	}
	c.mu.Unlock()
	for _, s := range streams {
		s.Close()
	}
	c.wire.close()
	c.hc.CloseIdleConnections()
}

// request builds an HTTP request to the era's target for method and body:
// Authorization, the era's default headers, the WithHeader headers, then
// hdr. A name in a later set replaces the earlier value; a name whose only
// value is "" removes the header.
func (c *Client) request(ctx context.Context, method string, body []byte, hdr http.Header, init bool) (*http.Request, error) {
	u, defaults, err := c.wire.target(method, body, init)
	if err != nil {
		return nil, err
	}
	return c.newRequest(ctx, method, u, body, defaults, hdr)
}

// newRequest builds an HTTP request to u with Authorization, then the
// defaults, the WithHeader headers and hdr, as [Client.request] does.
func (c *Client) newRequest(ctx context.Context, method, u string, body []byte, defaults, hdr http.Header) (*http.Request, error) {
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

// Do sends a raw HTTP request with the given method and body and returns
// the response as is, whatever its status; the caller must close its body.
// It goes where the era sends that method: the endpoint ([Sessions],
// [Stateless]); for [SSE], a POST to the message URL ([ErrNotConnected]
// before [Client.Connect]) and any other method to the SSE URL.
//
// The request carries Authorization, the era's default headers for the
// method and body, then the WithHeader headers, then hdr: for POST
// Content-Type and Accept (for [SSE], Content-Type only); for GET Accept:
// text/event-stream; the session headers ([Sessions]: Mcp-Session-Id and
// MCP-Protocol-Version, when set); for [Stateless], MCP-Protocol-Version
// and, when body is a JSON-RPC request, Mcp-Method and Mcp-Name derived
// from it. A name in hdr replaces the default value; a name whose only
// value is "" removes the header.
func (c *Client) Do(ctx context.Context, method string, body []byte, hdr http.Header) (*http.Response, error) {
	req, err := c.request(ctx, method, body, hdr, false)
	if err != nil {
		return nil, err
	}
	return c.hc.Do(req)
}

// Post sends body in a raw POST, like [Client.Do]. For [SSE], whatever the
// server sends in answer arrives on the SSE stream.
func (c *Client) Post(ctx context.Context, body []byte, hdr http.Header) (*http.Response, error) {
	return c.Do(ctx, http.MethodPost, body, hdr)
}

// newHTTPError reads (part of) the body of resp into an *HTTPError.
func newHTTPError(resp *http.Response) *HTTPError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return &HTTPError{Status: resp.StatusCode, Body: body, Header: resp.Header}
}

type wireRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

type wireResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// marshalParams encodes params; nil (or anything that encodes as null)
// means no params member.
func marshalParams(params any) (json.RawMessage, error) {
	if params == nil {
		return nil, nil
	}
	if raw, ok := params.(json.RawMessage); ok && len(raw) == 0 {
		return nil, nil
	}
	p, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("mcptest: encoding params: %w", err)
	}
	if string(p) == "null" {
		return nil, nil
	}
	return p, nil
}

func idKey(id int64) string { return strconv.FormatInt(id, 10) }

// send sends one request with a fresh integer id and the given (prepared)
// params, and returns its response message and the HTTP response header.
func (c *Client) send(ctx context.Context, method string, params json.RawMessage, init bool) (*Message, http.Header, error) {
	id := c.nextID.Add(1)
	body, err := encodeJSON(wireRequest{JSONRPC: "2.0", ID: json.RawMessage(idKey(id)), Method: method, Params: params})
	if err != nil {
		return nil, nil, err
	}
	return c.wire.roundTrip(ctx, id, method, body, init)
}

// sendCancel tells the server that request id was abandoned. It is bounded
// by a short timeout and runs synchronously, so nothing outlives the call.
func (c *Client) sendCancel(ctx context.Context, id int64, cause error) {
	if !c.cfg.cancelNotify {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
	defer cancel()
	_ = c.Notify(cctx, "notifications/cancelled", map[string]any{
		"requestId": id,
		"reason":    cause.Error(),
	})
}

// resultOf returns the result of a response message, or its error.
func resultOf(method string, m *Message) (json.RawMessage, error) {
	if m.Error != nil {
		return nil, m.Error
	}
	if m.Result == nil {
		return nil, fmt.Errorf("mcptest: %s: response has neither result nor error", method)
	}
	return m.Result, nil
}

// Call sends a JSON-RPC request with a fresh integer id and returns its
// final result. params nil sends no params member. A JSON-RPC error comes
// back as *[RPCError]; an unexpected HTTP status as *[HTTPError].
//
// How the request travels depends on the era:
//   - [Sessions]: POSTed with the session headers; the answer is JSON or an
//     SSE stream, whose server requests are answered (see
//     [WithRequestHandler]) and which is resumed if it ends early (see
//     [WithAutoResume]).
//   - [SSE]: POSTed to the message URL, which must answer 202; the response
//     is read from the SSE stream. Before [Client.Connect] it fails with
//     [ErrNotConnected]; if the stream ends first, with [ErrNoResponse] and
//     the reason.
//   - [Stateless]: params (a value that encodes as a JSON object, or nil)
//     gets the _meta envelope merged in: protocolVersion,
//     clientCapabilities, clientInfo and logLevel, unless the caller's own
//     params._meta sets them (a key set to null is removed); other _meta
//     keys, such as progressToken, are kept. When the result is
//     input_required, Call answers each input request with the handler
//     configured for its method ([WithElicitationHandler],
//     [WithSamplingHandler], [WithRootsHandler], [WithRequestHandler]) and
//     retries with a fresh id, the same params, inputResponses and the
//     requestState echoed byte for byte, up to [WithMaxRounds] round trips
//     in all. A missing handler fails the call with [ErrNoHandler]; a
//     handler's error fails it too (there is no error answer to an input
//     request). A result without resultType counts as complete (see
//     [ResultType] to assert on it); an unknown one is
//     [ErrUnknownResultType]. A JSON-RPC request on a response stream is
//     [ErrServerRequest].
//
// If ctx ends first, a [Sessions] or [SSE] client sends
// notifications/cancelled for the request (see [WithCancelNotifications]);
// a [Stateless] one closes the connection.
func (c *Client) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	p, err := c.wire.params(params)
	if err != nil {
		return nil, err
	}
	round := 0
	defer func() { c.rounds.Store(int64(round)) }()
	for {
		round++
		m, _, err := c.send(ctx, method, p, false)
		if err != nil {
			return nil, err
		}
		res, err := resultOf(method, m)
		if err != nil {
			return nil, err
		}
		next, err := c.wire.next(ctx, method, p, res, round)
		if err != nil {
			return nil, err
		}
		if next == nil {
			return res, nil
		}
		p = next
	}
}

// CallOnce sends one request with a fresh id and params as [Client.Call]
// sends them (for [Stateless], with the _meta envelope), and returns the
// response message as it came, with the header of the HTTP response that
// carried it (nil for [SSE]): a JSON-RPC error is a message with Error
// set, and an input_required result is not answered. An HTTP status other
// than 2xx comes back as *[HTTPError] (see [HTTPError.RPCError]).
func (c *Client) CallOnce(ctx context.Context, method string, params any) (*Message, http.Header, error) {
	p, err := c.wire.params(params)
	if err != nil {
		return nil, nil, err
	}
	return c.send(ctx, method, p, false)
}

// Notify sends a client notification where the era sends messages, with
// the headers [Client.Do] sends, and requires 202 Accepted; any other
// status comes back as *[HTTPError].
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	p, err := marshalParams(params)
	if err != nil {
		return err
	}
	body, err := encodeJSON(wireRequest{JSONRPC: "2.0", Method: method, Params: p})
	if err != nil {
		return err
	}
	return c.postExpect202(ctx, body)
}

func (c *Client) postExpect202(ctx context.Context, body []byte) error {
	req, err := c.request(ctx, http.MethodPost, body, nil, false)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	return expect202(resp)
}

// expect202 consumes resp, and fails unless it is 202 Accepted.
func expect202(resp *http.Response) error {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return newHTTPError(resp)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return nil
}

// Initialize runs the initialize handshake of the [Sessions] and [SSE]
// eras: it posts initialize with protocolVersion ([WithProtocolVersion]),
// the capabilities and the clientInfo, stores the negotiated
// protocolVersion, then posts notifications/initialized and requires 202
// Accepted. [Sessions] posts initialize without a session header and
// stores the Mcp-Session-Id response header (or clears the stored one if
// the server sent none); [SSE] first connects, unless connected. The
// [Stateless] era has no initialize: it fails with [errors.ErrUnsupported].
func (c *Client) Initialize(ctx context.Context) (*InitializeResult, error) {
	if err := c.wire.beforeInitialize(ctx); err != nil {
		return nil, err
	}
	params, err := encodeJSON(map[string]any{
		"protocolVersion": c.cfg.version,
		"capabilities":    c.cfg.capabilities(),
		"clientInfo":      Implementation{Name: c.cfg.clientName, Version: c.cfg.clientVersion},
	})
	if err != nil {
		return nil, err
	}
	m, hdr, err := c.send(ctx, "initialize", params, true)
	if err != nil {
		return nil, err
	}
	raw, err := resultOf("initialize", m)
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
	c.sessionID = hdr.Get(HeaderSessionID)
	c.version = res.ProtocolVersion
	c.mu.Unlock()
	if err := c.Notify(ctx, "notifications/initialized", nil); err != nil {
		return &res, fmt.Errorf("mcptest: notifications/initialized: %w", err)
	}
	return &res, nil
}

// HandleRequest answers the server request m with the handler configured
// for its method (see [WithRequestHandler]) and posts the answer with
// [Client.Respond] or [Client.RespondError]. Requests read from a
// response stream (or, for [SSE], from the SSE stream) are handled
// automatically; use this for requests read from a [Stream].
func (c *Client) HandleRequest(ctx context.Context, m *Message) error {
	if !m.IsRequest() {
		return fmt.Errorf("mcptest: not a request: %s", mustJSON(m))
	}
	res, rpcErr := runHandler(ctx, c.cfg.handlers, m.Method, m.Params)
	if rpcErr != nil {
		return c.RespondError(ctx, m.ID, rpcErr)
	}
	return c.Respond(ctx, m.ID, res)
}

// Respond posts a JSON-RPC result response for the server request with the
// given id where the era sends messages, and requires 202 Accepted. result
// nil sends {}.
func (c *Client) Respond(ctx context.Context, id json.RawMessage, result any) error {
	p, err := marshalParams(result)
	if err != nil {
		return err
	}
	if p == nil {
		p = json.RawMessage("{}")
	}
	body, err := encodeJSON(wireResponse{JSONRPC: "2.0", ID: id, Result: p})
	if err != nil {
		return err
	}
	return c.postExpect202(ctx, body)
}

// RespondError posts a JSON-RPC error response for the server request with
// the given id where the era sends messages, and requires 202 Accepted.
func (c *Client) RespondError(ctx context.Context, id json.RawMessage, e *RPCError) error {
	body, err := encodeJSON(wireResponse{JSONRPC: "2.0", ID: id, Error: e})
	if err != nil {
		return err
	}
	return c.postExpect202(ctx, body)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}
