package mcphandler

import (
	"log/slog"

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
// storeauth.go), its owner index and its periods (ct), and the parts of
// the handler New connects (connectConfirms): the catalog, where a call
// taken over finds its tool again, the streams' event logs, where it is
// answered, and the approvals, which take over a call that waits for one.
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
	kinds  confirmKinds      // its records, as ct says (setKinds)

	catalog   *catalog   // finds the tool of a call taken over again
	streams   *streams   // the event logs where a call taken over is answered
	approvals *approvals // takes over a resumed stream's call that waits for an approval
}

// newConfirms returns the confirms of cfg, exchanging signed records and
// messages through bus, with its periods at their defaults and its owner
// index signed with secrets; New connects it to the rest of the handler
// (connectConfirms).
func newConfirms(cfg *Config, m *macs, bus *replicaBus, secrets [][]byte) (*confirms, error) {
	owners, err := newConfirmOwners(cfg, secrets)
	if err != nil {
		return nil, err
	}
	cs := &confirms{cfg: cfg, macs: m, bus: bus, owners: owners, ct: defaultConfirmTimes}
	cs.setKinds()
	return cs, nil
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

// connectConfirms connects h's confirms and approvals to the parts of h
// they call, once New has built them all.
func connectConfirms(h *Handler) {
	h.confirms.catalog, h.confirms.streams, h.confirms.approvals = h.catalog, h.streams, h.approvals
	h.approvals.catalog = h.catalog
}
