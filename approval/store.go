package approval

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/mcphandler/mcphandler/internal/canon"
	"github.com/mcphandler/mcphandler/internal/ownerindex"
	"github.com/mcphandler/mcphandler/internal/record"
	"github.com/mcphandler/mcphandler/internal/sign"
	"github.com/mcphandler/mcphandler/session"
)

// Shared is the part of a session.Store approvals live in: records with
// atomic transitions, and Pub/Sub to wake waiters on other replicas.
type Shared interface {
	session.Records
	session.PubSub
}

// RuleFunc is a named rule of [Policy.Rule]: it admits approver for a (nil
// error) or refuses them (the error is kept in the *NotAllowedError). It
// may be called concurrently, from any replica's page.
type RuleFunc func(ctx context.Context, a *Approval, approver Identity) error

// Defaults of Config.
const (
	DefaultTTL              = 2 * time.Minute
	DefaultLinger           = time.Minute
	DefaultPoll             = time.Second
	DefaultMaxArgumentBytes = 64 << 10
	DefaultMaxMessageBytes  = 4 << 10
	// DefaultMaxPendingPerIdentity is the default of
	// Config.MaxPendingPerIdentity: each pending approval is a page an
	// approver may be asked to look at.
	DefaultMaxPendingPerIdentity = 20
	// DefaultMaxPendingPerTenant is the default of
	// Config.MaxPendingPerTenant.
	DefaultMaxPendingPerTenant = 1000
	// MaxFieldBytes bounds the subject, tenant, role and tool name an
	// approval is bound to; longer ones are ErrTooLarge.
	MaxFieldBytes = 512
)

// Config configures a [Store]. Zero fields take the defaults noted.
type Config struct {
	// Store keeps the records and carries the wake-ups. Required: the
	// session store the handler uses, so that every replica sees them.
	Store Shared
	// Keys are the secrets every replica shares (the handler's
	// StateKeys), each at least 32 bytes: the first signs, all verify.
	// Required; the signing key is derived for approvals only.
	Keys [][]byte
	// URL is the address of the page, to which an id is appended: e.g.
	// "https://app.example.com/approvals/". Required.
	URL string
	// TTL is how long an approval waits for a decision. If zero,
	// DefaultTTL (the handler's default ConfirmTimeout).
	TTL time.Duration
	// Linger is how long a record outlives its expiry, so that a late
	// visit reads "expired" or "already decided" rather than "not found",
	// and an approved call can still be repeated to run. If zero,
	// DefaultLinger.
	Linger time.Duration
	// Poll is how often a waiter re-reads its record besides the wake-ups.
	// If zero, DefaultPoll.
	Poll time.Duration
	// Roles orders role names from least to most privileged, for
	// [Policy.MinRole] (the handler's Config.Roles).
	Roles []string
	// Rules are the rules a [Policy.Rule] may name.
	Rules map[string]RuleFunc
	// MaxArgumentBytes bounds the canonical arguments of an approval. If
	// zero, DefaultMaxArgumentBytes (64 KiB).
	MaxArgumentBytes int
	// MaxMessageBytes bounds the message shown on the page. If zero,
	// DefaultMaxMessageBytes (4 KiB).
	MaxMessageBytes int
	// MaxPendingPerIdentity bounds the approvals one caller (tenant and
	// subject) holds pending, across every replica sharing Store: each
	// counts from [Store.Begin] until it is decided or expires (one the
	// caller withdrew, until its expiry: withdrawing frees no place).
	// A Begin of a new approval past it is [ErrTooManyPending], saying
	// how many are held and until when (the same call repeated while
	// pending finds its approval, and is not refused). If zero,
	// DefaultMaxPendingPerIdentity (20); at most 1024.
	MaxPendingPerIdentity int
	// MaxPendingPerTenant bounds the approvals the callers of one tenant
	// hold pending together, across every replica sharing Store, counted
	// as MaxPendingPerIdentity is (a withdrawn one until its expiry). A
	// Begin of a new approval past it is [ErrTooManyPendingInTenant],
	// saying how many are held and until when. It also bounds the work of
	// [Store.Inbox]: at most this many records read per view. One caller
	// cannot reach it alone unless it is above MaxPendingPerIdentity; a
	// tenant whose callers together reach it waits for decisions or
	// expiries. If zero, DefaultMaxPendingPerTenant (1000); at most 1024.
	MaxPendingPerTenant int
	// OnPending, if set, is told of each new pending approval once, across
	// every replica sharing Store: by the Store whose Begin made it, never
	// for a Begin that found it (the same call repeated, or made at once
	// on another replica). It gets the approval as made — its URL, tool,
	// arguments, asker, expiry and Policy (who may decide it) — to post it
	// to a chat or mail its approvers. It runs off the caller's goroutine,
	// after Begin returned, so that a slow or failing hook never delays or
	// fails the call: at most 4 at once per Store, each within
	// NotifyTimeout; a notice past 256 waiting is dropped (logged). Close
	// cancels the hooks running. It must not modify the Approval.
	OnPending func(ctx context.Context, a *Approval)
	// NotifyTimeout bounds one OnPending call (its ctx). If zero,
	// DefaultNotifyTimeout (30 s).
	NotifyTimeout time.Duration
	// Logger receives what OnPending dropped or why it failed. If nil,
	// slog.Default().
	Logger *slog.Logger
}

