// The 2025 push path of a confirm: the question goes to the client as an
// elicitation/create on the call's stream, the answer comes back as a
// JSON-RPC response through any replica and is claimed in the store, and
// a replica takes over a confirm whose asker is gone (its lease lapsed).
// The binding and decision shared with the 2026-07-28 round path are in
// confirm.go and confirm_state.go; the round path in confirm_rounds.go.

package mcphandler

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"time"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/record"
	"github.com/mcphandler/mcphandler/session"
)

// confirmPush carries a confirm over the 2025 transports: asks the client
// with a server-to-client request on the call's stream (see confirm). It
// answers the request itself and returns false, or returns true with
// t.lease set: the run under whose lease the tool runs.
func (cs *confirms) confirmPush(t *toolRun, d Decision) bool {
	rq, m, call, ev := t.rq, t.m, t.call, &t.ev
	outcome, result, run, refused := cs.confirm(rq.ctx, call, d, ev)
	ev.Outcome = outcome
	switch {
	case refused != nil:
		cs.confirmRefused(rq, m, refused, ev)
		ev.Audit.end(ev.Outcome)
		return false
	case outcome == outcomeHandedOver:
		return false // the replica that finished the confirm answers
	case outcome == OutcomeRevoked:
		ev.Audit.end(outcome)
		rq.fail(m.ID, errUnknownTool(call.Tool.Name))
		return false
	case result != nil || run == nil:
		// After a disconnect nobody listens: the result goes to the
		// stream's log only, for a client that resumes.
		ev.Audit.end(outcome)
		ev.IsError = result != nil && result.IsError
		if result == nil {
			result = ErrorResult("Not run.")
		}
		rq.sendResult(m.ID, result)
		return false
	}
	// The run holds the confirm's lease while the tool runs, and records
	// its end once the response went out.
	ev.Audit.end(OutcomeConfirmed)
	t.lease = run
	return true
}

// outcomeHandedOver is what the asker of a 2025 confirm ends with when
// another replica finished the confirm (its lease had lapsed) or when the
// store could not tell it what was decided: it sends nothing more and
// reports nothing, and the replica that finishes the confirm answers the
// client on the stream's log (the client resumes with Last-Event-ID) and
// reports the call.
const outcomeHandedOver Outcome = "handed_over"

// confirm asks the human to confirm call on a 2025 session. It returns the
// outcome, the result to send when the tool must not run, and when it may
// run, the run whose finish records its end; or, when the confirm could
// not be counted against its caller's bound (confirm_owner.go), why.
//
// The question is an elicitation with an unguessable id. Its record in the
// store binds the answer to this session, identity, tool and arguments,
// and decides the confirm in one transition (see confirm_state.go): the
// answer is stored in the record by the replica that receives it
// (pending → answered), or the asker closes the record when it gives up
// (pending → closed). The asker holds the confirm's lease while it waits,
// so no other replica takes the confirm over; the Pub/Sub reply only wakes
// it, and it also reads the record every confirmPoll and at its timeout.
// An answer stored just before the timeout is acted on, never reported
// as timed out.
func (cs *confirms) confirm(ctx context.Context, call *ToolCall, d Decision, ev *CallEvent) (Outcome, *ToolResult, *confirmRun, error) {
	x := call.Exchange
	canAsk := x.sess != nil && !x.st.noSSE && x.caps.Has(session.CapElicitationForm)
	if !canAsk {
		return OutcomeFallback, fallbackResult(call, d), nil, nil
	}
	id := confirmPrefix + rand.Text()
	ev.ConfirmID = id
	form, expect, msg, err := confirmQuestion(call, d)
	if err != nil {
		return OutcomeError, errTooLongToConfirm(call), nil, nil
	}
	params, err := x.elicitParams(ElicitRequest{Message: msg, Schema: form})
	if err != nil {
		cs.logger().Error("mcphandler: confirm form", "tool", call.Tool.Name, "err", err)
		return OutcomeError, ErrorResult("Not run: the confirmation could not be asked."), nil, nil
	}
	c := &confirmCall{cs: cs, id: id, tool: call.Tool.Name, ident: call.Identity, form: form, expect: expect, found: call.Tool, audit: ev.Audit}
	now := time.Now()
	c.rec = confirmRecord{State: statePending, Session: x.sess.ID, Owner: call.Identity.key(), Tool: call.Tool.Name,
		Digest: argsDigest(call.Arguments), Deadline: now.Add(cs.cfg.ConfirmTimeout).UnixMilli(),
		Expect: expect, Task: taskRequest(call), Msg: msg, Asked: now.UnixMilli(), ARole: call.Identity.Role}
	c.rec.keepCall(x, call.Arguments)
	// The bytes elicitParams sent as the requestedSchema.
	c.rec.Form, _ = json.Marshal(form)
	if err := cs.admitConfirm(ctx, call.Identity, id); err != nil {
		return OutcomeDenied, nil, nil, err
	}
	if err := c.record(context.WithoutCancel(ctx)); err != nil {
		cs.logger().Error("mcphandler: storing a confirm", "err", err)
		return OutcomeError, ErrorResult("Not run: the confirmation could not be recorded."), nil, nil
	}
	c.audit.asked(c.rec.Msg, c.rec.Form, c.rec.Asked, c.rec.ARole, id)
	outcome, result, run := c.wait(ctx, x, params)
	return outcome, result, run, nil
}

