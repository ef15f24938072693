package mcphandler

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"time"

	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/session"
)

// confirmRounds runs the 2026-07-28 confirm of call, round by round, with
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
func (cs *confirms) confirmRounds(t *toolRun, d Decision) bool {
	rq, m, call, ev := t.rq, t.m, t.call, &t.ev
	x := call.Exchange
	if !x.caps.Has(session.CapElicitationForm) {
		r := fallbackResult(call, d)
		ev.Outcome, ev.IsError = OutcomeFallback, r.IsError
		ev.Audit.end(OutcomeFallback)
		rq.sendResult(m.ID, r)
		return false
	}
	r := x.mr
	q, err := newConfirmAsk(call, d)
	if err != nil {
		ev.Outcome, ev.IsError = OutcomeError, true
		ev.Audit.end(OutcomeError)
		rq.sendResult(m.ID, errTooLongToConfirm(call))
		return false
	}
	if r.state.Nonce == "" {
		cs.openConfirmRound(rq, m, x, q, ev)
		return false
	}
	rec, raw, ok := cs.loadRound(rq, m, r.state.Nonce, ev)
	if !ok {
		ev.Audit = nil // nothing decided here
		return false
	}
	switch {
	case rec.State == statePending && r.state.Round == 1:
		return cs.answerConfirmRound(t, q, rec, raw)
	case rec.State == stateAwaiting && rec.Round == r.state.Round:
		ev.Audit = nil // a later round: its decision was recorded when made
		return cs.resumeRound(t, rec, raw)
	}
	ev.Audit = nil // a replay: nothing decided here
	cs.replayNonce(rq, m, rec, r.state.Round, ev)
	return false
}

// resumeRound goes on with a confirmed (or approved) call that asked its
// client a question in an earlier round and now has the answers: the
// nonce moves from awaiting to running, once, and the call is to run.
func (cs *confirms) resumeRound(t *toolRun, rec nonceRecord, raw []byte) bool {
	n := t.call.Exchange.mr.state.Nonce
	next := nonceRecord{State: stateRunning, Round: rec.Round}
	b, ok, err := cs.moveNonce(t.rq.ctx, n, raw, stateAwaiting, &next)
	if !ok {
		cs.nonceRaced(t.rq, t.m, n, rec.Round, err, &t.ev)
		return false
	}
	return t.grantRound(n, rec, b)
}

// holdRound ends the first round of a call whose handler carried state
// into the next (Exchange.SetRoundState) and that has no record yet: the
// record nonce/<n> (counted against the caller's bound first), awaiting
// round 1 with this round's input_required answer, makes its rounds
// single use from here on, as a confirmed call's are; then the client is
// asked. The sealed state names the nonce, the round, and that it is held.
func (cs *confirms) holdRound(t *toolRun) {
	rq, m, ev := t.rq, t.m, &t.ev
	r := t.call.Exchange.mr
	n := rand.Text()
	if err := cs.admitConfirm(rq.ctx, rq.id, n); err != nil {
		cs.confirmRefused(rq, m, err, ev)
		return
	}
	r.state.Nonce, r.state.Round, r.state.Held = n, 1, true
	members, err := rq.inputRequiredMembers(r)
	if err != nil {
		ev.Outcome = OutcomeError
		rq.fail(m.ID, errInternal())
		return
	}
	rec := nonceRecord{State: stateAwaiting, Round: 1, Result: append(append([]byte{'{'}, members...), '}')}
	if err := cs.createNonce(rq.ctx, n, &rec); err != nil {
		ev.Outcome = OutcomeError
		rq.storeFailed(m, err)
		return
	}
	ev.Outcome, ev.IsError, ev.ErrorClass = OutcomeInputRequired, false, ""
	rq.sendInputRequired(m.ID, members)
}

