package mcphandler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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

// toolRun is one tools/call on its way through the pipeline that owns
// it: lookup, validate, decide, execute, deliver, report.
//
//	lookup ──► validate ──► decide (BeforeCall, a confirm, an approval) ──► execute ──► deliver ──► report (OnCall)
//
// execute is the only place a tool's handler runs, and proceed, the only
// caller of execute, the only place a decided call goes on from: the
// asker of a call (serveToolsCall) and a replica that takes over a
// confirmed or approved 2025 call from the store (confirms.adopt,
// approvals.runAdopted) build a toolRun and proceed the same way. How
// a decision travels is chosen once, in decide: pushed on the call's
// 2025 stream, in input_required rounds when the request has them
// (2026-07-28), or by repeating the call (an approval a client cannot
// wait for). How the result is delivered is the executor's: answered
// inline, recorded in the round's nonce record (rounds, and the rounds
// of a handler that carries state across them), or answered with a task
// (RunAsTask, either revision).
//
// A toolRun belongs to the goroutine serving its request; it lives on
// that goroutine's stack, so nothing may keep a pointer to it.
type toolRun struct {
	rq   *request
	m    *jsonrpc.Message // the tools/call; its ID is what the answer carries
	call *ToolCall
	ev   CallEvent // reported once the call ends (report)

	// lease, if set, is the confirm's run the tool runs under (a 2025
	// confirm or approval): it records the call's end once answered.
	lease *confirmRun
	// round, if its nonce is set, is the 2026-07-28 confirm or approval
	// whose record the round's end is written to before it is answered.
	round roundRun
	// restart is set when the handler returned ErrCallAgain and the call
	// starts over (canRestart); restarted, on the run that started over.
	restart, restarted bool
}

// serveToolsCall serves tools/call: a tool the caller cannot see gets the
// unknown-tool error and never runs.
func serveToolsCall(h *Handler, rq *request, m *jsonrpc.Message) {
	t := toolRun{rq: rq, m: m, ev: CallEvent{Identity: rq.id, SessionID: rq.info.sessionID}}
	if t.lookup() && t.validate() && t.decide() {
		t.proceed()
	}
	if t.restart { // ErrCallAgain: the call starts over, once
		t = toolRun{rq: rq, m: m, ev: CallEvent{Identity: rq.id, SessionID: rq.info.sessionID}, restarted: true}
		if t.lookup() && t.validate() && t.decide() {
			t.proceed()
		}
	}
	t.report()
}

// ErrCallAgain is what a tool's handler returns, before it acted, when
// the call must start over because what the name stands for changed
// while the handler ran: a gateway's caller authorized an upstream while
// the call waited, so the upstream's own tool can now be looked up under
// that name. Wrap it in a *ToolError to say so to the client.
//
// The call then starts over, once, in the same request: looked up again
// (ListTools), validated and decided again (BeforeCall sees the tool as
// it is listed now; a Confirm or Approve asks anew), then run; what the
// first run did is not reported (OnCall sees the second). That happens
// when the first run was allowed without a confirm, an approval or a
// task, and its request is not a 2026-07-28 round (whose retry starts
// the call over anyway); otherwise, or from the second run, the error is
// the call's tool error, so that the client calls again.
var ErrCallAgain = errors.New("mcphandler: the call must start over")

// canRestart reports whether a call whose handler returned ErrCallAgain
// starts over in its request (see ErrCallAgain).
func (t *toolRun) canRestart() bool {
	x := t.call.Exchange
	return !t.restarted && t.lease == nil && t.round.nonce == "" && t.call.task == nil && !x.inRounds() && (x == nil || x.tk == nil)
}

// report tells the interceptors and OnCall how the call ended. A confirm
// handed over is reported by the replica that finishes it.
func (t *toolRun) report() {
	rq := t.rq
	rq.ic.callEnded(&t.ev) // for Config.Interceptors (intercept.go)
	if rq.h.cfg.OnCall != nil && t.ev.Outcome != outcomeHandedOver {
		t.ev.Duration = time.Since(rq.start)
		t.ev.Audit.taskOf(t.call)
		emitCall(&rq.h.cfg, t.ev)
	}
}

// validate checks what the call asks of a task and its arguments against
// the tool's input schema; it answers the request and returns false when
// the call cannot go on.
func (t *toolRun) validate() bool {
	rq, m, call := t.rq, t.m, t.call
	slot, ok := rq.checkTask(m, call, &t.ev)
	if !ok {
		return false
	}
	if in := call.Tool.input; in != nil {
		if err := in.args.check(call.Arguments); err != nil {
			t.ev.Outcome, t.ev.IsError, t.ev.ErrorClass = OutcomeError, true, ClassBadArgs
			class, detail := classify(err)
			rq.sendResult(m.ID, toolErrorResult(class, detail))
			return false
		}
	}
	call.task = slot // a confirmed call too becomes a task once confirmed
	return true
}

