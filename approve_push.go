package mcphandler

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"time"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// approvalPrefix marks the request ids of URL elicitations of approvals
// (followed by the approval's id); the client's answer only says whether
// the person agreed to open the page.
const approvalPrefix = "mcpha-"

// approvePush asks a 2025-11-25 client to open the approval's page with a
// URL-mode elicitation/create and waits for the decision, under a confirm
// record (confirm_state.go) that names the approval: the asker holds its
// lease while it waits; if it dies, the replica serving the client's
// resumed stream takes the record over and finishes the call there
// (adoptApproval). Approved: pending → running, the approval is consumed
// (once), notifications/elicitation/complete is sent, and the tool runs.
// Declined, expired or withdrawn: pending → closed, and the result says so.
// A client that goes away does not end the wait (the result is logged for
// its resume); a cancelled call withdraws the approval. A caller whose
// credentials fail a re-check (see callerWatch) stops waiting: the record
// is closed as revoked and the approval stays as it is, for its owner's
// repeated call with valid credentials.
func (ap *approvals) approvePush(t *toolRun, d Decision, a *approval.Approval) bool {
	rq, m, call, ev := t.rq, t.m, t.call, &t.ev
	c := ap.approvalCall(call, a, ev.Audit)
	ctx := context.WithoutCancel(rq.ctx)
	if err := ap.confirms.admitConfirm(ctx, call.Identity, c.id); err != nil {
		ap.confirms.confirmRefused(rq, m, err, ev)
		ev.Audit.end(ev.Outcome)
		return false
	}
	if err := c.record(ctx); err != nil {
		ap.logger().Error("mcphandler: storing an approval's confirm", "err", err)
		ev.Outcome, ev.IsError = OutcomeError, true
		ev.Audit.end(OutcomeError)
		rq.sendResult(m.ID, ErrorResult("Not run: the approval could not be recorded."))
		return false
	}
	c.audit.confirm(c.id)
	outcome, result, run := c.waitApproval(rq.ctx, a, approvalMessage(call, d))
	ev.Outcome = outcome
	ev.Audit.end(outcome)
	switch {
	case outcome == outcomeHandedOver:
		return false
	case run == nil:
		ev.IsError = result != nil && result.IsError
		if result == nil {
			result = ErrorResult("Not run.")
		}
		rq.sendResult(m.ID, result)
		return false
	}
	t.lease = run
	call.approver = c.approver
	return true
}

// approvalCall is the confirm that carries call across replicas while
// approval a waits for its decision, its record not yet stored.
func (ap *approvals) approvalCall(call *ToolCall, a *approval.Approval, audit *Audit) *confirmCall {
	x := call.Exchange
	c := &confirmCall{cs: ap.confirms, id: confirmPrefix + rand.Text(), tool: call.Tool.Name, ident: call.Identity, found: call.Tool, x: x, audit: audit}
	// The arguments are kept whatever their size: the approval bounds
	// them (approval.Config.MaxArgumentBytes), and its use checks them.
	c.rec = confirmRecord{State: statePending, Session: x.sess.ID, Owner: call.Identity.key(), Tool: call.Tool.Name,
		Digest: argsDigest(call.Arguments), Deadline: a.Expires.UnixMilli(), Stream: x.st.streamID(), ReqID: x.reqID,
		Args: call.Arguments, Approval: a.ID, Task: taskRequest(call)}
	c.rec.Form, _ = json.Marshal(elicitation.Confirm(confirmField, "Confirm")) // never asked; records carry a form
	return c
}