// heldRound goes on with a held call (see holdRound) that BeforeCall
// allows: the retry of the round its record awaits runs it (awaiting →
// running, once, then endRound); any other retry runs nothing
// (replayNonce), and one whose record is gone is refused.
func (cs *confirms) heldRound(t *toolRun) bool {
	rq, m, ev := t.rq, t.m, &t.ev
	r := t.call.Exchange.mr
	rec, raw, err := cs.loadNonce(rq.ctx, r.state.Nonce)
	switch {
	case isAbsent(err):
		ev.Outcome, ev.IsError = OutcomeReplayRefused, true
		rq.sendResult(m.ID, ErrorResult("Not run: this step of the call expired or was already answered."))
		return false
	case err != nil:
		ev.Outcome = OutcomeError
		rq.storeFailed(m, err)
		return false
	case rec.State == stateAwaiting && rec.Round == r.state.Round:
		if !cs.resumeRound(t, rec, raw) {
			return false
		}
		ev.Outcome = OutcomeAllowed
		return true
	}
	cs.replayNonce(rq, m, rec, r.state.Round, ev)
	return false
}

// openConfirmRound records a new confirm (its nonce, pending, counted
// against the caller's bound first: confirm_owner.go) and asks the client
// in round 1.
func (cs *confirms) openConfirmRound(rq *request, m *jsonrpc.Message, x *Exchange, q confirmAsk, ev *CallEvent) {
	n := rand.Text()
	ev.ConfirmID = n
	if err := cs.admitConfirm(rq.ctx, rq.id, n); err != nil {
		cs.confirmRefused(rq, m, err, ev)
		ev.Audit.end(ev.Outcome)
		return
	}
	// The record keeps what this round asks, for the Audit of the retry
	// that decides: the message, and the bytes elicitParams sends as the
	// requestedSchema.
	form, _ := json.Marshal(q.form)
	rec := nonceRecord{State: statePending, Round: 1, Msg: q.msg, Form: form, Asked: time.Now().UnixMilli(), ARole: rq.id.Role}
	if err := cs.createNonce(rq.ctx, n, &rec); err != nil {
		ev.Outcome = OutcomeError
		ev.Audit.end(OutcomeError)
		rq.storeFailed(m, err)
		return
	}
	x.mr.state.Nonce, x.mr.state.Round = n, 1
	cs.askConfirmRounds(rq, m, x, q.form, q.msg, ev)
}

// confirmAsk is what a confirm asks: the form, the answer that approves,
// and the message shown.
type confirmAsk struct {
	form   *elicitation.Schema
	expect map[string]any
	msg    string
}

func newConfirmAsk(call *ToolCall, d Decision) (confirmAsk, error) {
	form, expect, msg, err := confirmQuestion(call, d)
	return confirmAsk{form, expect, msg}, err
}

// loadRound loads the record of the confirm a retry names; it answers the
// request and returns false when there is none (expired, used) or the
// store fails.
func (cs *confirms) loadRound(rq *request, m *jsonrpc.Message, n string, ev *CallEvent) (nonceRecord, []byte, bool) {
	ev.ConfirmID = n
	rec, raw, err := cs.loadNonce(rq.ctx, n)
	switch {
	case isAbsent(err):
		ev.Outcome, ev.IsError = OutcomeReplayRefused, true
		rq.sendResult(m.ID, ErrorResult("Not run: this confirmation expired or was already used."))
		return rec, nil, false
	case err != nil:
		ev.Outcome = OutcomeError
		rq.storeFailed(m, err)
		return rec, nil, false
	}
	return rec, raw, true
}

// answerConfirmRound judges the answer to round 1 of a pending confirm: a
// missing one is asked again, an invalid one refused; a decline or a
// mismatch closes the confirm; an approval returns true: the tool runs.
func (cs *confirms) answerConfirmRound(t *toolRun, q confirmAsk, rec nonceRecord, raw []byte) bool {
	rq, m, call, ev := t.rq, t.m, t.call, &t.ev
	x := call.Exchange
	r := x.mr
	n := r.state.Nonce
	a, ok := r.confirmAnswer()
	if !ok { // a missing answer is asked again
		cs.askConfirmRounds(rq, m, x, q.form, q.msg, ev)
		return false
	}
	res, err := checkedAnswer(a, q.form)
	if err != nil {
		ev.Outcome = OutcomeError
		ev.Audit = nil // nothing decided: the confirm stays pending
		rq.fail(m.ID, invalidParams("Invalid params: the confirm answer does not match its form"))
		return false
	}
	step(rq.ctx, StepConfirmAnswered, n) // for Config.Interceptors (intercept.go)
	outcome, result := decide(res, q.form, q.expect, call.Tool.Name)
	b, ok, err := cs.moveNonce(rq.ctx, n, raw, statePending, nonceAfter(outcome, result))
	if !ok {
		ev.Audit = nil // another retry decided, and has the record
		cs.nonceRaced(rq, m, n, r.state.Round, err, ev)
		return false
	}
	// This retry's answer decided: the question as round 1 asked it (the
	// pending record's), answered by the caller the sealed requestState is
	// bound to.
	ev.Audit.asked(rec.Msg, rec.Form, rec.Asked, rec.ARole, n)
	ev.Audit.byClient(rq.id)
	if result != nil {
		ev.Outcome, ev.IsError = outcome, true
		ev.Audit.end(outcome)
		rq.sendResult(m.ID, result)
		return false
	}
	ev.Audit.end(OutcomeConfirmed)
	return t.grantRound(n, rec, b)
}

