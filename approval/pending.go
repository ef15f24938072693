package approval

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/mcphandler/mcphandler/internal/ownerindex"
)

// Each caller (tenant and subject) has an index of its pending approvals,
// approval-owner/<digest>, signed (purpose "approval-owner") and kept by
// package internal/ownerindex: the ids, oldest first, each counting until
// its Expires. It bounds the pending approvals of a caller
// (Config.MaxPendingPerIdentity) across replicas: Begin admits a new
// approval into it before its record is written, and a decision takes it
// out. One the caller withdrew counts until its expiry, like a pending
// one: otherwise a caller that withdraws each approval at once (a client
// that declines to open every page) could make approval records without
// end. A removal lost to a store failure is found by Begin at the bound,
// which reads the records the index names (at most once per recheck for
// one caller) and keeps only those pending or withdrawn.
//
// Each tenant has one too, approval-tenant/<digest>, signed (purpose
// "approval-tenant") and kept the same way: it bounds the pending
// approvals of a tenant (Config.MaxPendingPerTenant), all its callers
// together, and it is what the inbox reads (inbox.go): the approvals a
// tenant's approvers may have to decide, found in one read, whichever
// replica made them. Begin admits a new approval into the caller's index
// first, then into its tenant's; a refusal or failure of the second takes
// it out of the first. A decision takes it out of both.

// recheck is how often, at most, Begin at the bound reads the records of
// a caller's index to drop those no longer pending.
const recheck = 10 * time.Second

// admitGrace is how long an index entry whose record cannot be read still
// counts: Begin admits an approval before it writes its record, and the
// replica that checks may run a clock up to this far ahead.
const admitGrace = 30 * time.Second

// ownerKey names the index of asker's pending approvals; the parts are
// length-prefixed before hashing.
func ownerKey(asker Identity) string {
	h := sha256.New()
	for _, p := range []string{asker.Tenant, asker.Subject} {
		h.Write(binary.AppendUvarint(nil, uint64(len(p))))
		h.Write([]byte(p))
	}
	return "approval-owner/" + hex.EncodeToString(h.Sum(nil))
}

// tenantKey names the index of the pending approvals of tenant's callers.
func tenantKey(tenant string) string {
	h := sha256.New()
	h.Write(binary.AppendUvarint(nil, uint64(len(tenant))))
	h.Write([]byte(tenant))
	return "approval-tenant/" + hex.EncodeToString(h.Sum(nil))
}

// admit counts approval id of asker, pending until exp, in the caller's
// index and then in its tenant's, or refuses it with ErrTooManyPending
// or ErrTooManyPendingInTenant (counted in neither).
func (s *Store) admit(ctx context.Context, asker Identity, id string, exp int64) error {
	err := s.owners.Admit(ctx, ownerKey(asker), id, exp, s.stillPending)
	if full, ok := errors.AsType[*ownerindex.FullError](err); ok {
		return fmt.Errorf("%w: %d pending approvals held, at most %d (each counts until it is decided or expires, %s after it was asked; the oldest until %s)",
			ErrTooManyPending, full.Held, full.Max, s.cfg.TTL, full.Oldest.UTC().Format(time.RFC3339))
	}
	if err != nil {
		return fmt.Errorf("approval: pending index: %w", err)
	}
	err = s.tenants.Admit(ctx, tenantKey(asker.Tenant), id, exp, s.stillPending)
	if err == nil {
		return nil
	}
	s.owners.Remove(context.WithoutCancel(ctx), ownerKey(asker), id)
	if full, ok := errors.AsType[*ownerindex.FullError](err); ok {
		return fmt.Errorf("%w: %d pending approvals held by the callers of this tenant, at most %d (each counts until it is decided or expires, %s after it was asked; the oldest until %s)",
			ErrTooManyPendingInTenant, full.Held, full.Max, s.cfg.TTL, full.Oldest.UTC().Format(time.RFC3339))
	}
	return fmt.Errorf("approval: tenant pending index: %w", err)
}

// stillPending keeps the entries of an index whose approval is still
// pending or was withdrawn, or whose record may not be written yet.
func (s *Store) stillPending(ctx context.Context, live []ownerindex.Entry) ([]ownerindex.Entry, error) {
	now := s.now().UnixMilli()
	keep := live[:0:0]
	for _, e := range live {
		r, _, err := s.load(ctx, e.ID)
		switch {
		case errors.Is(err, ErrNotFound):
			if e.Until-s.cfg.TTL.Milliseconds()+admitGrace.Milliseconds() > now {
				keep = append(keep, e)
			}
		case err != nil:
			return nil, err
		case r.State == Pending, r.State == Withdrawn:
			keep = append(keep, e)
		}
	}
	return keep, nil
}

// release stops counting approval id of asker, which was decided or never
// shown, in the caller's index and its tenant's. A failure is left for
// the check at the bound to find.
func (s *Store) release(ctx context.Context, asker Identity, id string) {
	ctx = context.WithoutCancel(ctx)
	s.owners.Remove(ctx, ownerKey(asker), id)
	s.tenants.Remove(ctx, tenantKey(asker.Tenant), id)
}
