package mcphandler

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/record"
	"github.com/mcphandler/mcphandler/internal/task"
)

// A confirm is a state machine kept in the store, one record per confirm
// (confirm/<id> on 2025 sessions, nonce/<n> on 2026-07-28). Every change of
// state is one CompareAndSwap from the exact bytes read, so of replicas
// racing for a transition exactly one wins, and the loser reads what the
// winner decided. The decision of a 2025 confirm is the first of
// pending → answered (the one answer accepted, stored in the record) and
// pending → closed (the asker gave up); the human's answer is never
// inferred from a message, only read from the record.
//
//	                       ┌──────────► closed (not run: declined, timed out, …)
//	                       │                ▲
//	pending ──► answered ──┴──► running ──► done (ran; result recorded)
//	   │                          │  ▲  └──► unknown (the runner stopped)
//	   │ 2026: accepted           ▼  │
//	   └────────────────────► awaiting (2026: the tool asked more; next round)
//
// Who may make which transition:
//   - pending → answered: the replica that received the client's answer
//     (2025), once, from the session and identity that were asked, before
//     the record's deadline.
//   - pending → closed: the asker at its timeout, disconnect or
//     cancellation; or, once the asker's lease lapsed and the deadline
//     passed, the replica serving the client's resumed stream.
//   - answered → running | closed: the replica holding the confirm's lease
//     (the asker, or the one that took the lease over after it lapsed),
//     after checking the answer and the tool's visibility.
//   - pending → running | closed (2026): the retry that carries the answer.
//   - running → done | awaiting: the runner; running → unknown: a replica
//     that found the runner's lease lapsed.
//   - awaiting → running (2026): the retry of the round the record awaits.
//     A held call's record (its handler carried state across rounds,
//     holdRound) is created awaiting, with no confirm before.
//
// Lifetimes: a record lives confirmTTL (ConfirmTimeout + confirmLinger)
// from its last transition, and says so, signed, with its revision (see
// recordLife); a lease leaseTTL, renewed every leaseTTL/3.
type confirmState string

const (
	statePending  confirmState = "pending"  // asked, not answered
	stateAnswered confirmState = "answered" // 2025: one answer accepted and stored
	stateRunning  confirmState = "running"  // accepted; the runner holds the lease
	stateAwaiting confirmState = "awaiting" // 2026: a round asked the client more
	stateClosed   confirmState = "closed"   // ended without running
	stateDone     confirmState = "done"     // ran; the outcome is recorded
	stateUnknown  confirmState = "unknown"  // the runner stopped mid-run
)

// confirmMoves lists every transition; anything else is refused.
var confirmMoves = map[confirmState][]confirmState{
	statePending:  {stateAnswered, stateRunning, stateClosed},
	stateAnswered: {stateRunning, stateClosed},
	stateRunning:  {stateDone, stateAwaiting, stateUnknown},
	stateAwaiting: {stateRunning},
}

func (s confirmState) valid() bool {
	switch s {
	case statePending, stateAnswered, stateRunning, stateAwaiting, stateClosed, stateDone, stateUnknown:
		return true
	}
	return false
}

func (s confirmState) canMove(to confirmState) bool {
	for _, t := range confirmMoves[s] {
		if t == to {
			return true
		}
	}
	return false
}

// confirmTimes are the periods above; tests shorten them.
type confirmTimes struct {
	lease, poll, skew, linger time.Duration
}

var defaultConfirmTimes = confirmTimes{lease: leaseTTL, poll: confirmPoll, skew: clockSkew, linger: confirmLinger}

// errBadRecord reports a record that does not verify, has an unexpected
// shape, was rolled back or is past its end of life: it is treated as
// absent, and nothing acts on it.
var errBadRecord = record.ErrInvalid

