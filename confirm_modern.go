package mcphandler

import (
	"context"
	"crypto/rand"
	"errors"

	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/session"
)

// confirmModern runs the 2026-07-28 confirm of call, round by round, with
// the record nonce/<n> as its state machine (see confirm_state.go) and the
// nonce and round sealed in the requestState, bound to the caller, the
// tool and the arguments:
//
//   - The first round creates the record (pending) and asks the confirm's
//     question (input key confirmInputKey) in an input_required answer.
//   - The retry of that round carries the answer, which decides once:
//     pending → closed (declined, cancelled: the refusal is recorded), or
//     pending → running, and the tool runs.
//   - A run whose tool asks the client more (it returned ErrInputRequired)
//     records running → awaiting round r+1 with its input_required answer;
//     the retry of round r+1 runs the tool again (awaiting → running) with
//     every earlier answer, the confirm's decision carried by the record.
//   - A run that completes records running → done with its result.
//
// A retry of a state whose round has passed runs nothing: a finished call
// returns its recorded result, the last round its recorded input_required
// answer, anything older or still running a refusal. Each transition is a
// CompareAndSwap, so of concurrent retries on any replicas only one runs.
func (h *Handler) confirmModern(rq *request, m *jsonrpc.Message, call *ToolCall, d Decision, ev *CallEvent) {
	x := call.Exchange
	if !x.caps.Has(session.CapElicitationForm) {
		r := fallbackResult(call, d)
		ev.Outcome, ev.IsError = OutcomeFallback, r.IsError
		rq.sendResult(m.ID, r)
		return
	}
	r := x.mr
	form, expect, msg, err := confirmQuestion(call, d)
	if err != nil {
		r := errTooLongToConfirm(call)
		ev.Outcome, ev.IsError = OutcomeError, true
		rq.sendResult(m.ID, r)
		return
	}
	if r.state.Nonce == "" {
		n := rand.Text()
		ev.ConfirmID = n
		if err := h.createNonce(rq.ctx, n); err != nil {
			ev.Outcome = OutcomeError
			h.storeFailed(rq, m, err)
			return
		}
		r.state.Nonce, r.state.Round = n, 1
		h.askConfirmModern(rq, m, x, form, msg, ev)
		return
	}
	n := r.state.Nonce
	ev.ConfirmID = n
	rec, raw, err := h.loadNonce(rq.ctx, n)
	switch {
	case isAbsent(err):
		ev.Outcome, ev.IsError = OutcomeReplayRefused, true
		rq.sendResult(m.ID, ErrorResult("Not run: this confirmation expired or was already used."))
		return
	case err != nil:
		ev.Outcome = OutcomeError
		h.storeFailed(rq, m, err)
		return
	}
	switch {
	case rec.State == statePending && r.state.Round == 1:
		a, ok := r.confirmAnswer()
		if !ok { // a missing answer is asked again
			h.askConfirmModern(rq, m, x, form, msg, ev)
			return
		}
		res, err := elicitation.ParseResult(a)
		if err == nil && res.Action == elicitation.Accept {
			err = form.Validate(res.Content)
		}
		if err != nil || !validInput("elicitation/create", a) {
			ev.Outcome = OutcomeError
			rq.fail(m.ID, invalidParams("Invalid params: the confirm answer does not match its form"))
			return
		}
		step(rq.ctx, StepConfirmAnswered, n) // for Config.Interceptors (intercept.go)
		outcome, result := decide(res, form, expect, call.Tool.Name)
		if result != nil {
			b, _ := result.appendJSON(nil)
			next := nonceRecord{State: stateClosed, Round: 1, Outcome: outcome, Result: b}
			if _, ok, err := h.moveNonce(rq.ctx, n, raw, statePending, &next); !ok {
				h.nonceRaced(rq, m, n, r.state.Round, err, ev)
				return
			}
			ev.Outcome, ev.IsError = outcome, true
			rq.sendResult(m.ID, result)
			return
		}
		next := nonceRecord{State: stateRunning, Round: 1}
		b, ok, err := h.moveNonce(rq.ctx, n, raw, statePending, &next)
		if !ok {
			h.nonceRaced(rq, m, n, r.state.Round, err, ev)
			return
		}
		h.runConfirmedRound(rq, m, call, ev, n, rec, b)
	case rec.State == stateAwaiting && rec.Round == r.state.Round:
		next := nonceRecord{State: stateRunning, Round: rec.Round}
		b, ok, err := h.moveNonce(rq.ctx, n, raw, stateAwaiting, &next)
		if !ok {
			h.nonceRaced(rq, m, n, r.state.Round, err, ev)
			return
		}
		h.runConfirmedRound(rq, m, call, ev, n, rec, b)
	default:
		h.replayNonce(rq, m, rec, r.state.Round, ev)
	}
}

