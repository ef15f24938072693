package mcphandler

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/internal/canon"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/session"
)

// ErrCannotAsk is returned by the [Exchange] methods that ask the client
// something when the client cannot be asked: it did not declare the
// capability, the handler is stateless, or the request was part of a batch.
var ErrCannotAsk = errors.New("mcphandler: the client cannot be asked")

// ErrDisconnected is returned by the Exchange methods that wait for the
// client when the client's connection for the request went away, or when
// the request's caller failed a re-check of its credentials while it
// waited (Config.Authenticate, Identity.Expires): the request then ended
// with that failure, and nothing more reaches the client on it.
var ErrDisconnected = errors.New("mcphandler: the client disconnected")

// ClientError is a JSON-RPC error the client answered a server request with.
type ClientError struct {
	Code    Code
	Message string
}

func (e *ClientError) Error() string {
	return "mcphandler: client error " + strconv.Itoa(int(e.Code)) + ": " + e.Message
}

// Exchange is the conversation with the client during one request: a
// handler reports progress and logs through it, and asks the client for
// input (elicitation, sampling, roots). Messages travel on the request's
// own response stream, which then becomes an SSE stream.
//
// Its methods are safe for concurrent use, and must not be called after
// the handler returned.
type Exchange struct {
	h             *Handler
	st            *stream
	sess          *session.Session // nil without a session
	caps          session.Capabilities
	version       string
	progressToken json.RawMessage
	gone          <-chan struct{} // closed when the client's connection ends
	logLevel      LogLevel        // least level to send; "" sends nothing
	reqID         json.RawMessage // the JSON-RPC id of the request
	mr            *rounds         // 2026-07-28: questions go in input_required rounds
	tk            *taskAsk        // in a task: questions go in the task's inputRequests
	// answer, set by newDetachedExchange, answers questions in place of the
	// client.
	answer func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
}

// CloseStream ends the HTTP response of this request now, as 2025-11-25
// allows (SSE polling): the client reconnects with a GET carrying
// Last-Event-ID, on any replica, and receives what the handler sends from
// then on, its result included. The handler keeps running. It returns an
// error when the stream cannot be resumed (no session, a batch, the
// legacy transport, 2026-07-28, HTTP/2).
//
// The connection closes with the response and is never reused: called
// before anything was sent on the stream, the response's header says
// "Connection: close" and its body ends cleanly; called after (the header
// went out without saying so, and can no longer), the body is left
// unterminated, which the client sees as its connection breaking — what
// the spec calls closing the connection without terminating the SSE
// stream — and resumes from the same way.
func (x *Exchange) CloseStream() error {
	if x == nil || x.st == nil {
		// A stream without a session has no event log (closeConn refuses
		// it too): nothing could resume it.
		return errors.New("mcphandler: this stream cannot be resumed")
	}
	return x.st.closeConn()
}

// Disconnected is closed when the client's connection for this request
// ends. A disconnect is not a cancellation (the request's context goes on
// until the work ends or the client sends notifications/cancelled), but
// nothing more can reach the client on this request's stream.
//
// A nil Exchange (a [ToolCall] built by hand) is never disconnected.
func (x *Exchange) Disconnected() <-chan struct{} {
	if x == nil {
		return nil
	}
	return x.gone
}

// ClientCapabilities reports what the client declared it supports; none
// for a nil Exchange.
func (x *Exchange) ClientCapabilities() session.Capabilities {
	if x == nil {
		return 0
	}
	return x.caps
}

// Progress reports progress of the request. It is sent only when the request
// carried a progressToken (which it echoes exactly); otherwise it does
// nothing. progress must increase from one call to the next; total may be
// zero when unknown. On a nil Exchange (a [ToolCall] built by hand, as in
// a unit test) it does nothing.
func (x *Exchange) Progress(progress, total float64, message string) error {
	if x == nil || len(x.progressToken) == 0 {
		return nil
	}
	b := make([]byte, 0, 128)
	b = append(b, `{"progressToken":`...)
	b = append(b, x.progressToken...)
	b = append(b, `,"progress":`...)
	b = strconv.AppendFloat(b, progress, 'g', -1, 64)
	if total > 0 {
		b = append(b, `,"total":`...)
		b = strconv.AppendFloat(b, total, 'g', -1, 64)
	}
	if message != "" {
		b = append(b, `,"message":`...)
		b = jsonrpc.AppendString(b, message)
	}
	b = append(b, '}')
	return x.st.send(jsonrpc.AppendRequest(nil, nil, "notifications/progress", b))
}

