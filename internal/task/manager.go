// Package task keeps durable MCP tasks in a shared session store, so that
// a task created on one replica is read, updated and cancelled on any, and
// is never stuck in working nor run twice when the replica running it
// dies.
//
// A [Manager] per process creates tasks ([Manager.Create], which returns
// the [Run] the caller executes) and serves the tasks methods for any
// replica's tasks: [Manager.Get], [Manager.Update], [Manager.Cancel] and,
// for 2025-11-25, [Manager.List] and [Manager.Wait]. Every one takes the
// caller's [Owner]: a task of another tenant or subject answers exactly
// like an unknown id ([ErrNotFound]).
//
// # Durability and the runner's lease
//
// Create returns once the task's record is in the store (PutIfAbsent), so
// a tasks/get right after it, on any replica, finds it. The replica
// running the task holds a lease key in the store, renewed every
// Lease/3. When the lease lapses — the replica died, or lost the store
// for longer than Lease — the next replica that reads the task marks it
// failed (outcome unknown, code -32603), in one CompareAndSwap; the
// runner's late Complete then loses with ErrTerminal. Nothing in this
// package ever starts a task's work a second time.
//
// # Cancellation and notifications
//
// Cancel marks the task cancelled in the store (so tasks/get shows it at
// once, as 2025-11-25 requires) and publishes a signed signal; the
// Manager holding the Run cancels the Run's context, wherever it is.
// A lost signal costs latency, never correctness: every renewal also
// re-reads the record. Every visible change of a task is published,
// signed, on its tenant's channel; [Manager.Listen] receives them.
package task

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/ownerindex"
	"github.com/mcphandler/mcphandler/internal/record"
	"github.com/mcphandler/mcphandler/internal/revs"
	"github.com/mcphandler/mcphandler/internal/sign"
	"github.com/mcphandler/mcphandler/session"
)

// Store is what a Manager needs of a session store.
type Store interface {
	session.Records
	session.PubSub
}

// Defaults of [Config].
const (
	DefaultTTL             = time.Hour
	DefaultResultRetention = 10 * time.Minute
	DefaultPollInterval    = time.Second
	DefaultMaxTasks        = 100
	DefaultMaxResultBytes  = 1 << 20
	DefaultLease           = 5 * time.Second
)

// ReservedKeyPrefix starts the input keys the handler keeps for itself; a
// runner's RequestInput may not use it. It equals
// mcphandler.ReservedKeyPrefix.
const ReservedKeyPrefix = "mcphandler/"

// Config configures a Manager. The zero value of each field but Store and
// Keys selects its default.
type Config struct {
	// Store keeps the records and carries the signals. Required.
	Store Store
	// Keys are the secrets records and messages are signed with, newest
	// first (see package internal/sign). Required.
	Keys [][]byte
	// TTL is how long a task is kept from its creation (reported as
	// ttlMs); a task still running then is failed. Default DefaultTTL.
	TTL time.Duration
	// ResultRetention is how long an ended task is kept at least after it
	// ended, within TTL+ResultRetention of its creation. Default
	// DefaultResultRetention.
	ResultRetention time.Duration
	// PollInterval is the pollIntervalMs suggested to clients. Default
	// DefaultPollInterval.
	PollInterval time.Duration
	// MaxTasks bounds the tasks one identity holds: each counts from its
	// creation until TTL+ResultRetention after it. Default
	// DefaultMaxTasks; at most ownerindex.MaxEntries (1024).
	MaxTasks int
	// MaxResultBytes bounds a task's result. Default
	// DefaultMaxResultBytes.
	MaxResultBytes int
	// Lease is how long a runner's lease lasts without renewal, and so
	// how soon a task of a dead replica is failed. Default DefaultLease.
	Lease time.Duration
	// Logger receives what the Manager cannot return (failed renewals,
	// dropped forged messages). Default slog.Default().
	Logger *slog.Logger

	now func() time.Time // tests
}

// Manager creates tasks and serves the tasks methods. It is safe for
// concurrent use; Close stops it.
type Manager struct {
	cfg            Config
	signal, status *sign.Signer
	owners         *ownerindex.Index
	// records keeps the task records, signed (purpose "task"). Its Revs
	// is the newest revision this Manager read or wrote of each: an older
	// one was written back by something that can write the store but not
	// sign, and reads as absent (see load), as does one past its expiry.
	records record.Kind[taskRecord, *taskRecord]

	mu     sync.Mutex // guards runs, sub and closed
	runs   map[string]*Run
	sub    session.Subscription
	closed bool
}

