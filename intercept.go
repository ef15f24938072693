package mcphandler

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/session"
)

// Interceptor wraps the serving of one MCP operation (see [Request]): it
// may start a span, time it, log it, or refuse it, and it calls next once
// with the context the operation runs with. Every hook and tool of the
// operation receives a context derived from that one, so a span started in
// it is the parent of the hooks' and tools' own spans. next returns how the
// operation ended.
//
// An Interceptor runs on the operation's goroutine and must call next
// exactly once, before returning; if it returns without calling next, the
// request is answered with an internal error. It may change the fields of
// *req that say so (LogAttrs, OnStep, OnUpstream) before calling next; the
// others are for reading. Interceptors are listed in
// [Config.Interceptors], the first one outermost.
//
// Package otelmcp (a module of its own) provides one that records
// OpenTelemetry traces and metrics.
type Interceptor func(ctx context.Context, req *Request, next func(context.Context) Result) Result

// RequestKind says what operation a [Request] describes.
type RequestKind uint8

const (
	// KindRequest is a JSON-RPC request of a client (initialize
	// included), in every protocol revision and transport. It is the zero
	// value.
	KindRequest RequestKind = iota
	// KindAnswer is a 2025 client's response to a confirm question the
	// server asked (Method "elicitation/create", ID the confirm's id). It
	// may be received by another replica than the one that asked; the
	// replica that receives it may run the confirmed tool inside it.
	KindAnswer
	// KindStream is a GET stream of a 2025 session, from its request to
	// its end (Method is empty).
	KindStream
	// KindSessionEnd is a DELETE ending a 2025 session (Method is empty).
	// Result.ErrorCode is zero when the session was ended, and
	// Request.Identity is then its owner.
	KindSessionEnd
)

// Other stands, in a [Request], for what a client sent that the handler
// does not serve: a method, or a protocol version. It is the value the
// OpenTelemetry conventions give an unknown HTTP method.
const Other = "_OTHER"

// Request describes one MCP operation to an [Interceptor].
//
// Its strings are safe to log and to use as span attributes: what the
// handler did not choose is bounded. Method and ProtocolVersion come from
// closed sets; Target, a KindStream or KindSessionEnd's SessionID and
// Result.ErrorMessage are cut to 256 bytes (at a UTF-8 boundary, copied
// when cut, so that nothing an interceptor keeps holds on to the request);
// ID is within Config.Limits.MaxIDBytes. Meta is the client's JSON as sent
// (within Config.Limits.MaxBodyBytes): read what you need of it. Only Method,
// ProtocolVersion and a Target the handler found ([Result.Found]) are fit
// for metric attributes.
type Request struct {
	Kind RequestKind
	// Method is the JSON-RPC method, e.g. "tools/call", one the handler
	// serves to this request. Methods of later revisions
	// ("server/discover", "subscriptions/listen", ...) are given as they
	// are. A method the handler does not serve here — no dispatch table
	// has it, the hook it needs is not set, or the request's revision does
	// not have it — is given as [Other]: the request is still wrapped (so
	// that it is traced and logged), and answered -32601 whatever else its
	// params hold; Result.ErrorMessage then holds the name the client
	// sent, cut short. The client's own string never reaches interceptors
	// as Method, so Method is fit for a metric attribute.
	Method string
	// Target is what the request names: the tool of tools/call, the
	// prompt of prompts/get, the URI of resources/read, subscribe and
	// unsubscribe; else "". It is set before next is called when the
	// params carry _meta, and in any case when next returns (the method
	// reads its params once). It is what the client sent, cut to 256
	// bytes; [Result.Found] says whether the handler found it.
	Target string
	// ID is the JSON-RPC id, as sent.
	ID json.RawMessage
	// SessionID is the Mcp-Session-Id of a 2025 session ("" for
	// stateless and 2026-07-28 requests). For initialize it is set when
	// next returns: it is the new session's. For KindStream and
	// KindSessionEnd it is the header as the client sent it, cut to 256
	// bytes, before the handler checked it (inside next).
	SessionID string
	// ProtocolVersion is the revision in force: the session's negotiated
	// one, the 2026-07-28 request's own, or the version header of a
	// stateless request. For initialize it is set when next returns. It
	// is always a revision the handler serves, or "" (no version yet), or
	// — for a KindStream or KindSessionEnd whose header names none —
	// [Other].
	ProtocolVersion string
	// Identity is the caller, as Config.Authenticate decided. For a
	// KindSessionEnd it is set when next returns, once the session ended
	// (its owner); for a KindStream it is not set.
	Identity Identity
	// Meta is the params._meta object of the request (of the result, for
	// KindAnswer), where a client puts traceparent, tracestate and
	// baggage; nil when absent.
	Meta json.RawMessage
	// HTTP is the HTTP request that carried the operation. Its context
	// holds what the host's HTTP middleware put there (an ambient span).
	HTTP *http.Request
	// Start is when the handler received the HTTP request.
	Start time.Time

	// LogAttrs are added to the handler's own log lines about the
	// operation, next to session_id and confirm_id (e.g. a trace id). Set
	// them before calling next.
	LogAttrs []slog.Attr
	// OnStep, if set before calling next, is called at each step of a
	// confirm the operation goes through, on the goroutine that reached it
	// (see [Step]). An interceptor that sets it calls the value it found
	// there too.
	OnStep func(Step)
	// OnUpstream, if set before calling next, wraps each call a tool of
	// the operation makes to another MCP server through
	// [ToolCall.CallUpstream] (package gateway's upstream tools): it runs
	// on the tool's goroutine, with the tool's context, and calls next
	// once with the context the upstream call runs with (a span started
	// in it is the upstream call's parent), after adding to u.Header and
	// u.Meta what the call should carry (a trace context); next returns
	// how the call ended. u's other fields are for reading. Not calling
	// next leaves the upstream call unrun. An interceptor that finds it
	// set keeps the value found outermost: its own runs inside it, as
	// that one's next.
	OnUpstream func(ctx context.Context, u *UpstreamCall, next func(context.Context) UpstreamResult) UpstreamResult
}