// record takes the confirm's lease and stores its pending record. The
// lease comes before the record: an answer never finds the record without
// the lease of its live asker.
func (c *confirmCall) record(ctx context.Context) error {
	cs := c.cs
	var err error
	if c.ls, err = cs.takeLease(ctx, c.id); err == nil && c.ls == nil {
		err = errors.New("mcphandler: confirm id already in use")
	}
	if err == nil {
		if c.raw, err = cs.createConfirm(ctx, c.id, &c.rec); err != nil {
			c.ls.Release()
		}
	}
	if err == nil && c.rec.Stream != "" {
		// A resumed stream finds its confirm here (see watchConfirm).
		cs.cfg.Store.PutIfAbsent(ctx, confirmOfKey(c.rec.Session, c.rec.Stream), []byte(c.id), cs.confirmOfTTL())
	}
	return err
}

// confirmCall is one 2025 confirm being decided by the replica that holds
// its lease: the asker, or a replica that took it over.
type confirmCall struct {
	cs     *confirms
	id     string
	tool   string
	ident  Identity // who called; the role of the answer replaces its role
	form   *elicitation.Schema
	expect map[string]any
	ls     *record.Lease
	rec    confirmRecord // as last read or written
	raw    []byte        // its exact bytes in the store
	found  Tool          // the tool, found again when the answer is judged
	x      *Exchange     // the asker's exchange; nil for a take-over
	// approver is who approved the call, once its approval is decided
	// approved (approvalDecided): ToolCall.ApprovedBy.
	approver *approval.Identity
	// audit is the record of the decision (nil without OnCall): who
	// answered is set where the answer is acted on (decideAnswer,
	// approvalDecided), the outcome by whoever reports the call.
	audit *Audit
	// refused says the client declined to open an approval's page, which
	// withdrew it (awaitDecision).
	refused bool
}

// confirmRun is a confirmed call about to run: its record is running and
// this replica holds the lease.
type confirmRun struct {
	c   *confirmCall
	raw []byte
}

// finish records that the run ended (running → done) and releases the
// lease. If the record is no longer running (a replica found the lease
// lapsed and reported the outcome as unknown), that stays.
func (r *confirmRun) finish(ctx context.Context) {
	c := r.c
	next := c.rec
	next.State, next.Outcome = stateDone, OutcomeConfirmed
	if _, ok, err := c.cs.moveConfirm(ctx, c.id, r.raw, stateRunning, &next); !ok {
		c.cs.logger().Error("mcphandler: recording a confirmed call's end", "confirm", c.id, "err", err)
	}
	c.ls.Release()
}

// wait sends the question and waits for the record to leave pending.
func (c *confirmCall) wait(ctx context.Context, x *Exchange, params []byte) (Outcome, *ToolResult, *confirmRun) {
	cs := c.cs
	c.x = x
	q, err := newQuestion(ctx, cs.bus, x, c.id, mustHear)
	if err != nil {
		cs.logger().Error("mcphandler: session store", "err", err)
		return c.giveUp(ctx, OutcomeError)
	}
	defer q.close()
	if err := q.send("elicitation/create", params); err != nil {
		return c.giveUp(ctx, OutcomeDisconnected)
	}
	step(ctx, StepConfirmAsked, c.id) // for Config.Interceptors (intercept.go)
	return c.await(ctx, q)
}

