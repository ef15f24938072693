// Package approval keeps approvals: records, in the shared session store,
// of a person's decision on one tool call that a client cannot answer by
// itself. A call the host wants approved is bound to the caller (tenant and
// subject), the tool and the digest of its canonical arguments; a person
// signed in on a page the host serves (package approval/page) approves or
// declines it, and the call runs at most once after an approval.
//
// # States
//
// Every approval is one record, approval/<id>, signed with keys derived
// from the host's state keys (so that write access to the store is not
// enough to approve anything). Every change of state is one
// CompareAndSwap from the exact bytes read, so of replicas racing for a
// transition exactly one wins, and the others read what it decided:
//
//		pending ──► approved ──► used (the call ran, once)
//		   ├──────► declined
//		   └──────► expired
//
//	  - pending → approved | declined: [Store.Decide], by an approver the
//	    approval's [Policy] admits, before [Approval.Expires].
//	  - pending → expired: the first reader at or after Expires
//	    ([Store.Wait], [Store.Decide], [Store.Begin]).
//	  - approved → used: [Store.Consume], for the same caller, tool and
//	    arguments, before the approval's end: Expires plus
//	    [Config.Linger], when its record leaves the store. The end is
//	    read from the signed record: a record read at or after it, from
//	    whatever store still holds it, is not found.
//
// A decision is announced on the Pub/Sub channel of the approval, so a
// waiter on any replica wakes at once; the message carries no decision
// (the waiter reads the record), so a lost message costs latency, never
// correctness, and waiters also re-read the record every [Config.Poll].
//
// # Repeated calls
//
// A client that cannot open a URL is told the approval's URL and repeats
// the call. [Store.Begin] finds the approval bound to the same caller,
// tool and arguments while it is pending or approved, and starts a new one
// otherwise; [Store.Consume] lets one call run per approval. So the same
// call repeated after the approval runs once, and a further identical call
// asks again.
//
// # Bounds
//
// A caller (tenant and subject) holds at most
// [Config.MaxPendingPerIdentity] pending approvals (20 by default), on
// every replica: a Begin of one more is [ErrTooManyPending], saying how
// many are held and until when. An approval stops counting once decided
// or expired; one the caller withdrew counts until it would have expired,
// so that withdrawing does not let a caller make approvals without end.
// The count is an index per caller in the store,
// approval-owner/<digest>, signed and changed by CompareAndSwap only
// (package internal/ownerindex).
//
// A tenant's callers together hold at most [Config.MaxPendingPerTenant]
// (1000 by default): a Begin of one more is [ErrTooManyPendingInTenant].
// It is counted the same way, in an index per tenant,
// approval-tenant/<digest>, which is also what [Store.Inbox] reads: the
// approvals waiting for a tenant's approvers, on any replica, in one read
// of the index and at most one read per approval it names.
//
// # Write access to the store
//
// Whoever can write the store without the keys cannot make a record or
// message that verifies, but can delete any, and can write back a copy
// of a genuine record (or index) taken earlier: records are signed for
// their key, not for their moment. Single use therefore also rests on
// each Store's memory: it remembers every approval it saw leave pending
// (its own transitions, the records it read, and the transitions the
// other replicas publish, signed, on the channel approval-state) until
// the approval's end, and a record read in an earlier state than the one
// remembered reads as not found. What such a writer can do:
//
//   - delete records and indexes: an approval is not found, the call asks
//     again; a caller's pending count starts again from zero;
//   - on a replica that never heard of a transition (it started after
//     it, its subscription was down when the transition was published,
//     or it had to forget it past 65536 remembered approvals), pass off a
//     copy as the record: an approved copy lets the same caller's same
//     call run once more there (that use is remembered), a pending copy
//     of a declined or withdrawn approval can be approved there by an
//     approver its policy admits;
//   - nothing at or after the approval's end (Expires plus Linger, read
//     from the signed record): no copy is decided, used or shown then.
//
// It cannot approve, run a call nobody approved, change a call's caller,
// tool, arguments or policy, or make an approval last longer.
package approval

import (
	"errors"
	"fmt"
	"time"
)

// Identity is the caller who asks, or the person who decides. It is the
// subset of mcphandler.Identity an approval is bound to and its policy is
// checked against.
type Identity struct {
	Subject string `json:"sub"`
	Tenant  string `json:"ten,omitempty"`
	Role    string `json:"role,omitempty"`
}

