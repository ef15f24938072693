package mcphandler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/mcphandler/mcphandler/internal/canon"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/modern"
)

type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      json.RawMessage `json:"_meta"`
}

type metaParams struct {
	ProgressToken json.RawMessage `json:"progressToken"`
}

// callTool runs tools/call: find the tool among the caller's, validate the
// arguments, ask BeforeCall, confirm if asked to, run, answer, report.
//
//	lookup ──► validate ──► BeforeCall ──► (confirm) ──► Handler ──► response ──► OnCall
//
// A tool the caller cannot see gets the unknown-tool error and never runs.
func (h *Handler) callTool(rq *request, m *jsonrpc.Message) {
	ev := CallEvent{Identity: rq.id, SessionID: rq.info.sessionID}
	defer func() {
		rq.ic.callEnded(&ev) // for Config.Interceptors (intercept.go)
		// A confirm handed over is reported by the replica that finishes it.
		if h.cfg.OnCall != nil && ev.Outcome != outcomeHandedOver {
			ev.Duration = time.Since(rq.start)
			h.emit(ev)
		}
	}()
	var p callParams
	if len(m.Params) == 0 || json.Unmarshal(m.Params, &p) != nil {
		ev.Outcome = OutcomeError
		rq.fail(m.ID, invalidParams("Invalid params: a tool name is required"))
		return
	}
	ev.Tool = p.Name
	rq.ic.target(p.Name) // for Config.Interceptors (intercept.go)
	args := p.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = emptyResult
	} else if args[0] != '{' {
		ev.Outcome = OutcomeError
		rq.fail(m.ID, invalidParams("Invalid params: arguments must be an object"))
		return
	}
	ev.Arguments = args
	tool, ok, err := h.findTool(rq.ctx, rq.id, p.Name)
	if err != nil {
		h.loggerFor(rq.ctx).Error("mcphandler: ListTools", "err", err)
		ev.Outcome = OutcomeError
		rq.fail(m.ID, wireError(err))
		return
	}
	if !ok {
		ev.Outcome = OutcomeNotFound
		rq.fail(m.ID, errUnknownTool(p.Name))
		return
	}
	if h.stepUp(rq, m, tool.Scopes) {
		ev.Outcome = OutcomeDenied
		return
	}
	if rq.modern {
		if he := checkParamHeaders(rq, &tool, args); he != nil {
			ev.Outcome = OutcomeError
			rq.fail(m.ID, headerMismatch(he.Message))
			return
		}
	}
	x := rq.newExchange(p.Meta)
	x.reqID = m.ID
	if !rq.prepareRounds(x, m, tool.Name, args) {
		ev.Outcome = OutcomeError
		return
	}
	call := &ToolCall{Tool: tool, Arguments: args, Identity: rq.id, SessionID: rq.info.sessionID, Exchange: x}

	if tool.validate != nil {
		if err := tool.validate(args); err != nil {
			ev.Outcome, ev.IsError, ev.ErrorClass = OutcomeError, true, string(ClassBadArgs)
			class, detail := classify(err)
			rq.sendResult(m.ID, toolErrorResult(class, detail))
			return
		}
	}

	d := Decision{}
	if h.cfg.BeforeCall != nil {
		d, err = h.beforeCall(rq.ctx, call)
		if err != nil {
			h.loggerFor(rq.ctx).Error("mcphandler: BeforeCall", "tool", tool.Name, "err", err)
			ev.Outcome = OutcomeError
			rq.fail(m.ID, wireError(err))
			return
		}
	}
	switch d.Kind {
	case DecisionDeny:
		ev.Outcome = OutcomeDenied
		rq.fail(m.ID, h.denyError(d))
		return
	case DecisionConfirm:
		// What the human is shown, what the confirm is bound to and what
		// runs are one value: the canonical arguments.
		if canonical, err := canon.Canonical(call.Arguments); err == nil {
			call.Arguments, ev.Arguments = canonical, canonical
		} else {
			ev.Outcome = OutcomeError
			rq.fail(m.ID, invalidParams("Invalid params: arguments must be valid JSON without repeated keys"))
			return
		}
		if rq.modern {
			h.confirmModern(rq, m, call, d, &ev)
			return
		}
		outcome, result, run := h.confirm(rq.ctx, call, d, &ev)
		ev.Outcome = outcome
		switch {
		case outcome == outcomeHandedOver:
			return // the replica that finished the confirm answers
		case outcome == OutcomeRevoked:
			rq.fail(m.ID, errUnknownTool(p.Name))
			return
		case result != nil || run == nil:
			// After a disconnect nobody listens: the result goes to the
			// stream's log only, for a client that resumes.
			ev.IsError = result != nil && result.IsError
			if result == nil {
				result = ErrorResult("Not run.")
			}
			rq.sendResult(m.ID, result)
			return
		}
		// The run holds the confirm's lease while the tool runs, and
		// records its end once the response went out.
		defer run.finish(rq.ctx)
	default:
		ev.Outcome = OutcomeAllowed
	}

	result, err := h.run(rq.ctx, call, &ev)
	if rq.finishRounds(x, m, err) {
		ev.Outcome, ev.IsError, ev.ErrorClass = OutcomeInputRequired, false, ""
		return
	}
	rq.sendResult(m.ID, result)
}

