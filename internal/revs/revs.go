// Package revs remembers, in one process, the newest revision it has seen
// of each signed record of a shared store, so that a record written back
// to an earlier genuine revision (rolled back by something that can write
// the store but cannot sign) is recognised and refused by every process
// that saw a later one.
//
// A store alone cannot tell a rolled-back record from a current one: the
// older value verifies, since it was genuine once. What a process saw,
// the store cannot take back. So each record carries a revision that
// every write increments, and each process remembers the newest revision
// of every record it read or wrote until the record's end of life: a read
// that began after the process knew of a later revision, and returns an
// older one, was rolled back. (A read that began before a write of the
// process returned may return the revision before it: that is an ordinary
// stale read, not a rollback; but no transition may start from it, see
// [Memory.Newer].) What this bounds is stated where it is used: at most
// one act on a rolled-back record per process that never saw a later
// revision of it, never past the record's end of life.
//
// Memory is bounded: a [Memory] holds at most its capacity of records,
// each as a 64-bit hash of its key (with a seed of the process) and three
// integers; past the capacity the record remembered first is forgotten
// first. A forgotten record is bounded by its end of life only.
//
// [Window] does the same for the receiver of a stream of signed messages:
// per key (a writer, a task), the values it takes must count up.
package revs

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// DefaultCapacity is the capacity of a zero Memory: about 2 MB when full.
const DefaultCapacity = 1 << 15

// Memory is the newest revision seen of each record, until the record's
// end of life. The zero value is ready to use, with DefaultCapacity; it
// allocates nothing until first used. It is safe for concurrent use.
type Memory struct {
	// Capacity bounds the records remembered; zero means
	// DefaultCapacity. Set it before first use.
	Capacity int

	clock atomic.Uint64 // counts the revisions learnt

	mu    sync.Mutex // guards the fields below
	seed  maphash.Seed
	m     map[uint64]entry
	order []uint64 // keys in the order first remembered, a ring
	head  int      // the oldest in order, once it is full
}

type entry struct {
	rev uint64
	end int64  // unix ms: forgotten from then on
	at  uint64 // the clock when rev was learnt
}

// Begin returns the moment a read of the store begins; pass it to See
// with what the read returned.
func (m *Memory) Begin() uint64 { return m.clock.Load() }

// See reports whether revision rev of the record under key, which lives
// until end (unix ms), read by a read that began at since (Begin), is not
// older than a revision this Memory knew of before that read began, at
// now (unix ms); and remembers it if it is newer than any seen. A false
// answer means the record was rolled back: refuse it. After a write that
// succeeded, call it with since Begin() to remember what was written (its
// answer then does not matter).
func (m *Memory) See(key string, rev uint64, end, now int64, since uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.seed = maphash.MakeSeed()
		m.m = make(map[uint64]entry)
	}
	k := maphash.String(m.seed, key)
	e, ok := m.m[k]
	switch {
	case !ok:
		m.remember(k, entry{rev: rev, end: end, at: m.clock.Add(1)})
	case e.end <= now || rev > e.rev:
		m.m[k] = entry{rev: rev, end: end, at: m.clock.Add(1)}
	case rev < e.rev:
		// Older: rolled back if this read began after the newer was
		// known, else a read that raced the write that made it.
		return e.at > since
	case end > e.end:
		e.end = end
		m.m[k] = e
	}
	return true
}

// Newer reports whether a revision of the record under key newer than rev
// is known at now (unix ms). A transition from revision rev then either
// fails (the store holds the newer one) or succeeds only because the
// record was rolled back: do not attempt it, read the record again. A
// read that raced this process's own write (See takes it) cannot act so.
func (m *Memory) Newer(key string, rev uint64, now int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		return false
	}
	e, ok := m.m[maphash.String(m.seed, key)]
	return ok && e.end > now && e.rev > rev
}

// remember adds a record not remembered yet, forgetting the oldest one if
// the memory is full.
func (m *Memory) remember(k uint64, e entry) {
	limit := m.Capacity
	if limit <= 0 {
		limit = DefaultCapacity
	}
	if len(m.order) < limit {
		m.order = append(m.order, k)
	} else {
		// Forget the oldest: its slot in the ring is the new one's.
		delete(m.m, m.order[m.head])
		m.order[m.head] = k
		m.head = (m.head + 1) % len(m.order)
	}
	m.m[k] = e
}

// Len is how many records are remembered (ended ones included until their
// slot is reused).
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}