// same reports whether a and b are the same person: same tenant and
// subject (the role does not matter).
func (a Identity) same(b Identity) bool { return a.Tenant == b.Tenant && a.Subject == b.Subject }

// Policy says who may decide an approval. Its zero value is the four-eyes
// rule: any signed-in person of the caller's tenant other than the caller.
// It is stored in the approval's record, so that the page on any replica
// applies the policy the call was made with; a rule is therefore named
// ([Config.Rules]) rather than a func.
type Policy struct {
	// AnyTenant admits approvers of another tenant than the caller's. If
	// false (the default), an approver must act for the caller's tenant.
	AnyTenant bool `json:"anyTenant,omitempty"`
	// AllowSelf admits the caller as their own approver. If false (the
	// default), an approver with the caller's tenant and subject is refused.
	AllowSelf bool `json:"self,omitempty"`
	// MinRole, if set, admits only approvers whose role is at or above it
	// in [Config.Roles]. A MinRole missing from Roles admits nobody, and an
	// approver role missing from Roles is below every role.
	MinRole string `json:"minRole,omitempty"`
	// Rule, if set, names a [RuleFunc] in [Config.Rules] that must admit
	// the approver too, after the checks above. A name missing from Rules
	// admits nobody.
	Rule string `json:"rule,omitempty"`
}

// Annotations are the hints a tool gives about itself (MCP
// ToolAnnotations: readOnlyHint, destructiveHint, idempotentHint,
// openWorldHint), carried with an approval so that the page tells the
// approver what kind of call it is. They are the tool's claims, not
// enforced by anything; a field left unset takes the MCP default, which
// [Annotations.IsDestructive] and [Annotations.IsOpenWorld] apply (a nil
// *Annotations is a tool that says nothing: destructive and open world).
type Annotations struct {
	// ReadOnly: the tool does not modify its environment.
	ReadOnly bool `json:"ro,omitempty"`
	// Destructive, when not ReadOnly: the tool may destroy or overwrite
	// (nil: the MCP default, true).
	Destructive *bool `json:"de,omitempty"`
	// Idempotent: calling it again with the same arguments does nothing
	// more.
	Idempotent bool `json:"idem,omitempty"`
	// OpenWorld: the tool reaches outside the server (other systems, the
	// internet); nil: the MCP default, true.
	OpenWorld *bool `json:"ow,omitempty"`
}

// IsDestructive reports whether a tool with these hints may destroy data,
// by the MCP defaults: true unless ReadOnly, or Destructive is false. A
// nil a is true.
func (a *Annotations) IsDestructive() bool {
	return a == nil || !a.ReadOnly && (a.Destructive == nil || *a.Destructive)
}

// IsOpenWorld reports whether a tool with these hints reaches outside the
// server, by the MCP default: true unless OpenWorld is false. A nil a is
// true.
func (a *Annotations) IsOpenWorld() bool { return a == nil || a.OpenWorld == nil || *a.OpenWorld }

// normal is a's canonical form for storing and comparing: nil when it
// says nothing (every field unset), else a copy.
func (a *Annotations) normal() *Annotations {
	if a == nil || *a == (Annotations{}) {
		return nil
	}
	c := *a
	if a.Destructive != nil {
		c.Destructive = new(*a.Destructive)
	}
	if a.OpenWorld != nil {
		c.OpenWorld = new(*a.OpenWorld)
	}
	return &c
}

// sameAnnotations reports whether a and b say the same (nil and an
// all-unset value are the same).
func sameAnnotations(a, b *Annotations) bool {
	a, b = a.normal(), b.normal()
	if a == nil || b == nil {
		return a == b
	}
	eq := func(x, y *bool) bool { return x == nil && y == nil || x != nil && y != nil && *x == *y }
	return a.ReadOnly == b.ReadOnly && a.Idempotent == b.Idempotent && eq(a.Destructive, b.Destructive) && eq(a.OpenWorld, b.OpenWorld)
}

// State is where an approval is in its life.
type State string

// States of an approval.
const (
	Pending  State = "pending"  // waiting for a decision
	Approved State = "approved" // approved; the call may run once
	Declined State = "declined" // declined; the call does not run
	Expired  State = "expired"  // nobody decided in time; the call does not run
	Used     State = "used"     // approved, and one call ran
	// Withdrawn: the caller cancelled the call before anyone decided; the
	// call does not run.
	Withdrawn State = "withdrawn"
)

func (s State) valid() bool {
	switch s {
	case Pending, Approved, Declined, Expired, Used, Withdrawn:
		return true
	}
	return false
}

