package mcphandler

import (
	"context"
	"encoding/json"

	"github.com/mcphandler/mcphandler/internal/detached"
	"github.com/mcphandler/mcphandler/session"
)

func init() {
	detached.NewExchange = func(caps session.Capabilities, send func(msg []byte), ask func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)) any {
		return newDetachedExchange(caps, send, ask)
	}
}

// newDetachedExchange returns an Exchange that runs outside a Handler,
// for unit tests of tool handlers (package mcptest builds on it, through
// internal/detached: see mcptest.NewToolCall). What the handler sends the
// client — progress and log messages, as JSON-RPC notifications — goes to
// send; each question (Elicit, CreateMessage, ListRoots, Ask) goes to ask
// as the method and params of the server-to-client request, and ask
// returns the client's result or an error. caps are the capabilities the
// client declares. Progress is reported with progress token 1, log
// messages from level debug up, in protocol version 2025-11-25.
//
// send and ask are called on the goroutine of the handler's call, and
// from its own goroutines if it starts any: they must be safe for
// concurrent use if it does.
func newDetachedExchange(caps session.Capabilities, send func(msg []byte), ask func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)) *Exchange {
	st := &stream{sink: func(msg []byte) error {
		send(msg)
		return nil
	}}
	return &Exchange{st: st, caps: caps, version: Version20251125, progressToken: json.RawMessage("1"), logLevel: LevelDebug, answer: ask}
}
