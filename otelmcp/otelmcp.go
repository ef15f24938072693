// Package otelmcp records OpenTelemetry traces and metrics of an
// mcphandler.Handler, following the OpenTelemetry semantic conventions for
// MCP (gen-ai/mcp.md). It is a module of its own, so that the handler's
// module needs no OpenTelemetry dependency.
//
// Install it as the first of Config.Interceptors:
//
//	icp, err := otelmcp.NewInterceptor()
//	cfg.Interceptors = []mcphandler.Interceptor{icp}
//
// # Traces
//
// Every MCP request gets one SERVER span named "{mcp.method.name}
// {target}" (target: the tool of tools/call, the prompt of prompts/get,
// once the handler found it among the caller's; other methods, and a
// target the handler did not find, are named by the method alone, as the
// conventions ask when no low-cardinality target is known; the handler
// reads the target once, while serving, so a sampler sees the method
// alone unless the params carried _meta, and the target attributes are
// set when the span ends), with the attributes mcp.method.name,
// gen_ai.tool.name, gen_ai.prompt.name, mcp.resource.uri,
// jsonrpc.request.id, mcp.session.id (2025 sessions),
// mcp.protocol.version, gen_ai.operation.name = execute_tool (tools/call),
// rpc.response.status_code and, on failures, error.type (the JSON-RPC
// code as a string, or tool_error for an isError result) with status
// ERROR. Methods the conventions do not know yet (server/discover,
// subscriptions/listen, ...) are emitted as they are; a method the handler
// does not serve is "_OTHER" ([mcphandler.Other]: the handler never gives
// a client's own method), and the status message names it. Project
// attributes: mcphandler.tenant (see [WithoutTenant]) and
// mcphandler.outcome on tools/call.
//
// The span's parent is the trace context of the request's params._meta
// (traceparent, tracestate; baggage goes into the context), extracted with
// the TextMapPropagator of [WithPropagator] (by default W3C trace context
// and baggage); the ambient span of the HTTP request (e.g. from otelhttp)
// is then linked. Without _meta, the ambient span is the parent.
//
// A call a tool makes to another MCP server through
// [mcphandler.ToolCall.CallUpstream] — every call of a gateway's upstream
// tool (package gateway) — is a CLIENT span, child of the span in the
// tool's context (the request's SERVER span, or the tool's own), named
// "{mcp.method.name} {target}" with the tool's name upstream as target
// (e.g. "tools/call search"), with mcp.method.name, gen_ai.tool.name (the
// name upstream), gen_ai.operation.name = execute_tool,
// mcp.protocol.version (when the upstream's revision is known before the
// call), and the project attributes mcphandler.upstream (the host's id of
// the upstream), mcphandler.upstream.era and
// mcphandler.upstream.credential_kind (a label the host declared, never
// the credential); on failures error.type (the upstream's JSON-RPC code,
// also in rpc.response.status_code, tool_error for an isError result, else
// the class of the failure: timeout, backend_unavailable, internal) with
// status ERROR and the upstream's error message. Its trace context goes
// upstream, written by the propagator of [WithPropagator], in the headers
// of every HTTP request of the call and in the _meta of each of its
// requests (initialize included), where the conventions put it and where
// an upstream served by this package reads it: the upstream's spans
// continue the trace as the CLIENT span's children. The client's baggage
// is not sent upstream.
//
// The steps of a confirm are span events carrying mcphandler.confirm.id:
// mcphandler.confirm.asked on the asking call, mcphandler.confirm.answered
// and mcphandler.confirm.ran wherever they happen — on a 2025 session the
// answer may arrive at another replica, whose span (named
// "elicitation/create", kind SERVER) then carries them. Joining spans by
// mcphandler.confirm.id shows the chain across replicas.
//
// # Metrics
//
//   - mcp.server.operation.duration (s): every MCP request, with the
//     conventions' buckets and low-cardinality attributes (method, tool or
//     prompt name, protocol version, error.type).
//   - mcp.server.session.duration (s): a 2025 session ended by DELETE,
//     from its creation to the DELETE, on the replica that serves the
//     DELETE (the creation time is in the session's record; for a record
//     of an earlier release, which has none, only on the replica that
//     served the initialize). Sessions that expire or are evicted are not
//     recorded: no request ends them.
//   - mcphandler.server.confirms: confirms by mcphandler.outcome, counted
//     by the replica that decides them.
//   - mcphandler.server.sessions: 2025 sessions created on this replica
//     and not yet ended by DELETE or idle for the session TTL
//     ([WithSessionTTL]).
//   - mcphandler.server.streams: open long-lived streams on this replica
//     (GET streams and subscriptions/listen), by mcphandler.stream.
//
// # Bounds
//
// No string a client chooses becomes telemetry unbounded, nor one an
// upstream chooses: a tool's name upstream is only in the CLIENT span's
// name and gen_ai.tool.name (cut like a found target), never a metric
// attribute. A metric
// attribute takes values from closed sets only: mcp.method.name is a
// method the handler serves or _OTHER, mcp.protocol.version a revision it
// serves or _OTHER, gen_ai.tool.name and gen_ai.prompt.name a tool or
// prompt the handler found among the caller's ([mcphandler.Result.Found]),
// error.type a code the server chose; the attribute sets kept for reuse
// are at most 4096, so a host whose tool set keeps changing costs a set
// per request past them, not memory. A span's name is a method and a
// found target, each cut to 128 bytes (span names of found targets kept
// for reuse: at most 4096). Every other span value a client can vary — a
// target not found, a resource URI, the request and session ids, the
// protocol version, the tenant, the confirm id, the status message — is
// cut to 256 bytes at a UTF-8 boundary, and copied when cut, so that a
// span waiting for export holds no more of the request.
package otelmcp

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mcphandler/mcphandler"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/mcphandler/mcphandler/otelmcp"