// Result is how an operation ended, as next returns it to an
// [Interceptor].
type Result struct {
	// ErrorCode is the JSON-RPC error code of an error response, or zero.
	// For KindAnswer, [CodeInvalidRequest] when the answer was refused
	// (nobody waits for it), [CodeStoreUnavailable] when the store failed.
	ErrorCode Code
	// ErrorMessage is the message of the error response, cut to 256
	// bytes: it may echo what the client sent (an unknown method or tool).
	ErrorMessage string
	// IsError reports a tools/call result with isError set.
	IsError bool
	// Found reports that the handler found the tool of a tools/call or
	// the prompt of a prompts/get, among those the caller may see: Target
	// is then a name of the server's, not only the client's.
	Found bool
	// Outcome is how a tools/call ended (see [CallEvent]), also for the
	// call a KindAnswer finished on this replica. It is "handed_over" for
	// a 2025 confirm that another replica finished and reports.
	Outcome Outcome
	// ConfirmID is the id of the confirm involved, if any.
	ConfirmID string
	// SessionCreated is, for a KindSessionEnd that ended its session, when
	// the session was created, as its record in the store says: known on
	// every replica. It is zero when the record does not say (a session
	// created by an earlier release, or last updated by one).
	SessionCreated time.Time
}

// StepKind names a step of a confirm.
type StepKind string

// The steps of a confirm, in order. Each may happen on another replica.
const (
	StepConfirmAsked    StepKind = "confirm.asked"    // the question was sent (2025) or returned (2026-07-28)
	StepConfirmAnswered StepKind = "confirm.answered" // the human's answer was accepted
	StepConfirmRan      StepKind = "confirm.ran"      // the confirmed tool starts running
)

// Step is one step of a confirm, reported through [Request.OnStep].
type Step struct {
	Kind      StepKind
	ConfirmID string
	At        time.Time
}

// interception is the state of one intercepted operation.
type interception struct {
	req    Request
	res    Result
	called bool
	depth  int32 // interceptors entered (next to called: one word for both)

	h      *Handler // its Config.Interceptors are the chain
	serve  func(context.Context)
	nextFn func(context.Context) Result

	// The JSON-RPC request served, for serveRequest (no closure per
	// request).
	rq     *request
	m      *jsonrpc.Message
	method func(*Handler, *request, *jsonrpc.Message)

	// LogAttrs' first room, so that an interceptor appending one (as
	// otelmcp does) allocates nothing. One, not more: with it the
	// interception is 504 bytes, in the 512-byte size class, and 544
	// with two (TestInterceptionSize).
	logBuf [1]slog.Attr

	mu      sync.Mutex
	confirm string // the confirm id of the last step, for log lines
}

type interceptKey struct{}

func interceptionFrom(ctx context.Context) *interception {
	ic, _ := ctx.Value(interceptKey{}).(*interception)
	return ic
}