// proceed runs a call that was decided and delivers its result, under
// the confirm's lease if it has one: a round of a confirmed (or held)
// call is recorded first (endRound), and a first round whose handler
// carried state into the next makes the call held (holdRound).
func (t *toolRun) proceed() {
	if t.lease != nil {
		defer t.lease.finish(t.rq.ctx)
	}
	result, err := t.execute()
	switch {
	case errors.Is(err, ErrCallAgain) && t.canRestart():
		t.restart = true // nothing answered: serveToolsCall starts over
	case t.round.nonce != "":
		t.rq.h.confirms.endRound(t, result, err)
	case t.call.Exchange.holds():
		t.rq.h.confirms.holdRound(t)
	default:
		t.deliver(result, err)
	}
}

// deliver answers the call with what execute returned: input_required when
// the tool asked the client on 2026-07-28, the CreateTaskResult of a call
// that became a task, else the result.
func (t *toolRun) deliver(result *ToolResult, err error) {
	rq, m := t.rq, t.m
	if rq.finishRounds(t.call.Exchange, m, err) {
		t.ev.Outcome, t.ev.IsError, t.ev.ErrorClass = OutcomeInputRequired, false, ""
		return
	}
	if rq.answerTask(m, t.call.task) {
		return
	}
	rq.sendResult(m.ID, result)
}

// lookup decodes a tools/call, finds the caller's tool, checks the
// scopes it needs, and opens the call (open).
// It answers the request and returns false when the call cannot go on.
func (t *toolRun) lookup() bool {
	rq, m, ev := t.rq, t.m, &t.ev
	h := rq.h
	p, args, e := decodeCall(rq.meta.of(m.Params), m, ev)
	rq.ic.target(ev.Tool) // for Config.Interceptors (intercept.go)
	if e != nil {
		ev.Outcome = OutcomeError
		rq.fail(m.ID, e)
		return false
	}
	tool, ok, err := h.catalog.findTool(rq.ctx, rq.id, p.Name)
	switch {
	case err != nil:
		h.loggerFor(rq.ctx).Error("mcphandler: ListTools", "err", err)
		ev.Outcome = OutcomeError
		rq.fail(m.ID, wireError(err))
		return false
	case !ok:
		ev.Outcome = OutcomeNotFound
		rq.fail(m.ID, errUnknownTool(p.Name))
		return false
	}
	ev.Tool = tool.Name
	rq.ic.found() // for Config.Interceptors (intercept.go)
	if h.catalog.stepUp(rq, m, tool.Scopes) {
		ev.Outcome = OutcomeDenied
		return false
	}
	return t.open(tool, args, p.Meta)
}