// Project attribute keys.
const (
	TenantKey    = attribute.Key("mcphandler.tenant")
	OutcomeKey   = attribute.Key("mcphandler.outcome")
	ConfirmIDKey = attribute.Key("mcphandler.confirm.id")
	StreamKey    = attribute.Key("mcphandler.stream")
)

// ErrorTypeToolError is the error.type of a tools/call whose result has
// isError set.
const ErrorTypeToolError = "tool_error"

type config struct {
	tp         trace.TracerProvider
	mp         metricProvider
	prop       propagation.TextMapPropagator
	noTenant   bool
	sessionTTL time.Duration
}

// Option configures [NewInterceptor].
type Option func(*config)

// WithTracerProvider sets the TracerProvider. If unset, the global one
// (otel.GetTracerProvider) is used. The slices otelmcp passes to a span's
// Start and SetAttributes are reused for another request once the span
// ended: the provider must copy what it keeps, as the SDK does.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithPropagator sets how the trace context is read from params._meta,
// and written into the headers and _meta of calls to upstream servers
// (baggage excepted: the caller's is not sent on). If unset, W3C trace
// context and baggage.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.prop = p }
}

// WithoutTenant leaves the mcphandler.tenant attribute out of spans, for
// hosts whose tenant names must not reach the tracing backend.
func WithoutTenant() Option { return func(c *config) { c.noTenant = true } }

// WithSessionTTL is how long a session of this replica counts as open in
// mcphandler.server.sessions without requests; it should equal
// Config.Sessions.TTL. If zero, 30 minutes.
func WithSessionTTL(d time.Duration) Option { return func(c *config) { c.sessionTTL = d } }

type interceptor struct {
	cfg    config
	tracer trace.Tracer
	m      *metrics
	// upstreamFn is i.upstream, made once: the Request.OnUpstream of every
	// tools/call.
	upstreamFn func(context.Context, *mcphandler.UpstreamCall, func(context.Context) mcphandler.UpstreamResult) mcphandler.UpstreamResult

	scratch sync.Pool              // *scratch
	names   cache[nameKey, string] // span names of found targets
}

