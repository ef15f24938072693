package mcphandler

import (
	"context"
	"errors"
	"time"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/session"
)

// An Approve decision is carried out here, the same way on every era up
// to the point where the link travels to the client (approvals.decide):
//
//	Begin ──► approved already? ──► Consume ──► run (a repeated call)
//	   └────► pending ──► push and wait (2025-11-25, url mode), an input
//	                      request in rounds (2026-07-28, url mode), or a
//	                      tool result naming the page, to repeat the call
//	                      once approved (everything else)
//
// The approval is bound to the caller, the tool and the canonical
// arguments (package approval), and is consumed once: of any number of
// identical calls, on any replicas, one runs per approval.

// checkApprovals panics on an Approvals store whose approvals would
// outlive the confirm records that wait for them.
func checkApprovals(cfg *Config) {
	if cfg.Approvals != nil && cfg.Approvals.TTL() > cfg.ConfirmTimeout {
		panic("mcphandler: Config.Approvals has a TTL longer than Config.ConfirmTimeout: the records of the calls waiting for approvals would expire first")
	}
}

// decide carries out an Approve decision, as the request can carry it: a
// 2026-07-28 client that declared URL mode gets an input request carrying
// the approval's URL (rounds, approve_rounds.go); a 2025-11-25 client that
// declared URL mode, on a stream, is pushed the elicitation and the call
// waits (push, approve_push.go); any other client (2024-11-05 has no URL
// mode) gets the tool result naming the page, and repeats the call once
// it is approved (approveByRepeat). It returns true when the tool is to
// run, with t.lease or t.round set.
func (ap *approvals) decide(t *toolRun, d Decision) bool {
	call := t.call
	if ap.cfg.Approvals == nil {
		ap.logger().Error("mcphandler: BeforeCall decided Approve, but Config.Approvals is nil; not run", "tool", call.Tool.Name)
		t.ev.Outcome, t.ev.IsError = OutcomeError, true
		t.ev.Audit.end(OutcomeError)
		t.rq.sendResult(t.m.ID, ErrorResult("Not run: "+call.Tool.Name+" needs an approval, and this server cannot ask for one."))
		return false
	}
	x := call.Exchange
	if x.mr != nil {
		if !x.caps.Has(session.CapElicitationURL) {
			return ap.approveByRepeat(t, d)
		}
		return ap.approveRounds(t, d)
	}
	urlMode := x.version >= Version20251125 && x.caps.Has(session.CapElicitationURL)
	if !urlMode || x.sess == nil || x.st.noSSE || x.st.streamID() == "" {
		return ap.approveByRepeat(t, d)
	}
	a, run, ok := ap.openApproval(t, d)
	if !ok || run {
		return run
	}
	return ap.approvePush(t, d, a)
}

// approvalAsker is the identity an approval is bound to.
func approvalAsker(id Identity) approval.Identity {
	return approval.Identity{Subject: id.Subject, Tenant: id.Tenant, Role: id.Role}
}

// approvalHints are the hints of tool the approval page shows: its
// Annotations, except those of another server the host does not trust
// (Origin set without TrustHints), which the page must not present as
// facts; it then shows the MCP defaults (destructive, open world), as
// Tool.Destructive reads them.
func approvalHints(tool *Tool) *approval.Annotations {
	a := tool.Annotations
	if a == nil || tool.Origin != nil && !tool.Origin.TrustHints {
		return nil
	}
	return &approval.Annotations{ReadOnly: a.ReadOnlyHint, Destructive: a.DestructiveHint, Idempotent: a.IdempotentHint, OpenWorld: a.OpenWorldHint}
}

