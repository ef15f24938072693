package mcphandler

import "log/slog"

// approvals carries out the Approve decisions of every era (approve.go):
// it starts or finds a call's approval in Config.Approvals and carries
// its link the era's way — pushed and waited for on a 2025-11-25 stream
// (approve_push.go), an input_required round on 2026-07-28
// (approve_rounds.go), or a tool result naming the page — and, on the
// replica serving a resumed stream, takes over a call whose asker is gone.
//
// It depends on the Handler's Config (cfg: Approvals, ConfirmTimeout,
// OnCall, the store), on confirms, whose records, nonces, leases and
// per-identity bound a call waiting for its approval uses, and on the
// catalog, where a call taken over finds its tool again (set by New:
// connectConfirms).
//
// It keeps no state in memory: an approval's decision is the approval
// store's, and what a call waiting for it decides is a CompareAndSwap on
// its confirm record, so it is safe for concurrent use. Its fields are
// set once, by New, and then only read.
type approvals struct {
	cfg      *Config
	confirms *confirms
	catalog  *catalog
}

// newApprovals returns the approvals of cfg, waiting under the records of
// cs; New connects it to the catalog (connectConfirms).
func newApprovals(cfg *Config, cs *confirms) *approvals {
	return &approvals{cfg: cfg, confirms: cs}
}

func (ap *approvals) logger() *slog.Logger { return ap.cfg.Logger }