// NewInterceptor returns an interceptor recording traces and metrics (see
// the package doc). It fails only if an instrument cannot be made. It may
// be used by many handlers at once.
func NewInterceptor(opts ...Option) (mcphandler.Interceptor, error) {
	c := config{sessionTTL: 30 * time.Minute}
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.prop == nil {
		c.prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	m, err := newMetrics(c.mp, c.sessionTTL)
	if err != nil {
		return nil, err
	}
	return newInterceptor(c, m).intercept, nil
}

func newInterceptor(c config, m *metrics) *interceptor {
	i := &interceptor{cfg: c, tracer: c.tp.Tracer(ScopeName), m: m, names: cache[nameKey, string]{limit: maxNames}}
	i.scratch.New = func() any { return new(scratch) }
	i.upstreamFn = i.upstream
	return i
}

func (i *interceptor) intercept(ctx context.Context, req *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
	switch req.Kind {
	case mcphandler.KindStream:
		done := i.m.streamOpened(ctx, "get")
		defer done()
		return next(ctx)
	case mcphandler.KindSessionEnd:
		res := next(ctx)
		if res.ErrorCode == 0 {
			i.m.sessionEnded(ctx, req.SessionID, req.ProtocolVersion, res.SessionCreated)
		}
		return res
	}
	if req.Method == "subscriptions/listen" {
		done := i.m.streamOpened(ctx, "listen")
		defer done()
	}
	sc := i.scratch.Get().(*scratch)
	ctx, span := i.start(ctx, req, sc)
	c := &call{span: span}
	// trace_id and span_id, formatted only when a line is logged (an
	// empty-keyed group is inlined).
	req.LogAttrs = append(req.LogAttrs, slog.Any("", c))
	// Only a tools/call or a confirm's answer goes through confirm steps.
	if span.IsRecording() && (req.Method == "tools/call" || req.Kind == mcphandler.KindAnswer) {
		c.prev = req.OnStep
		req.OnStep = c.onStep
	}
	// Only a tool calls upstream: a tools/call, or the confirmed call an
	// answer runs.
	if req.Method == "tools/call" || req.Kind == mcphandler.KindAnswer {
		i.wrapUpstream(req)
	}
	res := next(ctx)
	i.end(ctx, span, req, res, sc)
	return res
}

// call is what outlives the start of a request's span: its ids for log
// lines and its confirm steps (one allocation for both).
type call struct {
	span trace.Span
	prev func(mcphandler.Step)
}

// onStep adds a confirm step to the span as an event.
func (c *call) onStep(s mcphandler.Step) {
	c.span.AddEvent("mcphandler."+string(s.Kind), trace.WithTimestamp(s.At),
		trace.WithAttributes(ConfirmIDKey.String(s.ConfirmID)))
	if c.prev != nil {
		c.prev(s)
	}
}

// LogValue logs the trace_id and span_id of the span, in hex.
func (c *call) LogValue() slog.Value {
	sc := c.span.SpanContext()
	return slog.GroupValue(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
}

// scratch is the room for the span's start options and attributes, reused
// across requests: TracerProvider implementations copy what they are given
// (the SDK does), so it goes back to the pool once the span ended.
type scratch struct {
	opts  [3]trace.SpanStartOption
	attrs [maxSpanAttrs]attribute.KeyValue
}

// maxSpanAttrs is the most attributes end sets on a span.
const maxSpanAttrs = 12

var serverKind = trace.WithSpanKind(trace.SpanKindServer)

// start starts the request's span, its parent from params._meta when
// there is a trace context there, the ambient span linked.
func (i *interceptor) start(ctx context.Context, req *mcphandler.Request, sc *scratch) (context.Context, trace.Span) {
	opts := append(sc.opts[:0], serverKind, trace.WithTimestamp(req.Start))
	if carrier := metaCarrier(req.Meta); carrier != nil {
		ambient := trace.SpanContextFromContext(ctx)
		ctx = i.cfg.prop.Extract(ctx, carrier)
		if remote := trace.SpanContextFromContext(ctx); remote.IsValid() && ambient.IsValid() && !remote.Equal(ambient) {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: ambient}))
		}
	}
	// The attributes are all set when the span ends, in one call (the
	// SDK then allocates their room once); a span sampled out costs none.
	ctx, span := i.tracer.Start(ctx, i.spanName(req, false), opts...)
	clear(sc.opts[:])
	return ctx, span
}