// runInterceptors calls the interceptors around serve (nil: the JSON-RPC
// request of ic, by serveRequest). serve receives the context that the
// last interceptor passed on, holding ic. Each
// interceptor gets the same next, which calls the following one: an
// interceptor calls it once, so a counter is enough (no closure per level).
func (h *Handler) runInterceptors(ic *interception, ctx context.Context, serve func(context.Context)) Result {
	ic.h, ic.serve = h, serve
	ic.req.LogAttrs = ic.logBuf[:0]
	ic.nextFn = ic.next
	return ic.next(ctx)
}

// next calls the next interceptor, or serve after the last one.
func (ic *interception) next(ctx context.Context) Result {
	if icps := ic.h.cfg.Interceptors; int(ic.depth) < len(icps) {
		i := ic.depth
		ic.depth++
		return icps[i](ctx, &ic.req, ic.nextFn)
	}
	if !ic.called {
		ic.called = true
		ctx = context.WithValue(ctx, interceptKey{}, ic)
		if ic.serve == nil {
			ic.serveRequest(ctx)
		} else {
			ic.serve(ctx)
		}
	}
	return ic.res
}

// intercept serves the JSON-RPC request m of rq through the interceptors,
// calling serve (which calls intercept again first) from inside them. It
// reports false when there are none or rq is already intercepted: the
// caller then serves the request itself. serve is a method expression, not
// a method value: the caller builds it for every request, intercepted or
// not, and a method value would be allocated each time.
func (h *Handler) intercept(rq *request, m *jsonrpc.Message, known bool, serve func(*Handler, *request, *jsonrpc.Message)) bool {
	if len(h.cfg.Interceptors) == 0 || rq.ic != nil {
		return false
	}
	method := m.Method
	if !known {
		method = Other
	}
	ic := &interception{req: Request{Method: method, ID: m.ID, Identity: rq.id, HTTP: rq.r, Start: rq.start,
		ProtocolVersion: rq.version}}
	ic.req.Target, ic.req.Meta = requestTarget(method, m.Params, rq.meta.of(m.Params))
	ic.req.Target = clipEcho(ic.req.Target)
	if rq.sess != nil {
		ic.req.SessionID, ic.req.ProtocolVersion = rq.sess.ID, rq.sess.ProtocolVersion
	}
	rq.ic, ic.rq, ic.m, ic.method = ic, rq, m, serve
	h.runInterceptors(ic, rq.context(), nil) // serves by ic.serveRequest
	if !ic.called {
		rq.fail(m.ID, errInternal())
	}
	return true
}

// serveRequest serves the intercepted JSON-RPC request with the context
// the last interceptor passed on.
func (ic *interception) serveRequest(ctx context.Context) {
	rq, m := ic.rq, ic.m
	rq.base = ctx
	ic.method(rq.h, rq, m)
	if m.Method == "initialize" {
		ic.req.ProtocolVersion = rq.version
		// A 2025 POST's new session is in its response's header. A legacy
		// initialize runs in the session its SSE stream opened, which
		// intercept already gave, and has no response writer of its own.
		if rq.sess == nil {
			if sid := rq.st.w.Header().Get("Mcp-Session-Id"); sid != "" {
				ic.req.SessionID = sid
			}
		}
	}
}

// interceptAnswer delivers the 2025 answer m to confirm id (answer, i.e.
// answerConfirm) through the interceptors.
func (h *Handler) interceptAnswer(rq *request, id string, m *jsonrpc.Message, answer func(*request, string, *jsonrpc.Message) error) error {
	if len(h.cfg.Interceptors) == 0 {
		return answer(rq, id, m)
	}
	ic := &interception{req: Request{Kind: KindAnswer, Method: "elicitation/create", ID: m.ID, Identity: rq.id,
		SessionID: rq.sess.ID, ProtocolVersion: rq.sess.ProtocolVersion, HTTP: rq.r, Start: rq.start}}
	_, ic.req.Meta = requestTarget("", m.Result, nil)
	ic.res.ConfirmID, ic.confirm = id, id
	rq.ic = ic
	err := errNotWaiting
	h.runInterceptors(ic, rq.context(), func(ctx context.Context) {
		rq.base = ctx
		if err = answer(rq, id, m); err != nil {
			ic.res.ErrorCode, ic.res.ErrorMessage = CodeStoreUnavailable, clipEcho(err.Error())
			if err == errNotWaiting {
				ic.res.ErrorCode = CodeInvalidRequest
			}
		}
	})
	return err
}

