package task

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mcphandler/mcphandler/internal/ownerindex"
)

// Each identity has an index of its tasks, task-owner/<digest>, signed
// (purpose "task-owner"), kept by package internal/ownerindex: the ids of
// its tasks, oldest first, with when each stops counting (its creation
// plus TTL+ResultRetention, which no record outlives). It bounds the tasks
// of an identity (Config.MaxTasks, at most ownerindex.MaxEntries) and
// lists them for 2025-11-25 tasks/list. Like a task, it changes by
// CompareAndSwap only.

// uuidLen is the length of a task id.
const uuidLen = 36

// admit adds task id, counting until exp, to the index of own, unless
// own already holds MaxTasks tasks.
func (m *Manager) admit(ctx context.Context, own, id string, exp int64) error {
	err := m.owners.Admit(ctx, ownerKey(own), id, exp, nil)
	if full, ok := errors.AsType[*ownerindex.FullError](err); ok {
		return fmt.Errorf("%w: %d tasks held, at most %d (each counts for %s after its creation; the oldest until %s)",
			ErrTooManyTasks, full.Held, full.Max, m.cfg.TTL+m.cfg.ResultRetention, full.Oldest.UTC().Format(time.RFC3339))
	}
	if errors.Is(err, ownerindex.ErrContended) {
		return errContended
	}
	return err
}

// MaxListPage bounds the tasks of one List page.
const MaxListPage = 50

// List returns owner's tasks, newest first, at most MaxListPage, starting
// after the task whose id is cursor ("" for the first page), and the
// cursor of the next page ("" when this is the last) — 2025-11-25
// tasks/list. Every task Get would return is listed. A cursor that names
// no task of owner is ErrInvalidCursor.
func (m *Manager) List(ctx context.Context, owner Owner, cursor string) ([]DetailedTask, string, error) {
	live, err := m.owners.Live(ctx, ownerKey(owner.digest()))
	if err != nil {
		return nil, "", err
	}
	slices.Reverse(live)
	if cursor != "" {
		i := slices.IndexFunc(live, func(e ownerindex.Entry) bool { return e.ID == cursor })
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