// targetAttrs are the attributes of the request's target, known once it
// was served (the handler reads its params once).
func targetAttrs(a []attribute.KeyValue, req *mcphandler.Request) []attribute.KeyValue {
	if req.Target == "" {
		return a
	}
	t := clipValue(req.Target)
	switch req.Method {
	case "tools/call":
		a = append(a, semconv.GenAIToolName(t))
	case "prompts/get":
		a = append(a, semconv.GenAIPromptName(t))
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		a = append(a, semconv.McpResourceURI(t))
	}
	return a
}

// maxNameBytes bounds the method and the target in a span name: both come
// from the client.
const maxNameBytes = 128

// maxValueBytes bounds every string value otelmcp puts on a span that the
// client chose or could vary (a target, a request or session id, the
// protocol version, the status message): a longer one is cut at a UTF-8
// boundary, and copied, so that a span kept for export holds no more of
// the request.
const maxValueBytes = 256

// clipValue cuts s to maxValueBytes at a UTF-8 boundary, copying it when
// cut.
func clipValue(s string) string {
	if len(s) <= maxValueBytes {
		return s
	}
	return strings.Clone(clipTo(s, maxValueBytes))
}

// spanName is the span name of req, "{method} {target}". Names of found
// targets (keep: the request found its tool or prompt) are made once and
// kept, up to maxNames of them; others are made per request.
func (i *interceptor) spanName(req *mcphandler.Request, keep bool) string {
	m := clip(req.Method)
	switch req.Method {
	case "tools/call", "prompts/get":
		if req.Target == "" {
			return m
		}
	default:
		return m
	}
	t := clip(req.Target)
	k := nameKey{m, t}
	if n, ok := i.names.load(k); ok {
		return n
	}
	n := m + " " + t
	if keep {
		// The key's strings are copied: clipped, they would hold on to
		// the whole request.
		i.names.store(nameKey{strings.Clone(m), strings.Clone(t)}, n)
	}
	return n
}

type nameKey struct{ method, target string }

// maxNames bounds the span names kept for reuse: targets come from the
// client.
const maxNames = 4096

// clip cuts s to maxNameBytes, at a UTF-8 boundary.
func clip(s string) string { return clipTo(s, maxNameBytes) }

// clipTo cuts s to n bytes, at a UTF-8 boundary.
func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// requestAttrs adds the span's attributes that describe the request.
func requestAttrs(a []attribute.KeyValue, req *mcphandler.Request, noTenant bool) []attribute.KeyValue {
	a = append(a, semconv.McpMethodNameKey.String(clipValue(req.Method)))
	if req.Method == "tools/call" {
		a = append(a, semconv.GenAIOperationNameExecuteTool)
	}
	if len(req.ID) > 0 {
		a = append(a, semconv.JSONRPCRequestID(clipValue(requestID(req.ID))))
	}
	if !noTenant && req.Identity.Tenant != "" {
		a = append(a, TenantKey.String(clipValue(req.Identity.Tenant)))
	}
	a = targetAttrs(a, req)
	if req.SessionID != "" {
		a = append(a, semconv.McpSessionID(clipValue(req.SessionID)))
	}
	if req.ProtocolVersion != "" {
		a = append(a, semconv.McpProtocolVersion(clipValue(req.ProtocolVersion)))
	}
	return a
}

// requestID is the id as the conventions want it: a string's value, a
// number's text.
func requestID(id json.RawMessage) string {
	var s string
	if len(id) > 0 && id[0] == '"' && json.Unmarshal(id, &s) == nil {
		return s
	}
	return string(id)
}

