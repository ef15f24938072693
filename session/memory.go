package session

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Memory is a Store that lives in one process: sessions are lost on
// restart and are not shared with other replicas. Its zero value is not
// usable; call [NewMemory].
//
// Expired sessions are removed lazily: a Get of an expired session finds
// nothing, and every Create sweeps the table once per TTL period, so the
// store starts no goroutine and needs no Close.
type Memory struct {
	mu        sync.RWMutex // guards sessions, owners and nextSweep
	sessions  map[string]*memEntry
	owners    map[string][]string // owner -> admitted session ids, oldest first
	nextSweep time.Time
	now       func() time.Time

	subMu sync.Mutex // guards subs
	subs  map[string]map[*memSub]struct{}

	rec memRecords
}

// Memory implements Store, and so each of its parts.
var (
	_ Store    = (*Memory)(nil)
	_ Sessions = (*Memory)(nil)
	_ PubSub   = (*Memory)(nil)
	_ Records  = (*Memory)(nil)
	_ EventLog = (*Memory)(nil)
)

type memEntry struct {
	mu      sync.Mutex // guards s and expires
	s       Session
	expires time.Time
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{
		sessions: make(map[string]*memEntry),
		owners:   make(map[string][]string),
		subs:     make(map[string]map[*memSub]struct{}),
		now:      time.Now,
		rec: memRecords{
			records: make(map[string]memRecord),
			logs:    make(map[string]*memLog),
		},
	}
}

func ttlOf(s *Session) time.Duration {
	if s.TTL > 0 {
		return s.TTL
	}
	return DefaultTTL
}

// Create implements [Sessions].
func (m *Memory) Create(_ context.Context, s *Session) error {
	now := m.now()
	e := &memEntry{s: *s, expires: now.Add(ttlOf(s))}
	e.s.Subscriptions = slices.Clone(s.Subscriptions)
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.After(m.nextSweep) {
		m.sweepLocked(now)
		m.nextSweep = now.Add(min(ttlOf(s), time.Minute))
	}
	if old, ok := m.sessions[s.ID]; ok && !old.expired(now) {
		return errors.New("session: id already in use")
	}
	m.sessions[s.ID] = e
	return nil
}

func (m *Memory) sweepLocked(now time.Time) {
	for id, e := range m.sessions {
		if e.expired(now) {
			delete(m.sessions, id)
		}
	}
	for owner, ids := range m.owners {
		if ids = m.liveLocked(ids, now); len(ids) == 0 {
			delete(m.owners, owner)
		} else {
			m.owners[owner] = ids
		}
	}
}

// liveLocked returns the ids of sessions that still exist, in order,
// reusing ids' array.
func (m *Memory) liveLocked(ids []string, now time.Time) []string {
	live := ids[:0]
	for _, id := range ids {
		if e, ok := m.sessions[id]; ok && !e.expired(now) {
			live = append(live, id)
		}
	}
	clear(ids[len(live):])
	return live
}

// Admit implements [Sessions].
func (m *Memory) Admit(_ context.Context, s *Session, max int) ([]string, error) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := m.liveLocked(m.owners[s.Owner], now)
	if !slices.Contains(ids, s.ID) {
		if e, ok := m.sessions[s.ID]; ok && !e.expired(now) {
			ids = append(ids, s.ID)
		}
	}
	var ended []string
	if max > 0 && len(ids) > max {
		ended = slices.Clone(ids[:len(ids)-max])
		for _, id := range ended {
			delete(m.sessions, id)
		}
		ids = slices.Delete(ids, 0, len(ids)-max)
	}
	if len(ids) == 0 {
		delete(m.owners, s.Owner)
	} else {
		m.owners[s.Owner] = ids
	}
	return ended, nil
}

func (e *memEntry) expired(now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return now.After(e.expires)
}

func (m *Memory) entry(id string) *memEntry {
	m.mu.RLock()
	e := m.sessions[id]
	m.mu.RUnlock()
	return e
}

// Get implements [Sessions].
func (m *Memory) Get(_ context.Context, id string) (*Session, error) {
	e := m.entry(id)
	if e == nil {
		return nil, ErrNotFound
	}
	now := m.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if now.After(e.expires) {
		return nil, ErrNotFound
	}
	e.expires = now.Add(ttlOf(&e.s))
	s := e.s
	s.Subscriptions = slices.Clone(e.s.Subscriptions)
	return &s, nil
}

// Update implements [Sessions].
func (m *Memory) Update(_ context.Context, s *Session) error {
	e := m.entry(s.ID)
	if e == nil {
		return ErrNotFound
	}
	now := m.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if now.After(e.expires) {
		return ErrNotFound
	}
	id, owner := e.s.ID, e.s.Owner
	e.s = *s
	e.s.ID, e.s.Owner = id, owner
	e.s.Subscriptions = slices.Clone(s.Subscriptions)
	e.expires = now.Add(ttlOf(&e.s))
	return nil
}