// await waits for the confirm's answer, woken by the question's replies
// (hints: the answer is in the record) and reading the record every poll,
// until the deadline, the client's disconnect, the call's cancellation or
// its caller's failed re-check (lost: revoked, the tool does not run
// whatever the answer). If the replies end, the poll goes on alone.
func (c *confirmCall) await(ctx context.Context, q *question) (Outcome, *ToolResult, *confirmRun) {
	cs := c.cs
	hints := q.replies()
	timeout := time.NewTimer(time.Until(c.rec.deadline()))
	defer timeout.Stop()
	poll := time.NewTicker(cs.ct.poll)
	defer poll.Stop()
	for {
		select {
		case b, ok := <-hints:
			if !ok {
				hints = nil // the poll still reads the record
				continue
			}
			if _, ok := q.open(b); !ok {
				continue
			}
		case <-poll.C:
		case <-timeout.C:
			return c.giveUp(ctx, OutcomeTimedOut)
		case <-q.gone:
			return c.giveUp(ctx, OutcomeDisconnected)
		case <-q.lost:
			return c.giveUp(ctx, OutcomeRevoked)
		case <-ctx.Done():
			return c.giveUp(ctx, OutcomeCancelled)
		}
		rec, raw, err := cs.loadConfirm(context.WithoutCancel(ctx), c.id)
		if err == nil && rec.State == statePending || err != nil && !isAbsent(err) {
			continue // not answered, or the store cannot tell now
		}
		return c.follow(ctx, rec, raw, err, "")
	}
}

func isAbsent(err error) bool {
	return errors.Is(err, session.ErrNotFound) || errors.Is(err, errBadRecord)
}

// giveUp closes the pending confirm because of outcome (timeout,
// disconnect, cancellation, the caller's failed re-check). If the record
// was answered first, the answer decides instead — but a cancelled or
// revoked call does not run whatever it says. If the store cannot be
// reached, it keeps trying until ct.skew after the deadline and then
// hands the confirm over: it says nothing it cannot know.
func (c *confirmCall) giveUp(ctx context.Context, outcome Outcome) (Outcome, *ToolResult, *confirmRun) {
	cs := c.cs
	ctx = context.WithoutCancel(ctx)
	limit := c.rec.deadline().Add(cs.ct.skew)
	for {
		next := c.rec
		next.State, next.By, next.Outcome = stateClosed, c.ls.Token(), outcome
		raw, ok, err := cs.moveConfirm(ctx, c.id, c.raw, statePending, &next)
		if ok {
			c.rec, c.raw = next, raw
			c.ls.Release()
			if outcome == OutcomeTimedOut && c.x != nil {
				stoppedWaiting(c.x.st, jsonrpc.AppendString(nil, c.id))
			}
			return outcome, c.notRun(outcome), nil
		}
		if err == nil {
			rec, raw, err := cs.loadConfirm(ctx, c.id)
			if err == nil && rec.State == statePending {
				c.rec, c.raw = rec, raw
				continue
			}
			if err == nil || isAbsent(err) {
				return c.follow(ctx, rec, raw, err, refusal(outcome))
			}
		}
		if time.Now().After(limit) {
			cs.logger().Error("mcphandler: a confirm's outcome is unknown: the session store is unavailable", "confirm", c.id, "err", err)
			c.ls.Release()
			return outcomeHandedOver, nil, nil
		}
		time.Sleep(cs.ct.poll)
	}
}

// refusal is the outcome that overrides an answer found when a wait ends
// because of outcome: a cancelled or revoked call does not run whatever
// the answer; "" lets the answer decide.
func refusal(outcome Outcome) Outcome {
	if outcome == OutcomeCancelled || outcome == OutcomeRevoked {
		return outcome
	}
	return ""
}

// notRun is the result a call that did not run gets for outcome.
func (c *confirmCall) notRun(outcome Outcome) *ToolResult {
	switch outcome {
	case OutcomeTimedOut:
		return ErrorResult("Not run: the confirmation of " + c.tool + " timed out.")
	case OutcomeCancelled:
		return ErrorResult("Not run: the request was cancelled.")
	case OutcomeDisconnected:
		// Logged for a client that resumes the stream.
		return ErrorResult("Not run: the client went away before the confirmation of " + c.tool + " was answered.")
	case OutcomeRevoked:
		return nil
	}
	return ErrorResult("Not run: the confirmation of " + c.tool + " failed.")
}

