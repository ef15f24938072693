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
	"net/textproto"
	"strconv"
	"strings"
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

// Client is an MCP Streamable HTTP client for tests. It is safe for
// concurrent use by multiple goroutines.
type Client struct {
	url    string
	hc     *http.Client
	cfg    config
	nextID atomic.Int64

	mu        sync.Mutex
	sessionID string
	version   string
	notes     []Notification
	requests  []Message
	streams   map[*Stream]struct{}
}

// New starts an [httptest.Server] for h, closed when the test ends, and
// returns a client for its endpoint (path "/" unless [WithPath] says
// otherwise). The client is closed when the test ends, before the server.
func New(t testing.TB, h http.Handler, opts ...Option) *Client {
	t.Helper()
	cfg := newConfig(opts)
	c := newClient(cfg.serve(t, h, cfg.path), cfg)
	t.Cleanup(c.Close)
	return c
}

// Dial returns a client for the MCP endpoint at url, for example
// "http://127.0.0.1:8080/mcp". It does not contact the server.
func Dial(url string, opts ...Option) *Client {
	cfg := newConfig(opts)
	cfg.httpClient = cfg.httpClientOrOwn()
	return newClient(url, cfg)
}

func newClient(url string, cfg config) *Client {
	return &Client{url: url, hc: cfg.httpClient, cfg: cfg, streams: map[*Stream]struct{}{}}
}

// URL returns the endpoint URL.
func (c *Client) URL() string { return c.url }

// SessionID returns the session id the server assigned at initialize, or
// the one set with [Client.SetSessionID]; "" if none.
func (c *Client) SessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID
}

// SetSessionID replaces the session id sent in Mcp-Session-Id; "" stops
// sending the header.
func (c *Client) SetSessionID(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sessionID = id
}

// ProtocolVersion returns the protocol version negotiated at initialize (or
// set with [Client.SetProtocolVersion]), which the client sends in
// MCP-Protocol-Version; "" before initialize.
func (c *Client) ProtocolVersion() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// SetProtocolVersion replaces the version sent in MCP-Protocol-Version; ""
// stops sending the header.
func (c *Client) SetProtocolVersion(v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version = v
}

// Notifications returns a copy of the server notifications received so far,
// in order of arrival.
func (c *Client) Notifications() []Notification {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Notification(nil), c.notes...)
}

// ClearNotifications forgets the notifications received so far.
func (c *Client) ClearNotifications() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notes = nil
}

// ServerRequests returns a copy of the server requests (elicitation/create,
// ping, …) received on response streams so far, in order of arrival.
func (c *Client) ServerRequests() []Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Message(nil), c.requests...)
}

// Close closes every open [Stream] and the idle connections of the HTTP
// client. The client stays usable afterwards.
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
	c.hc.CloseIdleConnections()
}

// newRequest builds a request with the default headers for its method, the
// session headers if session is true, the WithHeader headers, and then hdr:
// a name in hdr replaces the default, and a name whose only value is ""
// removes it.
func (c *Client) newRequest(ctx context.Context, method string, body []byte, hdr http.Header, session bool) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url, rd)
	if err != nil {
		return nil, err
	}
	switch method {
	case http.MethodPost:
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", acceptBoth)
	case http.MethodGet:
		req.Header.Set("Accept", "text/event-stream")
	}
	if c.cfg.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.token)
	}
	if session {
		c.mu.Lock()
		sid, ver := c.sessionID, c.version
		c.mu.Unlock()
		if sid != "" {
			req.Header.Set(HeaderSessionID, sid)
		}
		if ver != "" {
			req.Header.Set(HeaderProtocolVersion, ver)
		}
	}
	for k, vs := range c.cfg.header {
		req.Header[textproto.CanonicalMIMEHeaderKey(k)] = append([]string(nil), vs...)
	}
	for k, vs := range hdr {
		if len(vs) == 0 || (len(vs) == 1 && vs[0] == "") {
			req.Header.Del(k)
			continue
		}
		req.Header[textproto.CanonicalMIMEHeaderKey(k)] = append([]string(nil), vs...)
	}
	return req, nil
}

// Do sends a raw HTTP request to the endpoint with the given method and
// body and returns the response as is, whatever its status; the caller must
// close its body. The request carries the default headers for the method
// (for POST: Content-Type and Accept; for GET: Accept: text/event-stream),
// Authorization, the session headers and the WithHeader headers. A name in
// hdr replaces the default value; a name whose only value is "" removes the
// header.
func (c *Client) Do(ctx context.Context, method string, body []byte, hdr http.Header) (*http.Response, error) {
	req, err := c.newRequest(ctx, method, body, hdr, true)
	if err != nil {
		return nil, err
	}
	return c.hc.Do(req)
}

