package mcphandler

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/session"
)

// confirmField is the boolean the human ticks in the default confirm form.
const confirmField = "confirm"

// confirmPrefix marks the request ids of confirm elicitations, whose
// answers are claimed atomically in the store.
const confirmPrefix = "mcphc-"

func isConfirmID(id string) bool { return strings.HasPrefix(id, confirmPrefix) }

func confirmKey(id string) string { return "confirm/" + id }

// confirmRecord is what the store holds for a pending confirm: it binds the
// answer to the session and identity that were asked, and to the tool and
// arguments that were shown. State moves pending → answered (by the one
// answer accepted) or pending → closed (when the asker gave up).
type confirmRecord struct {
	State   string `json:"st"`
	Session string `json:"sid"`
	Owner   string `json:"own"`
	Tool    string `json:"tool"`
	Digest  string `json:"args"`
	// What another replica needs to finish the call when the replica that
	// asked is gone (see takeOver): the call's stream, its request id, its
	// arguments and the form with the values it expects.
	Stream string          `json:"stream,omitempty"`
	ReqID  json.RawMessage `json:"req,omitempty"`
	Args   json.RawMessage `json:"argv,omitempty"`
	Form   json.RawMessage `json:"form,omitempty"`
	Expect map[string]any  `json:"expect,omitempty"`
}

func (r confirmRecord) encode() []byte { b, _ := json.Marshal(r); return b }

func argsDigest(args []byte) string {
	sum := sha256.Sum256(args)
	return hex.EncodeToString(sum[:])
}

// ConfirmDestructive returns a BeforeCall policy that asks a human to
// confirm every tool whose annotations mark it destructive (see
// [Tool.Destructive]) and defers everything else to next (Allow when nil).
// A Deny or Confirm from next wins over the policy's own confirm.
func ConfirmDestructive(next BeforeCallFunc) BeforeCallFunc {
	return func(ctx context.Context, call *ToolCall) (Decision, error) {
		d := Allow()
		if next != nil {
			var err error
			if d, err = next(ctx, call); err != nil {
				return d, err
			}
		}
		if d.Kind == DecisionAllow && call.Tool.Destructive() {
			return Confirm(confirmMessage(call)), nil
		}
		return d, nil
	}
}

// confirm asks the human to confirm call. It returns the outcome and, when
// the tool must not run, the result to send (nil when it may run).
//
// The question is an elicitation with an unguessable id whose record in
// the store binds the answer to this session, identity, tool and
// arguments; deliverResponse accepts one answer only. When the answer
// comes, the tool's visibility is checked again with the answering
// identity's role.
func (h *Handler) confirm(ctx context.Context, call *ToolCall, d Decision, ev *CallEvent) (Outcome, *ToolResult) {
	x := call.Exchange
	canAsk := x.sess != nil && !x.st.noSSE && x.caps.Has(session.CapElicitationForm)
	if !canAsk {
		return OutcomeFallback, fallbackResult(call, d)
	}
	id := confirmPrefix + rand.Text()
	ev.ConfirmID = id
	form, expect, msg := confirmQuestion(call, d)
	rec := confirmRecord{State: "pending", Session: x.sess.ID, Owner: call.Identity.key(), Tool: call.Tool.Name, Digest: argsDigest(call.Arguments),
		Stream: x.st.streamID(), ReqID: x.reqID, Args: call.Arguments, Expect: expect}
	rec.Form, _ = json.Marshal(form)
	pending := rec.encode()
	ttl := h.cfg.ConfirmTimeout + time.Minute
	if ok, err := h.cfg.Store.PutIfAbsent(ctx, confirmKey(id), pending, ttl); err != nil || !ok {
		h.logger().Error("mcphandler: storing a confirm", "err", err)
		return OutcomeError, ErrorResult("Not run: the confirmation could not be recorded.")
	}
	if rec.Stream != "" {
		// A resumed stream finds its confirm here (see watchRunner).
		h.cfg.Store.PutIfAbsent(ctx, confirmOfKey(x.sess.ID, rec.Stream), []byte(id), ttl+h.cfg.ResumeWindow)
	}
	// Whatever happens next, a pending confirm can no longer be answered.
	defer func() {
		rec.State = "closed"
		h.cfg.Store.CompareAndSwap(context.WithoutCancel(ctx), confirmKey(id), pending, rec.encode(), ttl)
	}()

	actx, cancel := context.WithTimeout(ctx, h.cfg.ConfirmTimeout)
	defer cancel()
	res, role, err := x.elicit(actx, id, ElicitRequest{Message: msg, Schema: form})
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
	if outcome, result := decide(res, form, expect, call.Tool.Name); result != nil {
		return outcome, result
	}
	// Re-check: the caller may have lost the tool while the human thought.
	now := call.Identity
	if x.mr == nil {
		now.Role = role // 2025: the answer came in another request
	}
	if _, ok, err := h.findTool(ctx, now, call.Tool.Name); err != nil || !ok {
		return OutcomeRevoked, nil
	}
	return OutcomeConfirmed, nil
}

