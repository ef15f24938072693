package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
)

// ModernProtocolVersion is the protocol version a [Stateless] client
// sends unless [WithProtocolVersion] says otherwise.
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

// Errors of the [Stateless] era.
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

// WithLogLevel makes a [Stateless] client send
// _meta["io.modelcontextprotocol/logLevel"] = level in every request, which
// opts in to notifications/message for it.
func WithLogLevel(level string) Option {
	return func(c *config) { c.logLevel = level }
}

// WithMaxRounds sets how many round trips [Client.Call] makes at most for
// one request in the [Stateless] era, the first included, before it gives
// up on a server that keeps answering input_required with
// [ErrTooManyRounds]. The default is [DefaultMaxRounds]; values below 1
// mean 1.
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

// statelessWire is the [Stateless] era: 2026-07-28, no session.
type statelessWire struct {
	c *Client
}

// target is the endpoint, with the default headers of the method,
// MCP-Protocol-Version, and for a JSON-RPC request body Mcp-Method and
// Mcp-Name derived from it.
func (w *statelessWire) target(method string, body []byte, _ bool) (string, http.Header, error) {
	h := http.Header{}
	switch method {
	case http.MethodPost:
		h.Set("Content-Type", "application/json")
		h.Set("Accept", acceptBoth)
	case http.MethodGet:
		h.Set("Accept", "text/event-stream")
	}
	if v := w.c.ProtocolVersion(); v != "" {
		h.Set(HeaderProtocolVersion, v)
	}
	var m struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &m) == nil {
		var params map[string]json.RawMessage
		_ = json.Unmarshal(m.Params, &params)
		applyHeaders(h, methodHeaders(m.Method, params))
	}
	return w.c.url, h, nil
}

func (w *statelessWire) params(params any) (json.RawMessage, error) {
	p, err := w.buildParams(params)
	if err != nil {
		return nil, err
	}
	b, err := encodeJSON(p)
	if err != nil {
		return nil, fmt.Errorf("mcptest: encoding params: %w", err)
	}
	return b, nil
}

func (w *statelessWire) beforeInitialize(context.Context) error {
	return w.c.unsupported("Initialize")
}

func (w *statelessWire) close() {}

// stateless returns the client's wire if its era is [Stateless], or fails
// naming op.
func (c *Client) stateless(op string) (*statelessWire, error) {
	if w, ok := c.wire.(*statelessWire); ok {
		return w, nil
	}
	return nil, c.unsupported(op)
}

