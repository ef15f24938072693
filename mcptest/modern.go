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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// ModernProtocolVersion is the protocol version a [ModernClient] sends
// unless [WithProtocolVersion] says otherwise.
const ModernProtocolVersion = "2026-07-28"

// DefaultMaxRounds is the default of [WithMaxRounds].
const DefaultMaxRounds = 10

// Header names added by 2026-07-28. MCP-Protocol-Version is
// [HeaderProtocolVersion].
const (
	HeaderMethod = "Mcp-Method"
	HeaderName   = "Mcp-Name"
)

// Keys of the 2026-07-28 _meta envelope.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
)

// Values of a 2026-07-28 result's resultType.
const (
	ResultTypeComplete      = "complete"
	ResultTypeInputRequired = "input_required"
)

// Error codes added by 2026-07-28.
const (
	CodeHeaderMismatch                  = -32020
	CodeMissingRequiredClientCapability = -32021
	CodeUnsupportedProtocolVersion      = -32022
)

// Errors of a [ModernClient].
var (
	// ErrServerRequest is returned when a 2026-07-28 response stream
	// carries a JSON-RPC request, which that revision forbids.
	ErrServerRequest = errors.New("mcptest: the server sent a JSON-RPC request on a 2026-07-28 response stream")
	// ErrTooManyRounds is returned when a request still needs input after
	// the number of round trips set with [WithMaxRounds].
	ErrTooManyRounds = errors.New("mcptest: the server still asks for input after the maximum number of rounds")
	// ErrNoHandler is returned when an input_required result asks for
	// input the client has no handler for.
	ErrNoHandler = errors.New("mcptest: no handler for an input request")
	// ErrUnknownResultType is returned for a result whose resultType the
	// client does not know, which the spec says to treat as invalid.
	ErrUnknownResultType = errors.New("mcptest: unknown resultType")
)

// WithLogLevel makes a [ModernClient] send
// _meta["io.modelcontextprotocol/logLevel"] = level in every request, which
// opts in to notifications/message for it.
func WithLogLevel(level string) Option {
	return func(c *config) { c.logLevel = level }
}

// WithMaxRounds sets how many round trips [ModernClient.Call] makes at
// most for one request, the first included, before it gives up on a server
// that keeps answering input_required with [ErrTooManyRounds]. The default
// is [DefaultMaxRounds]; values below 1 mean 1.
func WithMaxRounds(n int) Option {
	return func(c *config) { c.maxRounds = n }
}