// confirmQuestion is what a confirm asks: the decision's form and expected
// values (by default a required "confirm" box that must be ticked), and
// its message (by default the tool and its arguments), made safe to show.
func confirmQuestion(call *ToolCall, d Decision) (*elicitation.Schema, map[string]any, string) {
	form, expect := d.Form, d.Expect
	if form == nil {
		form, expect = elicitation.Confirm(confirmField, "Confirm"), map[string]any{confirmField: true}
	}
	msg := d.Message
	if msg == "" {
		msg = confirmMessage(call)
	}
	return form, expect, safeText(msg, 1000)
}

// decide turns the human's answer into an outcome; result is nil when the
// tool may run (accepted, every expected value present).
func decide(res elicitation.Result, form *elicitation.Schema, expect map[string]any, tool string) (Outcome, *ToolResult) {
	switch res.Action {
	case elicitation.Accept:
		for field, want := range expect {
			if !res.Confirmed(form, field, want) {
				return OutcomeDeclined, ErrorResult("Not run: the user did not confirm " + tool + ".")
			}
		}
		return OutcomeConfirmed, nil
	case elicitation.Decline:
		return OutcomeDeclined, ErrorResult("Not run: the user declined " + tool + ".")
	default:
		return OutcomeCancelled, ErrorResult("Not run: the user dismissed the confirmation of " + tool + ".")
	}
}

// claimAnswer accepts the answer to confirm id once: only while it is
// pending, and only from the session and identity it was asked of. A
// refused answer is reported to OnCall as a replay.
func (h *Handler) claimAnswer(rq *request, id string) (confirmRecord, []byte, bool) {
	ctx := rq.r.Context()
	var rec confirmRecord
	old, err := h.cfg.Store.Load(ctx, confirmKey(id))
	if err != nil || json.Unmarshal(old, &rec) != nil {
		return rec, nil, false
	}
	if rec.State == "pending" && rec.Session == rq.sess.ID && rec.Owner == rq.id.key() {
		rec.State = "answered"
		answered := rec.encode()
		if ok, err := h.cfg.Store.CompareAndSwap(ctx, confirmKey(id), old, answered, h.cfg.ConfirmTimeout+time.Minute); err == nil && ok {
			return rec, answered, true
		}
	}
	if h.cfg.OnCall != nil {
		h.emit(CallEvent{Tool: rec.Tool, Identity: rq.id, SessionID: rq.sess.ID, Outcome: OutcomeReplayRefused, ConfirmID: id})
	}
	return rec, nil, false
}

// takeOver finishes a 2025 confirmed call whose asking replica is gone: the
// answer was claimed, but nobody waits for it. This replica checks the
// answer against the recorded form, checks the tool's visibility again with
// the answering identity, runs the tool at most once (the claim made this
// replica its only runner), and appends the result to the call's event log,
// where the client's resumed GET (Last-Event-ID) receives it.
func (h *Handler) takeOver(rq *request, id string, rec confirmRecord, answered []byte, m *jsonrpc.Message) {
	ctx := context.WithoutCancel(rq.r.Context())
	rq.info = &reqInfo{identity: rq.id, request: rq.r, version: rq.sess.ProtocolVersion, sessionID: rq.sess.ID}
	rq.ctx = context.WithValue(ctx, ctxKey{}, rq.info)
	rq.version = rq.sess.ProtocolVersion
	rq.st = &stream{id: rec.Stream, sse: true, gone: true, log: &eventLog{store: h.cfg.Store, sid: rq.sess.ID, ttl: h.cfg.ResumeWindow}}
	ev := CallEvent{Tool: rec.Tool, Identity: rq.id, SessionID: rq.sess.ID, ConfirmID: id, Arguments: rec.Args}
	defer func() {
		if h.cfg.OnCall != nil {
			ev.Duration = time.Since(rq.start)
			h.emit(ev)
		}
		rec.State = "done"
		h.cfg.Store.CompareAndSwap(ctx, confirmKey(id), answered, rec.encode(), h.cfg.ConfirmTimeout+time.Minute)
	}()
	form, err := elicitation.Parse(rec.Form)
	var res elicitation.Result
	if err == nil && m.Error == nil {
		if res, err = elicitation.ParseResult(m.Result); err == nil && res.Action == elicitation.Accept {
			err = form.Validate(res.Content)
		}
	}
	if err != nil || m.Error != nil {
		ev.Outcome = OutcomeDeclined
		rq.sendResult(rec.ReqID, ErrorResult("Not run: the confirmation of "+rec.Tool+" failed."))
		return
	}
	if outcome, result := decide(res, form, rec.Expect, rec.Tool); result != nil {
		ev.Outcome, ev.IsError = outcome, true
		rq.sendResult(rec.ReqID, result)
		return
	}
	tool, ok, err := h.findTool(rq.ctx, rq.id, rec.Tool)
	if err != nil || !ok {
		ev.Outcome = OutcomeRevoked
		rq.fail(rec.ReqID, errUnknownTool(rec.Tool))
		return
	}
	x := &Exchange{h: h, st: rq.st, sess: rq.sess, version: rq.version, caps: rq.sess.Capabilities, logLevel: LogLevel(rq.sess.LogLevel)}
	call := &ToolCall{Tool: tool, Arguments: rec.Args, Identity: rq.id, SessionID: rq.sess.ID, Exchange: x}
	ev.Outcome = OutcomeConfirmed
	release := h.holdRun(ctx, id)
	result, _ := h.run(rq.ctx, call, &ev)
	rq.sendResult(rec.ReqID, result)
	release()
}

