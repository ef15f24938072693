package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/record"
)

// newID mints a task id: a random (version 4) UUID.
func newID() string { return uuid.NewString() }

// Run is the execution of one task on the replica that created it: it
// holds the task's lease, renewed every Lease/3, until the task ends or
// the Manager closes. Its methods are safe for concurrent use.
type Run struct {
	m        *Manager
	id, by   string
	deadline time.Time
	lease    *record.Lease

	ctx    context.Context
	cancel context.CancelCauseFunc
	wake   chan struct{} // a signal arrived: re-read the record

	// mu guards stopped, and is held while re-reading the record. Lock
	// order: mu, then the Manager's mu or the lease's, never the reverse.
	mu      sync.Mutex
	stopped bool
}

// start registers the Run of the task just created and starts renewing
// its lease.
func (m *Manager) start(id string, rec *taskRecord, lease *record.Lease) (*Run, error) {
	r := &Run{m: m, id: id, by: rec.By, deadline: time.UnixMilli(rec.C + rec.TTL), lease: lease, wake: make(chan struct{}, 1)}
	ctx, cancel := context.WithDeadline(context.Background(), r.deadline)
	var cancelCause context.CancelCauseFunc
	r.ctx, cancelCause = context.WithCancelCause(ctx)
	r.cancel = func(err error) { cancelCause(err); cancel() }
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		r.cancel(ErrClosed)
		return nil, ErrClosed
	}
	m.runs[id] = r
	m.mu.Unlock()
	lease.Keep(r.renewed) // a no-op if the Run was stopped already
	return r, nil
}

// ID returns the task's id.
func (r *Run) ID() string { return r.id }

// Context returns the context the task's work runs under. It is cancelled
// with cause ErrCancelled when the task is cancelled (from any replica),
// ErrTerminal when another replica ended it, ErrClosed when the Manager
// closes, and it reaches its deadline at the task's TTL.
func (r *Run) Context() context.Context { return r.ctx }

// renewed runs after each renewal of the lease (which takes a lapsed
// lease back if nobody took it), with the renewal's error: it re-reads
// the record, so that a task that ended elsewhere, was marked failed
// while its lease had lapsed, or reached its TTL, stops the Run.
func (r *Run) renewed(ctx context.Context, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	if err != nil {
		r.m.cfg.Logger.Warn("task: renewing a lease failed", "task", r.id, "err", err)
	}
	if !time.Now().Before(r.deadline) {
		r.m.fail(ctx, r.id, r.by, msgExpired)
	}
	r.checkLocked(ctx)
}

// checkLocked stops the Run if its task ended or is no longer its own.
func (r *Run) checkLocked(ctx context.Context) {
	rec, _, err := r.m.load(ctx, r.id, "")
	switch {
	case errors.Is(err, ErrNotFound):
		r.stopLocked(ErrTerminal)
	case err != nil:
	case rec.St == Cancelled:
		r.stopLocked(ErrCancelled)
	case rec.St.Terminal() || rec.By != r.by:
		r.stopLocked(ErrTerminal)
	}
}

// check is checkLocked for a signal.
func (r *Run) check() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stopped {
		ctx, cancel := context.WithTimeout(context.Background(), r.m.cfg.Lease/3)
		defer cancel()
		r.checkLocked(ctx)
	}
}

// stopLocked ends the Run: no more renewals (the lease lapses Lease after
// the last one; end drops it at once), its context cancelled with cause,
// and the Run forgotten by its Manager.
func (r *Run) stopLocked(cause error) {
	if r.stopped {
		return
	}
	r.stopped = true
	r.lease.Stop()
	r.cancel(cause)
	r.m.mu.Lock()
	delete(r.m.runs, r.id)
	r.m.mu.Unlock()
}

func (r *Run) stop(cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked(cause)
}

// Complete ends the task with the tool's result (a JSON object; a tool
// error is a result with isError, and still completes the task). A result
// of more than MaxResultBytes fails the task instead, with a -32603 error
// saying so, and returns ErrResultTooLarge. ErrTerminal means the task
// had already ended (cancelled, or failed by another replica): the result
// is dropped.
func (r *Run) Complete(ctx context.Context, result json.RawMessage) error {
	if !isObject(result) {
		return r.Fail(ctx, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task's result is not a JSON object"})
	}
	if len(result) > r.m.cfg.MaxResultBytes {
		msg := fmt.Sprintf("the task's result is %d bytes, more than the limit of %d", len(result), r.m.cfg.MaxResultBytes)
		if err := r.Fail(ctx, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}); err != nil {
			return err
		}
		return fmt.Errorf("%w: %s", ErrResultTooLarge, msg)
	}
	return r.end(ctx, func(rec *taskRecord) { rec.St, rec.Res = Completed, compact(result) })
}

// Fail ends the task as failed with e (a protocol-level error; its
// Message must not be empty). ErrTerminal means it had already ended.
func (r *Run) Fail(ctx context.Context, e *jsonrpc.Error) error {
	if e == nil || e.Message == "" {
		e = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task failed"}
	}
	c := *e
	c.Message = truncate(c.Message, maxMessageLen)
	if len(c.Data) > MaxInputBytes || (len(c.Data) > 0 && !json.Valid(c.Data)) {
		c.Data = nil
	}
	return r.end(ctx, func(rec *taskRecord) { rec.St, rec.Err, rec.Msg = Failed, &c, c.Message })
}