// buildParams decodes params, which must encode as a JSON object (or be
// nil), and merges the _meta envelope into it. Keys of a _meta the caller
// gave win over the client's; a key the caller set to null is removed, so
// that tests can send a request without, say, clientCapabilities.
func (w *statelessWire) buildParams(params any) (map[string]json.RawMessage, error) {
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
	if err := w.envelope(meta); err != nil {
		return nil, err
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

// envelope adds to meta the keys of the client's envelope it does not
// have: protocolVersion, clientCapabilities, clientInfo and logLevel.
func (w *statelessWire) envelope(meta map[string]json.RawMessage) error {
	cfg := &w.c.cfg
	def := func(key string, v any) error {
		if _, ok := meta[key]; ok {
			return nil
		}
		b, err := encodeJSON(v)
		meta[key] = b
		return err
	}
	if v := w.c.ProtocolVersion(); v != "" {
		if err := def(MetaProtocolVersion, v); err != nil {
			return err
		}
	}
	if err := def(MetaClientCapabilities, cfg.capabilities()); err != nil {
		return err
	}
	if cfg.clientName != "" || cfg.clientVersion != "" {
		if err := def(MetaClientInfo, Implementation{Name: cfg.clientName, Version: cfg.clientVersion}); err != nil {
			return err
		}
	}
	if cfg.logLevel != "" {
		return def(MetaLogLevel, cfg.logLevel)
	}
	return nil
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

func (w *statelessWire) roundTrip(ctx context.Context, id int64, _ string, body []byte, _ bool) (*Message, http.Header, error) {
	req, err := w.c.request(ctx, http.MethodPost, body, nil, false)
	if err != nil {
		return nil, nil, err
	}
	resp, err := w.c.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	m, err := w.readResponse(resp, idKey(id))
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return m, resp.Header, err
}

// readResponse reads the answer to the request with the given id: one JSON
// object, or an SSE stream of notifications ended by the response.
func (w *statelessWire) readResponse(resp *http.Response, id string) (*Message, error) {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, newHTTPError(resp)
	}
	if resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent {
		return nil, fmt.Errorf("mcptest: the server answered a request with HTTP %d and no response: %w", resp.StatusCode, newHTTPError(resp))
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch strings.ToLower(ct) {
	case "application/json":
		return w.readJSON(resp.Body, id)
	case "text/event-stream":
		return w.readStream(resp.Body, id)
	default:
		return nil, fmt.Errorf("mcptest: unexpected Content-Type %q for a response: %w", resp.Header.Get("Content-Type"), newHTTPError(resp))
	}
}

// readJSON reads a JSON answer, which must be the response to id.
func (w *statelessWire) readJSON(body io.Reader, id string) (*Message, error) {
	data, err := io.ReadAll(body)
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
	done, err := w.handle(m, id)
	if err == nil && !done {
		err = fmt.Errorf("mcptest: JSON response lacks the response to the request: %s", truncate(data))
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// readStream reads an SSE answer: notifications, then the response to id.
func (w *statelessWire) readStream(body io.Reader, id string) (*Message, error) {
	for ev, err := range ReadSSE(body) {
		if err != nil {
			return nil, err
		}
		if ev.Data == "" {
			continue
		}
		if ev.Message == nil {
			return nil, fmt.Errorf("mcptest: SSE event data is not a single JSON-RPC message: %q", truncate([]byte(ev.Data)))
		}
		done, err := w.handle(ev.Message, id)
		if err != nil {
			return nil, err
		}
		if done {
			return ev.Message, nil
		}
	}
	return nil, ErrNoResponse
}

// handle deals with one message read in answer to the request with the
// given id and reports whether it is that request's response.
func (w *statelessWire) handle(m *Message, id string) (bool, error) {
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
		w.c.note(m)
		return false, nil
	default:
		return false, fmt.Errorf("mcptest: invalid JSON-RPC message: %s", mustJSON(m))
	}
}

// next answers an input_required result: it returns params for the retry,
// with inputResponses and requestState, or nil for a complete result.
func (w *statelessWire) next(ctx context.Context, method string, params, result json.RawMessage, round int) (json.RawMessage, error) {
	var probe struct {
		ResultType *string `json:"resultType"`
	}
	if err := json.Unmarshal(result, &probe); err != nil {
		return nil, fmt.Errorf("mcptest: %s: result is not an object: %s", method, truncate(result))
	}
	switch {
	case probe.ResultType == nil || *probe.ResultType == ResultTypeComplete:
		return nil, nil
	case *probe.ResultType != ResultTypeInputRequired:
		return nil, fmt.Errorf("%w %q in the %s result: %s", ErrUnknownResultType, *probe.ResultType, method, truncate(result))
	}
	ir, err := ParseInputRequired(result)
	if err != nil {
		return nil, err
	}
	if round >= max(w.c.cfg.maxRounds, 1) {
		return nil, fmt.Errorf("%w (%s, %d rounds): %s", ErrTooManyRounds, method, round, truncate(result))
	}
	answers, err := w.answerInputs(ctx, ir.InputRequests)
	if err != nil {
		return nil, err
	}
	var rs json.RawMessage
	if ir.HasRequestState {
		rs = ir.RawRequestState
	}
	return retryParams(params, answers, rs)
}

// retryParams returns params (encoded) with inputResponses set to answers
// and requestState to the raw JSON string rs, each left out when empty.
func retryParams(params json.RawMessage, answers map[string]json.RawMessage, rs json.RawMessage) (json.RawMessage, error) {
	p := map[string]json.RawMessage{}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, fmt.Errorf("mcptest: params must be a JSON object, not %s", truncate(params))
	}
	delete(p, "inputResponses")
	delete(p, "requestState")
	if len(answers) > 0 {
		b, err := encodeJSON(answers)
		if err != nil {
			return nil, fmt.Errorf("mcptest: encoding inputResponses: %w", err)
		}
		p["inputResponses"] = b
	}
	if len(rs) > 0 {
		p["requestState"] = rs
	}
	return encodeJSON(p)
}

// answerInputs runs the handler for each input request, in key order.
func (w *statelessWire) answerInputs(ctx context.Context, reqs map[string]InputRequest) (map[string]json.RawMessage, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	keys := slices.Sorted(maps.Keys(reqs))
	out := make(map[string]json.RawMessage, len(reqs))
	for _, k := range keys {
		r := reqs[k]
		h := w.c.cfg.handlers[r.Method]
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

// Retry sends a hand-made retry of a [Stateless] request that got
// input_required: a fresh id, params with the _meta envelope, plus
// inputResponses (omitted when nil) and requestState (omitted when ""). It
// returns the response message as [Client.CallOnce] does. Other eras have
// no rounds ([errors.ErrUnsupported]).
func (c *Client) Retry(ctx context.Context, method string, params any, inputResponses map[string]any, requestState string) (*Message, error) {
	w, err := c.stateless("Retry")
	if err != nil {
		return nil, err
	}
	p, err := w.buildParams(params)
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
	pb, err := encodeJSON(p)
	if err != nil {
		return nil, fmt.Errorf("mcptest: encoding params: %w", err)
	}
	m, _, err := c.send(ctx, method, pb, false)
	return m, err
}

// Listen POSTs subscriptions/listen, a [Stateless] request, with params
// {"notifications": filter} plus the _meta envelope (filter nil sends {})
// and returns the response stream: the first event should be
// notifications/subscriptions/acknowledged, and [Stream.RequestID] is the
// subscription id the notifications carry. ctx bounds the whole life of
// the stream; cancelling it, [Stream.Close] or [Client.Close] ends it,
// which is how a client cancels a subscription. An HTTP status other than
// 2xx comes back as *[HTTPError], a JSON error response as *[RPCError],
// and any other non-stream answer as an error. Other eras have no
// subscriptions/listen ([errors.ErrUnsupported]; see [Client.OpenStream]
// for [Sessions]).
func (c *Client) Listen(ctx context.Context, filter any) (*Stream, error) {
	w, err := c.stateless("Listen")
	if err != nil {
		return nil, err
	}
	f, err := marshalParams(filter)
	if err != nil {
		return nil, err
	}
	if f == nil {
		f = json.RawMessage("{}")
	}
	p, err := w.params(map[string]json.RawMessage{"notifications": f})
	if err != nil {
		return nil, err
	}
	id := json.RawMessage(idKey(c.nextID.Add(1)))
	body, err := encodeJSON(wireRequest{JSONRPC: "2.0", ID: id, Method: "subscriptions/listen", Params: p})
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	resp, err := w.post(sctx, body)
	if err != nil {
		cancel()
		return nil, err
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || !strings.EqualFold(ct, "text/event-stream") {
		defer cancel()
		defer resp.Body.Close()
		return nil, w.notAStream(resp, string(id))
	}
	s := newStream(sctx, cancel, resp, "", id, c.untrack)
	c.track(s)
	return s, nil
}

func (w *statelessWire) post(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := w.c.request(ctx, http.MethodPost, body, nil, false)
	if err != nil {
		return nil, err
	}
	return w.c.hc.Do(req)
}

// notAStream explains the answer to subscriptions/listen id that is not a
// stream.
func (w *statelessWire) notAStream(resp *http.Response, id string) error {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return newHTTPError(resp)
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if !strings.EqualFold(ct, "application/json") {
		return fmt.Errorf("mcptest: subscriptions/listen did not open a stream: %w", newHTTPError(resp))
	}
	m, err := w.readResponse(resp, id)
	if err != nil {
		return err
	}
	if m.Error != nil {
		return m.Error
	}
	return fmt.Errorf("mcptest: subscriptions/listen answered with a JSON result instead of a stream: %s", truncate(m.Result))
}