// Delete implements [Sessions].
func (m *Memory) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	delete(m.sessions, id)
	m.mu.Unlock()
	return nil
}

// Len reports how many sessions are stored, expired ones not yet swept
// included.
func (m *Memory) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.sessions)
}

// memSubBuffer bounds how many undelivered messages a subscriber may hold;
// beyond it Publish drops messages for that subscriber rather than block.
const memSubBuffer = 64

type memSub struct {
	m       *Memory
	channel string
	c       chan []byte
	once    sync.Once
}

// Publish implements [PubSub]. It never blocks: a subscriber whose buffer
// is full misses the message and is not counted.
func (m *Memory) Publish(_ context.Context, channel string, msg []byte) (int, error) {
	m.subMu.Lock()
	defer m.subMu.Unlock()
	n := 0
	for s := range m.subs[channel] {
		select {
		case s.c <- msg:
			n++
		default:
		}
	}
	return n, nil
}

// Subscribe implements [PubSub].
func (m *Memory) Subscribe(_ context.Context, channel string) (Subscription, error) {
	s := &memSub{m: m, channel: channel, c: make(chan []byte, memSubBuffer)}
	m.subMu.Lock()
	set := m.subs[channel]
	if set == nil {
		set = make(map[*memSub]struct{}, 1)
		m.subs[channel] = set
	}
	set[s] = struct{}{}
	m.subMu.Unlock()
	return s, nil
}

func (s *memSub) C() <-chan []byte { return s.c }

func (s *memSub) Close() error {
	s.once.Do(func() {
		s.m.subMu.Lock()
		defer s.m.subMu.Unlock()
		set := s.m.subs[s.channel]
		delete(set, s)
		if len(set) == 0 {
			delete(s.m.subs, s.channel)
		}
		close(s.c)
	})
	return nil
}

type memRecord struct {
	value   []byte
	expires time.Time
}

type memLog struct {
	events  [][]byte
	expires time.Time
}

// records and logs live in their own table, guarded by recMu.
type memRecords struct {
	recMu   sync.Mutex
	records map[string]memRecord
	logs    map[string]*memLog
	ops     int
}

func (m *Memory) sweepRecordsLocked(now time.Time) {
	m.rec.ops++
	if m.rec.ops%1024 != 0 {
		return
	}
	for k, r := range m.rec.records {
		if now.After(r.expires) {
			delete(m.rec.records, k)
		}
	}
	for k, l := range m.rec.logs {
		if now.After(l.expires) {
			delete(m.rec.logs, k)
		}
	}
}

// PutIfAbsent implements [Records].
func (m *Memory) PutIfAbsent(_ context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	now := m.now()
	m.rec.recMu.Lock()
	defer m.rec.recMu.Unlock()
	m.sweepRecordsLocked(now)
	if r, ok := m.rec.records[key]; ok && !now.After(r.expires) {
		return false, nil
	}
	m.rec.records[key] = memRecord{slices.Clone(value), now.Add(ttl)}
	return true, nil
}

// Load implements [Records].
func (m *Memory) Load(_ context.Context, key string) ([]byte, error) {
	now := m.now()
	m.rec.recMu.Lock()
	defer m.rec.recMu.Unlock()
	r, ok := m.rec.records[key]
	if !ok || now.After(r.expires) {
		return nil, ErrNotFound
	}
	return slices.Clone(r.value), nil
}

// CompareAndSwap implements [Records].
func (m *Memory) CompareAndSwap(_ context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	now := m.now()
	m.rec.recMu.Lock()
	defer m.rec.recMu.Unlock()
	r, ok := m.rec.records[key]
	if !ok || now.After(r.expires) || string(r.value) != string(old) {
		return false, nil
	}
	m.rec.records[key] = memRecord{slices.Clone(new), now.Add(ttl)}
	return true, nil
}

// AppendEvent implements [EventLog].
func (m *Memory) AppendEvent(_ context.Context, stream string, data []byte, ttl time.Duration) (uint64, error) {
	now := m.now()
	m.rec.recMu.Lock()
	defer m.rec.recMu.Unlock()
	m.sweepRecordsLocked(now)
	l := m.rec.logs[stream]
	if l == nil || now.After(l.expires) {
		l = &memLog{}
		m.rec.logs[stream] = l
	}
	l.events = append(l.events, slices.Clone(data))
	l.expires = now.Add(ttl)
	return uint64(len(l.events)), nil
}

// EventsAfter implements [EventLog].
func (m *Memory) EventsAfter(_ context.Context, stream string, after uint64) ([]Event, error) {
	now := m.now()
	m.rec.recMu.Lock()
	defer m.rec.recMu.Unlock()
	l := m.rec.logs[stream]
	if l == nil || now.After(l.expires) || after >= uint64(len(l.events)) {
		return nil, nil
	}
	out := make([]Event, 0, uint64(len(l.events))-after)
	for i := after; i < uint64(len(l.events)); i++ {
		out = append(out, Event{Seq: i + 1, Data: slices.Clone(l.events[i])})
	}
	return out, nil
}