// LogLevel is a syslog severity, as used by MCP logging.
type LogLevel string

// The MCP log levels, from least to most severe.
const (
	LevelDebug     LogLevel = "debug"
	LevelInfo      LogLevel = "info"
	LevelNotice    LogLevel = "notice"
	LevelWarning   LogLevel = "warning"
	LevelError     LogLevel = "error"
	LevelCritical  LogLevel = "critical"
	LevelAlert     LogLevel = "alert"
	LevelEmergency LogLevel = "emergency"
)

var logLevels = map[LogLevel]int{
	LevelDebug: 0, LevelInfo: 1, LevelNotice: 2, LevelWarning: 3,
	LevelError: 4, LevelCritical: 5, LevelAlert: 6, LevelEmergency: 7,
}

// Log sends a notifications/message to the client if the client asked for
// messages at this level or above (logging/setLevel on a 2025 session, the
// request's _meta log level on 2026-07-28); otherwise it does nothing. data is marshalled as JSON; it must not hold secrets.
//
// On a nil Exchange it does nothing.
func (x *Exchange) Log(level LogLevel, logger string, data any) error {
	if x == nil || x.logLevel == "" {
		return nil
	}
	want, ok1 := logLevels[x.logLevel]
	got, ok2 := logLevels[level]
	if !ok1 || !ok2 || got < want {
		return nil
	}
	d, err := json.Marshal(data)
	if err != nil {
		return err
	}
	b := make([]byte, 0, 64+len(d))
	b = append(b, `{"level":`...)
	b = jsonrpc.AppendString(b, string(level))
	if logger != "" {
		b = append(b, `,"logger":`...)
		b = jsonrpc.AppendString(b, logger)
	}
	b = append(b, `,"data":`...)
	b = append(b, d...)
	b = append(b, '}')
	return x.st.send(jsonrpc.AppendRequest(nil, nil, "notifications/message", b))
}

// ElicitRequest asks the human for input.
type ElicitRequest struct {
	// Key names the question in a 2026-07-28 input_required round (the key
	// of inputRequests and inputResponses). If empty, the handler picks
	// one from the question's position. It is not used on 2025 sessions.
	// Keys starting with [ReservedKeyPrefix] belong to the handler's own
	// questions (confirms): asking with one is an error.
	Key string
	// Message explains what is asked and why.
	Message string
	// Schema is the form (form mode). Required unless URL is set.
	Schema *elicitation.Schema
	// URL, for URL mode (2025-11-25), is the page the human must visit;
	// ElicitationID identifies that flow.
	URL, ElicitationID string
}

// LogLevel is the least level of the messages the client asked to be sent
// (logging/setLevel on its session, or the request's _meta logLevel on
// 2026-07-28); "" when it asked for none, and Log sends nothing. A
// gateway asks its upstream for the same.
func (x *Exchange) LogLevel() LogLevel {
	if x == nil {
		return ""
	}
	return x.logLevel
}

// Elicit asks the human through the client and waits for the answer or for
// ctx to end. An accepted form answer is validated against the schema; an
// invalid one is an error. It returns [ErrCannotAsk] if the client did not
// declare the needed elicitation mode.
func (x *Exchange) Elicit(ctx context.Context, req ElicitRequest) (elicitation.Result, error) {
	params, err := x.elicitParams(req)
	if err != nil {
		return elicitation.Result{}, err
	}
	a, err := x.ask(ctx, req.Key, "elicit", "elicitation/create", params)
	if err != nil {
		return elicitation.Result{}, err
	}
	res, err := elicitation.ParseResult(a)
	if err != nil {
		return elicitation.Result{}, err
	}
	if res.Action == elicitation.Accept && req.Schema != nil {
		if err := req.Schema.Validate(res.Content); err != nil {
			return res, err
		}
	}
	return res, nil
}