// end completes the span with what is known once the request ended, and
// records the metrics.
func (i *interceptor) end(ctx context.Context, span trace.Span, req *mcphandler.Request, res mcphandler.Result, sc *scratch) {
	errType := errorType(res)
	defer i.m.operation(ctx, req, res, errType, time.Now())
	if !span.IsRecording() {
		span.End()
		i.scratch.Put(sc)
		return
	}
	if req.Target != "" {
		// A target the handler did not find is the client's string: the
		// span is named by the method alone.
		if res.Found {
			span.SetName(i.spanName(req, true))
		} else {
			span.SetName(clip(req.Method))
		}
	}
	a := requestAttrs(sc.attrs[:0], req, i.cfg.noTenant)
	if res.ErrorCode != 0 {
		a = append(a, semconv.RPCResponseStatusCode(strconv.Itoa(int(res.ErrorCode))))
	}
	if req.Method == "tools/call" && res.Outcome != "" {
		a = append(a, OutcomeKey.String(string(res.Outcome)))
	}
	if res.ConfirmID != "" {
		a = append(a, ConfirmIDKey.String(clipValue(res.ConfirmID)))
	}
	if errType != "" {
		a = append(a, semconv.ErrorTypeKey.String(errType))
		msg := clipValue(res.ErrorMessage)
		if msg == "" {
			msg = errType
		}
		span.SetStatus(codes.Error, msg)
	}
	span.SetAttributes(a...)
	span.End()
	clear(sc.attrs[:min(len(a), maxSpanAttrs)]) // hold no request's strings
	i.scratch.Put(sc)
}

// errorType is the error.type of a result: the JSON-RPC code, or
// tool_error; "" on success.
func errorType(res mcphandler.Result) string {
	switch {
	case res.ErrorCode != 0:
		return strconv.Itoa(int(res.ErrorCode))
	case res.IsError:
		return ErrorTypeToolError
	}
	return ""
}

// metaCarrier is the string members traceparent, tracestate and baggage
// of a _meta object, or nil. A _meta that cannot name one of them (none of
// the names in it, and no escape that could spell one) is not decoded: a
// 2026-07-28 request always carries _meta, mostly without a trace context.
func metaCarrier(meta json.RawMessage) propagation.MapCarrier {
	if len(meta) == 0 || !mayCarry(meta) || !json.Valid(meta) {
		return nil
	}
	return walkCarrier(meta)
}

// carrierKeys are the members of _meta a carrier holds.
var carrierKeys = [...]string{"traceparent", "tracestate", "baggage"}

// walkCarrier is what encoding/json decodes of a valid _meta into a map
// (see metaCarrier), in one walk of its members: keys match exactly once
// unescaped, the last of a duplicated key wins, and its value counts if it
// is a string or null (which decodes as ""). FuzzMetaCarrier compares the
// two.
func walkCarrier(meta []byte) propagation.MapCarrier {
	var last [len(carrierKeys)][]byte
	if !members(meta, func(k, v []byte) bool {
		for i, name := range carrierKeys {
			if exactKey(k, name) {
				last[i] = v
			}
		}
		return true
	}) {
		return nil
	}
	var c propagation.MapCarrier
	for i, v := range last {
		s, ok := jsonString(v)
		if string(v) == "null" {
			s, ok = "", true
		}
		if ok {
			if c == nil {
				c = propagation.MapCarrier{}
			}
			c[carrierKeys[i]] = s
		}
	}
	return c
}

// exactKey reports whether the quoted key is name once unescaped, as a
// map key of encoding/json is.
func exactKey(key []byte, name string) bool {
	k := key[1 : len(key)-1]
	if bytes.IndexByte(k, '\\') < 0 {
		return string(k) == name
	}
	var s string
	return json.Unmarshal(key, &s) == nil && s == name
}

// mayCarry reports whether meta may hold a member traceparent, tracestate
// or baggage: it mentions one of the names, or has an escape (a key such
// as "trace\u0070arent" names traceparent once decoded).
func mayCarry(meta []byte) bool {
	return bytes.IndexByte(meta, '\\') >= 0 || bytes.Contains(meta, []byte("traceparent")) ||
		bytes.Contains(meta, []byte("tracestate")) || bytes.Contains(meta, []byte("baggage"))
}
