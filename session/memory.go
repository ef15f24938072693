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
	mu        sync.RWMutex // guards sessions and nextSweep
	sessions  map[string]*memEntry
	nextSweep time.Time
	now       func() time.Time

	subMu sync.Mutex // guards subs
	subs  map[string]map[*memSub]struct{}
}

type memEntry struct {
	mu      sync.Mutex // guards s and expires
	s       Session
	expires time.Time
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{
		sessions: make(map[string]*memEntry),
		subs:     make(map[string]map[*memSub]struct{}),
		now:      time.Now,
	}
}

func ttlOf(s *Session) time.Duration {
	if s.TTL > 0 {
		return s.TTL
	}
	return DefaultTTL
}

// Create implements [Store].
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

// Get implements [Store].
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

// Update implements [Store].
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
	e.s.Initialized = s.Initialized
	e.s.LogLevel = s.LogLevel
	e.s.Subscriptions = slices.Clone(s.Subscriptions)
	e.expires = now.Add(ttlOf(&e.s))
	return nil
}

// Delete implements [Store].
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

// Publish implements [Store]. It never blocks: a subscriber whose buffer
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

// Subscribe implements [Store].
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