// openApproval finds or starts the approval of call. If it is approved
// already (the call is repeated after its approval), it is consumed here
// and run is true: the tool runs. Otherwise the approval returned is
// pending. It answers the request and returns ok false when the approval
// cannot be started.
func (ap *approvals) openApproval(t *toolRun, d Decision) (a *approval.Approval, run, ok bool) {
	rq, m, call, ev := t.rq, t.m, t.call, &t.ev
	s := ap.cfg.Approvals
	req := approval.Request{Asker: approvalAsker(call.Identity), Tool: call.Tool.Name, Arguments: call.Arguments, Message: d.Message, Policy: d.Policy,
		Annotations: approvalHints(&call.Tool)}
	for range 3 {
		var err error
		a, _, err = s.Begin(context.WithoutCancel(rq.ctx), req)
		if err != nil {
			ap.approvalFailed(rq, m, call, err, ev)
			return nil, false, false
		}
		ev.ConfirmID = a.ID
		ev.Audit.approval(a)
		if a.State != approval.Approved {
			return a, false, true
		}
		_, err = s.Consume(context.WithoutCancel(rq.ctx), a.ID, req.Asker, call.Tool.Name, call.Arguments)
		if err == nil {
			ev.Outcome = OutcomeConfirmed
			ev.Audit.decidedBy(a, false) // approved, as read from the store
			ev.Audit.end(OutcomeConfirmed)
			by := a.DecidedBy
			call.approver = &by
			return a, true, true
		}
		if !errors.Is(err, approval.ErrUsed) && !errors.Is(err, approval.ErrNotFound) {
			ap.approvalFailed(rq, m, call, err, ev)
			return nil, false, false
		}
		// An identical call used it first (or what Begin read was a copy
		// written back, or it just ended): this one asks again.
	}
	ap.approvalFailed(rq, m, call, errors.New("mcphandler: approvals keep being used by identical calls"), ev)
	return nil, false, false
}

// approvalFailed answers a call whose approval could not be started or
// used: too large to bind (a tool result), too many pending for the
// caller or its tenant (-32000 saying how many and until when), or a
// store failure (503).
func (ap *approvals) approvalFailed(rq *request, m *jsonrpc.Message, call *ToolCall, err error, ev *CallEvent) {
	ev.Outcome = OutcomeError
	defer func() { ev.Audit.end(ev.Outcome) }()
	switch {
	case errors.Is(err, approval.ErrTooManyPending), errors.Is(err, approval.ErrTooManyPendingInTenant):
		ev.Outcome = OutcomeDenied
		rq.fail(m.ID, rpcError(CodeRateLimited, err.Error()))
	case errors.Is(err, approval.ErrTooLarge):
		ev.IsError = true
		rq.sendResult(m.ID, ErrorResult("Not run: the arguments of "+call.Tool.Name+" are too large for an approval."))
	case errors.Is(err, session.ErrUnavailable):
		rq.storeFailed(m, err)
	default:
		ap.logger().Error("mcphandler: approval", "tool", call.Tool.Name, "err", err)
		ev.IsError = true
		rq.sendResult(m.ID, ErrorResult("Not run: the approval of "+call.Tool.Name+" failed."))
	}
}

// approveByRepeat carries an approval's link to a client that cannot wait
// for it: the call ends now, and the same call repeated after the approval
// runs (see openApproval). It gets a tool result with isError whose text
// names the page: the model or the person reads it, and the result
// reaches every client, whatever it declared. (URLElicitationRequiredError,
// -32042, which MCP 2025-11-25 allows instead, is only understood by a
// client that declared URL mode, and such a client is asked in-band.)
func (ap *approvals) approveByRepeat(t *toolRun, d Decision) bool {
	rq, m, call, ev := t.rq, t.m, t.call, &t.ev
	a, run, ok := ap.openApproval(t, d)
	if !ok || run {
		return run
	}
	ev.Outcome, ev.IsError = OutcomeFallback, true
	ev.Audit = nil // the approval is pending: the repeated call that finds it decided has the record
	rq.sendResult(m.ID, ErrorResult("Not run: "+call.Tool.Name+" needs an approval. Ask a person who may approve it to open "+
		a.URL+" and decide before "+a.Expires.UTC().Format(time.RFC3339)+"; once approved, call "+call.Tool.Name+
		" again with the same arguments: it runs once."))
	return false
}

// approvalMessage is the message of the URL elicitation of a call.
func approvalMessage(call *ToolCall, d Decision) string {
	msg := call.Tool.Name + " needs an approval: open the page to approve or decline it, or send the link to someone who may."
	if d.Message != "" {
		msg = safeText(d.Message, 1000) + " (" + msg + ")"
	}
	return msg
}

// approvalOutcome is the outcome and the result of an approval that was
// decided without an approval, or nil for an approved one.
func approvalOutcome(a *approval.Approval, tool string) (Outcome, *ToolResult) {
	switch a.State {
	case approval.Approved:
		return OutcomeConfirmed, nil
	case approval.Declined:
		return OutcomeDeclined, ErrorResult("Not run: " + tool + " was declined on its approval page.")
	case approval.Expired:
		return OutcomeTimedOut, ErrorResult("Not run: nobody approved " + tool + " before its approval expired.")
	case approval.Withdrawn:
		return OutcomeCancelled, ErrorResult("Not run: the approval of " + tool + " was withdrawn.")
	}
	return OutcomeReplayRefused, ErrorResult("Not run: the approval of " + tool + " was already used.")
}