// waitApproval sends the URL elicitation and waits for the approval's
// decision, keeping the stream alive every Config.Sessions.KeepAlive: with
// notifications/progress if the call carried a progressToken, else an SSE
// comment.
func (c *confirmCall) waitApproval(ctx context.Context, a *approval.Approval, msg string) (Outcome, *ToolResult, *confirmRun) {
	cs, x := c.cs, c.x
	params, err := x.elicitParams(ElicitRequest{Message: msg, URL: a.URL, ElicitationID: a.ID})
	// The decision comes from the approval: a question that cannot
	// subscribe waits without replies, and one whose params could not be
	// encoded, or that cannot reach the client, waits all the same.
	q, _ := newQuestion(ctx, cs.bus, x, approvalPrefix+a.ID, mayNotHear)
	defer q.close()
	if err == nil {
		q.send("elicitation/create", params)
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	decided := make(chan *approval.Approval, 1)
	go func() {
		got, err := cs.cfg.Approvals.Wait(wctx, a.ID)
		if err != nil {
			got = nil
		}
		decided <- got
	}()
	return c.awaitDecision(ctx, a, q, decided)
}

// awaitDecision waits for the approval's decision on decided, withdrawing
// the approval when the call is cancelled or the client declines to open
// the page (one of the question's replies), and stopping when its caller
// fails a re-check (lost). The client's disconnect does not end it.
func (c *confirmCall) awaitDecision(ctx context.Context, a *approval.Approval, q *question, decided <-chan *approval.Approval) (Outcome, *ToolResult, *confirmRun) {
	cs := c.cs
	hints := q.replies()
	keep := time.NewTicker(cs.cfg.Sessions.KeepAlive)
	defer keep.Stop()
	// Past the expiry the approval is decided (expired, at the latest): a
	// store that still cannot tell hands the call over to the replica that
	// can, which answers on the stream's log.
	limit := time.NewTimer(time.Until(a.Expires.Add(cs.ct.skew)))
	defer limit.Stop()
	done, n := ctx.Done(), 0
	for {
		select {
		case got := <-decided:
			if done == nil && got != nil && got.State == approval.Approved {
				// Cancelled, but approved first: the call does not run,
				// and the approval stays for a repeated call.
				got = &approval.Approval{ID: got.ID, State: approval.Withdrawn}
			}
			return c.approvalDecided(context.WithoutCancel(ctx), got)
		case <-limit.C:
			c.ls.Release()
			return outcomeHandedOver, nil, nil
		case <-q.lost:
			return c.giveUp(context.WithoutCancel(ctx), OutcomeRevoked)
		case b, ok := <-hints:
			if !ok {
				hints = nil
			} else if p, ok := q.open(b); ok && refusedToOpen(p) {
				c.refused = true // the client's answer, not a cancellation
				cs.cfg.Approvals.Withdraw(context.WithoutCancel(ctx), a.ID, approvalAsker(c.ident))
			}
		case <-done: // cancelled: withdraw; the decided read follows
			done = nil
			cs.cfg.Approvals.Withdraw(context.WithoutCancel(ctx), a.ID, approvalAsker(c.ident))
		case <-keep.C:
			n++
			c.stillWaiting(n)
		}
	}
}

// stillWaiting tells the client the n-th time that the call still waits
// for its approval: progress if the client asked for it, else a comment
// that keeps the stream open.
func (c *confirmCall) stillWaiting(n int) {
	if len(c.x.progressToken) > 0 {
		c.x.Progress(float64(n), 0, "waiting for an approval")
	} else {
		c.x.st.comment()
	}
}

// refusedToOpen reports whether a client's answer to an approval's URL
// elicitation (a reply hint) declines or dismisses it, or is an error.
func refusedToOpen(p []byte) bool {
	var r reply
	var m struct {
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(p, &r) != nil || json.Unmarshal(r.Msg, &m) != nil || len(m.Result) == 0 {
		return true
	}
	res, err := elicitation.ParseResult(m.Result)
	return err != nil || res.Action != elicitation.Accept
}

// approvalDecided acts on the approval got (nil: it could not be read) for
// the confirm record this replica holds the lease of. Of the replicas
// that could try, only the one whose transition out of pending succeeds
// acts; a lost transition or an unreadable approval is handed over to the
// replica that resumes the stream.
func (c *confirmCall) approvalDecided(ctx context.Context, got *approval.Approval) (Outcome, *ToolResult, *confirmRun) {
	cs := c.cs
	if got == nil || got.State == approval.Pending {
		c.ls.Release()
		return outcomeHandedOver, nil, nil
	}
	outcome, result := approvalOutcome(got, c.tool)
	// What the page showed and who decided there, as the approval store
	// says (a copy the asker made up when cancelled claims nothing).
	c.audit.approval(got)
	c.audit.decidedBy(got, c.refused)
	if result == nil && c.x != nil && !c.x.st.callerHolds() {
		// Approved, but the caller's credentials failed meanwhile: the
		// call does not run on this request, and the approval stays.
		return c.giveUp(ctx, OutcomeRevoked)
	}
	next := c.rec.decided(c.ls.Token(), outcome, result)
	raw, ok, _ := cs.moveConfirm(ctx, c.id, c.raw, statePending, &next)
	if !ok {
		c.ls.Release()
		return outcomeHandedOver, nil, nil
	}
	c.rec, c.raw = next, raw
	c.completeElicitation(got.ID)
	if result != nil {
		c.ls.Release()
		return outcome, result, nil
	}
	if _, err := cs.cfg.Approvals.Consume(ctx, got.ID, approvalAsker(c.ident), c.tool, c.rec.Args); err != nil {
		return c.usedElsewhere(ctx)
	}
	by := got.DecidedBy
	c.approver = &by
	return OutcomeConfirmed, nil, &confirmRun{c: c, raw: raw}
}

// usedElsewhere ends a call whose approval was approved but could not be
// used here (another call used it first): nothing runs.
func (c *confirmCall) usedElsewhere(ctx context.Context) (Outcome, *ToolResult, *confirmRun) {
	done := c.rec
	done.State, done.Outcome = stateDone, OutcomeReplayRefused
	c.cs.moveConfirm(ctx, c.id, c.raw, stateRunning, &done)
	c.ls.Release()
	o, r := approvalOutcome(&approval.Approval{State: approval.Used}, c.tool)
	return o, r, nil
}

// decided is r once a decision was read, by the process holding the
// lease token: running, or closed with outcome when result is sent
// instead of a run.
func (r confirmRecord) decided(token string, outcome Outcome, result *ToolResult) confirmRecord {
	r.By = token
	if result == nil {
		r.State = stateRunning
	} else {
		r.State, r.Outcome = stateClosed, outcome
	}
	return r
}

// completeElicitation tells the client the approval's page is done with
// (notifications/elicitation/complete).
func (c *confirmCall) completeElicitation(id string) {
	if c.x == nil {
		return
	}
	c.x.CompleteElicitation(id)
}

// adoptApproval finishes, on the replica serving a resumed stream, a call
// waiting for an approval whose asker is gone (nobody holds the record's
// lease), once the approval is decided: the result goes to the stream's
// event log. Still pending, or the asker alive: nothing happens (the
// resumed stream checks again every confirmPoll).
func (ap *approvals) adoptApproval(rq *request, id string, rec confirmRecord, raw []byte) {
	ctx := context.WithoutCancel(rq.context())
	got, err := ap.cfg.Approvals.Get(ctx, rec.Approval)
	if err != nil || got.State == approval.Pending {
		return
	}
	ls, err := ap.confirms.takeLease(ctx, id)
	if err != nil || ls == nil {
		return
	}
	out := ap.adoptRequest(ctx, rq, rec.Stream)
	x := &Exchange{h: rq.h, st: out.st, sess: rq.sess, version: out.version, caps: rq.sess.Capabilities, logLevel: LogLevel(rq.sess.LogLevel), reqID: rec.ReqID}
	ev := CallEvent{Tool: rec.Tool, Identity: rq.id, SessionID: rq.sess.ID, ConfirmID: rec.Approval, Arguments: rec.Args}
	ev.Audit = ap.confirms.recordAudit(rq.id, id, &rec)
	c := &confirmCall{cs: ap.confirms, id: id, tool: rec.Tool, ident: rq.id, ls: ls, rec: rec, raw: raw, x: x, audit: ev.Audit}
	start := time.Now()
	outcome, result, run := c.approvalDecided(out.ctx, got)
	ev.Outcome = outcome
	ev.Audit.end(outcome)
	switch {
	case outcome == outcomeHandedOver:
		return
	case run != nil:
		ap.runAdopted(out, c, run, &ev)
	case result != nil:
		ev.IsError = result.IsError
		out.sendResult(rec.ReqID, result)
	}
	if ap.cfg.OnCall != nil {
		ev.Duration = time.Since(start)
		emitCall(ap.cfg, ev)
	}
}

// runAdopted runs an adopted approved call, if the caller can still see
// the tool, and logs its result.
func (ap *approvals) runAdopted(out *request, c *confirmCall, run *confirmRun, ev *CallEvent) {
	defer run.finish(out.ctx)
	tool, ok, err := ap.catalog.findTool(out.ctx, c.ident, c.tool)
	if err != nil || !ok {
		ev.Outcome = OutcomeRevoked
		ev.Audit.end(OutcomeRevoked) // approved, but not run
		out.fail(c.rec.ReqID, errUnknownTool(c.tool))
		return
	}
	call := &ToolCall{Tool: tool, Arguments: c.rec.Args, Identity: c.ident, SessionID: c.rec.Session, Exchange: c.x, task: c.rec.slot(tool),
		approver: c.approver}
	t := toolRun{rq: out, m: &jsonrpc.Message{ID: c.rec.ReqID, Method: "tools/call"}, call: call, ev: *ev}
	t.proceed()
	*ev = t.ev
	ev.Audit.taskOf(call)
}

// adoptRequest is a request that writes to the event log of streamID only,
// for a call finished by a replica other than its asker, in the
// operation's context ctx, from the identity of the request that led
// here (from), in its session.
func (ap *approvals) adoptRequest(ctx context.Context, from *request, streamID string) *request {
	r, ident, sess := from.r, from.id, from.sess
	rq := &request{h: from.h, r: r, start: time.Now(), id: ident, sess: sess, version: sess.ProtocolVersion, era: eraSessions}
	rq.info = &reqInfo{identity: ident, request: r, version: sess.ProtocolVersion, sessionID: sess.ID, caps: sess.Capabilities}
	rq.base = context.WithoutCancel(ctx)
	rq.ctx = context.WithValue(rq.base, ctxKey{}, rq.info)
	rq.st = ap.confirms.logOnly(sess.ID, streamID)
	return rq
}
