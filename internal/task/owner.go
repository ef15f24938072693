package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

// Each identity has an index of its tasks, task-owner/<digest>, signed
// (purpose "task-owner"): the ids of its tasks, oldest first, with when
// each stops counting (its creation plus TTL+ResultRetention, which no
// record outlives). It bounds the tasks of an identity (Config.MaxTasks)
// and lists them for 2025-11-25 tasks/list. Like a task, it changes by
// CompareAndSwap only.
type ownerIndex struct {
	E []ownerEntry `json:"e"`
}

type ownerEntry struct {
	ID string `json:"i"`
	X  int64  `json:"x"` // unix ms: stops counting
}

// maxIndexEntries bounds what an index decodes, whatever MaxTasks is.
const maxIndexEntries = 1 << 14

func (m *Manager) loadIndex(ctx context.Context, own string) (ownerIndex, []byte, error) {
	var idx ownerIndex
	raw, err := m.cfg.Store.Load(ctx, ownerKey(own))
	if errors.Is(err, session.ErrNotFound) {
		return idx, nil, nil
	}
	if err != nil {
		return idx, nil, err
	}
	p, err := m.owner.Open(ownerKey(own), raw)
	if err != nil || json.Unmarshal(p, &idx) != nil || !idx.valid() {
		// Not ours: start afresh, swapping it out.
		return ownerIndex{}, raw, nil
	}
	return idx, raw, nil
}

func (idx *ownerIndex) valid() bool {
	if len(idx.E) > maxIndexEntries {
		return false
	}
	for _, e := range idx.E {
		if !validID(e.ID) || e.X <= 0 {
			return false
		}
	}
	return true
}

// live drops the entries that stopped counting at now.
func (idx *ownerIndex) live(now int64) []ownerEntry {
	return slices.DeleteFunc(slices.Clone(idx.E), func(e ownerEntry) bool { return e.X <= now })
}

// admit adds task id, counting until exp, to the index of own, unless own
// already holds MaxTasks tasks.
func (m *Manager) admit(ctx context.Context, own, id string, now, exp int64) error {
	for range maxAttempts {
		idx, raw, err := m.loadIndex(ctx, own)
		if err != nil {
			return err
		}
		live := idx.live(now)
		if len(live) >= m.cfg.MaxTasks {
			until := time.UnixMilli(live[0].X).UTC().Format(time.RFC3339)
			return fmt.Errorf("%w: %d tasks held, at most %d (each counts for %s after its creation; the oldest until %s)",
				ErrTooManyTasks, len(live), m.cfg.MaxTasks, m.cfg.TTL+m.cfg.ResultRetention, until)
		}
		live = append(live, ownerEntry{ID: id, X: exp})
		b, _ := json.Marshal(ownerIndex{E: live})
		b = m.owner.Sign(ownerKey(own), b)
		last := slices.MaxFunc(live, func(a, b ownerEntry) int { return int(a.X - b.X) })
		var ok bool
		if raw == nil {
			ok, err = m.cfg.Store.PutIfAbsent(ctx, ownerKey(own), b, m.storeTTL(last.X))
		} else {
			ok, err = m.cfg.Store.CompareAndSwap(ctx, ownerKey(own), raw, b, m.storeTTL(last.X))
		}
		if err != nil || ok {
			return err
		}
	}
	return errContended
}

// MaxListPage bounds the tasks of one List page.
const MaxListPage = 50

// List returns owner's tasks, newest first, at most MaxListPage, starting
// after the task whose id is cursor ("" for the first page), and the
// cursor of the next page ("" when this is the last) — 2025-11-25
// tasks/list. Every task Get would return is listed. A cursor that names
// no task of owner is ErrInvalidCursor.
func (m *Manager) List(ctx context.Context, owner Owner, cursor string) ([]DetailedTask, string, error) {
	idx, _, err := m.loadIndex(ctx, owner.digest())
	if err != nil {
		return nil, "", err
	}
	live := idx.live(m.nowMs())
	slices.Reverse(live)
	if cursor != "" {
		i := slices.IndexFunc(live, func(e ownerEntry) bool { return e.ID == cursor })
		if i < 0 {
			return nil, "", ErrInvalidCursor
		}
		live = live[i+1:]
	}
	var out []DetailedTask
	for i, e := range live {
		if len(out) == MaxListPage {
			return out, live[i-1].ID, nil
		}
		d, err := m.Get(ctx, owner, e.ID)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		out = append(out, d)
	}
	return out, "", nil
}