// checkedAnswer reads a client's answer to a confirm asked with form: an
// error when it is no elicitation result, or accepts with content the
// form refuses.
func checkedAnswer(a []byte, form *elicitation.Schema) (elicitation.Result, error) {
	res, err := elicitation.ParseResult(a)
	if err == nil && res.Action == elicitation.Accept {
		err = form.Validate(res.Content)
	}
	if err == nil && !validInput("elicitation/create", a) {
		err = errors.New("mcphandler: malformed confirm answer")
	}
	return res, err
}

// nonceAfter is the record of a round's nonce once its answer decided:
// running, or closed with outcome and the result sent instead of a run.
func nonceAfter(outcome Outcome, result *ToolResult) *nonceRecord {
	if result == nil {
		return &nonceRecord{State: stateRunning, Round: 1}
	}
	b, _ := result.appendJSON(nil)
	return &nonceRecord{State: stateClosed, Round: 1, Outcome: outcome, Result: b}
}

// askConfirmRounds ends the round asking the confirm's question.
func (cs *confirms) askConfirmRounds(rq *request, m *jsonrpc.Message, x *Exchange, form *elicitation.Schema, msg string, ev *CallEvent) {
	params, err := x.elicitParams(ElicitRequest{Message: msg, Schema: form})
	if err != nil {
		ev.Outcome = OutcomeError
		ev.Audit.end(OutcomeError)
		rq.fail(m.ID, errInternal())
		return
	}
	x.mr.askConfirm(params)
	step(rq.ctx, StepConfirmAsked, ev.ConfirmID) // for Config.Interceptors (intercept.go)
	ev.Outcome = OutcomeInputRequired
	ev.Audit = nil // asked: the retry that answers has the record
	rq.inputRequired(m.ID, x.mr)
}

// roundRun is a 2026-07-28 confirmed (or approved) call's round that
// runs: its nonce, the record it was read as (prev) and the one it is
// now running as (running), for endRound.
type roundRun struct {
	nonce   string
	prev    nonceRecord
	running []byte
}

// grantRound lets the confirmed tool run for one round (the nonce's
// record, read as prev, is now running as running): the call proceeds,
// and endRound records how the round ended before it is answered.
func (t *toolRun) grantRound(n string, prev nonceRecord, running []byte) bool {
	t.ev.Outcome = OutcomeConfirmed
	t.round = roundRun{nonce: n, prev: prev, running: running}
	return true
}

// endRound records how a confirmed call's round ended (see roundEnd),
// then answers it.
func (cs *confirms) endRound(t *toolRun, result *ToolResult, err error) {
	next, send := t.rq.roundEnd(t.m, t.call, &t.ev, t.round.prev, result, err)
	if _, ok, err := cs.moveNonce(context.WithoutCancel(t.rq.ctx), t.round.nonce, t.round.running, stateRunning, &next); !ok {
		cs.logger().Error("mcphandler: recording a confirmed call's round", "err", err)
	}
	send()
}

