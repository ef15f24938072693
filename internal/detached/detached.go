// Package detached lets package mcptest build an Exchange that runs
// outside a Handler, without the root package exporting a constructor
// that only tests use. Package mcphandler sets NewExchange when it is
// initialised; mcptest, which imports mcphandler, calls it.
package detached

import (
	"context"
	"encoding/json"

	"github.com/mcphandler/mcphandler/session"
)

// NewExchange returns a *mcphandler.Exchange that runs outside a Handler
// (typed any because this package cannot import mcphandler, which imports
// it). What the tool's handler sends the client — progress and log
// messages, as JSON-RPC notifications — goes to send; each question
// (Elicit, CreateMessage, ListRoots, Ask) goes to ask as the method and
// params of the server-to-client request, and ask returns the client's
// result or an error. caps are the capabilities the client declares.
// Progress is reported with progress token 1, log messages from level
// debug up, in protocol version 2025-11-25.
//
// send and ask are called on the goroutine of the handler's call, and
// from its own goroutines if it starts any: they must be safe for
// concurrent use if it does.
//
// It is nil until package mcphandler is initialised, and never written
// after that.
var NewExchange func(caps session.Capabilities, send func(msg []byte), ask func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)) any