// Post sends body in a raw POST, like [Client.Do].
func (c *Client) Post(ctx context.Context, body []byte, hdr http.Header) (*http.Response, error) {
	return c.Do(ctx, http.MethodPost, body, hdr)
}

// newHTTPError reads (part of) the body of resp into an *HTTPError.
func newHTTPError(resp *http.Response) *HTTPError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return &HTTPError{Status: resp.StatusCode, Body: body, Header: resp.Header}
}

func (c *Client) newID() int64 { return c.nextID.Add(1) }

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

// Call sends one JSON-RPC request with a fresh integer id and returns its
// result. A JSON-RPC error comes back as *[RPCError]; an unexpected HTTP
// status as *[HTTPError]. params nil sends no params member.
func (c *Client) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	p, err := marshalParams(params)
	if err != nil {
		return nil, err
	}
	m, _, err := c.call(ctx, method, p, true)
	if err != nil {
		return nil, err
	}
	if m.Error != nil {
		return nil, m.Error
	}
	if m.Result == nil {
		return nil, fmt.Errorf("mcptest: %s: response has neither result nor error", method)
	}
	return m.Result, nil
}

// call sends one request and returns its response message and the HTTP
// response header.
func (c *Client) call(ctx context.Context, method string, params json.RawMessage, session bool) (*Message, http.Header, error) {
	id := c.newID()
	body, err := json.Marshal(wireRequest{JSONRPC: "2.0", ID: json.RawMessage(idKey(id)), Method: method, Params: params})
	if err != nil {
		return nil, nil, err
	}
	ps := newPending([]string{idKey(id)})
	hdr, err := c.exchange(ctx, body, ps, session)
	if err != nil {
		if ctx.Err() != nil && session && method != "initialize" {
			c.sendCancel(ctx, id, err)
		}
		return nil, hdr, err
	}
	return ps.got[idKey(id)], hdr, nil
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

// Notify sends a client notification and requires 202 Accepted; any other
// status comes back as *[HTTPError].
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	p, err := marshalParams(params)
	if err != nil {
		return err
	}
	body, err := json.Marshal(wireRequest{JSONRPC: "2.0", Method: method, Params: p})
	if err != nil {
		return err
	}
	return c.postExpect202(ctx, body)
}