func (x *Exchange) elicitParams(req ElicitRequest) ([]byte, error) {
	if req.URL != "" {
		if !x.ClientCapabilities().Has(session.CapElicitationURL) {
			return nil, missingCap(`{"elicitation":{"url":{}}}`)
		}
		p := struct {
			Mode          string `json:"mode"`
			Message       string `json:"message"`
			URL           string `json:"url"`
			ElicitationID string `json:"elicitationId,omitempty"`
		}{"url", req.Message, req.URL, req.ElicitationID}
		if x.inRounds() {
			p.ElicitationID = "" // 2026-07-28 has no elicitation ids
		}
		return json.Marshal(p)
	}
	if !x.ClientCapabilities().Has(session.CapElicitationForm) {
		return nil, missingCap(`{"elicitation":{"form":{}}}`)
	}
	if req.Schema == nil {
		return nil, errors.New("mcphandler: Elicit: a form needs a Schema")
	}
	schema, err := json.Marshal(req.Schema)
	if err != nil {
		return nil, err
	}
	params := make([]byte, 0, 64+len(req.Message)+len(schema))
	params = append(params, '{')
	if x.version >= Version20251125 {
		params = append(params, `"mode":"form",`...)
	}
	params = append(params, `"message":`...)
	params = jsonrpc.AppendString(params, req.Message)
	params = append(params, `,"requestedSchema":`...)
	params = append(params, schema...)
	return append(params, '}'), nil
}

// CompleteElicitation tells the client that the out-of-band interaction
// of the URL-mode elicitation id (ElicitRequest.ElicitationID) is done
// (notifications/elicitation/complete, 2025-11-25), so that it may
// retry what waited for it or close what it showed. It is sent on the
// call's stream, in order with what the handler sends; it is an error on
// a revision without elicitation ids (before 2025-11-25, or 2026-07-28,
// whose rounds carry none), in a task, or when the stream is gone. id is
// 1–255 bytes.
func (x *Exchange) CompleteElicitation(id string) error {
	switch {
	case x == nil || x.st == nil || x.inRounds() || x.tk != nil || x.version < Version20251125:
		return ErrCannotAsk
	case id == "" || len(id) > 255:
		return errors.New("mcphandler: CompleteElicitation: the id must be 1 to 255 bytes")
	}
	p := append([]byte(`{"elicitationId":`), jsonrpc.AppendString(nil, id)...)
	return x.st.send(jsonrpc.AppendRequest(nil, nil, "notifications/elicitation/complete", append(p, '}')))
}

// CreateMessage asks the client to sample its model (sampling/createMessage)
// with params (a CreateMessageRequest's params) and returns the raw result.
func (x *Exchange) CreateMessage(ctx context.Context, params any) (json.RawMessage, error) {
	return x.createMessage(ctx, "", params)
}

func (x *Exchange) createMessage(ctx context.Context, key string, params any) (json.RawMessage, error) {
	if !x.ClientCapabilities().Has(session.CapSampling) {
		return nil, missingCap(`{"sampling":{}}`)
	}
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return x.ask(ctx, key, "sample", "sampling/createMessage", b)
}

// Request puts a request another MCP server made during this call —
// elicitation/create, sampling/createMessage or roots/list, with its
// params as that server sent them — to the client, in the request's era
// (on the call's stream, as an input_required round or through its task),
// and returns the client's result as the client sent it. It is how a
// gateway relays an upstream's questions. params must be one JSON object
// (or empty, for roots/list), nested at most 128 deep, without a repeated
// key. Like Elicit, CreateMessage and ListRoots, it returns an error
// naming the missing capability when the client did not declare it (a URL
// elicitation needs URL mode, any other needs form mode), and a
// *ClientError when the client answered with an error.
func (x *Exchange) Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	return x.relay(ctx, "", method, params)
}

// relay is Request under key (see Input.Key).
func (x *Exchange) relay(ctx context.Context, key, method string, params json.RawMessage) (json.RawMessage, error) {
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	if t := bytes.TrimSpace(params); len(t) == 0 || t[0] != '{' || canon.Check(params, canon.Limits{}) != nil {
		return nil, errors.New("mcphandler: Request: params must be one JSON object")
	}
	var kind string
	var need session.Capabilities
	var missing string
	switch method {
	case "elicitation/create":
		var p struct {
			Mode string `json:"mode"`
		}
		json.Unmarshal(params, &p)
		kind, need, missing = "elicit", session.CapElicitationForm, `{"elicitation":{"form":{}}}`
		if p.Mode == "url" {
			need, missing = session.CapElicitationURL, `{"elicitation":{"url":{}}}`
		}
	case "sampling/createMessage":
		kind, need, missing = "sample", session.CapSampling, `{"sampling":{}}`
	case "roots/list":
		kind, need, missing = "roots", session.CapRoots, `{"roots":{}}`
	default:
		return nil, errors.New("mcphandler: Request: not a request a server may make of a client: " + clipEcho(method))
	}
	if !x.ClientCapabilities().Has(need) {
		return nil, missingCap(missing)
	}
	return x.ask(ctx, key, kind, method, params)
}