// askConfirmModern ends the round asking the confirm's question.
func (h *Handler) askConfirmModern(rq *request, m *jsonrpc.Message, x *Exchange, form *elicitation.Schema, msg string, ev *CallEvent) {
	params, err := x.elicitParams(ElicitRequest{Message: msg, Schema: form})
	if err != nil {
		ev.Outcome = OutcomeError
		rq.fail(m.ID, &jsonrpc.Error{Code: CodeInternalError, Message: "Internal error"})
		return
	}
	x.mr.askConfirm(params)
	step(rq.ctx, StepConfirmAsked, ev.ConfirmID) // for Config.Interceptors (intercept.go)
	ev.Outcome = OutcomeInputRequired
	rq.inputRequired(m.ID, x.mr)
}

// runConfirmedRound runs the confirmed tool for one round (the record,
// read as prev, is now running as running) and records how the round
// ended before answering: with more questions (awaiting the next round),
// with a malformed answer or a missing capability (the same round may be
// retried: the record goes back to awaiting it), or completed (done).
func (h *Handler) runConfirmedRound(rq *request, m *jsonrpc.Message, call *ToolCall, ev *CallEvent, n string, prev nonceRecord, running []byte) {
	x := call.Exchange
	r := x.mr
	round := prev.Round
	ev.Outcome = OutcomeConfirmed
	result, err := h.run(rq.ctx, call, ev)
	var next nonceRecord
	var send func()
	var bad *badInputError
	var mce *MissingCapabilityError
	switch {
	case len(r.pending) > 0 && round < maxRounds:
		r.state.Round = round + 1
		members, merr := rq.inputRequiredMembers(r)
		if merr != nil {
			next = nonceRecord{State: stateAwaiting, Round: round, Result: prev.Result}
			send = func() { rq.fail(m.ID, &jsonrpc.Error{Code: CodeInternalError, Message: "Internal error"}) }
			break
		}
		next = nonceRecord{State: stateAwaiting, Round: round + 1, Result: append(append([]byte{'{'}, members...), '}')}
		ev.Outcome, ev.IsError, ev.ErrorClass = OutcomeInputRequired, false, ""
		send = func() { rq.sendInputRequired(m.ID, members) }
	case errors.As(err, &bad), errors.As(err, &mce):
		// The round did not complete; the confirm's decision stands.
		if prev.State == stateAwaiting {
			next = nonceRecord{State: stateAwaiting, Round: round, Result: prev.Result}
		} else {
			next = nonceRecord{State: stateAwaiting, Round: round}
		}
		ev.Outcome, ev.IsError, ev.ErrorClass = OutcomeError, false, ""
		send = func() { rq.finishRounds(x, m, err) }
	default:
		if len(r.pending) > 0 { // too many rounds
			result = ErrorResult("Not run further: " + call.Tool.Name + " asked for input too many times.")
			ev.IsError = true
		}
		b, _ := result.appendJSON(nil)
		next = nonceRecord{State: stateDone, Round: round, Outcome: OutcomeConfirmed, Result: b}
		send = func() { rq.sendResult(m.ID, result) }
	}
	if _, ok, err := h.moveNonce(context.WithoutCancel(rq.ctx), n, running, stateRunning, &next); !ok {
		h.logger().Error("mcphandler: recording a confirmed call's round", "err", err)
	}
	send()
}

// nonceRaced answers a retry that lost a transition to another one: with
// what the winner recorded.
func (h *Handler) nonceRaced(rq *request, m *jsonrpc.Message, n string, round int, err error, ev *CallEvent) {
	if err != nil {
		ev.Outcome = OutcomeError
		h.storeFailed(rq, m, err)
		return
	}
	rec, _, err := h.loadNonce(rq.ctx, n)
	if err != nil {
		ev.Outcome, ev.IsError = OutcomeReplayRefused, true
		rq.sendResult(m.ID, ErrorResult("Not run: this confirmation was already used."))
		return
	}
	h.replayNonce(rq, m, rec, round, ev)
}

// replayNonce answers a retry whose round the record has passed (or is
// running): nothing runs.
func (h *Handler) replayNonce(rq *request, m *jsonrpc.Message, rec nonceRecord, round int, ev *CallEvent) {
	switch {
	case rec.State == stateDone || rec.State == stateClosed:
		ev.Outcome = OutcomeReplayed
		rq.reply(m.ID, rec.Result)
	case rec.State == stateAwaiting && round > 0 && rec.Round == round+1 && len(rec.Result) > 0:
		ev.Outcome = OutcomeReplayed
		rq.sendInputRequired(m.ID, rec.Result[1:len(rec.Result)-1])
	case rec.State == stateRunning || rec.State == stateUnknown:
		ev.Outcome, ev.IsError = OutcomeReplayRefused, true
		rq.sendResult(m.ID, ErrorResult("Not run again: this confirmed call is still running, or its outcome is unknown."))
	default:
		ev.Outcome, ev.IsError = OutcomeReplayRefused, true
		rq.sendResult(m.ID, ErrorResult("Not run again: this step of the call was already answered; continue with the latest requestState."))
	}
}
