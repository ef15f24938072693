package otelmcp

import (
	"context"
	"net/http"
	"strconv"

	"github.com/mcphandler/mcphandler"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// Project attribute keys of the CLIENT span of an upstream call. Their
// values come from the host's configuration (see
// [mcphandler.UpstreamCall]).
const (
	UpstreamKey       = attribute.Key("mcphandler.upstream")
	UpstreamEraKey    = attribute.Key("mcphandler.upstream.era")
	CredentialKindKey = attribute.Key("mcphandler.upstream.credential_kind")
)

var clientKind = trace.WithSpanKind(trace.SpanKindClient)

// wrapUpstream makes the request's upstream calls go through i.upstream,
// inside the OnUpstream an interceptor before this one set.
func (i *interceptor) wrapUpstream(req *mcphandler.Request) {
	found := req.OnUpstream
	if found == nil {
		req.OnUpstream = i.upstreamFn
		return
	}
	req.OnUpstream = func(ctx context.Context, u *mcphandler.UpstreamCall, next func(context.Context) mcphandler.UpstreamResult) mcphandler.UpstreamResult {
		return found(ctx, u, func(ctx context.Context) mcphandler.UpstreamResult { return i.upstream(ctx, u, next) })
	}
}

// upstream makes a tool's call to another MCP server a CLIENT span, child
// of the span in ctx (the request's, or the tool's own), and sends its
// trace context with the call: in the headers of each HTTP request and in
// _meta, written by the configured propagator. The caller's baggage is
// not sent: it came from the client, and nothing of the downstream
// request goes upstream but the trace.
func (i *interceptor) upstream(ctx context.Context, u *mcphandler.UpstreamCall, next func(context.Context) mcphandler.UpstreamResult) mcphandler.UpstreamResult {
	method := clip(u.Method)
	name := method
	a := make([]attribute.KeyValue, 0, 8)
	a = append(a, semconv.McpMethodNameKey.String(method))
	if u.Method == "tools/call" {
		a = append(a, semconv.GenAIOperationNameExecuteTool)
	}
	if u.Name != "" {
		name = method + " " + clip(u.Name)
		a = append(a, semconv.GenAIToolName(clipValue(u.Name)))
	}
	if isRevision(u.Era) {
		a = append(a, semconv.McpProtocolVersion(u.Era))
	}
	a = append(a, UpstreamKey.String(clipValue(u.Upstream)), UpstreamEraKey.String(clipValue(u.Era)))
	if u.CredentialKind != "" {
		a = append(a, CredentialKindKey.String(clipValue(u.CredentialKind)))
	}
	ctx, span := i.tracer.Start(ctx, name, clientKind, trace.WithAttributes(a...))
	defer span.End()
	if u.Header == nil {
		u.Header = http.Header{}
	}
	if u.Meta == nil {
		u.Meta = map[string]string{}
	}
	sent := baggage.ContextWithoutBaggage(ctx)
	i.cfg.prop.Inject(sent, propagation.HeaderCarrier(u.Header))
	i.cfg.prop.Inject(sent, propagation.MapCarrier(u.Meta))
	res := next(ctx)
	if !span.IsRecording() {
		return res
	}
	var errType string
	switch {
	case res.ErrorCode != 0:
		errType = strconv.Itoa(int(res.ErrorCode))
		span.SetAttributes(semconv.RPCResponseStatusCode(errType))
	case res.IsError:
		errType = ErrorTypeToolError
	case res.ErrorClass != "":
		errType = string(res.ErrorClass)
	}
	if errType != "" {
		span.SetAttributes(semconv.ErrorTypeKey.String(errType))
		msg := clipValue(res.ErrorMessage)
		if msg == "" {
			msg = errType
		}
		span.SetStatus(codes.Error, msg)
	}
	return res
}

// isRevision reports whether era names one protocol revision (a date),
// not "2025", which stands for the one each call negotiates.
func isRevision(era string) bool {
	return len(era) == len("2025-11-25") && era[4] == '-' && era[7] == '-'
}