// confirmRecord is the record of a 2025 confirm. It binds the answer to
// the session and identity that were asked and to the tool and arguments
// that were shown, and holds what another replica needs to finish the
// call: its stream, request id, arguments and form, and once answered the
// answer itself.
type confirmRecord struct {
	State    confirmState `json:"st"`
	Session  string       `json:"sid"`
	Owner    string       `json:"own"`
	Tool     string       `json:"tool"`
	Digest   string       `json:"args"`
	Deadline int64        `json:"dl"` // unix ms: no answer is accepted after it

	Stream string          `json:"stream,omitempty"`
	ReqID  json.RawMessage `json:"req,omitempty"`
	Args   json.RawMessage `json:"argv,omitempty"`
	Form   json.RawMessage `json:"form"`
	Expect map[string]any  `json:"expect,omitempty"`

	// Set by the accepted answer: the client's result (or Failed when it
	// answered with an error) and the role of the identity that sent it.
	Answer json.RawMessage `json:"ans,omitempty"`
	Failed bool            `json:"fail,omitempty"`
	Role   string          `json:"role,omitempty"`

	// By is the lease token of the replica that made the last transition
	// out of pending or answered; Outcome says why a confirm closed.
	By      string  `json:"by,omitempty"`
	Outcome Outcome `json:"o,omitempty"`

	// Approval is the id of the approval the call waits for (an Approve
	// decision): the replica that resumes the call reads its decision.
	Approval string `json:"apv,omitempty"`

	// Task is the call's 2025-11-25 task request (params.task), when it
	// carried one: whichever replica runs the confirmed call makes it the
	// one task this request asked for.
	Task *confirmTask `json:"task,omitempty"`

	// What the question showed, for the Audit of whichever replica ends
	// the confirm: the message sent (Form is the schema sent), when it
	// was asked (unix ms), and the asker's role then. A record of an
	// earlier release holds none (its Audit then says "" and the
	// deadline's time), and a wait for an approval none (the approval
	// holds what its page shows).
	Msg   string `json:"msg,omitempty"`
	Asked int64  `json:"ak,omitempty"`
	ARole string `json:"arole,omitempty"`
	// Decided is when its answer was acted on (unix ms): set by the
	// transition out of answered, for the Audit of a replica that finds
	// the run's lease lapsed.
	Decided int64 `json:"dk,omitempty"`

	// Rev and End make a rolled-back record detectable (see recordLife).
	recordLife
}

// recordLife is what every confirm and nonce record carries, signed with
// it, so that a genuine record written back by something that can write
// the store but not sign is refused: Rev, incremented by every
// transition, so that a replica that saw a later revision refuses an
// earlier one (see package internal/revs); and End, the record's end of
// life (unix ms: its last transition plus confirmTTL, as its lifetime in
// the store), past which no replica acts on it, whatever its TTL in the
// store says.
type recordLife struct {
	Rev uint64 `json:"rev,omitempty"`
	End int64  `json:"x,omitempty"`
}

func (l *recordLife) Life() record.Life     { return record.Life{Rev: l.Rev, End: l.End} }
func (l *recordLife) SetLife(n record.Life) { l.Rev, l.End = n.Rev, n.End }

// confirmTask is the task request of a confirmed 2025-11-25 call: the ttl
// the client asked for (milliseconds, 0 for the default, at most 2^53 as
// params.task.ttl) and the task's owner, which must be the record's Owner.
type confirmTask struct {
	TTL     int64  `json:"ttl"`
	Tenant  string `json:"tn"`
	Subject string `json:"sub"`
}

// taskRequest is the task request of call's slot for its confirm record
// (nil when the call cannot become a 2025-11-25 task).
func taskRequest(call *ToolCall) *confirmTask {
	s := call.task
	if s == nil || !s.sessions {
		return nil
	}
	return &confirmTask{TTL: s.ttl.Milliseconds(), Tenant: s.owner.Tenant, Subject: s.owner.Subject}
}

// slot is the task slot of the call that runs rec's confirmed call, as
// tool (nil when rec asked for no task or tool no longer has task
// support): the task is the request's, owned by the asker.
func (rec *confirmRecord) slot(tool Tool) *taskSlot {
	t := rec.Task
	if t == nil || tool.TaskSupport == TaskNone {
		return nil
	}
	owner := task.Owner{Tenant: t.Tenant, Subject: t.Subject}
	return &taskSlot{owner: owner, sessions: true, ttl: time.Duration(t.TTL) * time.Millisecond}
}

func (r *confirmRecord) deadline() time.Time { return time.UnixMilli(r.Deadline) }

// What a 2025 confirm's record keeps of what the client sent, so that a
// record stays under about 80 KiB whatever the client sends (a request
// body may be 4 MiB): the call's arguments for another replica to finish
// it, and the client's answer.
const (
	maxKeptArgs   = 64 << 10
	maxKeptAnswer = 64 << 10
)

// keepCall sets what another replica needs to finish the call of x with
// args (adopt, confirm_push.go): its stream, request id and arguments.
// Arguments over maxKeptArgs, or a stream that is not logged, are not
// kept: then only the asker can finish the call.
func (r *confirmRecord) keepCall(x *Exchange, args json.RawMessage) {
	if len(args) > maxKeptArgs {
		return
	}
	if r.Stream = x.st.streamID(); r.Stream != "" {
		r.ReqID, r.Args = x.reqID, args
	}
}