// follow acts on a record that left pending: an answer is decided here
// (refused with refuse when that is set, see refusal); a transition this
// replica made (whose reply the store lost) is taken up; anything else
// was done by another replica, which answers the client. err is the error
// of reading it (absent or invalid: nobody can answer or run it any
// more).
func (c *confirmCall) follow(ctx context.Context, rec confirmRecord, raw []byte, err error, refuse Outcome) (Outcome, *ToolResult, *confirmRun) {
	switch {
	case err != nil:
		c.cs.logger().Error("mcphandler: a confirm's record is gone or invalid", "confirm", c.id, "err", err)
		c.ls.Release()
		return OutcomeError, ErrorResult("Not run: the confirmation of " + c.tool + " was lost."), nil
	case rec.State == stateAnswered:
		return c.decideAnswer(ctx, rec, raw, refuse)
	case rec.By == c.ls.Token() && rec.State == stateClosed:
		c.rec, c.raw = rec, raw
		c.ls.Release()
		return rec.Outcome, c.notRun(rec.Outcome), nil
	case rec.By == c.ls.Token() && rec.State == stateRunning:
		c.rec, c.raw = rec, raw
		return OutcomeConfirmed, nil, &confirmRun{c: c, raw: raw}
	}
	c.ls.Release()
	return outcomeHandedOver, nil, nil
}

// decideAnswer acts on the answer stored in the record: it may run
// (answered → running) or it does not (answered → closed), and of the
// replicas that could try, only the one whose transition succeeds acts.
// A cancelled or revoked request (refuse) does not run whatever the
// answer.
func (c *confirmCall) decideAnswer(ctx context.Context, rec confirmRecord, raw []byte, refuse Outcome) (Outcome, *ToolResult, *confirmRun) {
	cs := c.cs
	ctx = context.WithoutCancel(ctx)
	var outcome Outcome
	var result *ToolResult
	if refuse == "" {
		outcome, result = c.judge(ctx, &rec)
	} else {
		outcome, result = refuse, c.notRun(refuse)
	}
	// The answer in the signed record decides, whichever way: the caller
	// sent it (an answer is accepted from its tenant and subject only),
	// with the role stored with it.
	c.audit.byClient(Identity{Tenant: c.ident.Tenant, Subject: c.ident.Subject, Role: rec.Role})
	next := rec
	next.By, next.Decided = c.ls.Token(), time.Now().UnixMilli()
	if outcome == OutcomeConfirmed {
		next.State = stateRunning
	} else {
		next.State, next.Outcome = stateClosed, outcome
	}
	for range 3 {
		b, ok, err := cs.moveConfirm(ctx, c.id, raw, stateAnswered, &next)
		if ok {
			c.rec, c.raw = next, b
			if next.State == stateRunning {
				return OutcomeConfirmed, nil, &confirmRun{c: c, raw: b}
			}
			c.ls.Release()
			return outcome, result, nil
		}
		if err == nil {
			break // another replica decided
		}
		time.Sleep(cs.ct.poll)
	}
	return c.decisionLost(ctx, next, outcome, result, refuse)
}

// decisionLost follows a confirm whose decision could not be recorded:
// another replica decided, or the store failed.
func (c *confirmCall) decisionLost(ctx context.Context, next confirmRecord, outcome Outcome, result *ToolResult, refuse Outcome) (Outcome, *ToolResult, *confirmRun) {
	got, graw, err := c.cs.loadConfirm(ctx, c.id)
	if err != nil && !isAbsent(err) {
		c.ls.Release()
		return outcomeHandedOver, nil, nil
	}
	if err == nil && got.State == stateAnswered {
		c.ls.Release() // we could not record the decision: leave it to whoever can
		return outcomeHandedOver, nil, nil
	}
	if err == nil && got.By == next.By && got.State == stateClosed {
		c.ls.Release()
		return outcome, result, nil
	}
	return c.follow(ctx, got, graw, err, refuse)
}