// open checks what the era checks of a call of tool (Mcp-Param headers on
// 2026-07-28) and opens its Exchange, with its rounds if the era has
// them. It answers the request and returns false when the call cannot go
// on.
func (t *toolRun) open(tool Tool, args, meta json.RawMessage) bool {
	rq, m := t.rq, t.m
	if e := rq.checkCall(&tool, args); e != nil {
		t.ev.Outcome = OutcomeError
		rq.fail(m.ID, e)
		return false
	}
	x := rq.newExchange(meta)
	x.reqID = m.ID
	if !rq.prepareRounds(x, m, tool.Name, args) {
		t.ev.Outcome = OutcomeError
		return false
	}
	t.call = &ToolCall{Tool: tool, Arguments: args, Identity: rq.id, SessionID: rq.info.sessionID, Exchange: x}
	return true
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

// decide asks BeforeCall about the call and carries out its Decision: a
// Deny is answered; a Confirm or an Approve travels as the request can
// carry it (confirms.decide, approvals.decide). It returns true when the
// tool is to run (with t.lease or t.round set by the decision, if any).
func (t *toolRun) decide() bool {
	rq, m, call, ev := t.rq, t.m, t.call, &t.ev
	h := rq.h
	d := Decision{}
	if h.cfg.BeforeCall != nil {
		var err error
		if d, err = beforeCall(h.cfg.BeforeCall, rq.ctx, call); err != nil {
			h.loggerFor(rq.ctx).Error("mcphandler: BeforeCall", "tool", call.Tool.Name, "err", err)
			ev.Outcome = OutcomeError
			rq.fail(m.ID, wireError(err))
			return false
		}
	}
	decided := h.cfg.BeforeCall != nil // else nothing was decided: no Audit
	switch d.Kind {
	case DecisionDeny:
		ev.Outcome = OutcomeDenied
		ev.Audit = policyAudit(&h.cfg, auditDeny, call, OutcomeDenied)
		rq.fail(m.ID, denyError(h.cfg.Logger, d))
		return false
	case DecisionConfirm, DecisionApprove:
		return t.ask(d)
	case DecisionAllow:
		return t.allow(decided)
	}
	// A kind this handler does not know (a newer hook, a cast) never runs
	// the tool: it is refused like a Deny.
	h.cfg.Logger.Error("mcphandler: BeforeCall returned an unknown Decision.Kind; refused", "tool", call.Tool.Name, "kind", d.Kind)
	ev.Outcome = OutcomeDenied
	ev.Audit = policyAudit(&h.cfg, auditDeny, call, OutcomeDenied)
	rq.fail(m.ID, rpcError(CodeForbidden, "Forbidden"))
	return false
}

// ask sends the call to a human: a confirm of the client or an approval
// on the page, d says which. The call's Audit is the record of the
// question, filled in as it travels (confirm*.go, approve*.go), with the
// digest of what runs: canonical arguments.
func (t *toolRun) ask(d Decision) bool {
	h, call, ev := t.rq.h, t.call, &t.ev
	kind := auditConfirm
	if d.Kind == DecisionApprove {
		kind = auditApprove
	}
	ok := t.canonicalize()
	ev.Audit = newAudit(&h.cfg, kind, call.Identity, call.Tool.Name, call.SessionID, call.Arguments)
	if !ok {
		ev.Audit.end(OutcomeError)
		return false
	}
	if d.Kind == DecisionApprove {
		return h.approvals.decide(t, d)
	}
	return h.confirms.decide(t, d)
}

// allow goes on with a call the policy allowed (decided: BeforeCall said
// so, rather than there being none).
func (t *toolRun) allow(decided bool) bool {
	h, call, ev := t.rq.h, t.call, &t.ev
	ev.Outcome = OutcomeAllowed
	if decided {
		ev.Audit = policyAudit(&h.cfg, auditAllow, call, OutcomeAllowed)
	}
	if r := call.Exchange.mr; r != nil && r.state.Held && r.state.Nonce != "" {
		// A held call's rounds are single use: a round that does not
		// run ends the policy's decision with why.
		ok := h.confirms.heldRound(t)
		if !ok && ev.Audit != nil {
			ev.Audit.Outcome = ev.Outcome
		}
		return ok
	}
	return true
}

// canonicalize makes the call's arguments canonical before a human is
// asked about them: what the human is shown, what the confirm is bound to
// and what runs are one value. It answers the request and returns false
// when the arguments have no canonical form.
func (t *toolRun) canonicalize() bool {
	canonical, err := canon.Canonical(t.call.Arguments)
	if err != nil {
		t.ev.Outcome = OutcomeError
		t.rq.fail(t.m.ID, invalidParams("Invalid params: arguments must be valid JSON without repeated keys"))
		return false
	}
	t.call.Arguments, t.ev.Arguments = canonical, canonical
	return true
}

// beforeCall runs the BeforeCall hook, turning a panic into an error.
func beforeCall(hook BeforeCallFunc, ctx context.Context, call *ToolCall) (d Decision, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
		}
	}()
	return hook(ctx, call)
}

// denyError is the JSON-RPC error of a Deny: its code, message, and data
// (retryAfterMs for a rate limit, and the members of Decision.Data).
func denyError(log *slog.Logger, d Decision) *jsonrpc.Error {
	code := denyCode(log, d)
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
		log.Error("mcphandler: BeforeCall's Decision.Data is not a JSON object; left out", "err", err)
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
func denyCode(log *slog.Logger, d Decision) Code {
	switch d.Code {
	case CodeForbidden, CodeRateLimited:
		return d.Code
	case 0:
		return CodeForbidden
	}
	log.Error("mcphandler: BeforeCall denied with a Decision.Code that is neither CodeForbidden nor CodeRateLimited; refused as CodeForbidden", "code", d.Code)
	return CodeForbidden
}

// execute calls the tool's handler, the only place it is called, and
// turns its error or panic into a classified isError result. It records
// the result's class in the call's event, and returns the handler's own
// error too (see finishRounds).
func (t *toolRun) execute() (result *ToolResult, err error) {
	ctx, call, ev, h := t.rq.ctx, t.call, &t.ev, t.rq.h
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
	call.reportUpstream(ev)
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

// emitCall delivers ev to cfg.OnCall, recovering a panic.
func emitCall(cfg *Config, ev CallEvent) {
	defer func() {
		if v := recover(); v != nil {
			cfg.Logger.Error("mcphandler: OnCall panicked", "panic", v)
		}
	}()
	cfg.OnCall(ev)
}
