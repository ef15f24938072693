package mcphandler

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// A request's final message: a result (reply) or an error (fail), each
// decorated by the request's era and written to its stream (stream.go),
// and the answers of a failed hook or store call every method shares.

var emptyResult = []byte("{}")

// openResult appends the start of a result response up to and including
// the result object's opening brace (and, on 2026-07-28, its resultType,
// cache hints and serverInfo). closeResult ends it.
func (rq *request) openResult(dst []byte, id json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"result":{`...)
	return rq.decorate(dst)
}

func closeResult(dst []byte) []byte {
	if dst[len(dst)-1] == ',' {
		dst = dst[:len(dst)-1]
	}
	return append(dst, "}}"...)
}

// reply sends result, a JSON object, as the request's final message. A
// result that is not one (never from the handler itself) is an internal
// error rather than a malformed response.
func (rq *request) reply(id json.RawMessage, result []byte) {
	if len(result) < 2 || result[0] != '{' || result[len(result)-1] != '}' {
		rq.h.logger().Error("mcphandler: a result to send is not a JSON object")
		rq.fail(id, errInternal())
		return
	}
	b := rq.openResult(make([]byte, 0, len(result)+len(id)+160), id)
	b = append(b, result[1:len(result)-1]...)
	rq.st.finish(closeResult(b))
}

// fail sends an error as the request's final message.
func (rq *request) fail(id json.RawMessage, e *jsonrpc.Error) {
	rq.ic.failed(e) // for Config.Interceptors (intercept.go)
	rq.errorStatus(Code(e.Code))
	rq.st.finish(jsonrpc.AppendError(nil, id, e))
}

// hookFailed answers a request whose hook failed: an *Error is sent as is,
// anything else as an internal error that reveals nothing.
func (rq *request) hookFailed(m *jsonrpc.Message, hook string, err error) {
	var e *Error
	if !errors.As(err, &e) {
		rq.h.logger().Error("mcphandler: "+hook, "method", m.Method, "err", err)
	}
	rq.fail(m.ID, wireError(err))
}

// storeFailed answers a request whose session store call failed.
func (rq *request) storeFailed(m *jsonrpc.Message, err error) {
	rq.h.logger().Error("mcphandler: session store", "err", err)
	rq.st.status = http.StatusServiceUnavailable
	rq.fail(m.ID, errStoreUnavailable())
}
