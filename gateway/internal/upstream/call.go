package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// call is one operation (a list, a call, a detection): what its requests
// share. It is used by one goroutine.
type call struct {
	ep       *endpoint
	caps     clientCaps
	ask      Asker  // nil for a list: questions are refused
	progress []byte // the progressToken sent with tools/call (JSON), or nil
	asks     int    // server-to-client requests (or input requests) so far
}

// replyFunc sends a JSON-RPC response (to a server-to-client request) to
// the upstream.
type replyFunc func(ctx context.Context, msg []byte) error

// handle acts on m, which came while waiting for the response to the
// request id: it returns that response's result (done), relays a
// notification, or answers a server-to-client request with reply (nil:
// the era allows none, and one is ErrMalformed). A JSON-RPC error response
// is a *RPCError.
func (c *call) handle(ctx context.Context, m *message, id []byte, reply replyFunc) (result []byte, done bool, err error) {
	switch m.kind {
	case jsonrpc.KindResponse:
		if !bytes.Equal(m.ID, id) {
			return nil, false, fmt.Errorf("%w: a response whose id is not the request's", ErrMalformed)
		}
		if m.Error != nil {
			return nil, true, rpcError(m.Error)
		}
		return m.Result, true, nil
	case jsonrpc.KindNotification:
		c.notify(ctx, m)
		return nil, false, nil
	}
	if reply == nil {
		return nil, false, fmt.Errorf("%w: a server-to-client request (%s), which this era forbids", ErrMalformed, cutText(m.Method))
	}
	if c.asks++; c.asks > maxAsks {
		return nil, false, fmt.Errorf("%w: more than %d server-to-client requests in one call", ErrTooMany, maxAsks)
	}
	res, rerr := c.answer(ctx, m.Method, m.Params)
	if ctx.Err() != nil {
		return nil, false, ctxErr(ctx)
	}
	var msg []byte
	if rerr != nil {
		msg = jsonrpc.AppendError(nil, m.ID, &jsonrpc.Error{Code: rerr.Code, Message: rerr.Message, Data: rerr.Data})
	} else {
		msg = jsonrpc.AppendResult(nil, m.ID, res)
	}
	return nil, false, reply(ctx, msg)
}

// answer answers one server-to-client request: ping itself, a question the
// client declared it answers through the Asker, anything else -32601.
func (c *call) answer(ctx context.Context, method string, params []byte) ([]byte, *RPCError) {
	if method == "ping" {
		return []byte("{}"), nil
	}
	if c.ask == nil || !c.caps.allows(method) {
		return nil, &RPCError{Code: jsonrpc.CodeMethodNotFound, Message: "Method not found"}
	}
	res, err := c.askClient(ctx, method, params)
	if err != nil {
		var re *RPCError
		if errors.As(err, &re) {
			if len(re.Data) > 0 && !json.Valid(re.Data) {
				return nil, &RPCError{Code: re.Code, Message: re.Message} // what the Asker made cannot be sent
			}
			return nil, re
		}
		return nil, &RPCError{Code: jsonrpc.CodeInternalError, Message: "Internal error"}
	}
	return res, nil
}

// askClient puts one question to the Asker and checks its answer is a
// JSON object.
func (c *call) askClient(ctx context.Context, method string, params []byte) ([]byte, error) {
	if len(params) == 0 {
		params = []byte("{}")
	}
	res, err := c.ask.Ask(ctx, method, params)
	if err != nil {
		return nil, err
	}
	if !isObject(res) {
		return nil, errors.New("upstream: the Asker's answer to " + method + " is not a JSON object")
	}
	return res, nil
}

// notify relays the call's progress (with the token it sent) and log
// messages to the Asker; anything else is dropped.
func (c *call) notify(ctx context.Context, m *message) {
	if c.ask == nil {
		return
	}
	switch m.Method {
	case "notifications/progress":
		if c.progress == nil || !isObjectBytes(m.Params) {
			return
		}
		if tok, ok := members(m.Params)["progressToken"]; !ok || !bytes.Equal(tok, c.progress) {
			return
		}
	case "notifications/message":
		if !isObjectBytes(m.Params) {
			return
		}
	default:
		return
	}
	c.ask.Notify(ctx, m.Method, m.Params)
}

// requester sends one request of an operation in its era and returns its
// result (a JSON object): the upstream's questions and notifications that
// come before it are handled on the way.
type requester interface {
	request(ctx context.Context, method string, params []member, name string) ([]byte, error)
	endpoint() *endpoint
}

func (s *session) endpoint() *endpoint   { return s.c.ep }
func (s *stateless) endpoint() *endpoint { return s.c.ep }
func (l *legacy) endpoint() *endpoint    { return l.c.ep }

// withMeta builds a request's params object: params, and a _meta of the
// members of meta that have a value, then of Endpoint.Meta (none: no
// _meta).
func (c *call) withMeta(params []member, meta ...member) []byte {
	if len(c.ep.meta) > 0 {
		meta = append(meta[:len(meta):len(meta)], c.ep.meta...)
	}
	m := object(meta...)
	if len(m) > 2 {
		params = append(params[:len(params):len(params)], member{"_meta", m})
	}
	return object(params...)
}

// progressMeta is the _meta member that asks for progress of a
// tools/call.
func (c *call) progressMeta(method string) member {
	if method != "tools/call" {
		return member{}
	}
	return member{"progressToken", c.progress}
}
