package mcphandler

import (
	"encoding/json"
	"time"

	"github.com/mcphandler/mcphandler/approval"
)

// Audit is the record of one decided tools/call, for the host's audit
// log: who asked, what was shown, who decided and how, when, the digest
// of the arguments that ran, how the decision ended, and the ids that
// link its steps across replicas. [CallEvent.Audit] carries it.
//
// Which events carry one: the event of every call [BeforeCallFunc]
// allowed or denied (By "policy"); and for a Confirm or an Approve, the
// event of the request that ended the decision — the call ran under it,
// or will never run under it (declined, cancelled, timed out, expired,
// the client gone, the caller's credentials revoked, refused, a
// fallback, an error). On 2025 sessions that is the call's own event, or
// the event of the replica that took the call over from an asker that
// died; on 2026-07-28 the retry that carried the answer or waited for
// the approval. Events carry nil when nothing was decided: no
// BeforeCall, or a BeforeCall that failed; a step that leaves the
// decision open (a round that asks, input_required; a call told to be
// repeated once its approval is decided; a 2026-07-28 retry that ends
// with the approval still pending); a step after it (a later round of a
// confirmed call, a replayed retry); an answer refused or replayed. So
// each decision has one record, on whichever replica ended it. An
// approval decided on its page while no call waits for it (a client that
// repeats calls) is recorded on the repeated call's event once that call
// finds it approved; a decline or an expiry then reaches no call's
// event (package approval's Store has it).
//
// Encoded with encoding/json, a record is one JSON object whose member
// names (the struct tags) are stable: every member is always present
// ("" or null when it does not apply), new members may be added, none
// is renamed or removed, and the values of Decision and By are only ever
// added to. Times are UTC to the millisecond.
//
// Every string is bounded by what the library bounds already: the
// identities by the host's Authenticate (package auth: auth.MaxNameBytes
// each) and, for an approver, by approval.MaxFieldBytes; Tool by the
// 128 bytes of a served tool's name; Message by the confirm's message
// (a host's message cut at 1000 runes, the default one at 2000 runes
// plus the tool's title cut at 80) or by the approval's message
// (approval.Config.MaxMessageBytes, 4 KiB by default); Form is the
// host's Decision.Form or the default one, never the client's;
// Arguments by approval.Config.MaxArgumentBytes (64 KiB by default);
// URL by approval.Config.URL plus an approval id; the ids by their
// formats. Nothing in it is the client's text but the arguments, as
// bounded.
//
// The record and everything it references belong to the event: they
// are not changed after OnCall is called, and stay valid after it
// returns.
type Audit struct {
	// Decision is what BeforeCall decided: "allow", "deny", "confirm"
	// or "approve".
	Decision string `json:"decision"`
	// Tool is the name of the tool called.
	Tool string `json:"tool"`
	// Tenant, Subject and Role are the caller's, when the question was
	// asked (for a policy decision, when BeforeCall decided).
	Tenant  string `json:"tenant"`
	Subject string `json:"subject"`
	Role    string `json:"role"`

	// Message is the text shown: a confirm's message exactly as sent to
	// the client in its elicitation/create (on 2025 sessions, as the
	// confirm's record holds it; on 2026-07-28, as round 1 asked it);
	// an approval's message as its page shows it (approval.Approval's
	// Message, "" for none). "" for a policy decision, and for a confirm
	// that was never asked (a fallback, an error before asking).
	Message string `json:"message"`
	// Form is a confirm's requested schema exactly as sent to the
	// client (the requestedSchema member's bytes), null otherwise.
	Form json.RawMessage `json:"form"`
	// Arguments are, for an approval, the canonical arguments its page
	// shows (and the call runs with); null otherwise (a confirm's default
	// message shows them; CallEvent.Arguments carries every call's).
	Arguments json.RawMessage `json:"arguments"`
	// URL is an approval's page; "" otherwise.
	URL string `json:"url"`

	// By is who decided: "client", the client's answer to a confirm's
	// question (accept, decline, cancel, or an error answer), or its
	// refusal to open an approval's page, which withdrew the approval;
	// "page", a person signed in on the approval page (approved or
	// declined); "policy", BeforeCall itself (Decision "allow" or
	// "deny"); "" when nobody did (timed out, expired, the client gone,
	// the call cancelled or revoked before an answer, a fallback, a
	// failure).
	By string `json:"by"`
	// DeciderTenant, DeciderSubject and DeciderRole are who decided: for
	// "client", the caller (the tenant and subject an answer is bound
	// to) with the role it answered with; for "page", the approver
	// signed in on the page; "" otherwise.
	DeciderTenant  string `json:"deciderTenant"`
	DeciderSubject string `json:"deciderSubject"`
	DeciderRole    string `json:"deciderRole"`

	// Asked is when the question was asked: a confirm's record made, an
	// approval begun; for a policy decision, or a confirm never asked,
	// when BeforeCall decided. Decided is when the decision was taken:
	// an answer acted on, the approval's decision on its page (for an
	// expired one, its expiry), the timeout; for a policy decision,
	// Asked.
	Asked   time.Time `json:"asked"`
	Decided time.Time `json:"decided"`

	// ArgsDigest is the SHA-256 (hex) of the arguments the decision is
	// about, exactly as the tool gets them when it runs: canonical for a
	// confirm or an approval (internal/canon), as the client sent them
	// for a policy decision.
	ArgsDigest string `json:"argsDigest"`
	// Outcome is how the decision ended: OutcomeAllowed (a policy let the
	// call run) or OutcomeConfirmed (it ran under a confirm or an
	// approval, whatever the tool returned, and whether or not it then
	// asked the client more), else why the call did not run under it
	// (OutcomeDenied, OutcomeDeclined, OutcomeCancelled, OutcomeTimedOut
	// for an unanswered confirm or an expired approval, OutcomeDisconnected,
	// OutcomeRevoked, OutcomeFallback, OutcomeReplayRefused for an
	// approval an identical call used first, OutcomeError), or
	// OutcomeUnknown (it ran, and the replica running it stopped).
	Outcome Outcome `json:"outcome"`

	// ConfirmID is the id of the record the question was decided under
	// (the elicitation id of a 2025 confirm, the nonce of 2026-07-28;
	// a 2025 approval's wait has one too), ApprovalID the approval's,
	// TaskID the task the call became (2025-11-25 params.task, or
	// RunAsTask), SessionID the MCP session (2025). "" when none.
	ConfirmID  string `json:"confirmId"`
	ApprovalID string `json:"approvalId"`
	TaskID     string `json:"taskId"`
	SessionID  string `json:"sessionId"`
}

