package mcphandler

import (
	"context"
	"crypto/rand"
	"time"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// approveRounds runs a 2026-07-28 Approve round by round, with a nonce
// record (confirm_state.go) naming the approval, sealed in the
// requestState like a confirm's (confirm_rounds.go):
//
//   - The first round starts the approval, records the nonce (pending)
//     and asks the client to open the page: an input_required answer
//     whose request (input key confirmInputKey) is the URL elicitation.
//   - The retry waits for the decision (until the approval expires or the
//     client goes away); an answer that declines to open the page
//     withdraws the approval. Approved: pending → running, the approval is
//     consumed, the tool runs, and its result is recorded (done).
//     Declined, expired, withdrawn: pending → closed with the refusal.
//   - A retry of a finished call gets the recorded result: nothing runs
//     again.
//
// It returns true when the tool is to run.
func (ap *approvals) approveRounds(t *toolRun, d Decision) bool {
	rq, m, ev := t.rq, t.m, &t.ev
	r := t.call.Exchange.mr
	if r.state.Nonce == "" {
		return ap.openApprovalRound(t, d)
	}
	rec, raw, ok := ap.confirms.loadRound(rq, m, r.state.Nonce, ev)
	if !ok {
		ev.Audit = nil // nothing decided here
		return false
	}
	switch {
	case rec.State == statePending && rec.Approval == "":
		ev.Outcome, ev.IsError = OutcomeReplayRefused, true
		rq.sendResult(m.ID, ErrorResult("Not run: this requestState is not the one of an approval."))
	case rec.State == statePending && r.state.Round == 1:
		return ap.answerApprovalRound(t, rec, raw)
	case rec.State == stateAwaiting && rec.Round == r.state.Round:
		ev.Audit = nil // a later round: its decision was recorded when made
		return ap.confirms.resumeRound(t, rec, raw)
	default:
		ap.confirms.replayNonce(rq, m, rec, r.state.Round, ev)
	}
	ev.Audit = nil // a replay: nothing decided here
	return false
}

// openApprovalRound starts (or finds) the call's approval and asks the
// client to open its page in round 1. A call repeated after its approval
// (without the requestState) runs at once: it returns true.
func (ap *approvals) openApprovalRound(t *toolRun, d Decision) bool {
	rq, m, call, ev := t.rq, t.m, t.call, &t.ev
	x := call.Exchange
	a, run, ok := ap.openApproval(t, d)
	if !ok || run {
		return run
	}
	n := rand.Text()
	if err := ap.confirms.admitConfirm(rq.ctx, call.Identity, n); err != nil {
		ap.confirms.confirmRefused(rq, m, err, ev)
		ev.Audit.end(ev.Outcome)
		return false
	}
	if err := ap.confirms.createNonce(rq.ctx, n, &nonceRecord{State: statePending, Round: 1, Approval: a.ID}); err != nil {
		ev.Outcome = OutcomeError
		ev.Audit.end(OutcomeError)
		rq.storeFailed(m, err)
		return false
	}
	x.mr.state.Nonce, x.mr.state.Round = n, 1
	params, err := x.elicitParams(ElicitRequest{Message: approvalMessage(call, d), URL: a.URL})
	if err != nil {
		ev.Outcome = OutcomeError
		ev.Audit.end(OutcomeError)
		rq.fail(m.ID, errInternal())
		return false
	}
	x.mr.askConfirm(params)
	ev.Outcome = OutcomeInputRequired
	ev.Audit = nil // asked: the retry that ends the decision has the record
	rq.inputRequired(m.ID, x.mr)
	return false
}

// answerApprovalRound waits for the decision of the approval of a pending
// nonce and acts on it, once: of concurrent retries, on any replicas, the
// one whose transition out of pending succeeds acts.
func (ap *approvals) answerApprovalRound(t *toolRun, rec nonceRecord, raw []byte) bool {
	rq, m, call, ev := t.rq, t.m, t.call, &t.ev
	s, n := ap.cfg.Approvals, call.Exchange.mr.state.Nonce
	ctx := context.WithoutCancel(rq.ctx)
	ev.ConfirmID = rec.Approval
	refused := false
	if a, ok := call.Exchange.mr.confirmAnswer(); ok {
		if res, err := elicitation.ParseResult(a); err != nil || res.Action != elicitation.Accept {
			refused = true // the client's answer withdraws the approval
			s.Withdraw(ctx, rec.Approval, approvalAsker(call.Identity))
		}
	}
	got, err := ap.waitRound(rq, rec.Approval)
	if ap.undecidedRound(t, got, err) {
		return false
	}
	// What the page showed and who decided there, as the approval store
	// says; the record this retry's round runs under.
	ev.Audit.approval(got)
	ev.Audit.decidedBy(got, refused)
	ev.Audit.confirm(n)
	outcome, result := approvalOutcome(got, call.Tool.Name)
	if result != nil {
		ap.closeApprovalRound(rq, m, ev, n, raw, outcome, result)
		return false
	}
	return ap.runApprovedRound(t, rec, raw, got)
}

// undecidedRound ends a retry whose approval (got, or the failure to read
// it) decides nothing yet, and reports whether it did: the caller's
// credentials failed a re-check, the client stopped waiting, or the store
// failed. The nonce and the approval stay for the next retry.
func (ap *approvals) undecidedRound(t *toolRun, got *approval.Approval, err error) bool {
	rq, m, call, ev := t.rq, t.m, t.call, &t.ev
	switch {
	case err == nil && got.State == approval.Approved && !rq.st.callerHolds(), rq.st.callerLost():
		// The caller's credentials failed a re-check: the request ended
		// with that failure, and the nonce stays pending for a retry with
		// valid ones (the approval stays too).
		ev.Outcome = OutcomeRevoked
		ev.Audit = nil // still open: a retry ends it
		return true
	case rq.ctx.Err() != nil || err == nil && got.State == approval.Pending:
		// The client went away (or stopped waiting): the nonce stays
		// pending for its next retry.
		ev.Outcome, ev.IsError = OutcomeDisconnected, true
		ev.Audit = nil
		rq.sendResult(m.ID, ErrorResult("Not run yet: the approval of "+call.Tool.Name+" is pending; retry with the same requestState."))
		return true
	case err != nil:
		ev.Outcome = OutcomeError
		ev.Audit = nil
		rq.storeFailed(m, err)
		return true
	}
	return false
}

// closeApprovalRound records the result of an approval that was not given
// (declined, expired, withdrawn) in the call's nonce, and sends it.
func (ap *approvals) closeApprovalRound(rq *request, m *jsonrpc.Message, ev *CallEvent, n string, raw []byte, outcome Outcome, result *ToolResult) {
	if _, ok, err := ap.confirms.moveNonce(context.WithoutCancel(rq.ctx), n, raw, statePending, nonceAfter(outcome, result)); !ok {
		ev.Audit = nil // another retry recorded the decision
		ap.confirms.nonceRaced(rq, m, n, 1, err, ev)
		return
	}
	ev.Outcome, ev.IsError = outcome, true
	ev.Audit.end(outcome)
	rq.sendResult(m.ID, result)
}

// runApprovedRound moves the call's nonce to running and consumes the
// approval (once: a second consumer is refused as used); it returns true
// when the call is to run.
func (ap *approvals) runApprovedRound(t *toolRun, rec nonceRecord, raw []byte, got *approval.Approval) bool {
	rq, m, call, ev := t.rq, t.m, t.call, &t.ev
	ctx, n := context.WithoutCancel(rq.ctx), call.Exchange.mr.state.Nonce
	b, ok, err := ap.confirms.moveNonce(ctx, n, raw, statePending, &nonceRecord{State: stateRunning, Round: 1})
	if !ok {
		ev.Audit = nil // another retry recorded the decision
		ap.confirms.nonceRaced(rq, m, n, 1, err, ev)
		return false
	}
	if _, err := ap.cfg.Approvals.Consume(ctx, got.ID, approvalAsker(call.Identity), call.Tool.Name, call.Arguments); err != nil {
		outcome, result := approvalOutcome(&approval.Approval{State: approval.Used}, call.Tool.Name)
		res, _ := result.appendJSON(nil)
		ap.confirms.moveNonce(ctx, n, b, stateRunning, &nonceRecord{State: stateDone, Round: 1, Outcome: outcome, Result: res})
		ev.Outcome, ev.IsError = outcome, true
		ev.Audit.end(outcome)
		rq.sendResult(m.ID, result)
		return false
	}
	by := got.DecidedBy
	call.approver = &by
	ev.Audit.end(OutcomeConfirmed)
	return t.grantRound(n, rec, b)
}

// waitRound waits for approval id to be decided, as long as the request
// lasts and its caller passes its re-checks (see callerWatch); a request
// that ends first gets the store's or ctx's error.
func (ap *approvals) waitRound(rq *request, id string) (*approval.Approval, error) {
	ctx, release := rq.st.watchContext(rq.ctx)
	defer release()
	ctx, cancel := context.WithTimeout(ctx, ap.cfg.ConfirmTimeout+time.Second)
	defer cancel()
	return ap.cfg.Approvals.Wait(ctx, id)
}
