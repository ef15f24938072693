package approval

import (
	"container/heap"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/mcphandler/mcphandler/session"
)

// Single use cannot rest on the store alone: whoever can write it can copy
// a genuine record and write it back after the approval moved on, and the
// copy verifies (a record is signed for its key, not for its moment). So
// each Store remembers, in its own memory, every approval it saw leave
// pending — by its own transition, by reading the record, or by hearing
// another replica's transition on the channel approval-state (signed,
// dated) — with the latest state it knows, until the approval's end
// (Expires plus Linger), after which no copy is acted on anyway. A record
// read in an earlier state than the one remembered (pending after a
// decision, approved after the use) is a copy written back: it reads as
// not found, and is never acted on.
//
// What this cannot cover: a replica that never heard of a transition (it
// started after it, its subscription was down when it was published, or
// it forgot it to stay within maxSeen) takes a copy for the record. Such
// a replica acts on a copy at most once — the transition it then makes
// is remembered — and never at or after the approval's end.

// stateChannel carries every transition out of pending, and every use,
// to every replica.
const stateChannel = "approval-state"

// maxSeen bounds the approvals a Store remembers: past it, the one whose
// end comes first is forgotten. Some 150 bytes each.
const maxSeen = 1 << 16

// resubscribe is how long a Store whose subscription to stateChannel
// failed waits before it tries again (at its next use of the store).
const resubscribe = 5 * time.Second

// stateMsg is a transition as published on stateChannel.
type stateMsg struct {
	ID    string `json:"id"`
	State State  `json:"st"`
	End   int64  `json:"end"` // unix ms: the approval's end
}

// later reports whether state t comes after s in an approval's life.
func (s State) later(t State) bool {
	return s == Pending && t != Pending || s == Approved && t == Used
}

// seen is the memory of one Store: the latest state of each approval it
// knows left pending, until the approval's end.
type seen struct {
	mu    sync.Mutex
	state map[string]State
	ends  endHeap
}

// hearing is a Store's subscription to stateChannel: started at the
// Store's first use of the store, again after it ended (at most every
// resubscribe), stopped by Close.
type hearing struct {
	mu     sync.Mutex
	sub    session.Subscription
	tried  time.Time
	closed bool
}

type endItem struct {
	end int64
	id  string
}

// endHeap orders the remembered approvals by end, earliest first.
type endHeap []endItem

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i].end < h[j].end }
func (h endHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)        { *h = append(*h, x.(endItem)) }
func (h *endHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// known returns the state remembered for approval id ("" if none).
func (m *seen) known(id string) State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state[id]
}

// note remembers that approval id is in state st (not pending) until end,
// unless a later state is remembered already; now forgets what ended.
func (m *seen) note(id string, st State, end, now int64) {
	if st == Pending || end <= now {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.ends) > 0 && (m.ends[0].end <= now || len(m.ends) >= maxSeen) {
		delete(m.state, heap.Pop(&m.ends).(endItem).id)
	}
	cur, ok := m.state[id]
	switch {
	case !ok:
		if m.state == nil {
			m.state = make(map[string]State)
		}
		heap.Push(&m.ends, endItem{end: end, id: id})
		m.state[id] = st
	case cur.later(st):
		m.state[id] = st
	}
}

// rolledBack reports whether a record read in state st is older than the
// state known ("" for none) before the read began: a copy written back.
func rolledBack(known, st State) bool {
	return known != "" && known != st && !known.later(st)
}

// remember notes that approval id is in r's state, and if this Store made
// the transition (tell), tells the other replicas.
func (s *Store) remember(ctx context.Context, id string, r *stored, tell bool) {
	end := r.Expires + s.cfg.Linger.Milliseconds()
	now := s.now()
	s.seen.note(id, r.State, end, now.UnixMilli())
	if !tell || r.State == Pending {
		return
	}
	b, _ := json.Marshal(stateMsg{ID: id, State: r.State, End: end})
	s.cfg.Store.Publish(context.WithoutCancel(ctx), stateChannel, s.mac.SignMessage(stateChannel, now, b))
}

// listen subscribes s to stateChannel, unless it is subscribed, closed,
// or failed to subscribe within resubscribe.
func (s *Store) listen(ctx context.Context) {
	m := &s.hearing
	if !m.mu.TryLock() {
		return // another call is subscribing
	}
	defer m.mu.Unlock()
	now := time.Now()
	if m.sub != nil || m.closed || now.Sub(m.tried) < resubscribe {
		return
	}
	m.tried = now
	sub, err := s.cfg.Store.Subscribe(context.WithoutCancel(ctx), stateChannel)
	if err != nil {
		return
	}
	m.sub, m.tried = sub, time.Time{}
	go s.hear(sub)
}

// hear notes the transitions of other replicas until sub ends.
func (s *Store) hear(sub session.Subscription) {
	for b := range sub.C() {
		p, err := s.mac.OpenMessage(stateChannel, time.Now(), messageWindow, b)
		var m stateMsg
		if err != nil || json.Unmarshal(p, &m) != nil || !ValidID(m.ID) || !m.State.valid() {
			continue
		}
		s.seen.note(m.ID, m.State, m.End, s.now().UnixMilli())
	}
	s.hearing.mu.Lock()
	if s.hearing.sub == sub {
		s.hearing.sub = nil
	}
	s.hearing.mu.Unlock()
}

// Close stops s from hearing the transitions other replicas make (the
// one subscription and goroutine a Store holds once used). s keeps
// working, remembering only its own. It also cancels the OnPending
// calls running, and drops the notices still waiting and any later one.
// Call it when s is no longer used.
// It is safe to call more than once.
func (s *Store) Close() error {
	s.notices.close()
	m := &s.hearing
	m.mu.Lock()
	sub := m.sub
	m.closed, m.sub = true, nil
	m.mu.Unlock()
	if sub != nil {
		return sub.Close()
	}
	return nil
}