// New returns a Manager for cfg.
func New(cfg Config) (*Manager, error) {
	if cfg.Store == nil {
		return nil, errors.New("task: Config.Store is nil")
	}
	def(&cfg.TTL, DefaultTTL)
	def(&cfg.ResultRetention, DefaultResultRetention)
	def(&cfg.PollInterval, DefaultPollInterval)
	def(&cfg.Lease, DefaultLease)
	def(&cfg.MaxTasks, DefaultMaxTasks)
	def(&cfg.MaxResultBytes, DefaultMaxResultBytes)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	m := &Manager{cfg: cfg, runs: make(map[string]*Run)}
	var owner *sign.Signer
	for _, p := range []struct {
		s       **sign.Signer
		purpose string
	}{{&m.records.Signer, "task"}, {&owner, "task-owner"}, {&m.signal, "task-signal"}, {&m.status, "task-status"}} {
		s, err := sign.NewSigner(p.purpose, cfg.Keys...)
		if err != nil {
			return nil, err
		}
		*p.s = s
	}
	m.records.Store, m.records.Revs, m.records.Now, m.records.Dropped = cfg.Store, new(revs.Memory), cfg.now, m.dropped
	m.owners = ownerindex.New(ownerindex.Config{Store: cfg.Store, Signer: owner, Max: cfg.MaxTasks,
		ValidID: validID, MaxIDLen: uuidLen, Now: cfg.now})
	return m, nil
}

