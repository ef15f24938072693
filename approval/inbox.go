package approval

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// inboxBatch is how many records Inbox reads at once.
const inboxBatch = 16

// Inbox returns the approvals waiting for approver: those of callers of
// approver's tenant that are pending, not past their expiry, and that
// their Policy lets approver decide ([Store.Check], the check
// [Store.Decide] makes), newest first. It returns at most max of them
// (max ≤ 0: all it finds), and more reports that others wait besides.
//
// It reads the tenant's index (approval-tenant/<digest>, see pending.go),
// then the records it names, newest first, inboxBatch at a time, until
// it found max+1: at most Config.MaxPendingPerTenant records (1024 at
// most, whatever the store holds), each verified as any record read.
// It writes nothing (an approval past its expiry is left for the next
// Get to expire). So what it shows is what the store holds, on any
// replica; nothing is kept in memory but what every read remembers
// (seen.go).
//
// What is not in it: an approval of another tenant, even one whose Policy
// (AnyTenant) admits approver — its link still works; one made by a
// release before the tenant index (it has no entry); one whose index
// entry a store failure lost. Each can still be decided through its own
// page. Check runs once per pending approval read, so a Policy.Rule runs
// as many times (concurrently, up to inboxBatch at once). The error is the
// store's, wrapped.
func (s *Store) Inbox(ctx context.Context, approver Identity, max int) (list []*Approval, more bool, err error) {
	s.listen(ctx)
	live, err := s.tenants.Live(ctx, tenantKey(approver.Tenant))
	if err != nil {
		return nil, false, fmt.Errorf("approval: tenant pending index: %w", err)
	}
	slices.Reverse(live) // newest first
	for start := 0; start < len(live); start += inboxBatch {
		batch := live[start:min(start+inboxBatch, len(live))]
		found := make([]*Approval, len(batch))
		errs := make([]error, len(batch))
		var wg sync.WaitGroup
		for i, e := range batch {
			wg.Go(func() { found[i], errs[i] = s.waiting(ctx, e.ID, approver) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, false, err
		}
		for _, a := range found {
			if a == nil {
				continue
			}
			if max > 0 && len(list) == max {
				more = true
				break
			}
			list = append(list, a)
		}
		if more {
			break
		}
	}
	slices.SortStableFunc(list, func(a, b *Approval) int { return cmp.Compare(b.Created.UnixMilli(), a.Created.UnixMilli()) })
	return list, more, nil
}

// waiting reads approval id and returns it if it waits for approver: an
// approval of approver's tenant, pending and unexpired, which its policy
// lets approver decide. nil otherwise (also for a record not found).
func (s *Store) waiting(ctx context.Context, id string, approver Identity) (*Approval, error) {
	r, _, err := s.load(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case r.State != Pending || s.now().UnixMilli() >= r.Expires || r.Asker.Tenant != approver.Tenant:
		return nil, nil
	}
	a := s.approval(id, r)
	if s.Check(ctx, a, approver) != nil {
		return nil, nil
	}
	return a, nil
}