// judge checks the stored answer against the form and the expected
// values, then the tool's visibility with the role of the identity that
// answered: outcome confirmed means it may run.
func (c *confirmCall) judge(ctx context.Context, rec *confirmRecord) (Outcome, *ToolResult) {
	failed := ErrorResult("Not run: the confirmation of " + c.tool + " failed.")
	if rec.Failed {
		return OutcomeDeclined, failed
	}
	res, err := elicitation.ParseResult(rec.Answer)
	if err != nil {
		return OutcomeDeclined, failed
	}
	if res.Action == elicitation.Accept {
		if err := c.form.Validate(res.Content); err != nil {
			return OutcomeDeclined, failed
		}
	}
	if outcome, result := decide(res, c.form, c.expect, c.tool); result != nil {
		return outcome, result
	}
	// Re-check: the caller's credentials may have failed (the asker's
	// request ends then), or the caller lost the tool, while the human
	// thought.
	if c.x != nil && !c.x.st.callerHolds() {
		return OutcomeRevoked, nil
	}
	now := c.ident
	now.Role = rec.Role
	tool, ok, err := c.cs.catalog.findTool(toolCtx(ctx, now), now, c.tool)
	if err != nil || !ok {
		return OutcomeRevoked, nil
	}
	c.found = tool
	return OutcomeConfirmed, nil
}

// answerConfirm takes a client's answer to confirm id (2025): it is
// stored in the confirm's record once — only while pending, before the
// deadline, through the session and from the identity it was asked of —
// and the asker is woken. If the asker is gone (nobody holds the lease),
// this replica takes the confirm over and finishes the call. A refused
// answer is errNotWaiting (400) and reported to OnCall as a replay; when
// the store cannot be reached, its error (503: the client may send the
// answer again).
func (cs *confirms) answerConfirm(rq *request, id string, m *jsonrpc.Message) error {
	ctx := context.WithoutCancel(rq.context())
	rec, raw, err := cs.loadConfirm(ctx, id)
	if err != nil && !isAbsent(err) {
		return err
	}
	ok := err == nil && rec.State == statePending && rec.Session == rq.sess.ID && rec.Owner == rq.id.key() &&
		!time.Now().After(rec.deadline())
	if ok {
		next := rec
		next.State, next.Role, next.Failed, next.Answer = stateAnswered, rq.id.Role, m.Error != nil, nil
		if m.Error == nil && len(m.Result) <= maxKeptAnswer {
			next.Answer = m.Result
		} else {
			next.Failed = true // an error, or an answer too large to keep: not run
		}
		if raw, ok, err = cs.moveConfirm(ctx, id, raw, statePending, &next); err != nil {
			return err // the client may try again: a retry finds it answered, or pending
		}
		rec = next
		step(ctx, StepConfirmAnswered, id) // for Config.Interceptors (intercept.go)
	}
	if !ok {
		if cs.cfg.OnCall != nil {
			emitCall(cs.cfg, CallEvent{Tool: rec.Tool, Identity: rq.id, SessionID: rq.sess.ID, Outcome: OutcomeReplayRefused, ConfirmID: id})
		}
		return errNotWaiting
	}
	hint, _ := json.Marshal(reply{Role: rq.id.Role})
	cs.bus.publish(ctx, cs.macs.reply, replyChannel(rq.sess.ID, id), hint)
	if rec.Stream == "" {
		return nil // not resumable: only its asker can finish it
	}
	if ls, err := cs.takeLease(ctx, id); err == nil && ls != nil {
		// The asker is gone: finish the call here.
		cs.adopt(rq.context(), rq, rq.start, id, ls, rec, raw)
	}
	return nil
}