func (c *Client) postExpect202(ctx context.Context, body []byte) error {
	req, err := c.newRequest(ctx, http.MethodPost, body, nil, true)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
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

// Initialize runs the initialize handshake: it posts initialize without a
// session header, stores the Mcp-Session-Id response header (or clears the
// stored one if the server sent none) and the negotiated protocolVersion,
// then posts notifications/initialized and requires 202 Accepted.
func (c *Client) Initialize(ctx context.Context) (*InitializeResult, error) {
	params, err := json.Marshal(map[string]any{
		"protocolVersion": c.cfg.version,
		"capabilities":    c.capabilities(),
		"clientInfo":      Implementation{Name: c.cfg.clientName, Version: c.cfg.clientVersion},
	})
	if err != nil {
		return nil, err
	}
	m, hdr, err := c.call(ctx, "initialize", params, false)
	if err != nil {
		return nil, err
	}
	if m.Error != nil {
		return nil, m.Error
	}
	var res InitializeResult
	if err := json.Unmarshal(m.Result, &res); err != nil {
		return nil, fmt.Errorf("mcptest: decoding initialize result %s: %w", m.Result, err)
	}
	res.Raw = m.Result
	if res.ProtocolVersion == "" {
		return &res, fmt.Errorf("mcptest: initialize result has no protocolVersion: %s", m.Result)
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

// capabilities returns the client capabilities to declare at initialize.
func (c *Client) capabilities() json.RawMessage { return c.cfg.capabilities() }

// Delete ends the session with an HTTP DELETE carrying the session id. Any
// non-2xx status (a server may answer 405) comes back as *[HTTPError]. The
// stored session id is kept, so a test can check that the server now
// answers it with 404.
func (c *Client) Delete(ctx context.Context) error {
	resp, err := c.Do(ctx, http.MethodDelete, nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return newHTTPError(resp)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return nil
}

// BatchRequest is one member of a [Client.Batch].
type BatchRequest struct {
	Method string
	Params any
	// Notification sends the member without an id.
	Notification bool
}

// Batch sends several messages in one POST as a JSON array, which only
// 2025-03-26 allows, and returns the responses in the order of reqs (nil
// for notifications). Error responses are returned as messages with Error
// set, not as an error.
func (c *Client) Batch(ctx context.Context, reqs ...BatchRequest) ([]*Message, error) {
	wire := make([]wireRequest, len(reqs))
	keys := make([]string, len(reqs))
	var ids []string
	for i, r := range reqs {
		p, err := marshalParams(r.Params)
		if err != nil {
			return nil, err
		}
		wire[i] = wireRequest{JSONRPC: "2.0", Method: r.Method, Params: p}
		if !r.Notification {
			keys[i] = idKey(c.newID())
			wire[i].ID = json.RawMessage(keys[i])
			ids = append(ids, keys[i])
		}
	}
	body, err := json.Marshal(wire)
	if err != nil {
		return nil, err
	}
	ps := newPending(ids)
	if _, err := c.exchange(ctx, body, ps, true); err != nil {
		return nil, err
	}
	out := make([]*Message, len(reqs))
	for i, k := range keys {
		if k != "" {
			out[i] = ps.got[k]
		}
	}
	return out, nil
}

// pending tracks the responses an exchange waits for.
type pending struct {
	want map[string]bool
	got  map[string]*Message
}

func newPending(ids []string) *pending {
	p := &pending{want: map[string]bool{}, got: map[string]*Message{}}
	for _, id := range ids {
		p.want[id] = true
	}
	return p
}

func (p *pending) done() bool { return len(p.got) == len(p.want) }

// exchange posts body and reads the answer until every response in ps has
// arrived. It returns the header of the POST's HTTP response.
func (c *Client) exchange(ctx context.Context, body []byte, ps *pending, session bool) (http.Header, error) {
	req, err := c.newRequest(ctx, http.MethodPost, body, nil, session)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return resp.Header, newHTTPError(resp)
	}
	if len(ps.want) == 0 {
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return resp.Header, newHTTPError(resp)
		}
		return resp.Header, nil
	}
	if resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent {
		defer resp.Body.Close()
		return resp.Header, fmt.Errorf("mcptest: the server answered a request with HTTP %d and no response: %w", resp.StatusCode, newHTTPError(resp))
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch strings.ToLower(ct) {
	case "application/json":
		defer resp.Body.Close()
		return resp.Header, c.readJSON(ctx, resp.Body, ps)
	case "text/event-stream":
		return resp.Header, c.readStream(ctx, resp.Body, ps)
	default:
		defer resp.Body.Close()
		return resp.Header, fmt.Errorf("mcptest: unexpected Content-Type %q for a response: %w", resp.Header.Get("Content-Type"), newHTTPError(resp))
	}
}

// readJSON handles an application/json answer: one message or an array.
func (c *Client) readJSON(ctx context.Context, body io.Reader, ps *pending) error {
	data, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	m, batch := parseMessages(data)
	if m == nil && batch == nil {
		return fmt.Errorf("mcptest: response body is not a JSON-RPC message: %q", truncate(data))
	}
	msgs := batch
	if m != nil {
		msgs = []Message{*m}
	}
	for i := range msgs {
		if err := c.dispatch(ctx, &msgs[i], ps); err != nil {
			return err
		}
	}
	if !ps.done() {
		return fmt.Errorf("mcptest: JSON response lacks the response to a request: %q", truncate(data))
	}
	return nil
}

// readStream handles a text/event-stream answer, resuming it with GET and
// Last-Event-ID if it ends early after an event with an id.
func (c *Client) readStream(ctx context.Context, body io.ReadCloser, ps *pending) error {
	var (
		lastID string
		retry  time.Duration
		idle   int
	)
	for {
		progressed, err := c.consumeSSE(ctx, body, ps, &lastID, &retry)
		body.Close()
		if err != nil || ps.done() {
			return err
		}
		if lastID == "" || !c.cfg.autoResume {
			return ErrNoResponse
		}
		if progressed {
			idle = 0
		} else if idle++; idle > maxIdleResumes {
			return fmt.Errorf("%w (gave up after %d resumptions that brought no event)", ErrNoResponse, maxIdleResumes)
		}
		if retry > 0 {
			t := time.NewTimer(retry)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		resp, err := c.get(ctx, lastID)
		if err != nil {
			return fmt.Errorf("mcptest: resuming the response stream after event %q: %w", lastID, err)
		}
		body = resp.Body
	}
}

// consumeSSE reads events from body until every pending response arrived
// or the body ends. It reports whether any event was read.
func (c *Client) consumeSSE(ctx context.Context, body io.Reader, ps *pending, lastID *string, retry *time.Duration) (bool, error) {
	progressed := false
	for ev, err := range ReadSSE(body) {
		if err != nil {
			return progressed, err
		}
		progressed = true
		if ev.HasID {
			*lastID = ev.ID
		}
		if ev.HasRetry {
			*retry = ev.Retry
		}
		if ev.Data == "" {
			continue // priming or retry-only event
		}
		msgs := ev.Messages()
		if msgs == nil {
			return progressed, fmt.Errorf("mcptest: SSE event data is not a JSON-RPC message: %q", truncate([]byte(ev.Data)))
		}
		for i := range msgs {
			if err := c.dispatch(ctx, &msgs[i], ps); err != nil {
				return progressed, err
			}
		}
		if ps.done() {
			return progressed, nil
		}
	}
	return progressed, nil
}

// dispatch handles one message received in answer to a POST.
func (c *Client) dispatch(ctx context.Context, m *Message, ps *pending) error {
	switch {
	case m.IsResponse():
		if !hasID(m.ID) {
			if m.Error != nil {
				return m.Error
			}
			return fmt.Errorf("mcptest: response without id: %s", mustJSON(m))
		}
		key := string(bytes.TrimSpace(m.ID))
		if !ps.want[key] {
			return fmt.Errorf("mcptest: response with unexpected id %s", key)
		}
		if ps.got[key] != nil {
			return fmt.Errorf("mcptest: second response with id %s", key)
		}
		ps.got[key] = m
		return nil
	case m.IsRequest():
		c.mu.Lock()
		c.requests = append(c.requests, *m)
		c.mu.Unlock()
		if err := c.HandleRequest(ctx, m); err != nil {
			return fmt.Errorf("mcptest: answering server request %s: %w", m.Method, err)
		}
		return nil
	case m.IsNotification():
		c.mu.Lock()
		c.notes = append(c.notes, Notification{Method: m.Method, Params: m.Params})
		c.mu.Unlock()
		if c.cfg.onNotify != nil {
			c.cfg.onNotify(m.Method, m.Params)
		}
		return nil
	default:
		return fmt.Errorf("mcptest: invalid JSON-RPC message: %s", mustJSON(m))
	}
}

// HandleRequest answers the server request m with the handler configured
// for its method (see [WithRequestHandler]) and posts the answer with
// [Client.Respond] or [Client.RespondError]. Requests read from a POST's
// response stream are handled automatically; use this for requests read
// from a [Stream].
func (c *Client) HandleRequest(ctx context.Context, m *Message) error {
	if !m.IsRequest() {
		return fmt.Errorf("mcptest: not a request: %s", mustJSON(m))
	}
	h := c.cfg.handlers[m.Method]
	if h == nil {
		if m.Method != MethodPing {
			return c.RespondError(ctx, m.ID, &RPCError{Code: CodeMethodNotFound, Message: "Method not found: " + m.Method})
		}
		h = func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }
	}
	res, err := h(ctx, m.Params)
	if err != nil {
		var re *RPCError
		if !errors.As(err, &re) {
			re = &RPCError{Code: CodeInternalError, Message: err.Error()}
		}
		return c.RespondError(ctx, m.ID, re)
	}
	return c.Respond(ctx, m.ID, res)
}

// Respond posts a JSON-RPC result response for the server request with the
// given id and requires 202 Accepted. result nil sends {}.
func (c *Client) Respond(ctx context.Context, id json.RawMessage, result any) error {
	p, err := marshalParams(result)
	if err != nil {
		return err
	}
	if p == nil {
		p = json.RawMessage("{}")
	}
	body, err := json.Marshal(wireResponse{JSONRPC: "2.0", ID: id, Result: p})
	if err != nil {
		return err
	}
	return c.postExpect202(ctx, body)
}

// RespondError posts a JSON-RPC error response for the server request with
// the given id and requires 202 Accepted.
func (c *Client) RespondError(ctx context.Context, id json.RawMessage, e *RPCError) error {
	body, err := json.Marshal(wireResponse{JSONRPC: "2.0", ID: id, Error: e})
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