// end makes the runner's terminal transition and stops the Run, whether
// or not the transition could be made.
func (r *Run) end(ctx context.Context, set func(*taskRecord)) error {
	_, _, err := r.m.update(ctx, r.id, "", func(rec *taskRecord) error {
		if rec.By != r.by {
			return ErrTerminal
		}
		if rec.St == InputRequired {
			rec.Msg = "" // it said what the task waited for, no longer
		}
		rec.Req, rec.Ans = nil, nil
		set(rec)
		return nil
	})
	if errors.Is(err, ErrNotFound) {
		err = ErrTerminal
	}
	// Whatever happened, the work is over: stop renewing, so that a task
	// whose outcome could not be recorded (the store failed) is failed by
	// the next reader once the lease lapses, instead of staying working.
	r.stop(ErrTerminal)
	r.lease.Release()
	return err
}

// SetMessage sets the task's status message (at most 1024 bytes; longer
// is cut).
func (r *Run) SetMessage(ctx context.Context, msg string) error {
	_, _, err := r.m.update(ctx, r.id, "", func(rec *taskRecord) error {
		if rec.By != r.by {
			return ErrTerminal
		}
		rec.Msg = truncate(msg, maxMessageLen)
		return nil
	})
	return err
}

// RequestInput asks the client for input: the task becomes input_required
// with reqs added to its pending inputRequests (each {"method", "params"},
// e.g. an elicitation/create), and msg as its status message. Keys are
// unique over the task's lifetime: a key asked before is ErrInvalidInput,
// and so is a key with ReservedKeyPrefix, more than MaxInputKeys keys over
// the lifetime, or a request that is not a JSON object of at most
// MaxInputBytes. Wait for the answers with AwaitInput.
func (r *Run) RequestInput(ctx context.Context, reqs map[string]json.RawMessage, msg string) error {
	if len(reqs) == 0 {
		return fmt.Errorf("%w: no requests", ErrInvalidInput)
	}
	for k, v := range reqs {
		if err := checkKey(k); err != nil || strings.HasPrefix(k, ReservedKeyPrefix) {
			return fmt.Errorf("%w: key %q", ErrInvalidInput, k)
		}
		if len(v) > MaxInputBytes || !isObject(v) {
			return fmt.Errorf("%w: request %q must be a JSON object of at most %d bytes", ErrInvalidInput, k, MaxInputBytes)
		}
	}
	_, _, err := r.m.update(ctx, r.id, "", func(rec *taskRecord) error {
		if rec.By != r.by || rec.St.Terminal() {
			return ErrTerminal
		}
		if len(rec.Asked)+len(reqs) > MaxInputKeys {
			return fmt.Errorf("%w: more than %d input keys over the task's lifetime", ErrInvalidInput, MaxInputKeys)
		}
		keys := slices.Sorted(maps.Keys(reqs))
		for _, k := range keys {
			if slices.Contains(rec.Asked, k) {
				return fmt.Errorf("%w: key %q was asked before", ErrInvalidInput, k)
			}
		}
		if rec.Req == nil {
			rec.Req = make(map[string]json.RawMessage, len(reqs))
		}
		for _, k := range keys {
			rec.Req[k] = compact(reqs[k])
		}
		rec.Asked = append(rec.Asked, keys...)
		rec.St, rec.Msg = InputRequired, truncate(msg, maxMessageLen)
		return nil
	})
	return err
}

// AwaitInput waits until the client answered every one of keys (asked by
// RequestInput), takes the answers out of the record, and returns them:
// each answer is delivered once. It returns ErrTerminal if the task ends
// first, ctx's error if ctx ends first, and ErrInvalidInput for a key
// never asked.
func (r *Run) AwaitInput(ctx context.Context, keys ...string) (map[string]json.RawMessage, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no keys to wait for", ErrInvalidInput)
	}
	t := time.NewTicker(r.m.cfg.Lease / 3)
	defer t.Stop()
	for {
		got, err := r.takeAnswers(ctx, keys)
		if err != nil || got != nil {
			return got, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-r.ctx.Done():
			return nil, ErrTerminal
		case <-r.wake:
		case <-t.C:
		}
	}
}

// takeAnswers removes the answers to keys from the record once all are
// there; nil, nil means not yet.
func (r *Run) takeAnswers(ctx context.Context, keys []string) (map[string]json.RawMessage, error) {
	var got map[string]json.RawMessage
	_, _, err := r.m.update(ctx, r.id, "", func(rec *taskRecord) error {
		got = nil
		if rec.By != r.by || rec.St.Terminal() {
			return ErrTerminal
		}
		for _, k := range keys {
			if !slices.Contains(rec.Asked, k) {
				return fmt.Errorf("%w: key %q was never asked", ErrInvalidInput, k)
			}
			if _, ok := rec.Ans[k]; !ok {
				return errSkip
			}
		}
		got = make(map[string]json.RawMessage, len(keys))
		for _, k := range keys {
			got[k] = rec.Ans[k]
			delete(rec.Ans, k)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return got, nil
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// Do runs f, the task's work, under the Run's context, and ends the task
// with what f returns: its result completes the task; an error fails it
// (a *jsonrpc.Error as it is, any other as -32603 "internal error",
// without its text, which may hold server internals); a panic fails it
// like an error and is not re-raised. If the task was cancelled or ended
// elsewhere, whatever f returns is dropped. Do returns what ending the
// task returned (ErrTerminal when it had already ended).
func (r *Run) Do(f func(ctx context.Context) (json.RawMessage, error)) (err error) {
	ctx := context.WithoutCancel(r.ctx)
	defer func() {
		if p := recover(); p != nil {
			r.m.cfg.Logger.Error("task: the task's work panicked", "task", r.id, "panic", p)
			err = r.Fail(ctx, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"})
		}
	}()
	res, ferr := f(r.ctx)
	if ferr != nil {
		var je *jsonrpc.Error
		if !errors.As(ferr, &je) {
			je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
		}
		return r.Fail(ctx, je)
	}
	return r.Complete(ctx, res)
}
