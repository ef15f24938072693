package mcphandler

import (
	"context"
	"log/slog"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/ownerindex"
)

// confirms carries out the Confirm decisions of every era: it owns the
// records of confirms in the store (confirm/<id> on 2025 sessions,
// nonce/<n> on 2026-07-28: confirm_state.go) and the leases of the
// replicas responsible for them, the per-identity bound on those records
// (confirm_owner.go), the 2025 push path with its take-over by another
// replica (confirm_push.go) and the 2026-07-28 rounds (confirm_rounds.go).
// The approvals reuse its records and leases.
//
// It depends on the Handler's Config (cfg: the store, ConfirmTimeout,
// Sessions, OnCall, Approvals), the signers of what replicas exchange
// (macs) and the replica bus that signs, publishes and verifies it (bus,
// storeauth.go), its owner index and its periods (ct), and reaches the
// rest of the handler only through the func fields New sets
// (connectConfirms): the parts of a tools/call it finishes a call with
// (callPath), the sessions' event logs and the approvals' take-over.
//
// It keeps no state of its own in memory but the revisions macs.revs
// remembers: every decision is a CompareAndSwap on a record in the store,
// so it is safe for concurrent use by any number of requests, on any
// number of replicas. Its fields are set once, by New, and then only
// read (tests shorten ct before the handler serves).
type confirms struct {
	cfg    *Config
	macs   *macs
	bus    *replicaBus       // signed records and messages: publish, openRecord, openMessage, dropped
	owners *ownerindex.Index // the confirm records of each identity (confirm_owner.go)
	ct     confirmTimes      // the confirm machinery's periods

	callPath

	// eventLog is the event log of a session's POST streams (stream.go),
	// where a call finished by a replica other than its asker is answered.
	eventLog func(sid string) *eventLog
	// adoptApproval takes over a resumed stream's call that waits for an
	// approval (approve_push.go).
	adoptApproval func(rq *request, id string, rec confirmRecord, raw []byte)
}

// callPath is what confirms and approvals reach of the rest of a
// tools/call to finish a call they decided, besides the call's own
// toolRun (call.go), which runs and answers it: finding the tool again
// (the catalog), and answering a request whose store call failed. Each
// func is set once, by New, and is safe for concurrent use.
type callPath struct {
	findTool    func(ctx context.Context, id Identity, name string) (Tool, bool, error)
	storeFailed func(rq *request, m *jsonrpc.Message, err error)
}

// newConfirms returns the confirms of cfg, exchanging signed records and
// messages through bus, with its periods at their defaults and its owner
// index signed with secrets; New connects its func fields
// (connectConfirms).
func newConfirms(cfg *Config, m *macs, bus *replicaBus, secrets [][]byte) (*confirms, error) {
	owners, err := newConfirmOwners(cfg, secrets)
	if err != nil {
		return nil, err
	}
	return &confirms{cfg: cfg, macs: m, bus: bus, owners: owners, ct: defaultConfirmTimes}, nil
}

func (cs *confirms) logger() *slog.Logger { return cs.cfg.Logger }

// decide carries out a Confirm decision, as the request can carry it: in
// input_required rounds when it has them (2026-07-28, confirm_rounds.go),
// else pushed on the call's 2025 stream (confirm_push.go). It returns
// true when the tool is to run, with t.lease or t.round set.
func (cs *confirms) decide(t *toolRun, d Decision) bool {
	if t.call.Exchange.mr != nil {
		return cs.confirmRounds(t, d)
	}
	return cs.confirmPush(t, d)
}

// connectConfirms sets the func fields of h's confirms and approvals. Each
// calls h at the time of the call, so that neither depends on which of h's
// parts holds what it calls, nor on the order in which New builds them.
// It allocates once, here: nothing on a request's path.
func connectConfirms(h *Handler) {
	path := callPath{
		findTool: func(ctx context.Context, id Identity, name string) (Tool, bool, error) {
			return h.catalog.findTool(ctx, id, name)
		},
		storeFailed: func(rq *request, m *jsonrpc.Message, err error) { rq.storeFailed(m, err) },
	}
	cs := h.confirms
	cs.callPath = path
	cs.eventLog = func(sid string) *eventLog { return h.streams.eventLog(sid) }
	cs.adoptApproval = func(rq *request, id string, rec confirmRecord, raw []byte) {
		h.approvals.adoptApproval(rq, id, rec, raw)
	}
	h.approvals.callPath = path
}