// runLease is how long a replica's claim to be running a confirmed call
// lasts without renewal; it renews it a few times per period while the
// tool runs.
const runLease = 5 * time.Second

func confirmOfKey(sid, stream string) string { return "confirm-of/" + sid + "/" + stream }
func leaseKey(id string) string              { return "lease/" + id }

// holdRun marks the answered confirm id as running and holds a lease on it
// while the tool runs, so that if this replica dies mid-run a resumed
// stream can tell the client that the outcome is unknown (watchRunner)
// instead of anything running again. release marks it done.
func (h *Handler) holdRun(ctx context.Context, id string) (release func()) {
	ctx = context.WithoutCancel(ctx)
	st := h.cfg.Store
	old, err := st.Load(ctx, confirmKey(id))
	var rec confirmRecord
	if err != nil || json.Unmarshal(old, &rec) != nil || rec.State != "answered" {
		return func() {}
	}
	ttl := h.cfg.ConfirmTimeout + time.Minute
	rec.State = "running"
	running := rec.encode()
	if ok, err := st.CompareAndSwap(ctx, confirmKey(id), old, running, ttl); err != nil || !ok {
		return func() {}
	}
	st.PutIfAbsent(ctx, leaseKey(id), []byte("1"), runLease)
	var mu sync.Mutex
	var timer *time.Timer
	stopped := false
	var renew func()
	renew = func() {
		st.CompareAndSwap(ctx, leaseKey(id), []byte("1"), []byte("1"), runLease)
		mu.Lock()
		if !stopped {
			timer = time.AfterFunc(runLease/3, renew)
		}
		mu.Unlock()
	}
	mu.Lock()
	timer = time.AfterFunc(runLease/3, renew)
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		timer.Stop()
		mu.Unlock()
		rec.State = "done"
		st.CompareAndSwap(ctx, confirmKey(id), running, rec.encode(), ttl)
	}
}

