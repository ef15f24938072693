package mcphandler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/mcphandler/mcphandler/internal/canon"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      json.RawMessage `json:"_meta"`
}

// decodeCallParams reads params into p as json.Unmarshal would, and
// reports whether it would succeed, without allocating but for the name
// (see jsonrpc.Members). params is valid JSON: it was decoded with the
// message.
func decodeCallParams(params []byte, p *callParams) bool {
	ok := true
	return jsonrpc.Members(params, func(k, v []byte) bool {
		switch jsonrpc.KeyIndex(k, "name", "arguments", "_meta") {
		case 0:
			if string(v) != "null" {
				p.Name, ok = jsonrpc.String(v)
			}
		case 1:
			p.Arguments = v
		case 2:
			p.Meta = v
		}
		return ok
	}) && ok
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
	call, ok := h.lookupCall(rq, m, &ev)
	if !ok {
		return
	}
	x := call.Exchange
	slot, ok := rq.checkTask(m, call, &ev)
	if !ok {
		return
	}
	if in := call.Tool.input; in != nil {
		if err := in.args.check(call.Arguments); err != nil {
			ev.Outcome, ev.IsError, ev.ErrorClass = OutcomeError, true, ClassBadArgs
			class, detail := classify(err)
			rq.sendResult(m.ID, toolErrorResult(class, detail))
			return
		}
	}
	call.task = slot // a confirmed call too becomes a task once confirmed
	ok, run := h.decide(rq, m, call, &ev)
	if !ok {
		return
	}
	if run != nil {
		defer run.finish(rq.ctx)
	}
	result, err := h.run(rq.ctx, call, &ev)
	if rq.finishRounds(x, m, err) {
		ev.Outcome, ev.IsError, ev.ErrorClass = OutcomeInputRequired, false, ""
		return
	}
	if rq.answerTask(m, slot) {
		return
	}
	rq.sendResult(m.ID, result)
}

// lookupCall decodes a tools/call, finds the caller's tool, checks the
// scopes it needs and what the era checks, and opens the call's Exchange.
// It answers the request and returns false when the call cannot go on.
func (h *Handler) lookupCall(rq *request, m *jsonrpc.Message, ev *CallEvent) (*ToolCall, bool) {
	p, args, e := decodeCall(rq.meta.of(m.Params), m, ev)
	rq.ic.target(ev.Tool) // for Config.Interceptors (intercept.go)
	if e != nil {
		ev.Outcome = OutcomeError
		rq.fail(m.ID, e)
		return nil, false
	}
	tool, ok, err := h.catalog.findTool(rq.ctx, rq.id, p.Name)
	switch {
	case err != nil:
		h.loggerFor(rq.ctx).Error("mcphandler: ListTools", "err", err)
		ev.Outcome = OutcomeError
		rq.fail(m.ID, wireError(err))
		return nil, false
	case !ok:
		ev.Outcome = OutcomeNotFound
		rq.fail(m.ID, errUnknownTool(p.Name))
		return nil, false
	}
	ev.Tool = tool.Name
	rq.ic.found() // for Config.Interceptors (intercept.go)
	if h.catalog.stepUp(rq, m, tool.Scopes) {
		ev.Outcome = OutcomeDenied
		return nil, false
	}
	if e := rq.checkCall(&tool, args); e != nil {
		ev.Outcome = OutcomeError
		rq.fail(m.ID, e)
		return nil, false
	}
	x := rq.newExchange(p.Meta)
	x.reqID = m.ID
	if !rq.prepareRounds(x, m, tool.Name, args) {
		ev.Outcome = OutcomeError
		return nil, false
	}
	return &ToolCall{Tool: tool, Arguments: args, Identity: rq.id, SessionID: rq.info.sessionID, Exchange: x}, true
}

// decodeCall decodes the params of a tools/call: the tool's name and its
// arguments, an object ({} when absent or null), recorded in ev.
func decodeCall(x *paramsIndex, m *jsonrpc.Message, ev *CallEvent) (callParams, json.RawMessage, *jsonrpc.Error) {
	var p callParams
	if x != nil && !x.callParams(&p) || x == nil && (len(m.Params) == 0 || !decodeCallParams(m.Params, &p)) {
		return p, nil, invalidParams("Invalid params: a tool name is required")
	}
	ev.Tool = clipEcho(p.Name) // the tool's own name once it is found
	args := p.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = emptyResult
	} else if args[0] != '{' {
		return p, nil, invalidParams("Invalid params: arguments must be an object")
	}
	ev.Arguments = args
	return p, args, nil
}