func def[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

func (m *Manager) nowMs() int64 { return m.cfg.now().UnixMilli() }

// storeTTL is the store lifetime of a value that must be gone at exp.
func (m *Manager) storeTTL(exp int64) time.Duration {
	return max(time.Duration(exp-m.nowMs())*time.Millisecond, time.Millisecond)
}

// expiry is when r must be gone: TTL+ResultRetention after its creation
// while it runs; once ended, ResultRetention after now but no sooner than
// TTL after its creation, and never later than while it ran, so that the
// owner index (which counts a task until then) never misses it.
func (m *Manager) expiry(r *taskRecord) int64 {
	bound := r.C + r.TTL + m.cfg.ResultRetention.Milliseconds()
	if !r.St.Terminal() {
		return bound
	}
	return min(bound, max(r.C+r.TTL, m.nowMs()+m.cfg.ResultRetention.Milliseconds()))
}

// load reads task id and the exact bytes a transition must swap from. A
// malformed id, a missing, expired, forged or rolled-back record, and
// (when own is not empty) a record of another owner are all ErrNotFound.
func (m *Manager) load(ctx context.Context, id, own string) (taskRecord, []byte, error) {
	if !validID(id) {
		return taskRecord{}, nil, ErrNotFound
	}
	rec, raw, err := m.records.Load(ctx, taskKey(id))
	if err != nil {
		return taskRecord{}, nil, notFound(err)
	}
	if own != "" && rec.Own != own {
		return taskRecord{}, nil, ErrNotFound
	}
	return rec, raw, nil
}

// dropped logs a record that load refused as forged or rolled back; one
// past its expiry, or that does not decode, is dropped silently.
func (m *Manager) dropped(key string, err error) {
	id := strings.TrimPrefix(key, taskKey(""))
	switch {
	case errors.Is(err, record.ErrRolledBack):
		m.cfg.Logger.Warn("task: dropped a record older than one this replica saw (written back)", "task", id)
	case !errors.Is(err, record.ErrEnded) && !errors.Is(err, record.ErrInvalid):
		m.cfg.Logger.Warn("task: dropped a record that failed verification", "task", id, "err", err)
	}
}

// errSkip, returned by a change, writes nothing.
var errSkip = errors.New("skip")

// maxAttempts bounds the Swap attempts of one transition.
const maxAttempts = 64

// update applies change to task id until one Swap wins (a stale read is
// read again). change gets a copy of the current record to modify;
// returning errSkip writes nothing. It returns the record as written (or
// as read, when nothing was), and whether this call wrote it. A change to
// a status the current one cannot move to is ErrTerminal.
func (m *Manager) update(ctx context.Context, id, own string, change func(*taskRecord) error) (taskRecord, bool, error) {
	ctx = context.WithoutCancel(ctx)
	for range maxAttempts {
		cur, raw, err := m.load(ctx, id, own)
		if err != nil {
			return taskRecord{}, false, err
		}
		next := cur.clone()
		if err := change(&next); errors.Is(err, errSkip) {
			return cur, false, nil
		} else if err != nil {
			return cur, false, err
		}
		if !canMove(cur.St, next.St) {
			return cur, false, ErrTerminal
		}
		next.U = max(m.nowMs(), cur.U)
		next.Exp = m.expiry(&next)
		_, ok, err := m.records.Swap(ctx, taskKey(id), raw, &next, m.storeTTL(next.Exp))
		if err != nil {
			return cur, false, err
		}
		if ok {
			if next.St != cur.St || next.Msg != cur.Msg || len(next.Req) != len(cur.Req) {
				m.publishStatus(ctx, id, &next)
			}
			return next, true, nil
		}
	}
	return taskRecord{}, false, errContended
}

// newToken returns a random lease token.
func newToken() string { return rand.Text() }

// Create stores a new working task of owner for tool and returns the Run
// that executes it, holding its lease, with the task as stored. It returns
// only once the record is in the store. The Run's context is not derived
// from ctx (which bounds the store calls only): it ends when the task is
// cancelled or ended elsewhere, at its TTL, or at Close.
//
// ttl is the task's lifetime the client asked for (2025-11-25
// params.task.ttl): zero means Config.TTL, more than Config.TTL is cut to
// it, and less than MinTTL raised to it.
//
// It fails with ErrTooManyTasks when owner already holds MaxTasks tasks.
func (m *Manager) Create(ctx context.Context, owner Owner, tool string, ttl time.Duration) (*Run, DetailedTask, error) {
	if tool == "" || len(tool) > 256 {
		return nil, DetailedTask{}, errors.New("task: tool name must be 1 to 256 bytes")
	}
	if err := m.listenSignals(ctx); err != nil {
		return nil, DetailedTask{}, err
	}
	id, now := newID(), m.nowMs()
	rec := taskRecord{V: recordVersion, St: Working, Own: owner.digest(), Ten: digest("tenant", owner.Tenant), Tool: tool,
		C: now, U: now, TTL: m.ttl(ttl).Milliseconds(), Poll: m.cfg.PollInterval.Milliseconds(), By: newToken()}
	rec.Exp = m.expiry(&rec)
	if err := m.admit(ctx, rec.Own, id, rec.Exp); err != nil {
		return nil, DetailedTask{}, err
	}
	lease, err := record.Take(ctx, m.cfg.Store, leaseKey(id), rec.By, m.cfg.Lease)
	if err != nil || lease == nil {
		return nil, DetailedTask{}, orInUse(err, "lease")
	}
	if _, ok, err := m.records.Create(ctx, taskKey(id), &rec, m.storeTTL(rec.Exp)); err != nil || !ok {
		lease.Release()
		return nil, DetailedTask{}, orInUse(err, "record")
	}
	r, err := m.start(id, &rec, lease)
	if err != nil {
		return nil, DetailedTask{}, err
	}
	m.publishStatus(ctx, id, &rec)
	return r, rec.detailed(id), nil
}

// MinTTL is the shortest lifetime a client may ask for.
const MinTTL = time.Second

func (m *Manager) ttl(asked time.Duration) time.Duration {
	if asked <= 0 {
		return m.cfg.TTL
	}
	return min(max(asked, MinTTL), m.cfg.TTL)
}

func orInUse(err error, what string) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("task: new task's %s key already in use", what)
}

// Get returns task id of owner. A task still working or input_required
// whose runner's lease lapsed, or that outlived its TTL, is marked failed
// first, so no reader ever sees it stuck.
func (m *Manager) Get(ctx context.Context, owner Owner, id string) (DetailedTask, error) {
	rec, _, err := m.load(ctx, id, owner.digest())
	if err != nil {
		return DetailedTask{}, err
	}
	if !rec.St.Terminal() {
		if rec, err = m.checkRunner(ctx, id, &rec); err != nil {
			return DetailedTask{}, err
		}
	}
	return rec.detailed(id), nil
}

// Failure messages of tasks whose runner did not end them.
const (
	msgLapsed  = "the outcome of the task is unknown: the server running it stopped"
	msgExpired = "the task did not end within its ttl"
	msgClosed  = "the server running the task shut down before it ended"
)

// checkRunner fails rec (non-terminal) when its runner's lease lapsed or
// its TTL passed, and returns the task as it then is.
func (m *Manager) checkRunner(ctx context.Context, id string, rec *taskRecord) (taskRecord, error) {
	msg := msgExpired
	if m.nowMs() < rec.C+rec.TTL {
		_, err := m.cfg.Store.Load(ctx, leaseKey(id))
		if !errors.Is(err, session.ErrNotFound) {
			return *rec, err // held, or the store cannot tell now
		}
		msg = msgLapsed
	}
	return m.fail(ctx, id, rec.By, msg)
}

