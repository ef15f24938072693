package mcphandler

import (
	"context"
	"net/http"
	"time"
)

// UpstreamCall describes one call a tool's handler makes to another MCP
// server for its caller — package gateway forwards every call of an
// upstream tool this way — as [ToolCall.CallUpstream] reports it to the
// interceptors ([Request.OnUpstream]) and to OnCall ([CallEvent]).
//
// Upstream, Era and CredentialKind come from the host's configuration,
// never from a client or from the upstream: they are bounded by what the
// host configured, and fit for metric attributes. Name is the upstream's
// string: fit for a span, never for a metric attribute.
type UpstreamCall struct {
	// Upstream names the server: the id the host gave it (package
	// gateway: Upstream.ID, 1–32 bytes of a-z 0-9 -).
	Upstream string
	// Era is the protocol revision the server is spoken to in, as known
	// before the call: "2026-07-28", "2025-11-25", "2025-06-18",
	// "2025-03-26", "2025" (a 2025 revision, negotiated by each call) or
	// "2024-11-05".
	Era string
	// CredentialKind labels the credentials the call carries there, as
	// the host declared them (package gateway: Upstream.CredentialKind,
	// e.g. "static" or "token-exchange"; "" when not declared): a kind,
	// never the credential.
	CredentialKind string
	// Method is the MCP method of the call: "tools/call".
	Method string
	// Name is the tool's name on the server ([ToolOrigin.Name]): chosen
	// by the upstream (package gateway serves only names of at most 128
	// bytes of A-Z a-z 0-9 _ - . that its list accepted), so a span's
	// name or attribute, never a metric attribute.
	Name string

	// Header is what interceptors add to every HTTP request of the call,
	// set before they call next: the trace context (traceparent,
	// tracestate). It starts nil and holds nothing of the host's own
	// headers for the server (its credentials are never in it). Package
	// gateway sends a header of it only where the host configured none of
	// that name, and never one the protocol sets (Content-Type, Accept,
	// Mcp-*, Last-Event-ID).
	Header http.Header
	// Meta is what interceptors add to the _meta of every request of the
	// call, as strings, set before they call next: the trace context, as
	// the OpenTelemetry conventions for MCP carry it (traceparent,
	// tracestate). It starts nil. Package gateway never sends a key the
	// protocol uses (progressToken, or of prefix io.modelcontextprotocol/)
	// from it.
	Meta map[string]string
}

// UpstreamResult is how a call to another MCP server ended, as the
// function given to [ToolCall.CallUpstream] returns it through the
// interceptors.
type UpstreamResult struct {
	// ErrorCode is the JSON-RPC error code the server answered with, or
	// zero.
	ErrorCode Code
	// ErrorMessage is the message of that error: the server's words, cut
	// to 256 bytes (package gateway cuts them at a UTF-8 boundary).
	ErrorMessage string
	// IsError reports a result with isError set.
	IsError bool
	// ErrorClass is, when the call failed (an error answer included), the
	// class the tool reports the failure with ("timeout",
	// "backend_unavailable", "internal"); "" when the server answered
	// with a result.
	ErrorClass ErrorClass
}

// upstreamSeen is what CallUpstream reported of a call, for its
// CallEvent.
type upstreamSeen struct {
	upstream, era, kind string
	d                   time.Duration
}

// CallUpstream runs fn, a call this tool makes to another MCP server for
// its caller (package gateway forwards every call of an upstream tool
// through it), and reports it:
//
//   - to the interceptors of the request: the Request.OnUpstream they set
//     wrap fn (the first interceptor's outermost), each calling the next
//     with the context the call runs with, so that a span started there
//     is the parent of what fn does, and each may add to u.Header and
//     u.Meta what fn sends;
//   - to OnCall: the call's [CallEvent] gets u's Upstream, Era and
//     CredentialKind, and in UpstreamDuration the time fn took (the
//     times of several calls add up; the fields are the last's).
//
// fn runs at most once, on the calling goroutine, with ctx unless an
// interceptor passed on another derived from it; it should read u.Header
// and u.Meta when it sends, not before. CallUpstream returns what the
// interceptors returned, which is fn's result unless one changed it. An
// interceptor that does not call next leaves fn unrun: the result then
// has ErrorClass ClassInternal.
//
// Call it from the tool's handler, one call at a time, u not changed
// while it runs. In a task's work ([ToolCall.RunAsTask]), which runs
// after its request was answered and reported, it only runs fn.
func (c *ToolCall) CallUpstream(ctx context.Context, u *UpstreamCall, fn func(context.Context) UpstreamResult) UpstreamResult {
	var d time.Duration
	ran := false
	inner := func(ctx context.Context) UpstreamResult {
		if ran {
			return UpstreamResult{ErrorClass: ClassInternal}
		}
		ran = true
		start := time.Now()
		res := fn(ctx)
		d = time.Since(start)
		return res
	}
	var res UpstreamResult
	if ic := interceptionFrom(ctx); ic != nil && ic.req.OnUpstream != nil {
		res = ic.req.OnUpstream(ctx, u, inner)
		if !ran {
			res = UpstreamResult{ErrorClass: ClassInternal}
		}
	} else {
		res = inner(ctx)
	}
	if c.up == nil {
		c.up = new(upstreamSeen)
	}
	c.up.upstream, c.up.era, c.up.kind = u.Upstream, u.Era, u.CredentialKind
	c.up.d += d
	return res
}

// reportUpstream puts what CallUpstream reported of c into ev.
func (c *ToolCall) reportUpstream(ev *CallEvent) {
	if u := c.up; u != nil {
		ev.Upstream, ev.UpstreamEra, ev.CredentialKind, ev.UpstreamDuration = u.upstream, u.era, u.kind, u.d
	}
}