// confirmKinds are the kinds of confirm records (record.Kind): 2025
// confirms and 2026-07-28 nonces, signed each for its purpose, sharing
// this replica's memory of revisions. A record that says no end of life
// (written by an earlier release) ends, for a confirm, confirmTTL after
// its deadline; for a nonce, when the sealed requestState that names it
// expires.
type confirmKinds struct {
	confirm record.Kind[confirmRecord, *confirmRecord]
	nonce   record.Kind[nonceRecord, *nonceRecord]
}

// setKinds sets cs's record kinds from its config and periods: once by
// newConfirms, again when tests change the periods.
func (cs *confirms) setKinds() {
	ttl := cs.confirmTTL()
	cs.kinds.confirm = record.Kind[confirmRecord, *confirmRecord]{Store: cs.cfg.Store, Signer: cs.macs.confirm,
		Revs: &cs.macs.revs, Span: ttl, Dropped: cs.bus.dropped,
		Implied: func(r *confirmRecord) int64 { return r.Deadline + ttl.Milliseconds() }}
	cs.kinds.nonce = record.Kind[nonceRecord, *nonceRecord]{Store: cs.cfg.Store, Signer: cs.macs.nonce,
		Revs: &cs.macs.revs, Span: ttl, Dropped: cs.bus.dropped}
}

// endOfLife is the end of life of a record written now: confirmTTL ahead,
// as its lifetime in the store.
func (cs *confirms) endOfLife() int64 { return time.Now().Add(cs.confirmTTL()).UnixMilli() }

// Valid checks a decoded record like client input.
func (r *confirmRecord) Valid() bool {
	if !r.State.valid() || r.State == stateAwaiting || r.Session == "" || r.Owner == "" || r.Tool == "" || r.Deadline <= 0 {
		return false
	}
	if d, err := hex.DecodeString(r.Digest); err != nil || len(d) != 32 {
		return false
	}
	if _, err := elicitation.Parse(r.Form); err != nil {
		return false
	}
	if r.Stream != "" && (!jsonrpc.ValidID(r.ReqID) || !isObject(r.Args)) {
		return false
	}
	if r.State == stateAnswered && !r.Failed && !isObject(r.Answer) {
		return false
	}
	if r.Asked < 0 || r.Decided < 0 {
		return false
	}
	if t := r.Task; t != nil {
		owner := Identity{Tenant: t.Tenant, Subject: t.Subject}
		return t.TTL >= 0 && t.TTL <= 1<<53 && owner.key() == r.Owner
	}
	return true
}

// isObject reports whether b is one valid JSON object.
func isObject(b []byte) bool {
	return len(b) >= 2 && b[0] == '{' && b[len(b)-1] == '}' && json.Valid(b)
}

// loadConfirm reads the record of confirm id and the exact bytes a
// transition must swap from. A record that does not verify or decode, was
// rolled back or is past its end of life (when it says none: its deadline
// plus confirmTTL) is errBadRecord; a missing one session.ErrNotFound.
func (cs *confirms) loadConfirm(ctx context.Context, id string) (confirmRecord, []byte, error) {
	return cs.kinds.confirm.Load(ctx, confirmKey(id))
}

// createConfirm stores the pending record of a new confirm.
func (cs *confirms) createConfirm(ctx context.Context, id string, rec *confirmRecord) ([]byte, error) {
	rec.End = cs.endOfLife()
	raw, ok, err := cs.kinds.confirm.Create(ctx, confirmKey(id), rec, cs.confirmTTL())
	if err == nil && !ok {
		err = errors.New("mcphandler: confirm id already in use")
	}
	return raw, err
}

// moveConfirm makes the transition from the record read as raw (whose
// decoded state is from) to next. It reports whether this call made it;
// false means another replica changed the record first (read it again).
func (cs *confirms) moveConfirm(ctx context.Context, id string, raw []byte, from confirmState, next *confirmRecord) ([]byte, bool, error) {
	if !from.canMove(next.State) {
		return nil, false, errors.New("mcphandler: confirm cannot move from " + string(from) + " to " + string(next.State))
	}
	next.End = cs.endOfLife()
	return cs.kinds.confirm.Swap(ctx, confirmKey(id), raw, next, cs.confirmTTL())
}