// moves lists every transition; anything else is refused.
var moves = map[State][]State{
	Pending:  {Approved, Declined, Expired, Withdrawn},
	Approved: {Used},
}

func (s State) canMove(to State) bool {
	for _, t := range moves[s] {
		if t == to {
			return true
		}
	}
	return false
}

// Approval is one approval as read from the store: the caller's own copy.
type Approval struct {
	// ID is the approval's id: 22 characters of unpadded base64url, 128
	// random bits.
	ID string
	// URL is the page where a person decides: [Config.URL] followed by ID.
	URL string
	// State is the approval's state when it was read.
	State State
	// Asker is the caller whose call waits for the approval.
	Asker Identity
	// Tool is the name of the tool the call runs.
	Tool string
	// Digest is the SHA-256 of the canonical arguments.
	Digest [32]byte
	// Arguments are the call's arguments in canonical form: exactly what
	// the approver is shown and what runs.
	Arguments []byte
	// Message is the host's explanation shown on the page ("" for none).
	Message string
	// Policy says who may decide.
	Policy Policy
	// Annotations are the tool's hints as the call was asked (nil: none,
	// or an approval made by a release that did not keep them).
	Annotations *Annotations
	// Created is when the approval was made; Expires is when it expires if
	// nobody decided.
	Created, Expires time.Time
	// DecidedBy and Decided are the approver and the time of the decision,
	// once approved or declined.
	DecidedBy Identity
	Decided   time.Time
}

// Errors of the Store's methods. Errors of the store itself are returned
// wrapped, as the store returned them (session.ErrUnavailable when it
// could not be reached).
var (
	// ErrNotFound: no such approval — never made, gone after its record's
	// lifetime, or a record that does not verify (it is never acted on).
	ErrNotFound = errors.New("approval: not found")
	// ErrDecided: the approval was already approved or declined (or used).
	ErrDecided = errors.New("approval: already decided")
	// ErrExpired: nobody decided the approval before it expired.
	ErrExpired = errors.New("approval: expired")
	// ErrWithdrawn: the caller withdrew the approval before anyone decided.
	ErrWithdrawn = errors.New("approval: withdrawn")
	// ErrNotApproved: Consume of an approval that is not approved
	// (pending, declined, expired or withdrawn).
	ErrNotApproved = errors.New("approval: not approved")
	// ErrUsed: Consume of an approval that a call already used.
	ErrUsed = errors.New("approval: already used")
	// ErrMismatch: Consume for another caller, tool or arguments than the
	// approval is bound to.
	ErrMismatch = errors.New("approval: bound to another call")
	// ErrNotAllowed is matched (errors.Is) by every *NotAllowedError.
	ErrNotAllowed = errors.New("approval: not allowed")
	// ErrTooLarge: arguments or message past their bounds (see Config).
	ErrTooLarge = errors.New("approval: too large")
	// ErrTooManyPending: Begin of a new approval for a caller who holds
	// Config.MaxPendingPerIdentity pending approvals; the message says how
	// many and until when the oldest counts. Retry once one is decided or
	// expired.
	ErrTooManyPending = errors.New("approval: too many pending approvals for this identity")
	// ErrTooManyPendingInTenant: Begin of a new approval for a caller
	// whose tenant's callers hold Config.MaxPendingPerTenant pending
	// approvals together; the message says how many and until when the
	// oldest counts. Retry once one is decided or expired.
	ErrTooManyPendingInTenant = errors.New("approval: too many pending approvals in this tenant")
)

// Reasons of a NotAllowedError.
const (
	ReasonNoIdentity = "no_identity" // the approver has no subject
	ReasonSelf       = "self"        // the approver is the caller
	ReasonTenant     = "tenant"      // the approver acts for another tenant
	ReasonRole       = "role"        // the approver's role is below MinRole
	ReasonRule       = "rule"        // the named rule refused, or is unknown
)

// NotAllowedError reports an approver the approval's policy refuses.
type NotAllowedError struct {
	// Reason is one of the Reason constants.
	Reason string
	// Err is what a rule returned (nil for the other reasons).
	Err error
}

func (e *NotAllowedError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("approval: not allowed (%s): %v", e.Reason, e.Err)
	}
	return "approval: not allowed (" + e.Reason + ")"
}

// Is makes errors.Is(err, ErrNotAllowed) true.
func (e *NotAllowedError) Is(target error) bool { return target == ErrNotAllowed }

func (e *NotAllowedError) Unwrap() error { return e.Err }