// roundEnd is the record a confirmed call's round ends in, and the answer
// to send once it is recorded: with more questions, awaiting the next
// round; with a malformed answer, a missing capability or a task that
// could not be stored, nothing ran to its end, and the same round may be
// retried (awaiting it again: the confirm's decision stands); a call that
// became a task, done with its Task, so that a retry gets the same
// CreateTaskResult; otherwise done with the result.
func (rq *request) roundEnd(m *jsonrpc.Message, call *ToolCall, ev *CallEvent, prev nonceRecord, result *ToolResult, err error) (nonceRecord, func()) {
	x, s := call.Exchange, call.task
	r, round := x.mr, prev.Round
	var bad *badInputError
	var mce *MissingCapabilityError
	switch {
	case s != nil && s.created != nil:
		b, _ := json.Marshal(s.created.Task) // strings and numbers: it encodes
		return nonceRecord{State: stateDone, Round: round, Outcome: OutcomeConfirmed, Result: b, Task: true},
			func() { rq.sendCreateTask(m.ID, b) }
	case len(r.pending) > 0 && round < maxRounds:
		next, members := rq.nextConfirmRound(r, prev, ev)
		if members == nil {
			return next, func() { rq.fail(m.ID, errInternal()) }
		}
		return next, func() { rq.sendInputRequired(m.ID, members) }
	case s != nil && s.err != nil, errors.As(err, &bad), errors.As(err, &mce):
		next := nonceRecord{State: stateAwaiting, Round: round}
		if prev.State == stateAwaiting {
			next.Result = prev.Result
		}
		ev.Outcome, ev.IsError, ev.ErrorClass = OutcomeError, false, ""
		if s != nil && s.err != nil {
			return next, func() { rq.taskFailed(m, s.err) }
		}
		return next, func() { rq.finishRounds(x, m, err) }
	}
	if len(r.pending) > 0 { // too many rounds
		result = ErrorResult("Not run further: " + call.Tool.Name + " asked for input too many times.")
		ev.IsError = true
	}
	b, _ := result.appendJSON(nil)
	return nonceRecord{State: stateDone, Round: round, Outcome: OutcomeConfirmed, Result: b}, func() { rq.sendResult(m.ID, result) }
}

// nextConfirmRound is the record of a confirmed call that asked the client
// more, and the members of its input_required answer (nil if they could
// not be encoded: the round stays where it was).
func (rq *request) nextConfirmRound(r *rounds, prev nonceRecord, ev *CallEvent) (nonceRecord, []byte) {
	round := prev.Round
	r.state.Round = round + 1
	members, err := rq.inputRequiredMembers(r)
	if err != nil {
		return nonceRecord{State: stateAwaiting, Round: round, Result: prev.Result}, nil
	}
	ev.Outcome, ev.IsError, ev.ErrorClass = OutcomeInputRequired, false, ""
	return nonceRecord{State: stateAwaiting, Round: round + 1, Result: append(append([]byte{'{'}, members...), '}')}, members
}

// nonceRaced answers a retry that lost a transition to another one: with
// what the winner recorded.
func (cs *confirms) nonceRaced(rq *request, m *jsonrpc.Message, n string, round int, err error, ev *CallEvent) {
	if err != nil {
		ev.Outcome = OutcomeError
		rq.storeFailed(m, err)
		return
	}
	rec, _, err := cs.loadNonce(rq.ctx, n)
	if err != nil {
		ev.Outcome, ev.IsError = OutcomeReplayRefused, true
		rq.sendResult(m.ID, ErrorResult("Not run: this confirmation was already used."))
		return
	}
	cs.replayNonce(rq, m, rec, round, ev)
}

// replayNonce answers a retry whose round the record has passed (or is
// running): nothing runs.
func (cs *confirms) replayNonce(rq *request, m *jsonrpc.Message, rec nonceRecord, round int, ev *CallEvent) {
	switch {
	case rec.State == stateDone && rec.Task:
		ev.Outcome = OutcomeReplayed
		rq.sendCreateTask(m.ID, rec.Result)
	case rec.State == stateDone || rec.State == stateClosed:
		ev.Outcome = OutcomeReplayed
		rq.reply(m.ID, rec.Result)
	case rec.State == stateAwaiting && round > 0 && rec.Round == round+1 && len(rec.Result) > 0:
		ev.Outcome = OutcomeReplayed
		rq.sendInputRequired(m.ID, rec.Result[1:len(rec.Result)-1])
	case rec.State == stateRunning || rec.State == stateUnknown:
		ev.Outcome, ev.IsError = OutcomeReplayRefused, true
		rq.sendResult(m.ID, ErrorResult("Not run again: this call is still running, or its outcome is unknown."))
	default:
		ev.Outcome, ev.IsError = OutcomeReplayRefused, true
		rq.sendResult(m.ID, ErrorResult("Not run again: this step of the call was already answered; continue with the latest requestState."))
	}
}