// InputRequest is one entry of an input_required result's inputRequests.
type InputRequest struct {
	// Method is elicitation/create, sampling/createMessage or roots/list.
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// InputRequiredResult is a 2026-07-28 interim result asking the client to
// retry the request with answers (multi round-trip requests).
type InputRequiredResult struct {
	// ResultType is "input_required".
	ResultType string `json:"resultType"`
	// InputRequests maps the server's keys to what it asks for; nil if the
	// result had none.
	InputRequests map[string]InputRequest `json:"inputRequests,omitempty"`
	// RequestState is the decoded requestState, "" if absent (see
	// HasRequestState).
	RequestState string `json:"-"`
	// HasRequestState reports whether the result had a requestState.
	HasRequestState bool `json:"-"`
	// RawRequestState is the requestState JSON string exactly as received,
	// nil if absent. The client echoes these bytes.
	RawRequestState json.RawMessage `json:"-"`
	// Raw is the whole result object.
	Raw json.RawMessage `json:"-"`
}

// ResultType returns the resultType of a result object, "" if it has none
// or is not an object. A client treats "" as "complete" (a legacy server).
func ResultType(result json.RawMessage) string {
	var r struct {
		ResultType string `json:"resultType"`
	}
	_ = json.Unmarshal(result, &r)
	return r.ResultType
}

// ParseInputRequired decodes an input_required result. It fails if the
// result is not one, or has neither inputRequests nor requestState.
func ParseInputRequired(result json.RawMessage) (*InputRequiredResult, error) {
	var r struct {
		InputRequiredResult
		RequestState json.RawMessage `json:"requestState"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		return nil, fmt.Errorf("mcptest: decoding input_required result %s: %w", truncate(result), err)
	}
	out := r.InputRequiredResult
	out.Raw = result
	if out.ResultType != ResultTypeInputRequired {
		return nil, fmt.Errorf("mcptest: result is not input_required: %s", truncate(result))
	}
	if rs := bytes.TrimSpace(r.RequestState); len(rs) > 0 && string(rs) != "null" {
		if err := json.Unmarshal(rs, &out.RequestState); err != nil {
			return nil, fmt.Errorf("mcptest: requestState is not a string: %s", truncate(rs))
		}
		out.RawRequestState = rs
		out.HasRequestState = true
	}
	for k, ir := range out.InputRequests {
		if ir.Method == "" {
			return nil, fmt.Errorf("mcptest: input request %q has no method: %s", k, truncate(result))
		}
	}
	if out.InputRequests == nil && !out.HasRequestState {
		return nil, fmt.Errorf("mcptest: input_required result has neither inputRequests nor requestState: %s", truncate(result))
	}
	return &out, nil
}

// ModernClient is a client for the stateless 2026-07-28 revision over
// Streamable HTTP: no initialize and no session; every request carries the
// _meta envelope and the MCP-Protocol-Version, Mcp-Method and Mcp-Name
// headers; input_required results are answered with the configured
// handlers and retried. It is safe for concurrent use by multiple
// goroutines. It starts a goroutine only for a stream returned by
// [ModernClient.Listen].
type ModernClient struct {
	url     string
	hc      *http.Client
	cfg     config
	version string
	nextID  atomic.Int64
	rounds  atomic.Int64

	mu      sync.Mutex
	notes   []Notification
	streams map[*Stream]struct{}
}

// NewModern starts an [httptest.Server] for h, closed when the test ends,
// and returns a 2026-07-28 client for its endpoint (path "/" unless
// [WithPath] says otherwise). The client is closed when the test ends,
// before the server.
func NewModern(t testing.TB, h http.Handler, opts ...Option) *ModernClient {
	t.Helper()
	cfg := newConfig(opts)
	c := newModernClient(cfg.serve(t, h, cfg.path), cfg)
	t.Cleanup(c.Close)
	return c
}

// DialModern returns a 2026-07-28 client for the MCP endpoint at url. It
// does not contact the server.
func DialModern(url string, opts ...Option) *ModernClient {
	cfg := newConfig(opts)
	cfg.httpClient = cfg.httpClientOrOwn()
	return newModernClient(url, cfg)
}

func newModernClient(url string, cfg config) *ModernClient {
	v := ModernProtocolVersion
	if cfg.versionSet {
		v = cfg.version
	}
	return &ModernClient{url: url, hc: cfg.httpClient, cfg: cfg, version: v, streams: map[*Stream]struct{}{}}
}

// URL returns the endpoint URL.
func (c *ModernClient) URL() string { return c.url }

// ProtocolVersion returns the version the client sends in
// MCP-Protocol-Version and in _meta.
func (c *ModernClient) ProtocolVersion() string { return c.version }

// Capabilities returns the client capabilities sent in every request's
// _meta.
func (c *ModernClient) Capabilities() json.RawMessage { return c.cfg.capabilities() }

// Rounds returns how many round trips the last [ModernClient.Call] (or
// typed helper) that returned took: 1 when the first answer was final.
func (c *ModernClient) Rounds() int { return int(c.rounds.Load()) }

// Notifications returns a copy of the server notifications read from
// response streams so far, in order of arrival. Notifications read from a
// [ModernClient.Listen] stream are not recorded.
func (c *ModernClient) Notifications() []Notification {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.notes)
}

// ClearNotifications forgets the notifications received so far.
func (c *ModernClient) ClearNotifications() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notes = nil
}

// Close closes every open [Stream] from [ModernClient.Listen] and the idle
// connections of the HTTP client. The client stays usable afterwards.
func (c *ModernClient) Close() {
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

// buildParams encodes params, which must be a JSON object (or nil), and
// merges the _meta envelope into it. Keys of a _meta the caller gave win
// over the client's; a key the caller set to null is removed, so that tests
// can send a request without, say, clientCapabilities.
func (c *ModernClient) buildParams(params any) (map[string]json.RawMessage, error) {
	p, err := marshalParams(params)
	if err != nil {
		return nil, err
	}
	obj := map[string]json.RawMessage{}
	if p != nil {
		if err := json.Unmarshal(p, &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("mcptest: params must be a JSON object, not %s", truncate(p))
		}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := obj["_meta"]; ok && string(bytes.TrimSpace(raw)) != "null" {
		if err := json.Unmarshal(raw, &meta); err != nil || meta == nil {
			return nil, fmt.Errorf("mcptest: params._meta must be a JSON object, not %s", truncate(raw))
		}
	}
	def := func(key string, v any) error {
		if _, ok := meta[key]; ok {
			return nil
		}
		b, err := encodeJSON(v)
		if err != nil {
			return err
		}
		meta[key] = b
		return nil
	}
	if c.version != "" {
		if err := def(MetaProtocolVersion, c.version); err != nil {
			return nil, err
		}
	}
	if err := def(MetaClientCapabilities, c.cfg.capabilities()); err != nil {
		return nil, err
	}
	if c.cfg.clientName != "" || c.cfg.clientVersion != "" {
		if err := def(MetaClientInfo, Implementation{Name: c.cfg.clientName, Version: c.cfg.clientVersion}); err != nil {
			return nil, err
		}
	}
	if c.cfg.logLevel != "" {
		if err := def(MetaLogLevel, c.cfg.logLevel); err != nil {
			return nil, err
		}
	}
	for k, v := range meta {
		if string(bytes.TrimSpace(v)) == "null" {
			delete(meta, k)
		}
	}
	m, err := encodeJSON(meta)
	if err != nil {
		return nil, err
	}
	obj["_meta"] = m
	return obj, nil
}

// nameParam returns the params member mirrored in Mcp-Name for method, or
// "" if the method has none.
func nameParam(method string) string {
	switch method {
	case "tools/call", "prompts/get":
		return "name"
	case "resources/read":
		return "uri"
	case "tasks/get", "tasks/update", "tasks/cancel":
		return "taskId"
	}
	return ""
}

// headerValue converts a JSON string, integer or boolean to its header
// form (encoded when it is not header-safe); ok is false for other values.
func headerValue(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return EncodeHeaderValue(s), true
	case 't', 'f':
		return string(raw), string(raw) == "true" || string(raw) == "false"
	case 'n', '{', '[':
		return "", false
	default:
		var n json.Number
		if json.Unmarshal(raw, &n) != nil {
			return "", false
		}
		return n.String(), true
	}
}

// methodHeaders returns the Mcp-Method and Mcp-Name headers for a request.
func methodHeaders(method string, params map[string]json.RawMessage) http.Header {
	h := http.Header{}
	if method == "" {
		return h
	}
	h.Set(HeaderMethod, method)
	if key := nameParam(method); key != "" {
		if v, ok := headerValue(params[key]); ok {
			h.Set(HeaderName, v)
		}
	}
	return h
}

// newRequest builds a POST with the modern default headers, then derived
// (Mcp-Method, Mcp-Name), then the WithHeader headers, then hdr. A name in
// a later set replaces the earlier value; a name whose only value is ""
// removes the header.
func (c *ModernClient) newRequest(ctx context.Context, body []byte, derived, hdr http.Header) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", acceptBoth)
	if c.cfg.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.token)
	}
	if c.version != "" {
		req.Header.Set(HeaderProtocolVersion, c.version)
	}
	applyHeaders(req.Header, derived, c.cfg.header, hdr)
	return req, nil
}

// Post sends body to the endpoint in a raw POST and returns the response as
// is, whatever its status; the caller must close its body. The request
// carries the headers [ModernClient.Call] would send for body:
// Content-Type, Accept, Authorization, MCP-Protocol-Version, and, when body
// is a JSON-RPC request, Mcp-Method and Mcp-Name derived from it; then the
// WithHeader headers. A name in hdr replaces the default value; a name
// whose only value is "" removes the header.
func (c *ModernClient) Post(ctx context.Context, body []byte, hdr http.Header) (*http.Response, error) {
	var m struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(body, &m) == nil {
		_ = json.Unmarshal(m.Params, &params)
	}
	req, err := c.newRequest(ctx, body, methodHeaders(m.Method, params), hdr)
	if err != nil {
		return nil, err
	}
	return c.hc.Do(req)
}

// roundTrip sends one request with a fresh id and reads its response.
func (c *ModernClient) roundTrip(ctx context.Context, method string, params map[string]json.RawMessage) (*Message, http.Header, error) {
	p, err := encodeJSON(params)
	if err != nil {
		return nil, nil, fmt.Errorf("mcptest: encoding params: %w", err)
	}
	id := idKey(c.nextID.Add(1))
	body, err := encodeJSON(wireRequest{JSONRPC: "2.0", ID: json.RawMessage(id), Method: method, Params: p})
	if err != nil {
		return nil, nil, err
	}
	req, err := c.newRequest(ctx, body, methodHeaders(method, params), nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	m, err := c.readResponse(ctx, resp, id)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return m, resp.Header, err
}

// readResponse reads the answer to the request with the given id: one JSON
// object, or an SSE stream of notifications ended by the response.
func (c *ModernClient) readResponse(ctx context.Context, resp *http.Response, id string) (*Message, error) {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, newHTTPError(resp)
	}
	if resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent {
		return nil, fmt.Errorf("mcptest: the server answered a request with HTTP %d and no response: %w", resp.StatusCode, newHTTPError(resp))
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch strings.ToLower(ct) {
	case "application/json":
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		m, batch := parseMessages(data)
		if batch != nil {
			return nil, fmt.Errorf("mcptest: 2026-07-28 response body is a batch: %s", truncate(data))
		}
		if m == nil {
			return nil, fmt.Errorf("mcptest: response body is not a JSON-RPC message: %q", truncate(data))
		}
		done, err := c.handle(m, id)
		if err == nil && !done {
			err = fmt.Errorf("mcptest: JSON response lacks the response to the request: %s", truncate(data))
		}
		if err != nil {
			return nil, err
		}
		return m, nil
	case "text/event-stream":
		for ev, err := range ReadSSE(resp.Body) {
			if err != nil {
				return nil, err
			}
			if ev.Data == "" {
				continue
			}
			if ev.Message == nil {
				return nil, fmt.Errorf("mcptest: SSE event data is not a single JSON-RPC message: %q", truncate([]byte(ev.Data)))
			}
			done, err := c.handle(ev.Message, id)
			if err != nil {
				return nil, err
			}
			if done {
				return ev.Message, nil
			}
		}
		return nil, ErrNoResponse
	default:
		return nil, fmt.Errorf("mcptest: unexpected Content-Type %q for a response: %w", resp.Header.Get("Content-Type"), newHTTPError(resp))
	}
}

// handle deals with one message read in answer to the request with the
// given id and reports whether it is that request's response.
func (c *ModernClient) handle(m *Message, id string) (bool, error) {
	switch {
	case m.IsResponse():
		if got := string(bytes.TrimSpace(m.ID)); got != id {
			if !hasID(m.ID) && m.Error != nil {
				return false, m.Error
			}
			return false, fmt.Errorf("mcptest: response with id %s, want %s: %s", got, id, mustJSON(m))
		}
		return true, nil
	case m.IsRequest():
		return false, fmt.Errorf("%w: %s", ErrServerRequest, mustJSON(m))
	case m.IsNotification():
		c.mu.Lock()
		c.notes = append(c.notes, Notification{Method: m.Method, Params: m.Params})
		c.mu.Unlock()
		if c.cfg.onNotify != nil {
			c.cfg.onNotify(m.Method, m.Params)
		}
		return false, nil
	default:
		return false, fmt.Errorf("mcptest: invalid JSON-RPC message: %s", mustJSON(m))
	}
}

// CallOnce sends one request with a fresh id and the _meta envelope merged
// into params (as [ModernClient.Call] does) and returns the response
// message as it came, with the HTTP response header: a JSON-RPC error is a
// message with Error set, and an input_required result is not answered. An
// HTTP status other than 2xx comes back as *[HTTPError] (see
// [HTTPError.RPCError]).
func (c *ModernClient) CallOnce(ctx context.Context, method string, params any) (*Message, http.Header, error) {
	p, err := c.buildParams(params)
	if err != nil {
		return nil, nil, err
	}
	return c.roundTrip(ctx, method, p)
}

// Retry sends a hand-made retry of a request that got input_required: a
// fresh id, params with the _meta envelope, plus inputResponses (omitted
// when nil) and requestState (omitted when ""). It returns the response
// message as [ModernClient.CallOnce] does.
func (c *ModernClient) Retry(ctx context.Context, method string, params any, inputResponses map[string]any, requestState string) (*Message, error) {
	p, err := c.buildParams(params)
	if err != nil {
		return nil, err
	}
	if inputResponses != nil {
		b, err := encodeJSON(inputResponses)
		if err != nil {
			return nil, fmt.Errorf("mcptest: encoding inputResponses: %w", err)
		}
		p["inputResponses"] = b
	}
	if requestState != "" {
		b, err := encodeJSON(requestState)
		if err != nil {
			return nil, err
		}
		p["requestState"] = b
	}
	m, _, err := c.roundTrip(ctx, method, p)
	return m, err
}

// Call sends a request and returns its final result. params (a value that
// encodes as a JSON object, or nil) gets the _meta envelope merged in:
// protocolVersion, clientCapabilities, clientInfo and logLevel, unless the
// caller's own params._meta sets them (a key set to null is removed); other
// _meta keys of the caller, such as progressToken, are kept.
//
// When the result is input_required, Call answers each input request with
// the handler configured for its method ([WithElicitationHandler],
// [WithSamplingHandler], [WithRootsHandler], [WithRequestHandler]) and
// retries with a fresh id, the same params, inputResponses and the
// requestState echoed byte for byte, up to [WithMaxRounds] round trips in
// all. A missing handler fails the call with [ErrNoHandler]; a handler's
// error fails it too (there is no error answer to an input request). A
// result without resultType counts as complete (see [ResultType] to assert
// on it). A JSON-RPC error comes back as *[RPCError]; an unexpected HTTP
// status as *[HTTPError]; a JSON-RPC request on a response stream as
// [ErrServerRequest].
func (c *ModernClient) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	p, err := c.buildParams(params)
	if err != nil {
		return nil, err
	}
	maxRounds := max(c.cfg.maxRounds, 1)
	round := 0
	defer func() { c.rounds.Store(int64(round)) }()
	for {
		round++
		m, _, err := c.roundTrip(ctx, method, p)
		if err != nil {
			return nil, err
		}
		if m.Error != nil {
			return nil, m.Error
		}
		if m.Result == nil {
			return nil, fmt.Errorf("mcptest: %s: response has neither result nor error", method)
		}
		var probe struct {
			ResultType *string `json:"resultType"`
		}
		if err := json.Unmarshal(m.Result, &probe); err != nil {
			return nil, fmt.Errorf("mcptest: %s: result is not an object: %s", method, truncate(m.Result))
		}
		switch {
		case probe.ResultType == nil || *probe.ResultType == ResultTypeComplete:
			return m.Result, nil
		case *probe.ResultType != ResultTypeInputRequired:
			return nil, fmt.Errorf("%w %q in the %s result: %s", ErrUnknownResultType, *probe.ResultType, method, truncate(m.Result))
		}
		ir, err := ParseInputRequired(m.Result)
		if err != nil {
			return nil, err
		}
		if round >= maxRounds {
			return nil, fmt.Errorf("%w (%s, %d rounds): %s", ErrTooManyRounds, method, round, truncate(m.Result))
		}
		answers, err := c.answerInputs(ctx, ir.InputRequests)
		if err != nil {
			return nil, err
		}
		next := make(map[string]json.RawMessage, len(p)+2)
		for k, v := range p {
			next[k] = v
		}
		delete(next, "inputResponses")
		delete(next, "requestState")
		if len(answers) > 0 {
			b, err := encodeJSON(answers)
			if err != nil {
				return nil, err
			}
			next["inputResponses"] = b
		}
		if ir.HasRequestState {
			next["requestState"] = ir.RawRequestState
		}
		p = next
	}
}

// answerInputs runs the handler for each input request, in key order.
func (c *ModernClient) answerInputs(ctx context.Context, reqs map[string]InputRequest) (map[string]json.RawMessage, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(reqs))
	for k := range reqs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make(map[string]json.RawMessage, len(reqs))
	for _, k := range keys {
		r := reqs[k]
		h := c.cfg.handlers[r.Method]
		if h == nil {
			return nil, fmt.Errorf("%w: input request %q asks for %s", ErrNoHandler, k, r.Method)
		}
		res, err := h(ctx, r.Params)
		if err != nil {
			return nil, fmt.Errorf("mcptest: answering input request %q (%s): %w", k, r.Method, err)
		}
		if t := bytes.TrimSpace(res); len(t) == 0 || string(t) == "null" {
			res = json.RawMessage("{}")
		}
		out[k] = res
	}
	return out, nil
}

// Discover sends server/discover and returns its result.
func (c *ModernClient) Discover(ctx context.Context) (json.RawMessage, error) {
	return c.Call(ctx, "server/discover", nil)
}

// ListToolsPage sends one tools/list request, with the given cursor unless
// it is "", and returns the tools and the nextCursor ("" on the last page).
func (c *ModernClient) ListToolsPage(ctx context.Context, cursor string) ([]Tool, string, error) {
	return listToolsPage(ctx, c, cursor)
}

// ListTools lists all tools, following nextCursor until the last page. It
// fails if the server repeats a cursor.
func (c *ModernClient) ListTools(ctx context.Context) ([]Tool, error) {
	return listTools(ctx, c)
}

// CallTool calls a tool, answering input_required rounds as
// [ModernClient.Call] does. args is encoded as the arguments member; nil
// sends none. A tool failure is a result with IsError set, not an error.
func (c *ModernClient) CallTool(ctx context.Context, name string, args any) (*ToolResult, error) {
	return callTool(ctx, c, name, args)
}

// ReadResource sends resources/read for uri and returns the result.
func (c *ModernClient) ReadResource(ctx context.Context, uri string) (json.RawMessage, error) {
	return c.Call(ctx, "resources/read", map[string]string{"uri": uri})
}

// GetPrompt sends prompts/get and returns the result. args nil sends no
// arguments member.
func (c *ModernClient) GetPrompt(ctx context.Context, name string, args map[string]string) (json.RawMessage, error) {
	return c.Call(ctx, "prompts/get", struct {
		Name      string            `json:"name"`
		Arguments map[string]string `json:"arguments,omitempty"`
	}{name, args})
}

// Listen POSTs subscriptions/listen with params {"notifications": filter}
// plus the _meta envelope (filter nil sends {}) and returns the response
// stream: the first event should be notifications/subscriptions/acknowledged,
// and [Stream.RequestID] is the subscription id the notifications carry. ctx
// bounds the whole life of the stream; cancelling it, [Stream.Close] or
// [ModernClient.Close] ends it, which is how a client cancels a
// subscription. An HTTP status other than 2xx comes back as *[HTTPError], a
// JSON error response as *[RPCError], and any other non-stream answer as an
// error.
func (c *ModernClient) Listen(ctx context.Context, filter any) (*Stream, error) {
	f, err := marshalParams(filter)
	if err != nil {
		return nil, err
	}
	if f == nil {
		f = json.RawMessage("{}")
	}
	p, err := c.buildParams(map[string]json.RawMessage{"notifications": f})
	if err != nil {
		return nil, err
	}
	pb, err := encodeJSON(p)
	if err != nil {
		return nil, err
	}
	id := json.RawMessage(idKey(c.nextID.Add(1)))
	body, err := encodeJSON(wireRequest{JSONRPC: "2.0", ID: id, Method: "subscriptions/listen", Params: pb})
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	req, err := c.newRequest(sctx, body, methodHeaders("subscriptions/listen", p), nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || !strings.EqualFold(ct, "text/event-stream") {
		defer cancel()
		defer resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return nil, newHTTPError(resp)
		}
		if !strings.EqualFold(ct, "application/json") {
			return nil, fmt.Errorf("mcptest: subscriptions/listen did not open a stream: %w", newHTTPError(resp))
		}
		m, err := c.readResponse(sctx, resp, string(id))
		if err != nil {
			return nil, err
		}
		if m.Error != nil {
			return nil, m.Error
		}
		return nil, fmt.Errorf("mcptest: subscriptions/listen answered with a JSON result instead of a stream: %s", truncate(m.Result))
	}
	s := newStream(sctx, cancel, resp, "", id, func(s *Stream) {
		c.mu.Lock()
		delete(c.streams, s)
		c.mu.Unlock()
	})
	c.mu.Lock()
	c.streams[s] = struct{}{}
	c.mu.Unlock()
	go s.run()
	return s, nil
}