// adopt finishes a 2025 confirm whose asker is gone, on this replica,
// which took the confirm's lease over. The record is answered: the answer
// is judged against the recorded form, the tool's visibility is checked
// again with the answering identity's role, the tool runs at most once
// (the answered → running transition), and the response is appended to
// the call's event log, where the client's resumed GET (Last-Event-ID)
// receives it. from is the request that led here, whose identity asks,
// in its session; the call is reported to OnCall; ctx is the operation's
// context.
func (cs *confirms) adopt(ctx context.Context, from *request, start time.Time, id string, ls *record.Lease, rec confirmRecord, raw []byte) {
	r, ident, sess := from.r, from.id, from.sess
	rq := &request{h: from.h, r: r, start: start, id: ident, sess: sess, version: sess.ProtocolVersion, era: eraSessions}
	rq.info = &reqInfo{identity: ident, request: r, version: sess.ProtocolVersion, sessionID: sess.ID, caps: sess.Capabilities}
	rq.base = context.WithoutCancel(ctx)
	rq.ctx = context.WithValue(rq.base, ctxKey{}, rq.info)
	rq.st = cs.logOnly(sess.ID, rec.Stream)
	form, err := elicitation.Parse(rec.Form)
	if err != nil {
		ls.Release()
		return
	}
	ev := CallEvent{Tool: rec.Tool, Identity: ident, SessionID: sess.ID, ConfirmID: id, Arguments: rec.Args}
	ev.Audit = cs.recordAudit(ident, id, &rec)
	c := &confirmCall{cs: cs, id: id, tool: rec.Tool, ident: ident, form: form, expect: rec.Expect, ls: ls, rec: rec, raw: raw, audit: ev.Audit}
	outcome, result, run := c.follow(rq.ctx, rec, raw, nil, "")
	ev.Outcome = outcome
	ev.Audit.end(outcome)
	switch {
	case outcome == outcomeHandedOver:
		return
	case outcome == OutcomeRevoked:
		rq.fail(rec.ReqID, errUnknownTool(rec.Tool))
	case run != nil:
		x := &Exchange{h: rq.h, st: rq.st, sess: sess, version: rq.version, caps: sess.Capabilities, logLevel: LogLevel(sess.LogLevel), reqID: rec.ReqID}
		call := &ToolCall{Tool: c.found, Arguments: rec.Args, Identity: ident, SessionID: sess.ID, Exchange: x, task: rec.slot(c.found)}
		t := toolRun{rq: rq, m: &jsonrpc.Message{ID: rec.ReqID, Method: "tools/call"}, call: call, ev: ev, lease: run}
		t.proceed()
		ev = t.ev
		ev.Audit.taskOf(call)
	case result != nil:
		ev.IsError = result.IsError
		rq.sendResult(rec.ReqID, result)
	}
	interceptionFrom(rq.ctx).callEnded(&ev) // for Config.Interceptors (intercept.go)
	if cs.cfg.OnCall != nil {
		ev.Duration = time.Since(start)
		emitCall(cs.cfg, ev)
	}
}

// logOnly is a stream whose client is not connected here: what is sent
// goes to the event log of stream, for the client's resume.
func (cs *confirms) logOnly(sid, streamID string) *stream {
	return &stream{id: streamID, sse: true, gone: true, log: cs.streams.eventLog(sid)}
}

// closeLapsedPending closes as timed out a pending confirm past its
// deadline whose lease it could take; it returns a nil result when it did
// not, else the lease, which the caller releases once the result is sent.
func (cs *confirms) closeLapsedPending(ctx context.Context, id string, raw []byte, rec confirmRecord) (Outcome, *ToolResult, *record.Lease) {
	if time.Now().Before(rec.deadline()) {
		return "", nil, nil
	}
	ls, err := cs.takeLease(ctx, id)
	if err != nil || ls == nil {
		return "", nil, nil
	}
	next := rec
	next.State, next.By, next.Outcome = stateClosed, ls.Token(), OutcomeTimedOut
	if _, ok, _ := cs.moveConfirm(ctx, id, raw, statePending, &next); !ok {
		ls.Release()
		return "", nil, nil
	}
	return OutcomeTimedOut, ErrorResult("Not run: the confirmation of " + rec.Tool + " timed out."), ls
}

// markLapsedRunning records as unknown the outcome of a running confirmed
// call whose runner's lease lapsed; it returns a nil result when it did
// not (the runner is alive, or the store cannot tell now).
func (cs *confirms) markLapsedRunning(ctx context.Context, id string, raw []byte, rec confirmRecord) (Outcome, *ToolResult) {
	if !cs.leaseLapsed(ctx, id) {
		return "", nil
	}
	next := rec
	next.State = stateUnknown
	if _, ok, _ := cs.moveConfirm(ctx, id, raw, stateRunning, &next); !ok {
		return "", nil
	}
	return OutcomeUnknown, ErrorResult("The outcome of " + rec.Tool + " is unknown: the server running it stopped. It will not run again; check whether it took effect before retrying.")
}

