package mcphandler

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/elicitation"
)

// Identity is who is calling, as decided by [Config.Authenticate].
type Identity struct {
	// Subject names the user or service account (an OIDC "sub").
	Subject string
	// Tenant names the workspace, organisation or customer the caller
	// acts for. Sessions and confirms are bound to (Tenant, Subject).
	Tenant string
	// Role is matched against [Config.Roles] by role gates.
	Role string
	// Scopes are the OAuth scopes granted to the caller's token, if any.
	Scopes []string
	// Attributes carry anything else the host's hooks need.
	Attributes map[string]any
	// Expires is when the caller's credentials expire, if Authenticate can
	// tell (package auth sets it from a token's "exp"); zero means
	// unknown. A long-lived stream of the caller, and a POST of the
	// caller that waits, ends at that time; no final message of the
	// caller's requests is sent after it.
	Expires time.Time
}

// key is the binding of sessions and confirms: tenant and subject,
// length-prefixed so that no two identities share a key.
func (id Identity) key() string {
	return strconv.Itoa(len(id.Tenant)) + ":" + id.Tenant + "/" + id.Subject
}

// hasKey reports whether k is id.key(), without building the key: a
// session's owner is checked on every request.
func (id Identity) hasKey(k string) bool {
	var buf [20]byte
	n := strconv.AppendInt(buf[:0], int64(len(id.Tenant)), 10)
	if len(k) != len(n)+1+len(id.Tenant)+1+len(id.Subject) {
		return false
	}
	if k[:len(n)] != string(n) || k[len(n)] != ':' {
		return false
	}
	k = k[len(n)+1:]
	return k[:len(id.Tenant)] == id.Tenant && k[len(id.Tenant)] == '/' && k[len(id.Tenant)+1:] == id.Subject
}

// AuthenticateFunc decides who sent r. It runs on every request (POST, GET
// and DELETE). A non-nil error answers 401 with the challenge of
// [Config.Challenge]; wrap [ErrForbidden] to answer 403 instead.
//
// While a long-lived stream is open (a GET stream, a subscriptions/listen
// stream, a legacy HTTP+SSE stream), it runs again on the stream's request
// every [SessionOptions.KeepAlive], from another goroutine: an error, or an
// identity with another tenant or subject, ends the stream. It must not
// read r's body.
type AuthenticateFunc func(r *http.Request) (Identity, error)

// InsecureAnonymous is an [AuthenticateFunc] that serves every request as
// the zero Identity: whoever reaches the endpoint calls every tool that no
// MinRole or Scopes gate, and every such caller is the same one (the
// sessions, confirms and tasks of the zero Identity are not bounded per
// caller, since its callers cannot be told apart). Set it as
// Config.Authenticate for a demo or a test, to say that this is meant; a
// Config without Authenticate behaves the same, but New warns.
func InsecureAnonymous(*http.Request) (Identity, error) { return Identity{}, nil }

// ChallengeFunc returns the WWW-Authenticate header value for a request
// that failed authentication with err.
type ChallengeFunc func(r *http.Request, err error) string

// ServerInfo is what the server says about itself at initialize.
type ServerInfo struct {
	Name         string `json:"name"`
	Title        string `json:"title,omitempty"`
	Version      string `json:"version"`
	Instructions string `json:"-"`
}

// ServerInfoFunc returns the server's description for the caller in ctx
// (see [IdentityFrom]), e.g. a tenant-branded name and instructions.
type ServerInfoFunc func(ctx context.Context) ServerInfo

// ListToolsFunc returns the tools the caller in ctx may see, in display
// order. It runs for every tools/list and tools/call, so it should be cheap
// or cached by the host. Role gates ([Tool.MinRole]) are applied to its
// result by the handler. An error fails the request with an internal error
// whose text reveals nothing of err.
type ListToolsFunc func(ctx context.Context) ([]Tool, error)

// BeforeCallFunc decides whether call may run. It runs after the tool was
// found visible and its arguments validated, before any confirm. An error
// fails the call like a Deny with an internal reason.
type BeforeCallFunc func(ctx context.Context, call *ToolCall) (Decision, error)

// OnCallFunc receives one event after every tools/call, once the response
// has been written and flushed. It runs on the request's goroutine, so it
// should return quickly; a panic in it is recovered and logged.
type OnCallFunc func(ev CallEvent)

// DecisionKind is what [BeforeCallFunc] decided.
type DecisionKind uint8

const (
	// DecisionAllow runs the tool. It is the zero value.
	DecisionAllow DecisionKind = iota
	// DecisionDeny refuses the call with a JSON-RPC error.
	DecisionDeny
	// DecisionConfirm asks a human first.
	DecisionConfirm
	// DecisionApprove asks a person the host authenticates itself, on
	// the approval page of [Config.Approvals], who the decision's Policy
	// admits (see [Approve]).
	DecisionApprove
)

