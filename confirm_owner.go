package mcphandler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
	"github.com/mcphandler/mcphandler/internal/ownerindex"
	"github.com/mcphandler/mcphandler/internal/sign"
)

// Each identity (tenant and subject; the zero Identity is one) has an
// index of its confirms, confirm-owner/<digest>, signed (purpose
// "confirm-owner") and kept by package internal/ownerindex: the ids of
// the confirm/<id> records (2025, a confirm's or an approval's) and
// nonce/<n> records (2026-07-28, a confirm's or an approval's first round,
// or a held call's first round that carried state)
// it made, each counting from its creation for confirmCount. It bounds
// those records per identity (Config.Limits.MaxConfirmsPerIdentity) across
// replicas: a record is admitted into the index before it is written, and
// a confirm past the bound is refused with CodeRateLimited before
// anything is asked or written.
//
// A decision frees no place: the record of a decided confirm stays in the
// store for confirmTTL after it, and the client decides (a client that
// declines every question at once would otherwise make records without
// end). A record that goes on past its first decision (its tool runs, or
// asks more, past the confirm's timeout) can outlive its count; such
// records are bounded by the requests that keep them going.

// macConfirmOwner is the purpose of the confirm indexes' signatures.
const macConfirmOwner = "confirm-owner"

// confirmIDLen is the longest id of a confirm index: a 2025 confirm's
// (confirmPrefix and rand.Text); a nonce is rand.Text alone.
const confirmIDLen = len(confirmPrefix) + sessionRandLen

// validConfirmID reports whether id has the shape of a confirm's id or a
// nonce: what a confirm index may name.
func validConfirmID(id string) bool {
	if len(id) == confirmIDLen && id[:len(confirmPrefix)] == confirmPrefix {
		id = id[len(confirmPrefix):]
	}
	if len(id) != sessionRandLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('A' <= c && c <= 'Z' || '2' <= c && c <= '7') {
			return false
		}
	}
	return true
}

// newConfirmOwners returns the index of confirms per identity.
func newConfirmOwners(cfg *Config, secrets [][]byte) (*ownerindex.Index, error) {
	s, err := sign.NewSigner(macConfirmOwner, secrets...)
	if err != nil {
		return nil, err
	}
	return ownerindex.New(ownerindex.Config{Store: cfg.Store, Signer: s, Max: cfg.Limits.MaxConfirmsPerIdentity,
		ValidID: validConfirmID, MaxIDLen: confirmIDLen}), nil
}

// confirmOwnerKey names the confirm index of identity id.
func confirmOwnerKey(id Identity) string {
	sum := sha256.Sum256([]byte(id.key()))
	return "confirm-owner/" + hex.EncodeToString(sum[:])
}

// confirmCount is how long a confirm counts against its identity from
// its creation: its deadline (ConfirmTimeout at most), then its record's
// life after a decision at that deadline.
func (cs *confirms) confirmCount() time.Duration { return cs.cfg.ConfirmTimeout + cs.confirmTTL() }

// errTooManyConfirms is the refusal of a confirm past the bound of its
// identity.
type errTooManyConfirms struct{ *ownerindex.FullError }

// wire is the refusal's JSON-RPC error: CodeRateLimited, saying how many
// confirms are held and until when, with retryAfterMs.
func (e errTooManyConfirms) wire(count time.Duration) *jsonrpc.Error {
	// Rounded up: a client that waits exactly this long is not early.
	retry := max((time.Until(e.Oldest)+time.Millisecond-1)/time.Millisecond, 1)
	msg := fmt.Sprintf("Too many confirmations: %d confirmations held, at most %d (each counts for %s after it was asked, answered or not; the oldest until %s)",
		e.Held, e.Max, count, e.Oldest.UTC().Format(time.RFC3339))
	return rpcErrorData(CodeRateLimited, msg, []byte(`{"retryAfterMs":`+strconv.FormatInt(int64(retry), 10)+`}`))
}

// admitConfirm counts the confirm record id (a 2025 confirm's id or a
// 2026-07-28 nonce) against identity, before it is written. Past the
// bound it returns an errTooManyConfirms; a store failure (or an index
// contended past reason, ownerindex.ErrContended) as it is.
func (cs *confirms) admitConfirm(ctx context.Context, identity Identity, id string) error {
	until := time.Now().Add(cs.confirmCount()).UnixMilli()
	err := cs.owners.Admit(context.WithoutCancel(ctx), confirmOwnerKey(identity), id, until, nil)
	if full, ok := errors.AsType[*ownerindex.FullError](err); ok {
		return errTooManyConfirms{full}
	}
	return err
}

// confirmRefused answers a confirm that could not be admitted: past the
// bound of its identity (-32000) or for a store failure (503).
func (cs *confirms) confirmRefused(rq *request, m *jsonrpc.Message, err error, ev *CallEvent) {
	if full, ok := errors.AsType[errTooManyConfirms](err); ok {
		ev.Outcome = OutcomeDenied
		rq.fail(m.ID, full.wire(cs.confirmCount()))
		return
	}
	ev.Outcome = OutcomeError
	rq.storeFailed(m, err)
}