// decide asks BeforeCall about call and carries out its Decision: a Deny
// is answered, a Confirm travels the era's way. It returns true when the
// tool is to run, with the confirm's run (nil if none) it runs under.
func (h *Handler) decide(rq *request, m *jsonrpc.Message, call *ToolCall, ev *CallEvent) (bool, *confirmRun) {
	d := Decision{}
	if h.cfg.BeforeCall != nil {
		var err error
		if d, err = h.beforeCall(rq.ctx, call); err != nil {
			h.loggerFor(rq.ctx).Error("mcphandler: BeforeCall", "tool", call.Tool.Name, "err", err)
			ev.Outcome = OutcomeError
			rq.fail(m.ID, wireError(err))
			return false, nil
		}
	}
	switch d.Kind {
	case DecisionDeny:
		ev.Outcome = OutcomeDenied
		rq.fail(m.ID, h.denyError(d))
		return false, nil
	case DecisionConfirm, DecisionApprove:
		// What the human is shown, what the confirm is bound to and what
		// runs are one value: the canonical arguments.
		canonical, err := canon.Canonical(call.Arguments)
		if err != nil {
			ev.Outcome = OutcomeError
			rq.fail(m.ID, invalidParams("Invalid params: arguments must be valid JSON without repeated keys"))
			return false, nil
		}
		call.Arguments, ev.Arguments = canonical, canonical
		if d.Kind == DecisionApprove {
			return h.approvals.approve(rq, m, call, d, ev)
		}
		return rq.confirm(m, call, d, ev)
	case DecisionAllow:
		ev.Outcome = OutcomeAllowed
		return true, nil
	}
	// A kind this handler does not know (a newer hook, a cast) never runs
	// the tool: it is refused like a Deny.
	h.logger().Error("mcphandler: BeforeCall returned an unknown Decision.Kind; refused", "tool", call.Tool.Name, "kind", d.Kind)
	ev.Outcome = OutcomeDenied
	rq.fail(m.ID, rpcError(CodeForbidden, "Forbidden"))
	return false, nil
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
	code := h.denyCode(d)
	msg := d.Message
	if msg == "" {
		msg = "Forbidden"
		if code == CodeRateLimited {
			msg = "Rate limited"
		}
	}
	e := rpcError(code, msg)
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

// denyCode is the code of a Deny: CodeForbidden or CodeRateLimited, as
// Decision.Code documents; any other code is logged and refused as
// CodeForbidden.
func (h *Handler) denyCode(d Decision) Code {
	switch d.Code {
	case CodeForbidden, CodeRateLimited:
		return d.Code
	case 0:
		return CodeForbidden
	}
	h.logger().Error("mcphandler: BeforeCall denied with a Decision.Code that is neither CodeForbidden nor CodeRateLimited; refused as CodeForbidden", "code", d.Code)
	return CodeForbidden
}

// run calls the tool's handler and turns its error or panic into a
// classified isError result. It records the result's class in ev, and
// returns the handler's own error too (see finishRounds).
func (h *Handler) run(ctx context.Context, call *ToolCall, ev *CallEvent) (result *ToolResult, err error) {
	defer func() {
		if v := recover(); v != nil {
			h.loggerFor(ctx).Error("mcphandler: tool panicked", "tool", call.Tool.Name, "panic", v, "stack", string(debug.Stack()))
			result = toolErrorResult(ClassInternal, "")
			ev.IsError, ev.ErrorClass = true, ClassInternal
		}
	}()
	if ev.ConfirmID != "" {
		step(ctx, StepConfirmRan, ev.ConfirmID) // for Config.Interceptors (intercept.go)
	}
	if call.Tool.Handler == nil {
		ev.IsError, ev.ErrorClass = true, ClassInternal
		return toolErrorResult(ClassInternal, ""), nil
	}
	r, err := call.Tool.Handler(ctx, call)
	if err != nil {
		class, detail := classify(err)
		if class == ClassInternal && !errors.Is(err, ErrInputRequired) && !errors.Is(err, ErrCannotAsk) {
			h.loggerFor(ctx).Warn("mcphandler: tool failed", "tool", call.Tool.Name, "err", err)
		}
		ev.IsError, ev.ErrorClass = true, class
		return toolErrorResult(class, detail), err
	}
	if r == nil {
		r = &ToolResult{}
	}
	if !textFallback(&call.Tool, r) {
		h.loggerFor(ctx).Error("mcphandler: a tool with a UI returned no text and no structuredContent", "tool", call.Tool.Name)
		ev.IsError, ev.ErrorClass = true, ClassInternal
		return toolErrorResult(ClassInternal, ""), nil
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
		rq.fail(id, errInternal())
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
