package mcptest

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/internal/detached"
	"github.com/mcphandler/mcphandler/session"
)

// ToolCallRecorder records what a tool handler run on a [NewToolCall] sent
// the client. It is safe for concurrent use.
type ToolCallRecorder struct {
	mu        sync.Mutex // guards notes and questions
	notes     []Notification
	questions []Notification
}

// Notifications returns the notifications the handler sent, in order:
// notifications/progress (with progress token 1) and notifications/message.
func (r *ToolCallRecorder) Notifications() []Notification {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Notification(nil), r.notes...)
}

// Questions returns the server-to-client requests the handler made
// (elicitation/create, sampling/createMessage, roots/list), in order.
func (r *ToolCallRecorder) Questions() []Notification {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Notification(nil), r.questions...)
}

// NewToolCall returns a call of tool by id with args (marshalled to JSON;
// nil for {}), to run tool.Handler directly in a unit test — no Handler,
// no HTTP, no store — and the recorder of what the handler sends the
// client. Questions are answered by the request handlers of opts
// ([WithElicitationHandler], [WithSamplingHandler], [WithRootsHandler],
// [WithRequestHandler]), and the call declares the capabilities those
// imply; a question without a handler fails with -32601, as a client
// would answer it. Other options are ignored. It panics if args does not
// marshal to a JSON object.
//
// The call does not pass through the Handler's pipeline: no role gate,
// argument validation of a typed tool, BeforeCall or confirm runs.
func NewToolCall(tool mcphandler.Tool, args any, id mcphandler.Identity, opts ...Option) (*mcphandler.ToolCall, *ToolCallRecorder) {
	cfg := newConfig(opts)
	raw, err := marshalParams(args)
	if raw == nil && err == nil {
		raw = json.RawMessage("{}")
	}
	if err != nil || raw[0] != '{' {
		panic("mcptest: NewToolCall: arguments must marshal to a JSON object")
	}
	rec := &ToolCallRecorder{}
	send := func(msg []byte) {
		var m struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		json.Unmarshal(msg, &m)
		rec.mu.Lock()
		rec.notes = append(rec.notes, Notification{Method: m.Method, Params: m.Params})
		rec.mu.Unlock()
	}
	ask := func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		rec.mu.Lock()
		rec.questions = append(rec.questions, Notification{Method: method, Params: params})
		rec.mu.Unlock()
		h := cfg.handlers[method]
		if h == nil {
			return nil, &RPCError{Code: CodeMethodNotFound, Message: "Method not found: " + method}
		}
		return h(ctx, params)
	}
	x := detached.NewExchange(handlerCaps(cfg.handlers), send, ask).(*mcphandler.Exchange)
	return &mcphandler.ToolCall{Tool: tool, Arguments: raw, Identity: id, Exchange: x}, rec
}

// handlerCaps are the client capabilities the request handlers imply.
func handlerCaps(handlers map[string]RequestHandler) session.Capabilities {
	var c session.Capabilities
	if handlers[MethodElicit] != nil {
		c |= session.CapElicitationForm
	}
	if handlers[MethodSampling] != nil {
		c |= session.CapSampling
	}
	if handlers[MethodRootsList] != nil {
		c |= session.CapRoots
	}
	return c
}