// AnswersByRetry reports whether the client answers a question of this
// call by retrying the call — 2026-07-28 input_required rounds, outside a
// task — so that the tool's handler runs again, from its start, with the
// answers. A handler whose work must not run twice (a gateway forwarding
// the call upstream) must not ask then, unless it can go on from where it
// stopped: it carries what it needs into the next round
// ([Exchange.SetRoundState]), which also makes the rounds single use. Or
// [ToolCall.RunAsTask] gives it a task, where a question is answered while
// it waits, when the client declared tasks.
func (x *Exchange) AnswersByRetry() bool { return x.inRounds() }

// Root is a directory or file the client exposes.
type Root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// ListRoots asks the client for its roots (roots/list).
func (x *Exchange) ListRoots(ctx context.Context) ([]Root, error) {
	return x.listRoots(ctx, "")
}

func (x *Exchange) listRoots(ctx context.Context, key string) ([]Root, error) {
	if !x.ClientCapabilities().Has(session.CapRoots) {
		return nil, missingCap(`{"roots":{}}`)
	}
	raw, err := x.ask(ctx, key, "roots", "roots/list", nil)
	if err != nil {
		return nil, err
	}
	var r struct {
		Roots []Root `json:"roots"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, errors.New("mcphandler: malformed roots/list result")
	}
	return r.Roots, nil
}

// newRequestID returns an unguessable id for a server-to-client request, so
// that only the client that received the request can answer it.
func newRequestID() string { return "mcph-" + rand.Text() }

// reply is what deliverResponse publishes to the waiting request (signed
// for its reply channel): the client's response and the role of the
// identity that sent it. For a confirm it is only a wake-up: the answer
// is in the confirm's record.
type reply struct {
	Role string          `json:"role"`
	Msg  json.RawMessage `json:"msg,omitempty"`
}

// ask puts a question to the client: on 2026-07-28 into the request's
// input rounds under key (or the next key of kind), otherwise as a
// server-to-client request with a fresh unguessable id (key names only
// 2026-07-28 questions). A key with the reserved prefix is refused.
func (x *Exchange) ask(ctx context.Context, key, kind, method string, params []byte) (json.RawMessage, error) {
	if strings.HasPrefix(key, ReservedKeyPrefix) {
		return nil, &reservedKeyError{key: key}
	}
	if x.inRounds() {
		return x.askRound(key, kind, method, params)
	}
	if x != nil && x.tk != nil {
		return x.askTask(ctx, key, kind, method, params)
	}
	if x != nil && x.answer != nil {
		return x.answer(ctx, method, params)
	}
	return x.request(ctx, newRequestID(), method, params)
}

// request sends the server-to-client request id and waits for the answer
// that deliverResponse publishes, on whichever replica the client posts
// it (see question). A message on the reply channel that does not verify
// is dropped. The wait ends, without the answer, when the request's
// caller fails a re-check (see callerWatch).
func (x *Exchange) request(ctx context.Context, id, method string, params []byte) (json.RawMessage, error) {
	if x.sess == nil || x.st == nil || x.st.noSSE {
		return nil, ErrCannotAsk
	}
	// A tool's question arms the caller's watch before it subscribes: one
	// whose subscription fails has waited all the same, and its call's
	// final message re-checks the caller (stream.callerFailure).
	x.st.watchCaller()
	q, err := newQuestion(ctx, x.h.bus, x, id, mustHear)
	if err != nil {
		return nil, err
	}
	defer q.close()
	if err := q.send(method, params); err != nil {
		return nil, err
	}
	for {
		select {
		case b, ok := <-q.replies():
			if !ok {
				return nil, errStreamClosed
			}
			if p, ok := q.open(b); ok {
				return clientReply(p)
			}
		case <-q.gone:
			return nil, ErrDisconnected
		case <-q.lost:
			return nil, errCallerLost
		case <-ctx.Done():
			q.cancel()
			return nil, ctx.Err()
		}
	}
}

// clientReply reads the client's response a question heard: its result, or
// its error as a *ClientError.
func clientReply(p []byte) (json.RawMessage, error) {
	var r reply
	var m jsonrpc.Message
	if json.Unmarshal(p, &r) != nil || jsonrpc.Decode(r.Msg, &m) != nil {
		return nil, errors.New("mcphandler: malformed client response")
	}
	if m.Error != nil {
		return nil, &ClientError{Code: Code(m.Error.Code), Message: m.Error.Message}
	}
	return m.Result, nil
}