// watchConfirm looks after the confirm of a resumed stream whose asker or
// runner is gone (nobody holds its lease). A confirm still pending after
// its deadline is closed as timed out; an answered one is taken over and
// finished here (see adopt); a running one is recorded as unknown, and the
// client is told that nothing will run again. Whatever it decides goes to
// the stream's event log, where the resumed stream reads it. rq is the
// resuming GET.
func (cs *confirms) watchConfirm(rq *request, streamID string) {
	ctx, sid := context.WithoutCancel(rq.context()), rq.sess.ID
	id, rec, raw, ok := cs.confirmOfStream(ctx, sid, streamID)
	if !ok {
		return
	}
	ev := CallEvent{Tool: rec.Tool, Identity: rq.id, SessionID: sid, ConfirmID: id, Arguments: rec.Args, IsError: true}
	var msg *ToolResult
	switch rec.State {
	case stateAnswered:
		if ls, err := cs.takeLease(ctx, id); err == nil && ls != nil {
			cs.adopt(ctx, rq, time.Now(), id, ls, rec, raw)
		}
		return
	case statePending:
		if rec.Approval != "" && cs.cfg.Approvals != nil {
			cs.approvals.adoptApproval(rq, id, rec, raw) // see approve_push.go
			return
		}
		var ls *record.Lease
		ev.Outcome, msg, ls = cs.closeLapsedPending(ctx, id, raw, rec)
		if ls != nil {
			defer ls.Release()
		}
	case stateRunning:
		ev.Outcome, msg = cs.markLapsedRunning(ctx, id, raw, rec)
	}
	if msg == nil {
		return
	}
	ev.Audit = cs.recordAudit(rq.id, id, &rec)
	if rec.State == stateRunning {
		// It ran (or began to): the decision the record says was made.
		cs.ranUnder(ctx, ev.Audit, &rec)
	}
	ev.Audit.end(ev.Outcome)
	out := &request{h: rq.h, r: rq.r, st: cs.logOnly(sid, streamID), era: eraSessions}
	out.sendResult(rec.ReqID, msg)
	if cs.cfg.OnCall != nil {
		emitCall(cs.cfg, ev)
	}
}

// recordAudit starts the Audit of the decision record rec (confirm id)
// waits for, on a replica that ends it for an asker that is gone, from
// the identity ident of the request that led here (the record's owner:
// an answer or a resume comes from its tenant and subject only): the
// question as the record holds it, the digest of the arguments that run.
func (cs *confirms) recordAudit(ident Identity, id string, rec *confirmRecord) *Audit {
	kind := auditConfirm
	if rec.Approval != "" {
		kind = auditApprove
	}
	a := newAudit(cs.cfg, kind, ident, rec.Tool, rec.Session, rec.Args)
	if a == nil {
		return nil
	}
	if len(rec.Args) == 0 {
		a.ArgsDigest = rec.Digest
	}
	if rec.Approval != "" {
		a.ConfirmID, a.ApprovalID = id, rec.Approval
		return a
	}
	a.asked(rec.Msg, rec.Form, rec.Asked, rec.ARole, id)
	return a
}

// ranUnder records in a who decided the call of running record rec,
// which left pending only by a decision to run: the client's answer
// stored in it, or its approval's page (read again; claimed only as the
// approval store says).
func (cs *confirms) ranUnder(ctx context.Context, a *Audit, rec *confirmRecord) {
	if a == nil {
		return
	}
	if rec.Approval == "" {
		a.byClient(Identity{Tenant: a.Tenant, Subject: a.Subject, Role: rec.Role})
		if rec.Decided > 0 {
			a.Decided = time.UnixMilli(rec.Decided).UTC()
		}
		return
	}
	if cs.cfg.Approvals == nil {
		return
	}
	if got, err := cs.cfg.Approvals.Get(ctx, rec.Approval); err == nil {
		a.approval(got)
		a.decidedBy(got, false)
	}
}

// confirmOfStream loads the confirm the stream streamID of session sid
// was asked, if any and if its record names that session and stream.
func (cs *confirms) confirmOfStream(ctx context.Context, sid, streamID string) (id string, rec confirmRecord, raw []byte, ok bool) {
	b, err := cs.cfg.Store.Load(ctx, confirmOfKey(sid, streamID))
	if err != nil || !isConfirmID(string(b)) {
		return "", rec, nil, false
	}
	id = string(b)
	rec, raw, err = cs.loadConfirm(ctx, id)
	if err != nil || rec.Session != sid || rec.Stream != streamID {
		return "", rec, nil, false
	}
	return id, rec, raw, true
}