// watchRunner reports, for a resumed stream, whether the confirmed call
// it carries was being run by a replica that is gone (its lease expired
// while the confirm was running). It then records the outcome as unknown,
// once, and returns the final message to send.
func (h *Handler) watchRunner(ctx context.Context, sid, stream string) []byte {
	st := h.cfg.Store
	id, err := st.Load(ctx, confirmOfKey(sid, stream))
	if err != nil {
		return nil
	}
	old, err := st.Load(ctx, confirmKey(string(id)))
	var rec confirmRecord
	if err != nil || json.Unmarshal(old, &rec) != nil || rec.State != "running" {
		return nil
	}
	if _, err := st.Load(ctx, leaseKey(string(id))); !errors.Is(err, session.ErrNotFound) {
		return nil // alive, or the store cannot tell now
	}
	rec.State = "unknown"
	if ok, err := st.CompareAndSwap(ctx, confirmKey(string(id)), old, rec.encode(), h.cfg.ConfirmTimeout+time.Minute); err != nil || !ok {
		return nil
	}
	r := ErrorResult("The outcome of " + rec.Tool + " is unknown: the server running it stopped. It will not run again; check whether it took effect before retrying.")
	b := jsonrpc.AppendResult(nil, rec.ReqID, must(r.appendJSON(nil)))
	return b
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

// safeText drops control and format characters and bounds s to max runes.
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

// nonceKey names the store record of a 2026-07-28 confirm's outcome.
func nonceKey(nonce string) string { return "nonce/" + nonce }

// decided is the store record of a 2026-07-28 confirm once answered: the
// outcome, and the result that was sent (absent while the tool runs).
type decided struct {
	Outcome Outcome         `json:"o"`
	Result  json.RawMessage `json:"r,omitempty"`
}

// fallbackResult is what a call that needs a confirm gets when the client
// cannot be asked.
func fallbackResult(call *ToolCall, d Decision) *ToolResult {
	if d.Fallback != nil {
		return d.Fallback
	}
	return ErrorResult("Not run: " + call.Tool.Name + " needs a human confirmation, and this client cannot ask for one.")
}

// confirmModern runs the 2026-07-28 confirm of call. The first round asks
// (input_required) with a fresh nonce inside the sealed requestState, which
// binds it to the caller, the tool and the arguments. The retry's answer is
// decided once: the nonce is claimed in the store (PutIfAbsent), the tool
// runs, and its result is recorded, so a client that retries the same
// state (having lost the response) gets the recorded result and nothing
// runs twice — on any replica that shares the store.
func (h *Handler) confirmModern(rq *request, m *jsonrpc.Message, call *ToolCall, d Decision, ev *CallEvent) {
	x := call.Exchange
	if !x.caps.Has(session.CapElicitationForm) {
		r := fallbackResult(call, d)
		ev.Outcome, ev.IsError = OutcomeFallback, r.IsError
		rq.sendResult(m.ID, r)
		return
	}
	r := x.mr
	if r.state.Nonce == "" {
		r.state.Nonce = rand.Text()
	}
	key := nonceKey(r.state.Nonce)
	ev.ConfirmID = r.state.Nonce
	if rec, err := h.cfg.Store.Load(rq.ctx, key); err == nil {
		h.replayDecision(rq, m, rec, ev)
		return
	}
	form, expect, msg := confirmQuestion(call, d)
	res, _, err := x.elicit(rq.ctx, confirmInputKey, ElicitRequest{Message: msg, Schema: form})
	switch {
	case errors.Is(err, ErrInputRequired):
		ev.Outcome = OutcomeInputRequired
		rq.inputRequired(m.ID, r)
		return
	case err != nil:
		ev.Outcome = OutcomeError
		rq.fail(m.ID, invalidParams("Invalid params: the confirm answer does not match its form"))
		return
	}
	outcome, result := decide(res, form, expect, call.Tool.Name)
	ttl := h.cfg.ConfirmTimeout + time.Minute
	claim := decided{Outcome: outcome}
	if result != nil {
		claim.Result, _ = result.appendJSON(nil)
	} else {
		claim.Outcome = "running"
	}
	b, _ := json.Marshal(claim)
	ok, err := h.cfg.Store.PutIfAbsent(rq.ctx, key, b, ttl)
	if err != nil {
		ev.Outcome = OutcomeError
		h.storeFailed(rq, m, err)
		return
	}
	if !ok { // another retry decided first
		if rec, err := h.cfg.Store.Load(rq.ctx, key); err == nil {
			h.replayDecision(rq, m, rec, ev)
			return
		}
		ev.Outcome = OutcomeReplayRefused
		rq.sendResult(m.ID, ErrorResult("Not run: this confirmation was already used."))
		return
	}
	ev.Outcome = outcome
	if result != nil {
		ev.IsError = true
		rq.sendResult(m.ID, result)
		return
	}
	result, _ = h.run(rq.ctx, call, ev)
	done, _ := json.Marshal(decided{Outcome: OutcomeConfirmed, Result: must(result.appendJSON(nil))})
	if ok, err := h.cfg.Store.CompareAndSwap(context.WithoutCancel(rq.ctx), key, b, done, ttl); err != nil || !ok {
		h.logger().Error("mcphandler: recording a confirmed call's outcome", "err", err)
	}
	rq.sendResult(m.ID, result)
}

func must(b []byte, err error) []byte {
	if err != nil {
		return nil
	}
	return b
}

// replayDecision answers a retry of a confirm that was already decided:
// with the recorded result, or — while the tool runs or when the replica
// that ran it died before recording — with an error that says the outcome
// is unknown. Nothing runs again.
func (h *Handler) replayDecision(rq *request, m *jsonrpc.Message, rec []byte, ev *CallEvent) {
	var dcd decided
	if json.Unmarshal(rec, &dcd) != nil || dcd.Outcome == "running" || len(dcd.Result) == 0 {
		ev.Outcome, ev.IsError = OutcomeReplayRefused, true
		rq.sendResult(m.ID, ErrorResult("Not run again: this confirmed call is still running, or its outcome is unknown."))
		return
	}
	ev.Outcome = OutcomeReplayed
	rq.reply(m.ID, dcd.Result)
}