// interceptHTTP serves a GET stream or a DELETE (kind) through the
// interceptors. A DELETE's result has an error code unless it answered
// 204.
func (h *Handler) interceptHTTP(w http.ResponseWriter, r *http.Request, kind RequestKind, serve func(http.ResponseWriter, *http.Request)) {
	if len(h.cfg.Interceptors) == 0 {
		serve(w, r)
		return
	}
	ic := &interception{req: Request{Kind: kind, SessionID: clipEcho(headerValue(r, hdrSessionID)), HTTP: r, Start: time.Now(),
		ProtocolVersion: servedVersion(strings.TrimSpace(headerValue(r, hdrProtocolVersion)))}}
	h.runInterceptors(ic, r.Context(), func(ctx context.Context) {
		if kind != KindSessionEnd {
			serve(w, r.WithContext(ctx))
			return
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		serve(sw, r.WithContext(ctx))
		if sw.status != http.StatusNoContent {
			ic.res.ErrorCode, ic.res.ErrorMessage = CodeInvalidRequest, http.StatusText(sw.status)
		}
	})
}

// statusWriter records the status of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestTarget returns the target of method (see Request.Target) and the
// _meta object of params, reading params only if they mention _meta; else
// the target is set by the method's own parse of its params (see target).
// params are valid JSON (the body was checked): they are read as
// json.Unmarshal would into a struct of name, uri (strings) and _meta, in
// one walk of their members, and give nothing when it would fail. x, if
// not nil, is that walk already made (params_index.go).
func requestTarget(method string, params json.RawMessage, x *paramsIndex) (string, json.RawMessage) {
	if len(params) == 0 || params[0] != '{' || !bytes.Contains(params, []byte(`"_meta"`)) {
		return "", nil
	}
	var local paramsIndex
	if x == nil {
		x = &local
		indexParams(params, x)
	}
	name, uri, meta, ok := x.target()
	if !ok {
		return "", nil
	}
	if len(meta) == 0 || meta[0] != '{' {
		meta = nil
	}
	switch method {
	case "tools/call", "prompts/get":
		return name, meta
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		return uri, meta
	}
	return "", meta
}

// servedVersion is v if it names a revision the handler serves (or is
// empty), else Other.
func servedVersion(v string) string {
	if v == "" || isSessionsOrLegacyVersion(v) || v == Version20260728 {
		return v
	}
	return Other
}

// target records the target of an intercepted request, as the method's
// handler read it from the params.
func (ic *interception) target(t string) {
	if ic != nil {
		ic.req.Target = clipEcho(t)
	}
}

// found records that the handler found the target, visible to the caller.
func (ic *interception) found() {
	if ic != nil {
		ic.res.Found = true
	}
}

// failed records the error response of an intercepted request.
func (ic *interception) failed(e *jsonrpc.Error) {
	if ic != nil {
		ic.res.ErrorCode, ic.res.ErrorMessage = Code(e.Code), clipEcho(e.Message)
	}
}

// called records how an intercepted tools/call ended.
func (ic *interception) callEnded(ev *CallEvent) {
	if ic != nil {
		ic.res.Outcome, ic.res.IsError = ev.Outcome, ev.IsError
		if ev.ConfirmID != "" {
			ic.res.ConfirmID = ev.ConfirmID
		}
	}
}

// sessionEnded records the session a DELETE ended.
func (ic *interception) sessionEnded(s *session.Session, id Identity) {
	if ic != nil {
		ic.res.SessionCreated = s.Created
		ic.req.Identity = id
	}
}

// step reports a step of confirm id to the interceptors of the operation
// in ctx, if any.
func step(ctx context.Context, kind StepKind, id string) {
	ic := interceptionFrom(ctx)
	if ic == nil {
		return
	}
	ic.mu.Lock()
	ic.confirm = id
	ic.mu.Unlock()
	if ic.req.OnStep != nil {
		ic.req.OnStep(Step{Kind: kind, ConfirmID: id, At: time.Now()})
	}
}

// loggerFor returns the logger for lines about the operation in ctx: with
// its session_id, the confirm_id of its last confirm step, and the
// interceptors' LogAttrs.
func (h *Handler) loggerFor(ctx context.Context) *slog.Logger {
	var args []any
	if ri, ok := ctx.Value(ctxKey{}).(*reqInfo); ok && ri.sessionID != "" {
		args = append(args, slog.String("session_id", ri.sessionID))
	}
	if ic := interceptionFrom(ctx); ic != nil {
		if ic.req.SessionID != "" && len(args) == 0 {
			args = append(args, slog.String("session_id", ic.req.SessionID))
		}
		ic.mu.Lock()
		if ic.confirm != "" {
			args = append(args, slog.String("confirm_id", ic.confirm))
		}
		ic.mu.Unlock()
		for _, a := range ic.req.LogAttrs {
			args = append(args, a)
		}
	}
	if len(args) == 0 {
		return h.cfg.Logger
	}
	return h.cfg.Logger.With(args...)
}
