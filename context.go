package mcphandler

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/mcphandler/mcphandler/session"
)

// ctxKey is the key of the request's *reqInfo in a context.
type ctxKey struct{}

// reqInfo is what the accessors below read. One is allocated per request.
type reqInfo struct {
	identity  Identity
	request   *http.Request
	sessionID string
	version   string
	meta      json.RawMessage
	caps      session.Capabilities
	list      listMeta // the _meta members of a tools/list result (AddListMeta)
}

// IdentityFrom returns the caller of the request being served in ctx. It is
// set for every hook and handler the Handler calls.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	ri, ok := ctx.Value(ctxKey{}).(*reqInfo)
	if !ok {
		return Identity{}, false
	}
	return ri.identity, true
}

// RequestFrom returns the HTTP request being served in ctx. Handlers must not
// read its body or keep it after they return. Its Context is the HTTP
// request's own, without what Config.Interceptors added: that is in ctx.
func RequestFrom(ctx context.Context) (*http.Request, bool) {
	ri, ok := ctx.Value(ctxKey{}).(*reqInfo)
	if !ok {
		return nil, false
	}
	return ri.request, true
}

// SessionIDFrom returns the 2025 session of the request in ctx; it reports
// false when there is none (stateless mode, initialize, 2026 requests).
func SessionIDFrom(ctx context.Context) (string, bool) {
	ri, ok := ctx.Value(ctxKey{}).(*reqInfo)
	if !ok || ri.sessionID == "" {
		return "", false
	}
	return ri.sessionID, true
}

// ProtocolVersionFrom returns the MCP revision the request in ctx speaks.
func ProtocolVersionFrom(ctx context.Context) (string, bool) {
	ri, ok := ctx.Value(ctxKey{}).(*reqInfo)
	if !ok || ri.version == "" {
		return "", false
	}
	return ri.version, true
}

// ClientCapabilitiesFrom returns what the client of the request in ctx
// declared it can do: in its session's initialize (2025, 2024-11-05), or
// in the request's own _meta (2026-07-28). None when ctx serves no
// request, or during a client's initialize before it was read.
func ClientCapabilitiesFrom(ctx context.Context) session.Capabilities {
	ri, ok := ctx.Value(ctxKey{}).(*reqInfo)
	if !ok {
		return 0
	}
	return ri.caps
}

// MetaFrom returns the raw `_meta` object of the request's params, if it had
// one.
func MetaFrom(ctx context.Context) (json.RawMessage, bool) {
	ri, ok := ctx.Value(ctxKey{}).(*reqInfo)
	if !ok || len(ri.meta) == 0 {
		return nil, false
	}
	return ri.meta, true
}