// checkParamHeaders checks the Mcp-Param-* headers of a 2026-07-28
// tools/call against the arguments, for the parameters the tool's input
// schema annotates with x-mcp-header.
func checkParamHeaders(rq *request, tool *Tool, args []byte) *modern.HeaderError {
	if !bytes.Contains(tool.InputSchema, []byte("x-mcp-header")) {
		return nil
	}
	params, err := modern.ParamHeaders(tool.InputSchema)
	if err != nil {
		// An invalid annotation cannot be checked: fail closed.
		return &modern.HeaderError{Header: "Mcp-Param", Message: "Header mismatch: the tool's x-mcp-header annotations are invalid"}
	}
	if len(params) == 0 {
		return nil
	}
	return modern.CheckParamHeaders(rq.r.Header, params, args)
}

// beforeCall runs the BeforeCall hook, turning a panic into an error.
func (h *Handler) beforeCall(ctx context.Context, call *ToolCall) (d Decision, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
		}
	}()
	return h.cfg.BeforeCall(ctx, call)
}

// denyError is the JSON-RPC error of a Deny: its code, message, and data
// (retryAfterMs for a rate limit, and the members of Decision.Data).
func (h *Handler) denyError(d Decision) *jsonrpc.Error {
	code := d.Code
	if code != CodeRateLimited {
		code = CodeForbidden
	}
	msg := d.Message
	if msg == "" {
		msg = "Forbidden"
		if code == CodeRateLimited {
			msg = "Rate limited"
		}
	}
	e := &jsonrpc.Error{Code: code, Message: msg}
	var retry int64
	if code == CodeRateLimited && d.RetryAfter > 0 {
		// Rounded up: a client that waits exactly this long is not early.
		retry = int64(d.RetryAfter / time.Millisecond)
		if d.RetryAfter%time.Millisecond != 0 {
			retry++
		}
		e.Data = fmt.Appendf(nil, `{"retryAfterMs":%d}`, retry)
	}
	if d.Data == nil {
		return e
	}
	var members map[string]json.RawMessage
	b, err := json.Marshal(d.Data)
	if err == nil {
		err = json.Unmarshal(b, &members)
	}
	if err != nil || members == nil {
		h.logger().Error("mcphandler: BeforeCall's Decision.Data is not a JSON object; left out", "err", err)
		return e
	}
	if retry > 0 {
		members["retryAfterMs"] = strconv.AppendInt(nil, retry, 10)
	}
	e.Data, _ = json.Marshal(members) // sorted by name
	return e
}

// run calls the tool's handler and turns its error or panic into a
// classified isError result. It records the result's class in ev, and
// returns the handler's own error too (see finishRounds).
func (h *Handler) run(ctx context.Context, call *ToolCall, ev *CallEvent) (result *ToolResult, err error) {
	defer func() {
		if v := recover(); v != nil {
			h.loggerFor(ctx).Error("mcphandler: tool panicked", "tool", call.Tool.Name, "panic", v, "stack", string(debug.Stack()))
			result = toolErrorResult(ClassInternal, "")
			ev.IsError, ev.ErrorClass = true, string(ClassInternal)
		}
	}()
	if ev.ConfirmID != "" {
		step(ctx, StepConfirmRan, ev.ConfirmID) // for Config.Interceptors (intercept.go)
	}
	if call.Tool.Handler == nil {
		ev.IsError, ev.ErrorClass = true, string(ClassInternal)
		return toolErrorResult(ClassInternal, ""), nil
	}
	r, err := call.Tool.Handler(ctx, call)
	if err != nil {
		class, detail := classify(err)
		if class == ClassInternal && !errors.Is(err, ErrInputRequired) && !errors.Is(err, ErrCannotAsk) {
			h.loggerFor(ctx).Warn("mcphandler: tool failed", "tool", call.Tool.Name, "err", err)
		}
		ev.IsError, ev.ErrorClass = true, string(class)
		return toolErrorResult(class, detail), err
	}
	if r == nil {
		r = &ToolResult{}
	}
	ev.IsError = r.IsError
	return r, nil
}

// sendResult writes a tool result as the final message.
func (rq *request) sendResult(id json.RawMessage, r *ToolResult) {
	b := rq.openResult(make([]byte, 0, 256), id)
	b, err := r.appendMembers(b)
	if err != nil {
		rq.h.logger().Error("mcphandler: encoding tool result", "err", err)
		rq.fail(id, &jsonrpc.Error{Code: CodeInternalError, Message: "Internal error"})
		return
	}
	rq.st.finish(closeResult(b))
}

// emit delivers ev to OnCall, recovering a panic.
func (h *Handler) emit(ev CallEvent) {
	defer func() {
		if v := recover(); v != nil {
			h.logger().Error("mcphandler: OnCall panicked", "panic", v)
		}
	}()
	h.cfg.OnCall(ev)
}