// Store makes, decides and consumes approvals. It is safe for concurrent
// use, and any number of Stores (one per replica) may share one
// session store and keys.
type Store struct {
	cfg     Config
	mac     *sign.Signer
	records record.Kind[stored, *stored] // approval/<id>
	owners  *ownerindex.Index            // pending approvals per caller (pending.go)
	tenants *ownerindex.Index            // pending approvals per tenant (pending.go, inbox.go)
	seen    seen                         // approvals known to have left pending (seen.go)
	hearing hearing
	notices notifier // Config.OnPending (notify.go)
	now     func() time.Time
}

// New returns a Store for cfg, or an error naming the missing or invalid
// field.
func New(cfg Config) (*Store, error) {
	if cfg.Store == nil {
		return nil, errors.New("approval: Config.Store is required")
	}
	if cfg.URL == "" {
		return nil, errors.New("approval: Config.URL is required")
	}
	mac, err := sign.NewSigner("approval", cfg.Keys...)
	if err != nil {
		return nil, fmt.Errorf("approval: Config.Keys: %w", err)
	}
	cfg.Roles, cfg.Rules = slices.Clone(cfg.Roles), cloneRules(cfg.Rules)
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Linger <= 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.MaxArgumentBytes <= 0 {
		cfg.MaxArgumentBytes = DefaultMaxArgumentBytes
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.MaxPendingPerIdentity <= 0 {
		cfg.MaxPendingPerIdentity = DefaultMaxPendingPerIdentity
	}
	if cfg.MaxPendingPerTenant <= 0 {
		cfg.MaxPendingPerTenant = DefaultMaxPendingPerTenant
	}
	cfg.MaxPendingPerTenant = min(cfg.MaxPendingPerTenant, ownerindex.MaxEntries)
	owner, err := sign.NewSigner("approval-owner", cfg.Keys...)
	if err != nil {
		return nil, fmt.Errorf("approval: Config.Keys: %w", err)
	}
	tenant, err := sign.NewSigner("approval-tenant", cfg.Keys...)
	if err != nil {
		return nil, fmt.Errorf("approval: Config.Keys: %w", err)
	}
	if cfg.NotifyTimeout <= 0 {
		cfg.NotifyTimeout = DefaultNotifyTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Store{cfg: cfg, mac: mac, now: time.Now,
		notices: notifier{hook: cfg.OnPending, timeout: cfg.NotifyTimeout, logger: cfg.Logger}}
	s.records = record.Kind[stored, *stored]{Store: cfg.Store, Signer: mac, Implied: s.end, Now: func() time.Time { return s.now() }}
	s.owners = ownerindex.New(ownerindex.Config{Store: cfg.Store, Signer: owner, Max: cfg.MaxPendingPerIdentity,
		ValidID: ValidID, MaxIDLen: IDLen, Recheck: recheck, Now: func() time.Time { return s.now() }})
	s.tenants = ownerindex.New(ownerindex.Config{Store: cfg.Store, Signer: tenant, Max: cfg.MaxPendingPerTenant,
		ValidID: ValidID, MaxIDLen: IDLen, Recheck: recheck, Now: func() time.Time { return s.now() }})
	return s, nil
}

func cloneRules(m map[string]RuleFunc) map[string]RuleFunc {
	out := make(map[string]RuleFunc, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TTL is how long an approval waits for a decision.
func (s *Store) TTL() time.Duration { return s.cfg.TTL }

// IDLen is the length of an approval id.
const IDLen = 22

// ValidID reports whether id has the shape of an approval id (IDLen
// characters of unpadded base64url). Anything else is never looked up.
func ValidID(id string) bool {
	if len(id) != IDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func recordKey(id string) string { return "approval/" + id }
func channel(id string) string   { return "approval/" + id }

// bindingKey is the index from a call (caller, tool, digest) to its
// latest approval; every part is length-prefixed before hashing.
func bindingKey(asker Identity, tool string, digest [32]byte) string {
	h := sha256.New()
	for _, p := range []string{asker.Tenant, asker.Subject, tool} {
		h.Write(binary.AppendUvarint(nil, uint64(len(p))))
		h.Write([]byte(p))
	}
	h.Write(digest[:])
	return "approval-for/" + hex.EncodeToString(h.Sum(nil))
}

// stored is what the store keeps under approval/<id>.
type stored struct {
	State   State           `json:"st"`
	Asker   Identity        `json:"ask"`
	Tool    string          `json:"tool"`
	Digest  string          `json:"dg"`
	Args    json.RawMessage `json:"args"`
	Message string          `json:"msg,omitempty"`
	Policy  Policy          `json:"pol"`
	Created int64           `json:"c"`  // unix ms
	Expires int64           `json:"ex"` // unix ms
	By      *Identity       `json:"by,omitempty"`
	Decided int64           `json:"at,omitempty"`
	// Ann are the tool's hints; absent when it gave none, so that the
	// record of such a call keeps the bytes of earlier releases. A
	// replica of an earlier release ignores the member when it reads the
	// record, and drops it when it writes a transition (the page then
	// shows the MCP defaults: destructive, open world).
	Ann *Annotations `json:"ann,omitempty"`
}

// Valid checks a decoded record like client input.
func (r *stored) Valid() bool {
	if !r.State.valid() || r.Asker.Subject == "" || r.Tool == "" || r.Created <= 0 || r.Expires < r.Created {
		return false
	}
	if d, err := hex.DecodeString(r.Digest); err != nil || len(d) != 32 {
		return false
	}
	if (r.State == Approved || r.State == Declined || r.State == Used) && (r.By == nil || r.Decided <= 0) {
		return false
	}
	return canon.Check(r.Args, canon.Limits{}) == nil
}

// Life and SetLife make stored a record.Body that says no Life: it keeps
// no revision (see seen.go), and its end (s.end) depends on Linger, so
// the Store's record.Kind implies it.
func (r *stored) Life() record.Life   { return record.Life{} }
func (r *stored) SetLife(record.Life) {}

func (s *Store) approval(id string, r *stored) *Approval {
	a := &Approval{
		ID: id, URL: s.cfg.URL + id, State: r.State, Asker: r.Asker, Tool: r.Tool,
		Arguments: slices.Clone([]byte(r.Args)), Message: r.Message, Policy: r.Policy, Annotations: r.Ann.normal(),
		Created: time.UnixMilli(r.Created), Expires: time.UnixMilli(r.Expires),
	}
	hex.Decode(a.Digest[:], []byte(r.Digest))
	if r.By != nil {
		a.DecidedBy, a.Decided = *r.By, time.UnixMilli(r.Decided)
	}
	return a
}

// end is when approval r ends: its expiry plus Linger. Its record is
// gone from the store by then, and no copy of it is acted on after.
func (s *Store) end(r *stored) int64 { return r.Expires + s.cfg.Linger.Milliseconds() }

// ttl is the lifetime to give a record written now: until its end, at
// least a second.
func (s *Store) ttl(r *stored) time.Duration {
	return max(time.Duration(s.end(r)-s.now().UnixMilli())*time.Millisecond, time.Second)
}

// load reads approval id and the exact bytes a transition swaps from. A
// record that does not verify or check, read at or after its end (s.end,
// which the record implies: it stores no end of its own), or in an
// earlier state than this Store knows the approval in (a copy written
// back, see seen.go) is ErrNotFound.
func (s *Store) load(ctx context.Context, id string) (*stored, []byte, error) {
	if !ValidID(id) {
		return nil, nil, ErrNotFound
	}
	s.listen(ctx)
	// What was known before the read: a transition heard while the read
	// was under way may be newer than what it returns.
	known := s.seen.known(id)
	r, raw, err := s.records.Load(ctx, recordKey(id))
	switch {
	case errors.Is(err, session.ErrNotFound), errors.Is(err, record.ErrInvalid):
		return nil, nil, ErrNotFound
	case err != nil:
		return nil, nil, fmt.Errorf("approval: load: %w", err)
	case rolledBack(known, r.State):
		return nil, nil, ErrNotFound
	}
	s.remember(ctx, id, &r, false)
	return &r, raw, nil
}

// move makes the transition from the record read as raw to next, and
// reports whether this call made it; false means another replica changed
// the record first.
func (s *Store) move(ctx context.Context, id string, raw []byte, from State, next *stored) (bool, error) {
	if !from.canMove(next.State) {
		return false, fmt.Errorf("approval: cannot move from %s to %s", from, next.State)
	}
	_, ok, err := s.records.Swap(ctx, recordKey(id), raw, next, s.ttl(next))
	if err != nil {
		return false, fmt.Errorf("approval: %w", err)
	}
	if ok {
		s.remember(ctx, id, next, true)
		// Wake the waiters; the message carries no decision.
		s.cfg.Store.Publish(context.WithoutCancel(ctx), channel(id), s.mac.SignMessage(channel(id), s.now(), []byte(next.State)))
		if from == Pending && (next.State == Approved || next.State == Declined) {
			// Decided: it stops counting. (An expired one stopped at its
			// expiry; a withdrawn one counts until then, so that a
			// caller cannot make approvals without end by withdrawing
			// them.)
			s.release(ctx, next.Asker, id)
		}
	}
	return ok, nil
}

// Request is a call that needs an approval.
type Request struct {
	// Asker is the caller. Its Subject is required.
	Asker Identity
	// Tool is the name of the tool. Required.
	Tool string
	// Arguments are the call's arguments (JSON; empty is null). They are
	// bound in canonical form; a value with a repeated key is refused.
	Arguments []byte
	// Message is shown to the approver ("" for none): control and format
	// characters are escaped on the page, never dropped.
	Message string
	// Policy says who may decide.
	Policy Policy
	// Annotations are the tool's hints, shown to the approver (nil, or
	// every field unset: none). They are kept in the record as given, and
	// bind like Message: Begin does not return an approval made with
	// other hints (nor one made by an earlier release, which kept none,
	// for a tool that gives some: that call asks again).
	Annotations *Annotations
}

// check validates req and returns its canonical arguments and digest.
func (s *Store) check(req *Request) ([]byte, [32]byte, error) {
	var d [32]byte
	if req.Asker.Subject == "" || req.Tool == "" {
		return nil, d, errors.New("approval: a request needs an asker subject and a tool")
	}
	for _, f := range []string{req.Asker.Subject, req.Asker.Tenant, req.Asker.Role, req.Tool, req.Policy.MinRole, req.Policy.Rule} {
		if len(f) > MaxFieldBytes {
			return nil, d, fmt.Errorf("%w: a name is longer than %d bytes", ErrTooLarge, MaxFieldBytes)
		}
	}
	if len(req.Message) > s.cfg.MaxMessageBytes || !utf8.ValidString(req.Message) {
		return nil, d, fmt.Errorf("%w: the message must be UTF-8 of at most %d bytes", ErrTooLarge, s.cfg.MaxMessageBytes)
	}
	if len(req.Arguments) > 2*s.cfg.MaxArgumentBytes {
		return nil, d, fmt.Errorf("%w: the arguments are longer than %d bytes", ErrTooLarge, 2*s.cfg.MaxArgumentBytes)
	}
	args, err := canon.Canonical(req.Arguments)
	if err != nil {
		return nil, d, fmt.Errorf("approval: arguments: %w", err)
	}
	if len(args) > s.cfg.MaxArgumentBytes {
		return nil, d, fmt.Errorf("%w: the canonical arguments are longer than %d bytes", ErrTooLarge, s.cfg.MaxArgumentBytes)
	}
	return args, sha256.Sum256(args), nil
}

// Begin returns the approval of the call req describes: the one bound to
// the same caller (tenant and subject), tool and canonical arguments, with
// the same policy, message and annotations, while it is pending or approved; else a new
// pending one, which expires after TTL (so a policy the host tightened
// applies at once: the approval made under the old one is not returned
// again). created reports which. Of concurrent Begins for one call, on any
// replica, all return the same approval, unless a store failure
// interrupted them. A new approval past Config.MaxPendingPerIdentity of
// the caller is ErrTooManyPending, past Config.MaxPendingPerTenant of its
// tenant ErrTooManyPendingInTenant, and nothing is written but the
// indexes.
func (s *Store) Begin(ctx context.Context, req Request) (a *Approval, created bool, err error) {
	args, digest, err := s.check(&req)
	if err != nil {
		return nil, false, err
	}
	s.listen(ctx)
	idx := bindingKey(req.Asker, req.Tool, digest)
	for range 4 {
		cur, old, err := s.current(ctx, idx)
		if err != nil {
			return nil, false, err
		}
		if cur != nil && (cur.State == Pending || cur.State == Approved) && cur.Policy == req.Policy && cur.Message == req.Message &&
			sameAnnotations(cur.Annotations, req.Annotations) {
			return cur, false, nil
		}
		now := s.now()
		r := &stored{State: Pending, Asker: req.Asker, Tool: req.Tool, Digest: hex.EncodeToString(digest[:]),
			Args: args, Message: req.Message, Policy: req.Policy, Ann: req.Annotations.normal(),
			Created: now.UnixMilli(), Expires: now.Add(s.cfg.TTL).UnixMilli()}
		id := newID()
		if err := s.admit(ctx, req.Asker, id, r.Expires); err != nil {
			return nil, false, err
		}
		ok, err := s.create(ctx, idx, old, id, r)
		if err != nil || !ok {
			// Not made, or another Begin indexed its approval first: ours
			// is never shown to anyone. It goes at once, and stops
			// counting. Return theirs.
			s.drop(ctx, id, r)
			s.release(ctx, req.Asker, id)
		}
		if err != nil {
			return nil, false, err
		}
		if ok {
			s.notices.notify(s.approval(id, r)) // its own copy
			return s.approval(id, r), true, nil
		}
	}
	return nil, false, errors.New("approval: too much contention on one call")
}

// drop deletes the record of approval id as written new (r), unless it
// changed since: it swaps it for itself, to live a millisecond.
func (s *Store) drop(ctx context.Context, id string, r *stored) {
	s.records.Swap(ctx, recordKey(id), s.records.Encode(recordKey(id), r), r, time.Millisecond)
}

// create writes the record of new approval id and points the index idx,
// whose value was old (nil: absent), at it. It reports whether the index
// now points at it.
func (s *Store) create(ctx context.Context, idx string, old []byte, id string, r *stored) (bool, error) {
	_, ok, err := s.records.Create(ctx, recordKey(id), r, s.ttl(r))
	switch {
	case err != nil:
		return false, fmt.Errorf("approval: create: %w", err)
	case !ok:
		return false, errors.New("approval: create: id in use")
	}
	ptr := s.mac.Sign(idx, []byte(id)) // the bare id, not a record's JSON
	if old == nil {
		ok, err = s.cfg.Store.PutIfAbsent(ctx, idx, ptr, s.ttl(r))
	} else {
		ok, err = s.cfg.Store.CompareAndSwap(ctx, idx, old, ptr, s.ttl(r))
	}
	if err != nil {
		return false, fmt.Errorf("approval: index: %w", err)
	}
	return ok, nil
}

// current reads the approval the index idx points at (nil if none or gone)
// and the index's raw value (nil if absent). A pending approval past its
// expiry is expired on the way.
func (s *Store) current(ctx context.Context, idx string) (*Approval, []byte, error) {
	raw, err := s.cfg.Store.Load(ctx, idx)
	if errors.Is(err, session.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("approval: index: %w", err)
	}
	id, err := s.mac.Open(idx, raw)
	if err != nil {
		return nil, raw, nil // not ours: replaced by the next approval
	}
	a, err := s.Get(ctx, string(id))
	if errors.Is(err, ErrNotFound) {
		return nil, raw, nil
	}
	return a, raw, err
}

// Get returns approval id. A pending approval at or past its expiry is
// moved to expired first, so Get never reports one pending after it
// expired. A malformed id, or a record that does not verify, is
// ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (*Approval, error) {
	return s.transition(ctx, id, func(a *Approval, r *stored) (*stored, error) {
		if r.State != Pending || s.now().UnixMilli() < r.Expires {
			return nil, nil
		}
		return r.with(Expired), nil
	})
}

// errContention is returned when a transition lost its CompareAndSwap
// maxTries times in a row.
var errContention = errors.New("approval: too much contention on one approval")

const maxTries = 8

// transition reads approval id and asks step for the record to move it
// to: nil leaves it as read (and returns it with step's error); else the
// move is made with one CompareAndSwap from the bytes read, and returned
// with step's error, or, if another replica changed the record first,
// everything starts again from a fresh read.
func (s *Store) transition(ctx context.Context, id string, step func(a *Approval, r *stored) (*stored, error)) (*Approval, error) {
	for range maxTries {
		r, raw, err := s.load(ctx, id)
		if err != nil {
			return nil, err
		}
		a := s.approval(id, r)
		next, stepErr := step(a, r)
		if next == nil {
			return a, stepErr
		}
		ok, err := s.move(ctx, id, raw, r.State, next)
		if err != nil {
			return nil, err
		}
		if ok {
			return s.approval(id, next), stepErr
		}
	}
	return nil, errContention
}

// with returns a copy of r in state st.
func (r *stored) with(st State) *stored {
	next := *r
	next.State = st
	return &next
}

// Check reports whether approver may decide a: nil, or a *NotAllowedError.
// It does not look at a's state.
func (s *Store) Check(ctx context.Context, a *Approval, approver Identity) error {
	p := a.Policy
	switch {
	case approver.Subject == "":
		return &NotAllowedError{Reason: ReasonNoIdentity}
	case !p.AnyTenant && approver.Tenant != a.Asker.Tenant:
		return &NotAllowedError{Reason: ReasonTenant}
	case !p.AllowSelf && approver.same(a.Asker):
		return &NotAllowedError{Reason: ReasonSelf}
	case p.MinRole != "" && !s.atLeast(approver.Role, p.MinRole):
		return &NotAllowedError{Reason: ReasonRole}
	}
	if p.Rule == "" {
		return nil
	}
	rule := s.cfg.Rules[p.Rule]
	if rule == nil {
		return &NotAllowedError{Reason: ReasonRule, Err: fmt.Errorf("unknown rule %q", p.Rule)}
	}
	if err := rule(ctx, a, approver); err != nil {
		return &NotAllowedError{Reason: ReasonRule, Err: err}
	}
	return nil
}

// atLeast reports whether role is at or above min in Roles.
func (s *Store) atLeast(role, min string) bool {
	m := slices.Index(s.cfg.Roles, min)
	r := slices.Index(s.cfg.Roles, role)
	return m >= 0 && r >= m
}

// Decide records approver's decision on approval id: approve or decline.
// It is one CompareAndSwap from pending: of concurrent decisions, on any
// replica, exactly one is recorded, and the others get ErrDecided. It
// returns the approval as decided, or: ErrNotFound, ErrExpired (at or
// after Expires; nothing is decided), ErrDecided (the approval is returned
// too, as decided before), or a *NotAllowedError (nothing is decided).
func (s *Store) Decide(ctx context.Context, id string, approver Identity, approve bool) (*Approval, error) {
	a, err := s.transition(ctx, id, func(a *Approval, r *stored) (*stored, error) {
		switch {
		case r.State == Expired:
			return nil, ErrExpired
		case r.State == Withdrawn:
			return nil, ErrWithdrawn
		case r.State != Pending:
			return nil, ErrDecided
		case s.now().UnixMilli() >= r.Expires:
			return r.with(Expired), ErrExpired
		}
		if err := s.Check(ctx, a, approver); err != nil {
			return nil, err
		}
		next := r.with(Declined)
		if approve {
			next.State = Approved
		}
		next.By, next.Decided = &approver, s.now().UnixMilli()
		return next, nil
	})
	return a, err
}

// Consume uses approved approval id for one run of the call it is bound
// to: asker (tenant and subject), tool and arguments (compared in
// canonical form). Of concurrent Consumes, on any replica, exactly one
// succeeds; the others get ErrUsed. Other errors: ErrNotFound, ErrMismatch,
// ErrNotApproved (the approval is returned too: pending, declined or
// expired).
func (s *Store) Consume(ctx context.Context, id string, asker Identity, tool string, args []byte) (*Approval, error) {
	d, err := canon.Digest(args)
	if err != nil {
		return nil, ErrMismatch
	}
	a, err := s.transition(ctx, id, func(a *Approval, r *stored) (*stored, error) {
		switch {
		case !a.Asker.same(asker) || a.Tool != tool || a.Digest != d:
			return nil, ErrMismatch
		case r.State == Used:
			return nil, ErrUsed
		case r.State != Approved:
			return nil, ErrNotApproved
		}
		return r.with(Used), nil
	})
	if errors.Is(err, ErrMismatch) {
		return nil, err
	}
	return a, err
}

// Withdraw ends pending approval id for its caller, whose call was
// cancelled: nobody can decide it any more, and the page says so. It is
// one CompareAndSwap from pending, racing with decisions: the first wins.
// It returns the approval as it ends: withdrawn, or as decided or expired
// before (with ErrDecided or ErrExpired); ErrMismatch for another caller
// (nothing changes).
func (s *Store) Withdraw(ctx context.Context, id string, asker Identity) (*Approval, error) {
	a, err := s.transition(ctx, id, func(a *Approval, r *stored) (*stored, error) {
		switch {
		case !a.Asker.same(asker):
			return nil, ErrMismatch
		case r.State == Expired:
			return nil, ErrExpired
		case r.State == Withdrawn:
			return nil, nil
		case r.State != Pending:
			return nil, ErrDecided
		case s.now().UnixMilli() >= r.Expires:
			return r.with(Expired), ErrExpired
		}
		return r.with(Withdrawn), nil
	})
	if errors.Is(err, ErrMismatch) {
		return nil, err
	}
	return a, err
}

// Wait blocks until approval id is no longer pending, and returns it: a
// decision made on any replica wakes it at once (Pub/Sub), and it re-reads
// the record every Poll besides, so a lost wake-up costs latency only. At
// Expires it moves the approval to expired (unless a decision won) and
// returns it. It returns early with ctx's error; while the store fails it
// keeps trying, and returns the store's error once Expires plus Linger
// passed without a successful read (the record is gone by then anyway);
// if it never read the record, it keeps trying until ctx ends.
func (s *Store) Wait(ctx context.Context, id string) (*Approval, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	var wake <-chan []byte
	if sub, err := s.cfg.Store.Subscribe(ctx, channel(id)); err == nil {
		defer sub.Close()
		wake = sub.C()
	} // else: poll only
	tick := time.NewTicker(s.cfg.Poll)
	defer tick.Stop()
	var last *Approval
	for read := true; ; {
		if !read {
			read = s.await(ctx, id, &wake, tick.C, last)
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		a, err := s.Get(ctx, id)
		switch {
		case err == nil && a.State != Pending:
			return a, nil
		case err == nil:
			last = a
		case errors.Is(err, ErrNotFound), ctx.Err() != nil:
			return nil, err
		case last != nil && !s.now().Before(last.Expires.Add(s.cfg.Linger)):
			return nil, err
		}
		read = false
	}
}

// await waits for a reason to read approval id again: a verified wake-up
// on wake, a tick, the expiry of last, or ctx done. It reports whether to
// read (false only for a message that does not verify, or a closed wake
// channel). The channel is set to nil when it closes.
func (s *Store) await(ctx context.Context, id string, wake *<-chan []byte, tick <-chan time.Time, last *Approval) bool {
	until := s.cfg.Poll
	if last != nil {
		until = min(until, time.Until(last.Expires))
	}
	timer := time.NewTimer(max(until, time.Millisecond))
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case m, ok := <-*wake:
		if !ok {
			*wake = nil
			return true
		}
		_, err := s.mac.OpenMessage(channel(id), s.now(), messageWindow, m)
		return err == nil
	case <-tick:
	case <-timer.C:
	}
	return true
}

// messageWindow is how far a wake-up's timestamp may be from the
// receiver's clock.
const messageWindow = 30 * time.Second