// Decision is the verdict of [BeforeCallFunc]. The zero value allows the
// call. Build one with [Allow], [Deny], [RateLimit], [Confirm] or
// [Approve]. A Kind not listed here refuses the call (CodeForbidden).
type Decision struct {
	Kind DecisionKind
	// Message is the reason of a Deny (sent to the client) or the question
	// of a Confirm (shown to the human).
	Message string
	// Code is the JSON-RPC error code of a Deny: [CodeForbidden] (the
	// default, also for 0: never retry with this identity) or
	// [CodeRateLimited] (wait, then retry). Any other code is a mistake of
	// the hook: the call is still refused, with CodeForbidden (a Deny
	// never fails open), and the handler logs the bad code at Error level.
	Code Code
	// RetryAfter, with CodeRateLimited, tells the client how long to wait:
	// it is sent as data.retryAfterMs, rounded up to whole milliseconds.
	RetryAfter time.Duration
	// Data, with a Deny, tells the client more (package ratelimit puts the
	// limit that applied there): it must marshal (encoding/json) to a JSON
	// object, whose members are sent in the error's data object, next to
	// retryAfterMs, which wins over a member of that name. If nil, data is
	// {"retryAfterMs": …} for a rate limit with a RetryAfter, else absent.
	// A Data that does not marshal to an object is left out and logged.
	Data any
	// Form, with a Confirm, is the form shown to the human instead of the
	// default one (a required "confirm" box), and Expect holds the values
	// the answer must carry for the tool to run — e.g. a field where the
	// human types the id of what is deleted. See [Decision.WithForm].
	Form   *elicitation.Schema
	Expect map[string]any
	// Fallback is returned instead of running the tool when a Confirm
	// cannot be asked (the client declared no elicitation, or the handler
	// is stateless). If nil, such a call fails closed with a tool error
	// saying that confirmation is required.
	Fallback *ToolResult
	// Policy, with an Approve, says who may approve the call.
	Policy approval.Policy
}

// Allow lets the call run.
func Allow() Decision { return Decision{} }

// Deny refuses the call with [CodeForbidden] and reason as the message.
func Deny(reason string) Decision {
	return Decision{Kind: DecisionDeny, Message: reason, Code: CodeForbidden}
}

// RateLimit refuses the call with [CodeRateLimited]: the client may retry
// after the given delay.
func RateLimit(reason string, retryAfter time.Duration) Decision {
	return Decision{Kind: DecisionDeny, Message: reason, Code: CodeRateLimited, RetryAfter: retryAfter}
}

// Confirm asks the human to confirm the call with message before it runs.
// An empty message asks with the default one: the tool and every argument
// it will run with, each long value elided inside itself with a visible
// marker, invisible characters escaped (a call whose arguments cannot be
// shown in full that way within 2000 runes does not run). A non-empty
// message is shown with control and format characters removed, cut at
// 1000 runes: when it shows argument values, build it from the call's
// Arguments, which a confirmed call receives in canonical form.
func Confirm(message string) Decision {
	return Decision{Kind: DecisionConfirm, Message: message}
}

// Approve asks for an approval of the call before it runs: a person signed
// in on the host's approval page ([Config.Approvals], package
// approval/page), whom p admits (its zero value: anyone of the caller's
// tenant but the caller), approves or declines the call, bound to the
// caller, the tool and the canonical arguments. message ("" for none) is
// shown on the page. The client only carries the link, so it cannot
// approve by itself. How the link reaches the person, per revision:
//
//   - 2025-11-25 with elicitation.url declared, on a stream: a URL-mode
//     elicitation/create; the call waits (its stream kept alive, with
//     progress if the client asked for it), and after the decision
//     notifications/elicitation/complete, then the result. A client that
//     lost the stream resumes it (Last-Event-ID) for the result.
//   - 2026-07-28 with elicitation.url declared: an input_required answer
//     whose request is the URL elicitation; the retry waits for the
//     decision, runs the tool once, and a repeated retry gets the
//     recorded result.
//   - anything else (no URL mode, older revisions, HTTP+SSE): a tool
//     result with isError whose text names the page; the same call
//     repeated with the same arguments after the approval runs once, and a
//     further identical call asks again.
//
// Without Config.Approvals the call does not run.
func Approve(message string, p approval.Policy) Decision {
	return Decision{Kind: DecisionApprove, Message: message, Policy: p}
}