// fail marks task id failed with msg, if it has not ended and its runner
// is still by; it returns the task as it then is.
func (m *Manager) fail(ctx context.Context, id, by, msg string) (taskRecord, error) {
	rec, _, err := m.update(ctx, id, "", func(r *taskRecord) error {
		if r.St.Terminal() || r.By != by {
			return errSkip
		}
		r.St, r.Msg, r.Req, r.Ans = Failed, msg, nil, nil
		r.Err = &jsonrpc.Error{Code: -32603, Message: msg}
		return nil
	})
	return rec, err
}

// Update delivers the client's answers to the pending input requests of
// task id of owner (tasks/update): each answer under a pending key is kept
// for the runner and the key stops being pending; once none is, the task
// is working again. Keys that are not pending (unknown, already answered)
// are ignored, and so is an update of a task that is not input_required.
//
// responses are checked as ParseUpdate checks them (ErrInvalidParams).
func (m *Manager) Update(ctx context.Context, owner Owner, id string, responses map[string]json.RawMessage) error {
	if len(responses) > MaxInputKeys {
		return fmt.Errorf("%w: more than %d inputResponses", ErrInvalidParams, MaxInputKeys)
	}
	for k, v := range responses {
		if checkKey(k) != nil || len(v) > MaxInputBytes || !isObject(v) {
			return fmt.Errorf("%w: inputResponses[%q] must be an object of at most %d bytes under a valid key", ErrInvalidParams, k, MaxInputBytes)
		}
	}
	_, wrote, err := m.update(ctx, id, owner.digest(), func(r *taskRecord) error {
		n := 0
		for k, v := range responses {
			if _, ok := r.Req[k]; ok && r.St == InputRequired {
				delete(r.Req, k)
				if r.Ans == nil {
					r.Ans = make(map[string]json.RawMessage)
				}
				r.Ans[k] = compact(v)
				n++
			}
		}
		if n == 0 {
			return errSkip
		}
		if len(r.Req) == 0 {
			// Working again: the message said what the task waited for.
			r.St, r.Req, r.Msg = Working, nil, ""
		}
		return nil
	})
	if wrote {
		m.sendSignal(ctx, id, signalInput)
	}
	return err
}

// Cancel marks task id of owner cancelled, so that every later read shows
// it, and asks its runner, wherever it is, to stop. A task that already
// ended is returned unchanged with ErrTerminal (2026-07-28 acks it anyway;
// 2025-11-25 answers -32602).
func (m *Manager) Cancel(ctx context.Context, owner Owner, id string) (DetailedTask, error) {
	rec, wrote, err := m.update(ctx, id, owner.digest(), func(r *taskRecord) error {
		r.St, r.Msg, r.Req, r.Ans = Cancelled, "cancelled at the client's request", nil, nil
		return nil
	})
	if errors.Is(err, ErrTerminal) {
		return rec.detailed(id), err
	}
	if err != nil {
		return DetailedTask{}, err
	}
	if wrote {
		m.sendSignal(ctx, id, signalCancel)
	}
	return rec.detailed(id), nil
}

// Wait returns task id of owner once it ended (2025-11-25 tasks/result),
// reading it every PollInterval, or ctx's error.
func (m *Manager) Wait(ctx context.Context, owner Owner, id string) (DetailedTask, error) {
	return m.WaitUntil(ctx, owner, id, func(d DetailedTask) bool { return false })
}

// WaitUntil returns task id of owner once it ended or stop reports true
// of it, reading it every PollInterval, or ctx's error.
func (m *Manager) WaitUntil(ctx context.Context, owner Owner, id string, stop func(DetailedTask) bool) (DetailedTask, error) {
	t := time.NewTicker(min(m.cfg.PollInterval, m.cfg.Lease/3))
	defer t.Stop()
	for {
		d, err := m.Get(ctx, owner, id)
		if err != nil || d.Status.Terminal() || stop(d) {
			return d, err
		}
		select {
		case <-ctx.Done():
			return DetailedTask{}, ctx.Err()
		case <-t.C:
		}
	}
}

// compact returns v without insignificant whitespace (v is valid JSON).
func compact(v json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return append(json.RawMessage(nil), v...)
	}
	return json.RawMessage(b.Bytes())
}
