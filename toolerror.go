package mcphandler

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// ErrorClass is one of five kinds of tool failure, each mapped to one thing
// a model can do about it.
type ErrorClass string

// The tool error classes.
const (
	// ClassTimeout: the work exceeded its budget. Narrow it and retry.
	ClassTimeout ErrorClass = "timeout"
	// ClassBackendUnavailable: a dependency did not answer. Wait, retry once.
	ClassBackendUnavailable ErrorClass = "backend_unavailable"
	// ClassBadArgs: the arguments are wrong. Fix them; the same call fails again.
	ClassBadArgs ErrorClass = "bad_args"
	// ClassNotFound: the named thing does not exist. Look it up first.
	ClassNotFound ErrorClass = "not_found"
	// ClassInternal: anything else. Do not retry.
	ClassInternal ErrorClass = "internal"
)

var classHints = map[ErrorClass]struct {
	retryable bool
	hint      string
}{
	ClassTimeout:            {true, "The operation took too long. Narrow the request (a smaller range or limit) and retry."},
	ClassBackendUnavailable: {true, "A backend did not answer. Wait briefly and retry once."},
	ClassBadArgs:            {false, "The arguments are invalid. Fix them; retrying the same arguments fails again."},
	ClassNotFound:           {false, "Nothing matches. Check the name or id with a listing or search tool."},
	ClassInternal:           {false, "The tool failed. Do not retry; tell the user it failed."},
}

// ToolError is a classified tool failure. Its Detail is shown to the client,
// so it must hold only what the caller may see; Err is kept for the host's
// logs and never sent.
type ToolError struct {
	Class  ErrorClass
	Detail string
	Err    error
}

func (e *ToolError) Error() string {
	if e.Detail != "" {
		return "mcphandler: " + string(e.Class) + ": " + e.Detail
	}
	return "mcphandler: " + string(e.Class)
}

func (e *ToolError) Unwrap() error { return e.Err }

// NotFound returns a [ClassNotFound] tool error whose formatted detail is
// shown to the client.
func NotFound(format string, args ...any) error {
	return &ToolError{Class: ClassNotFound, Detail: fmt.Sprintf(format, args...)}
}

// BadArgs returns a [ClassBadArgs] tool error whose formatted detail is shown
// to the client.
func BadArgs(format string, args ...any) error {
	return &ToolError{Class: ClassBadArgs, Detail: fmt.Sprintf(format, args...)}
}

// Unavailable returns a [ClassBackendUnavailable] tool error wrapping cause.
// The cause is not shown to the client.
func Unavailable(cause error) error {
	return &ToolError{Class: ClassBackendUnavailable, Err: cause}
}

// Timeout returns a [ClassTimeout] tool error wrapping cause. The cause is
// not shown to the client.
func Timeout(cause error) error {
	return &ToolError{Class: ClassTimeout, Err: cause}
}

// classify maps a handler error to its class and the detail that may be
// shown. Only a *ToolError's Detail is shown; any other error's text could
// hold another tenant's data or server internals, so it is dropped.
func classify(err error) (ErrorClass, string) {
	var te *ToolError
	switch {
	case errors.As(err, &te):
		if _, ok := classHints[te.Class]; !ok {
			return ClassInternal, te.Detail
		}
		return te.Class, te.Detail
	case errors.Is(err, context.DeadlineExceeded):
		return ClassTimeout, ""
	}
	return ClassInternal, ""
}

// toolErrorResult renders a classified failure as an isError result whose
// text is compact JSON: {"error","retryable","hint","detail"}.
func toolErrorResult(class ErrorClass, detail string) *ToolResult {
	h := classHints[class]
	b := make([]byte, 0, 160)
	b = append(b, `{"error":`...)
	b = jsonrpc.AppendString(b, string(class))
	if h.retryable {
		b = append(b, `,"retryable":true,"hint":`...)
	} else {
		b = append(b, `,"retryable":false,"hint":`...)
	}
	b = jsonrpc.AppendString(b, h.hint)
	if detail != "" {
		b = append(b, `,"detail":`...)
		b = jsonrpc.AppendString(b, detail)
	}
	b = append(b, '}')
	return &ToolResult{Content: []Content{TextContent(string(b))}, IsError: true}
}
