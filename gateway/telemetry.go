package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// callTool makes the call upstream through ToolCall.CallUpstream: the
// interceptors wrap it (otelmcp: a CLIENT span, whose trace context goes
// upstream in the headers and in _meta), and OnCall learns the upstream,
// its era, the credentials' kind and the time spent there. It returns
// what upstream.CallTool returned (in the caller's kept upstream session,
// sessions.go) or, with retry set, what upstream.CallToolRound did: one
// round of a relayed call is one call. ep is how the caller reaches the
// upstream (forward.endpoint).
func (f *forward) callTool(ctx context.Context, call *mcphandler.ToolCall, ep upstream.Endpoint, a *asker, retry *upstream.Retry) (json.RawMessage, *upstream.InputRequired, error) {
	u := &mcphandler.UpstreamCall{Upstream: f.upstream, Era: f.era, CredentialKind: f.kind, Method: "tools/call", Name: f.name}
	var raw json.RawMessage
	var ir *upstream.InputRequired
	err := errNotSent
	call.CallUpstream(ctx, u, func(ctx context.Context) mcphandler.UpstreamResult {
		ep := ep
		if len(u.Header) > 0 {
			ep.Headers = func(_ context.Context, h http.Header) { addHeaders(h, u.Header) }
		}
		ep.Meta = u.Meta
		ep.LogLevel = string(call.Exchange.LogLevel()) // the upstream logs what the client asked for
		caps := capsJSON(call.Exchange.ClientCapabilities())
		if retry != nil {
			raw, ir, err = upstream.CallToolRound(ctx, ep, caps, f.name, call.Arguments, retry, a)
		} else {
			raw, err = f.g.keeper.call(ctx, f, ep, caps, call, a) // sessions.go
		}
		if ir != nil {
			return mcphandler.UpstreamResult{} // it answered: with questions
		}
		return upstreamResult(ctx, raw, err, a)
	})
	return raw, ir, err
}

// errNotSent is the error of a call an interceptor kept from going
// upstream.
var errNotSent = errors.New("gateway: an interceptor did not let the call go upstream")

// addHeaders adds to h, which holds the host's headers for the upstream,
// those of extra (an interceptor's) whose names it has none of: the
// host's credentials are never replaced. The wire client drops the
// protocol's headers.
func addHeaders(h, extra http.Header) {
	for k, vs := range extra {
		if k = http.CanonicalHeaderKey(k); len(h[k]) == 0 {
			h[k] = slices.Clone(vs)
		}
	}
}

// upstreamResult is how the upstream call ended, for the interceptors, as run
// reports it to the client: a refused question or an error answer is
// internal, a call past its deadline a timeout, any other failure (a
// result that is not an object included) backend_unavailable.
func upstreamResult(ctx context.Context, raw json.RawMessage, err error, a *asker) mcphandler.UpstreamResult {
	var rpc *upstream.RPCError
	switch {
	case a.refused.Load():
		return mcphandler.UpstreamResult{ErrorClass: mcphandler.ClassInternal}
	case err == nil:
		isError := false
		if !jsonrpc.Members(raw, func(k, v []byte) bool {
			if key, _ := jsonrpc.String(k); key == "isError" {
				isError = string(v) == "true"
			}
			return true
		}) {
			return mcphandler.UpstreamResult{ErrorClass: mcphandler.ClassBackendUnavailable}
		}
		return mcphandler.UpstreamResult{IsError: isError}
	case errors.As(err, &rpc):
		return mcphandler.UpstreamResult{ErrorCode: mcphandler.Code(rpc.Code), ErrorMessage: rpc.Message, ErrorClass: mcphandler.ClassInternal}
	case errors.Is(err, upstream.ErrSessionGone):
		var gone *upstream.SessionGoneError
		if errors.As(err, &gone) && gone.NotRun {
			return mcphandler.UpstreamResult{ErrorClass: mcphandler.ClassBackendUnavailable}
		}
		return mcphandler.UpstreamResult{ErrorClass: mcphandler.ClassInternal}
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return mcphandler.UpstreamResult{ErrorClass: mcphandler.ClassTimeout}
	}
	return mcphandler.UpstreamResult{ErrorClass: mcphandler.ClassBackendUnavailable}
}