// Values of Audit.Decision and Audit.By.
const (
	auditAllow   = "allow"
	auditDeny    = "deny"
	auditConfirm = "confirm"
	auditApprove = "approve"

	auditByClient = "client"
	auditByPage   = "page"
	auditByPolicy = "policy"
)

// auditTime is t as an Audit holds it: UTC, to the millisecond.
func auditTime(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

// newAudit starts the record of a call of tool with args, by id in
// session sid, whose BeforeCall decided kind; nil when cfg has no OnCall
// to read it, so that a handler without one builds none.
func newAudit(cfg *Config, kind string, id Identity, tool, sid string, args []byte) *Audit {
	if cfg.OnCall == nil {
		return nil
	}
	now := auditTime(time.Now())
	return &Audit{Decision: kind, Tool: tool, Tenant: id.Tenant, Subject: id.Subject, Role: id.Role,
		Asked: now, ArgsDigest: argsDigest(args), SessionID: sid}
}

// policyAudit is the record of a call BeforeCall allowed or denied.
func policyAudit(cfg *Config, kind string, call *ToolCall, outcome Outcome) *Audit {
	a := newAudit(cfg, kind, call.Identity, call.Tool.Name, call.SessionID, call.Arguments)
	if a != nil {
		a.By, a.Decided, a.Outcome = auditByPolicy, a.Asked, outcome
	}
	return a
}

// asked records the question of a confirm as its record holds it: the
// message and form sent, when, the asker's role then ("" keeps the one
// the record started with: a record of an earlier release holds none)
// and the record's id.
func (a *Audit) asked(msg string, form json.RawMessage, askedMs int64, role, confirmID string) {
	if a == nil {
		return
	}
	a.Message, a.Form, a.ConfirmID = msg, form, confirmID
	if len(form) == 0 {
		a.Form = nil
	}
	if askedMs > 0 {
		a.Asked = time.UnixMilli(askedMs).UTC()
	}
	if role != "" {
		a.Role = role
	}
}

// approval records what approval ap shows and when it was begun (an
// Approval not read from the store, with no Created, changes nothing).
func (a *Audit) approval(ap *approval.Approval) {
	if a == nil || ap == nil || ap.Created.IsZero() {
		return
	}
	a.ApprovalID, a.URL, a.Message, a.Arguments = ap.ID, ap.URL, ap.Message, ap.Arguments
	a.Tenant, a.Subject, a.Role = ap.Asker.Tenant, ap.Asker.Subject, ap.Asker.Role
	a.Asked = auditTime(ap.Created)
}

// confirm records the id of the record a decision waits under.
func (a *Audit) confirm(id string) {
	if a != nil {
		a.ConfirmID = id
	}
}

// byClient records that the client's answer decided, sent by the caller
// id (its tenant and subject, the role it answered with), now.
func (a *Audit) byClient(id Identity) {
	if a == nil {
		return
	}
	a.By, a.DeciderTenant, a.DeciderSubject, a.DeciderRole = auditByClient, id.Tenant, id.Subject, id.Role
	a.Decided = auditTime(time.Now())
}

// decidedBy records how approval ap was decided: on its page (approved,
// declined, or used after its approval), by the client's refusal to
// open it (withdrawn, when refused is set), or by nobody (expired, or
// withdrawn as the call was cancelled).
func (a *Audit) decidedBy(ap *approval.Approval, refused bool) {
	if a == nil || ap == nil {
		return
	}
	switch ap.State {
	case approval.Approved, approval.Declined, approval.Used:
		if ap.DecidedBy.Subject == "" {
			return // not read from a decided record: claim nothing
		}
		a.By = auditByPage
		a.DeciderTenant, a.DeciderSubject, a.DeciderRole = ap.DecidedBy.Tenant, ap.DecidedBy.Subject, ap.DecidedBy.Role
		a.Decided = auditTime(ap.Decided)
	case approval.Expired:
		a.Decided = auditTime(ap.Expires)
	case approval.Withdrawn:
		if refused {
			a.byClient(Identity{Tenant: ap.Asker.Tenant, Subject: ap.Asker.Subject, Role: ap.Asker.Role})
		}
	}
}

// end records the decision's outcome, and when it was taken if nothing
// said so before: now.
func (a *Audit) end(o Outcome) {
	if a == nil {
		return
	}
	a.Outcome = o
	if a.Decided.IsZero() {
		a.Decided = auditTime(time.Now())
	}
}

// taskOf records the task call became, if it became one.
func (a *Audit) taskOf(call *ToolCall) {
	if a == nil || call == nil || call.task == nil || call.task.created == nil {
		return
	}
	a.TaskID = call.task.created.TaskID
}
