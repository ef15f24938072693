package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Era is the protocol era a [Client] speaks. Each era is a different
// transport on the wire; [WithEra] chooses one, and [WithProtocolVersion]
// the revision within it.
type Era int

const (
	// Sessions is Streamable HTTP with sessions, revisions 2025-03-26,
	// 2025-06-18 and 2025-11-25 (default [DefaultProtocolVersion]): an
	// initialize handshake, then Mcp-Session-Id and MCP-Protocol-Version on
	// every request; answers as JSON or SSE; server requests on response
	// streams, answered by POST; a GET stream; DELETE. The default era.
	Sessions Era = iota
	// Stateless is the stateless revision 2026-07-28 (default
	// [ModernProtocolVersion]): no initialize and no session; every request
	// carries the _meta envelope and the MCP-Protocol-Version, Mcp-Method
	// and Mcp-Name headers; input_required results are answered and
	// retried; subscriptions/listen streams.
	Stateless
	// SSE is the HTTP+SSE transport of 2024-11-05 (default
	// [LegacyProtocolVersion]): a GET opens an SSE stream that names the
	// message URL; every message is POSTed there and every answer arrives
	// on the stream.
	SSE
)

// String returns "sessions", "stateless" or "sse".
func (e Era) String() string {
	switch e {
	case Sessions:
		return "sessions"
	case Stateless:
		return "stateless"
	case SSE:
		return "sse"
	}
	return fmt.Sprintf("Era(%d)", int(e))
}

// WithEra sets the protocol era of the client; the default is [Sessions].
// Methods that have no meaning in the chosen era fail with an error that
// matches [errors.ErrUnsupported]; each method's documentation says which.
// With [New], the endpoint of the [SSE] era is the SSE URL, set with
// [WithPath].
func WithEra(e Era) Option {
	return func(c *config) { c.era = e }
}

// wire is what differs between the eras: where a request goes and with
// which headers, how a request travels and its response comes back, and
// whether a result asks for another round. Each era implements it once
// (era_sessions.go, era_stateless.go, era_sse.go); the Client's shared
// code knows no era.
type wire interface {
	// target returns the URL and default headers of an HTTP request with
	// the given method and body (a JSON-RPC message, for POST). The
	// initialize request (init) goes without the state it creates.
	target(method string, body []byte, init bool) (string, http.Header, error)
	// params returns the params member to send for params (nil: none),
	// with the era's envelope if it has one.
	params(params any) (json.RawMessage, error)
	// roundTrip sends the request id, encoded in body, and returns its
	// response message and the header of the HTTP response that carried
	// it, handling the server requests and notifications read meanwhile.
	// When ctx ends first it tells the server, if the era can.
	roundTrip(ctx context.Context, id int64, method string, body []byte, init bool) (*Message, http.Header, error)
	// next returns the params of the next round of a request whose
	// round-th answer is result, or nil when result is final.
	next(ctx context.Context, method string, params, result json.RawMessage, round int) (json.RawMessage, error)
	// beforeInitialize readies the client for initialize (opening the
	// SSE stream), or fails for an era that has none.
	beforeInitialize(ctx context.Context) error
	// close ends what the era keeps open besides streams, and waits for
	// its goroutines.
	close()
}

// unsupported reports that op is not part of the client's era.
func (c *Client) unsupported(op string) error {
	return fmt.Errorf("mcptest: %s is not part of the %v era: %w", op, c.cfg.era, errors.ErrUnsupported)
}