// nonceRecord is the record of a 2026-07-28 confirm, or of a call whose
// handler carried state across rounds (held, see holdRound: created
// awaiting round 1, with no confirm). Round is the round
// whose requestState may move it next (1 while pending: the round that
// answers the confirm; while awaiting, the round after the last one run).
// Result is what a retry gets without anything running: the tool result
// (closed, done), or while awaiting the members of the last round's
// input_required answer.
type nonceRecord struct {
	State   confirmState    `json:"st"`
	Round   int             `json:"n"`
	Outcome Outcome         `json:"o,omitempty"`
	Result  json.RawMessage `json:"r,omitempty"`
	// Approval is the id of the approval a 2026-07-28 Approve waits for.
	Approval string `json:"apv,omitempty"`
	// Task says the call became a task (done only): Result is the Task
	// of the CreateTaskResult it was answered with.
	Task bool `json:"tk,omitempty"`

	// What round 1 of a confirm asked, kept while pending for the Audit
	// of the retry that decides it (on any replica): the message and the
	// requested schema sent, when (unix ms), and the asker's role then.
	// Not kept past pending; a record of an earlier release holds none.
	Msg   string          `json:"msg,omitempty"`
	Form  json.RawMessage `json:"form,omitempty"`
	Asked int64           `json:"ak,omitempty"`
	ARole string          `json:"arole,omitempty"`

	// Rev and End make a rolled-back record detectable (see recordLife).
	recordLife
}

// Valid checks a decoded record like client input.
func (r *nonceRecord) Valid() bool {
	if r.Task && r.State != stateDone || r.Asked < 0 || len(r.Form) > 0 && !isObject(r.Form) {
		return false
	}
	switch r.State {
	case statePending, stateRunning:
	case stateAwaiting:
		// A round's answer is replayed as the members of an input_required
		// result (replayNonce): an object with at least one.
		if len(r.Result) > 0 && (!isObject(r.Result) || len(bytes.TrimSpace(r.Result[1:len(r.Result)-1])) == 0) {
			return false
		}
	case stateClosed, stateDone:
		if !isObject(r.Result) {
			return false
		}
	default:
		return false
	}
	return r.Round >= 1 && r.Round <= maxRounds
}

// maxRounds bounds the input_required rounds of one confirmed call.
const maxRounds = 64

// loadNonce reads the record of nonce and the exact bytes a transition
// must swap from, like loadConfirm. A record of an earlier release has no
// end of life: the sealed expiry of the requestState that names it bounds
// it.
func (cs *confirms) loadNonce(ctx context.Context, nonce string) (nonceRecord, []byte, error) {
	return cs.kinds.nonce.Load(ctx, nonceKey(nonce))
}

// createNonce stores rec, the first record of nonce.
func (cs *confirms) createNonce(ctx context.Context, nonce string, rec *nonceRecord) error {
	rec.End = cs.endOfLife()
	_, ok, err := cs.kinds.nonce.Create(ctx, nonceKey(nonce), rec, cs.confirmTTL())
	if err == nil && !ok {
		err = errors.New("mcphandler: nonce already in use")
	}
	return err
}

func (cs *confirms) moveNonce(ctx context.Context, nonce string, raw []byte, from confirmState, next *nonceRecord) ([]byte, bool, error) {
	if !from.canMove(next.State) {
		return nil, false, errors.New("mcphandler: confirm cannot move from " + string(from) + " to " + string(next.State))
	}
	next.End = cs.endOfLife()
	return cs.kinds.nonce.Swap(ctx, nonceKey(nonce), raw, next, cs.confirmTTL())
}

// takeLease takes the lease of confirm id (record.Lease): this replica's
// claim to be responsible for the confirm, held by the asker while it
// waits and decides and by the runner while the tool runs, renewed every
// ct.lease/3 until released. It returns nil when another replica holds
// it; a replica that finds it lapsed may take the confirm over.
func (cs *confirms) takeLease(ctx context.Context, id string) (*record.Lease, error) {
	l, err := record.Take(ctx, cs.cfg.Store, leaseKey(id), randText(), cs.ct.lease)
	if l != nil {
		l.Keep(nil)
	}
	return l, err
}

// leaseLapsed reports whether nobody holds the lease of confirm id (false
// when the store cannot tell now).
func (cs *confirms) leaseLapsed(ctx context.Context, id string) bool {
	return record.Lapsed(ctx, cs.cfg.Store, leaseKey(id))
}
