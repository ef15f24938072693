package mcphandler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/session"
)

type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      json.RawMessage `json:"_meta"`
}

type metaParams struct {
	ProgressToken json.RawMessage `json:"progressToken"`
}

// confirmField is the boolean the human ticks in a confirm form.
const confirmField = "confirm"

// callTool runs tools/call: find the tool among the caller's, validate the
// arguments, ask BeforeCall, confirm if asked to, run, answer, report.
//
//	lookup ──► validate ──► BeforeCall ──► (confirm) ──► Handler ──► response ──► OnCall
//
// A tool the caller cannot see gets the unknown-tool error and never runs.
func (h *Handler) callTool(rq *request, m *jsonrpc.Message) {
	ev := CallEvent{Identity: rq.id, SessionID: rq.info.sessionID}
	defer func() {
		if h.cfg.OnCall != nil {
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
		h.logger().Error("mcphandler: ListTools", "err", err)
		ev.Outcome = OutcomeError
		rq.fail(m.ID, wireError(err))
		return
	}
	if !ok {
		ev.Outcome = OutcomeNotFound
		rq.fail(m.ID, errUnknownTool(p.Name))
		return
	}
	x := rq.newExchange(p.Meta)
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
			h.logger().Error("mcphandler: BeforeCall", "tool", tool.Name, "err", err)
			ev.Outcome = OutcomeError
			rq.fail(m.ID, wireError(err))
			return
		}
	}
	switch d.Kind {
	case DecisionDeny:
		ev.Outcome = OutcomeDenied
		rq.fail(m.ID, denyError(d))
		return
	case DecisionConfirm:
		outcome, result := h.confirm(rq.ctx, call, d)
		ev.Outcome = outcome
		if outcome == OutcomeDisconnected {
			return // nobody is listening any more
		}
		if result != nil {
			ev.IsError = result.IsError
			rq.sendResult(m.ID, result)
			return
		}
	default:
		ev.Outcome = OutcomeAllowed
	}

	result := h.run(rq.ctx, call, &ev)
	rq.sendResult(m.ID, result)
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

func denyError(d Decision) *jsonrpc.Error {
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
	if code == CodeRateLimited && d.RetryAfter > 0 {
		e.Data = fmt.Appendf(nil, `{"retryAfterMs":%d}`, d.RetryAfter.Milliseconds())
	}
	return e
}

// run calls the tool's handler and turns its error or panic into a
// classified isError result. It records the result's class in ev.
func (h *Handler) run(ctx context.Context, call *ToolCall, ev *CallEvent) (result *ToolResult) {
	defer func() {
		if v := recover(); v != nil {
			h.logger().Error("mcphandler: tool panicked", "tool", call.Tool.Name, "panic", v, "stack", string(debug.Stack()))
			result = toolErrorResult(ClassInternal, "")
			ev.IsError, ev.ErrorClass = true, string(ClassInternal)
		}
	}()
	if call.Tool.Handler == nil {
		ev.IsError, ev.ErrorClass = true, string(ClassInternal)
		return toolErrorResult(ClassInternal, "")
	}
	r, err := call.Tool.Handler(ctx, call)
	if err != nil {
		class, detail := classify(err)
		if class == ClassInternal {
			h.logger().Warn("mcphandler: tool failed", "tool", call.Tool.Name, "err", err)
		}
		ev.IsError, ev.ErrorClass = true, string(class)
		return toolErrorResult(class, detail)
	}
	if r == nil {
		r = &ToolResult{}
	}
	ev.IsError = r.IsError
	return r
}

// sendResult writes a tool result as the final message.
func (rq *request) sendResult(id json.RawMessage, r *ToolResult) {
	b := make([]byte, 0, 256)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b, err := r.appendJSON(b)
	if err != nil {
		rq.h.logger().Error("mcphandler: encoding tool result", "err", err)
		rq.fail(id, &jsonrpc.Error{Code: CodeInternalError, Message: "Internal error"})
		return
	}
	rq.st.finish(append(b, '}'))
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

// confirm asks the human to confirm call. It returns the outcome and, when
// the tool must not run, the result to send (nil when it may run).
func (h *Handler) confirm(ctx context.Context, call *ToolCall, d Decision) (Outcome, *ToolResult) {
	x := call.Exchange
	canAsk := x.sess != nil && !x.st.noSSE && x.caps.Has(session.CapElicitationForm)
	if !canAsk {
		if d.Fallback != nil {
			return OutcomeFallback, d.Fallback
		}
		return OutcomeFallback, ErrorResult("Not run: " + call.Tool.Name + " needs a human confirmation, and this client cannot ask for one.")
	}
	msg := d.Message
	if msg == "" {
		msg = confirmMessage(call)
	}
	actx, cancel := context.WithTimeout(ctx, h.cfg.ConfirmTimeout)
	defer cancel()
	res, err := x.Elicit(actx, ElicitRequest{Message: msg, Schema: elicitation.Confirm(confirmField, "Confirm")})
	switch {
	case err == nil:
	case errors.Is(err, ErrDisconnected), errors.Is(err, errStreamClosed):
		return OutcomeDisconnected, nil
	case ctx.Err() != nil:
		return OutcomeCancelled, ErrorResult("Not run: the request was cancelled.")
	case errors.Is(err, context.DeadlineExceeded):
		return OutcomeTimedOut, ErrorResult("Not run: the confirmation of " + call.Tool.Name + " timed out.")
	default:
		return OutcomeDeclined, ErrorResult("Not run: the confirmation of " + call.Tool.Name + " failed.")
	}
	switch res.Action {
	case elicitation.Accept:
		if v, _ := res.Content[confirmField].(bool); v {
			return OutcomeConfirmed, nil
		}
		return OutcomeDeclined, ErrorResult("Not run: the user did not confirm " + call.Tool.Name + ".")
	case elicitation.Decline:
		return OutcomeDeclined, ErrorResult("Not run: the user declined " + call.Tool.Name + ".")
	default:
		return OutcomeCancelled, ErrorResult("Not run: the user dismissed the confirmation of " + call.Tool.Name + ".")
	}
}

// confirmMessage describes the call for a human: the tool and its
// arguments, bounded and without control characters.
func confirmMessage(call *ToolCall) string {
	name := call.Tool.Title
	if name == "" {
		name = call.Tool.Name
	}
	return "Allow " + safeText(name, 80) + " to run with " + safeText(string(call.Arguments), 400) + "?"
}

// safeText drops control characters and bounds s to max runes.
func safeText(s string, max int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			continue
		}
		if n == max {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}