// WithFallback returns d with the result to send when a Confirm cannot be
// asked.
func (d Decision) WithFallback(r *ToolResult) Decision {
	d.Fallback = r
	return d
}

// WithForm returns d with a custom confirm form: the tool runs only if the
// human accepts and every field in expect has exactly that value.
func (d Decision) WithForm(form *elicitation.Schema, expect map[string]any) Decision {
	d.Form, d.Expect = form, expect
	return d
}

// Outcome says how a tools/call ended, in [CallEvent].
type Outcome string

// Outcomes of a tools/call.
const (
	OutcomeAllowed      Outcome = "allowed"      // ran without a confirm
	OutcomeDenied       Outcome = "denied"       // BeforeCall denied or rate-limited it
	OutcomeConfirmed    Outcome = "confirmed"    // the human accepted; it ran
	OutcomeDeclined     Outcome = "declined"     // the human declined; it did not run
	OutcomeCancelled    Outcome = "cancelled"    // the human dismissed the confirm; it did not run
	OutcomeTimedOut     Outcome = "timed_out"    // no answer within ConfirmTimeout; it did not run
	OutcomeDisconnected Outcome = "disconnected" // the client went away while asked; it did not run
	OutcomeFallback     Outcome = "fallback"     // the client could not be asked; the fallback was sent
	OutcomeNotFound     Outcome = "not_found"    // no such tool for this caller
	OutcomeError        Outcome = "error"        // bad arguments or a failing hook; it did not run
	// OutcomeRevoked: the human accepted, but by then the caller could no
	// longer see the tool (role or plan changed); or, while the call
	// waited for a confirm or an approval, the caller's credentials failed
	// a re-check or expired (the request ended with that failure; an
	// approval stays, for the caller's repeated call). It did not run.
	OutcomeRevoked Outcome = "revoked"
	// OutcomeInputRequired: on 2026-07-28, the call ended its round asking
	// the client for input (a confirm included); the retry is another call.
	OutcomeInputRequired Outcome = "input_required"
	// OutcomeReplayed: on 2026-07-28, a retry of a confirmed call that
	// already ran got the recorded result; nothing ran again.
	OutcomeReplayed Outcome = "replayed"
	// OutcomeReplayRefused: an answer for a confirm that was already
	// answered, expired, or asked of someone else; nothing ran.
	OutcomeReplayRefused Outcome = "replay_refused"
	// OutcomeUnknown: a 2025 confirmed call whose replica stopped while
	// running it (its lease lapsed); whether it took effect is unknown, and
	// it will not run again. Reported by the replica that noticed.
	OutcomeUnknown Outcome = "unknown"
)

// CallEvent describes one finished tools/call.
type CallEvent struct {
	// Tool is the tool called. For a call refused before its tool was
	// found (OutcomeNotFound, or params that name no tool or no object of
	// arguments) it is the name the client sent, cut to 256 bytes: any
	// string a client likes, so never a metric label or a key then.
	Tool      string
	Identity  Identity
	SessionID string
	Outcome   Outcome
	// Arguments are the call's raw arguments. They are only valid during
	// the OnCall callback.
	Arguments json.RawMessage
	// Duration is the time from receiving the request to writing the
	// response, a confirm's wait included.
	Duration time.Duration
	// IsError reports a tool result with isError set.
	IsError bool
	// ErrorClass is the class of a failed call ("timeout",
	// "backend_unavailable", "bad_args", "not_found", "internal"), or "".
	ErrorClass ErrorClass
	// ConfirmID links the events of one confirm: the call that asked, a
	// refused replay of its answer, and (on 2026-07-28) the retry that
	// ran it. Empty when no confirm was involved.
	ConfirmID string
	// Audit is the record of the call's decision — who asked, what was
	// shown, who decided and how, the digest of the arguments that ran —
	// on the event of the request that ended the decision, nil on every
	// other (see [Audit] for which). It is built only when OnCall is set.
	Audit *Audit

	// Upstream, UpstreamEra and CredentialKind describe the call the tool
	// made to another MCP server for the caller, through
	// [ToolCall.CallUpstream] (package gateway's upstream tools): the
	// host's id of the server, the protocol revision spoken there, and
	// the kind of credentials sent ("static", "token-exchange", …; a
	// label the host declared, never a credential). All three come from
	// the host's configuration, never from the client or the upstream, so
	// they are bounded and fit for metric labels; the tool's name on the
	// upstream is not among them. Empty for a tool that called no
	// upstream, and for a call run as a task (its work starts after this
	// event).
	Upstream       string
	UpstreamEra    string
	CredentialKind string
	// UpstreamDuration is the time spent in the upstream call (the sum,
	// if the tool made several), within Duration; zero without one.
	UpstreamDuration time.Duration
}
