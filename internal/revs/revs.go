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
// of an older one is refused. What this bounds is stated where it is used:
// at most one act on a rolled-back record per process that never saw a
// later revision of it (and none once the process has), never past the
// record's end of life.
//
// Memory is bounded: a [Memory] holds at most its capacity of records,
// each as a 64-bit hash of its key (with a seed of the process) and two
// integers; past the capacity the record remembered first is forgotten
// first, and a record is forgotten at its end of life. A forgotten record
// is bounded by its end of life only.
package revs

import (
	"hash/maphash"
	"sync"
)

// DefaultCapacity is the capacity of a zero Memory: some 1.5 MB when full.
const DefaultCapacity = 1 << 15

// Memory is the newest revision seen of each record, until the record's
// end of life. The zero value is ready to use, with DefaultCapacity; it
// allocates nothing until first used. It is safe for concurrent use.
type Memory struct {
	// Capacity bounds the records remembered; zero means
	// DefaultCapacity. Set it before first use.
	Capacity int

	mu    sync.Mutex
	seed  maphash.Seed
	m     map[uint64]entry
	order []uint64 // keys in the order first remembered, a ring
	head  int      // the oldest in order, once it is full
}

type entry struct {
	rev uint64
	end int64 // unix ms: forgotten from then on
}

// See reports whether revision rev of the record under key, which lives
// until end (unix ms), is at least the newest this Memory saw of it at
// now (unix ms), and remembers it if so. A false answer means the record
// was rolled back: refuse it.
func (m *Memory) See(key string, rev uint64, end, now int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.seed = maphash.MakeSeed()
		m.m = make(map[uint64]entry)
	}
	k := maphash.String(m.seed, key)
	e, ok := m.m[k]
	if ok && e.end > now && rev < e.rev {
		return false
	}
	if ok {
		if rev > e.rev || e.end <= now {
			m.m[k] = entry{rev: rev, end: end}
		} else if end > e.end {
			e.end = end
			m.m[k] = e
		}
		return true
	}
	m.remember(k, entry{rev: rev, end: end})
	return true
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
