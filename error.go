package mcphandler

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// Code is a JSON-RPC error code: one of the constants below, which are
// every code the handler sends, or a code a hook chooses for an [Error].
type Code int

// JSON-RPC error codes the handler sends. SPEC.md's error table lists
// when each is sent and with which HTTP status.
const (
	CodeParseError     Code = jsonrpc.CodeParseError     // -32700: the body is not JSON
	CodeInvalidRequest Code = jsonrpc.CodeInvalidRequest // -32600: not a valid JSON-RPC message
	CodeMethodNotFound Code = jsonrpc.CodeMethodNotFound // -32601: unknown method
	CodeInvalidParams       = jsonrpc.CodeInvalidParams  // -32602: bad params, unknown tool or prompt
	CodeInternalError       = jsonrpc.CodeInternalError  // -32603: the server failed

	// CodeRateLimited refuses a call for now: wait, then retry.
	CodeRateLimited Code = -32000
	// CodeForbidden refuses a call for good: never retry with this identity.
	CodeForbidden Code = -32001
	// CodeResourceNotFound is the 2025 revisions' "resource not found".
	CodeResourceNotFound Code = -32002
	// CodeStoreUnavailable reports that the session store cannot be
	// reached; the HTTP status is 503.
	CodeStoreUnavailable Code = -32010
)

// Error is a JSON-RPC error. A hook returns one (directly or wrapped) to
// choose the code and message the client sees; any other error becomes
// [CodeInternalError] with a message that reveals nothing of it.
type Error struct {
	Code    Code
	Message string
	// Data, if non-nil, is marshalled into the error's data member.
	Data any
}

// NewError returns an *Error with the given code and message.
func NewError(code Code, message string) *Error { return &Error{Code: code, Message: message} }

func (e *Error) Error() string {
	return "mcphandler: " + strconv.Itoa(int(e.Code)) + " " + e.Message
}

// ErrForbidden, returned (wrapped) by [Config.Authenticate], answers 403
// instead of 401: the caller is known but may not use this endpoint.
var ErrForbidden = errors.New("mcphandler: forbidden")

// ErrAuthUnavailable, returned (wrapped) by [Config.Authenticate], answers
// 503 with Retry-After instead of 401: the credentials could not be checked
// (the authorization server did not answer), so the client should keep its
// token and retry.
var ErrAuthUnavailable = errors.New("mcphandler: authentication unavailable")

// wireError converts err to the JSON-RPC error object sent on the wire.
func wireError(err error) *jsonrpc.Error {
	var e *Error
	if errors.As(err, &e) {
		we := rpcError(e.Code, e.Message)
		if e.Data != nil {
			if b, merr := json.Marshal(e.Data); merr == nil {
				we.Data = b
			}
		}
		return we
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je
	}
	return errInternal()
}

// rpcError is the wire form of an error the handler sends; every one is
// built here or by rpcErrorData.
func rpcError(code Code, msg string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: int(code), Message: msg}
}

// rpcErrorData is rpcError with a data member (JSON).
func rpcErrorData(code Code, msg string, data json.RawMessage) *jsonrpc.Error {
	return &jsonrpc.Error{Code: int(code), Message: msg, Data: data}
}

func invalidParams(msg string) *jsonrpc.Error {
	return rpcError(CodeInvalidParams, msg)
}

// maxEchoBytes bounds a string a client chose that the handler echoes in
// an error message or passes on to Config.Interceptors and OnCall (a
// method, a tool or prompt name, a URI, an error message that quotes
// them): a request of megabytes must not become a log line, a span or a
// metric of megabytes.
const maxEchoBytes = 256

// clipEcho returns s cut to maxEchoBytes at a UTF-8 boundary (a copy when
// cut, see clip).
func clipEcho(s string) string { return clip(s, maxEchoBytes) }

// quoteEcho is s quoted for an error message, cut to maxEchoBytes first.
func quoteEcho(s string) string { return strconv.Quote(clipEcho(s)) }

// clip returns s cut to at most n bytes, at a UTF-8 boundary. A cut
// string is a copy: a prefix that pointed into s would keep all of s
// alive in whatever holds it (a session record in memory, a span
// processor's queue, a cache).
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.Clone(s[:n])
}

// jsonError describes a params decoding error without echoing input.
func jsonError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return te.Field + " must be " + te.Type.String()
	}
	return "malformed params"
}

// errUnknownTool is the one answer for a tool that does not exist, is
// hidden from the caller, or is above the caller's role: the three must be
// indistinguishable.
func errUnknownTool(name string) *jsonrpc.Error {
	return rpcError(CodeInvalidParams, "Unknown tool: "+quoteEcho(name))
}

// errInternal is the one internal error the client sees: it reveals
// nothing of the cause, which is logged.
func errInternal() *jsonrpc.Error {
	return rpcError(CodeInternalError, "Internal error")
}

// errStoreUnavailable answers a request whose session store call failed,
// always with HTTP status 503 (see storeFailed and storeUnavailable).
func errStoreUnavailable() *jsonrpc.Error {
	return rpcError(CodeStoreUnavailable, "The session store is unavailable")
}

// methodNotFound answers a method the handler does not serve; it echoes
// the method quoted and cut to maxEchoBytes.
func methodNotFound(method string) *jsonrpc.Error {
	return rpcError(CodeMethodNotFound, "Method not found: "+quoteEcho(method))
}

func headerMismatch(msg string) *jsonrpc.Error {
	return rpcError(CodeHeaderMismatch, msg)
}
