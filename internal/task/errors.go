package task

import (
	"errors"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/record"
	"github.com/mcphandler/mcphandler/session"
)

// Errors of the Manager and of a Run. Errors of the store pass through:
// those that wrap session.ErrUnavailable mean the store could not be
// reached (the handler answers 503), and say nothing about the task.
var (
	// ErrNotFound is the answer for a task id that was never minted,
	// expired, is malformed, or belongs to another identity: the same
	// error value in every case, so that nothing tells them apart.
	ErrNotFound = errors.New("task: not found")
	// ErrTerminal reports a transition refused because the task already
	// ended: tasks/cancel of a completed, failed or cancelled task (the
	// task is returned with it), or a runner's Complete, Fail or
	// RequestInput that lost to a cancel or to a replica that marked the
	// task failed.
	ErrTerminal = errors.New("task: already ended")
	// ErrTooManyTasks refuses a new task when its identity already holds
	// Config.MaxTasks unexpired tasks. The message says how many and
	// until when a task counts.
	ErrTooManyTasks = errors.New("task: too many tasks for this identity")
	// ErrResultTooLarge reports a result of more than
	// Config.MaxResultBytes: the task is failed instead (with a
	// -32603 error saying so).
	ErrResultTooLarge = errors.New("task: result too large")
	// ErrInvalidInput reports input requests a runner may not make: a
	// key used before by the task (keys are unique over its lifetime), a
	// key with the reserved prefix, more than MaxInputKeys keys, or a
	// request that is not a JSON object of at most MaxInputBytes.
	ErrInvalidInput = errors.New("task: invalid input request")
	// ErrInvalidCursor reports a tasks/list cursor that this Manager did
	// not give to this identity, or that no longer points at a task.
	ErrInvalidCursor = errors.New("task: invalid cursor")
	// ErrClosed reports a call on a closed Manager, and is the cause of
	// the contexts of the runs it stopped.
	ErrClosed = errors.New("task: manager closed")
	// ErrCancelled is the cause of a Run's context once the task was
	// cancelled.
	ErrCancelled = errors.New("task: cancelled")
	// errContended reports a transition that lost more races in a row
	// than any legitimate load explains.
	errContended = errors.New("task: record contended")
)

// Code returns the JSON-RPC error code for err: -32602 (invalid params)
// for ErrNotFound, ErrInvalidParams, ErrInvalidCursor and ErrTerminal (the
// 2025-11-25 answer to cancelling an ended task); -32000 for
// ErrTooManyTasks (wait for tasks to expire, then retry); -32603 for
// anything else. Errors that wrap session.ErrUnavailable are not JSON-RPC
// errors: the caller answers them with 503.
func Code(err error) int {
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrInvalidParams), errors.Is(err, ErrInvalidCursor), errors.Is(err, ErrTerminal):
		return jsonrpc.CodeInvalidParams
	case errors.Is(err, ErrTooManyTasks):
		return -32000
	}
	return jsonrpc.CodeInternalError
}

// notFound maps the store's ErrNotFound, and a record refused as
// record.ErrInvalid, to ErrNotFound and passes other errors through.
func notFound(err error) error {
	if errors.Is(err, session.ErrNotFound) || errors.Is(err, record.ErrInvalid) {
		return ErrNotFound
	}
	return err
}
