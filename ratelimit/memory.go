package ratelimit

import (
	"context"
	"sync"
	"time"
)

// memory keeps the buckets in this process: for each bucket that is not
// full, its theoretical arrival time (TAT), the GCRA's one number. A
// bucket whose TAT has passed is full, exactly as if it had no entry, so
// entries are dropped when the map has doubled since the last sweep.
type memory struct {
	base time.Time // times are durations since base (monotonic)

	mu    sync.Mutex               // guards tat and sweep
	tat   map[string]time.Duration // bucket id → TAT
	sweep int                      // sweep when len(tat) reaches it
}

// minSweep is the size below which the map is never swept.
const minSweep = 1024

func newMemory() *memory {
	return &memory{base: time.Now(), tat: map[string]time.Duration{}, sweep: minSweep}
}

// allow is the GCRA of redis_rate's script, in integer nanoseconds: a call
// arriving at now is admitted if the bucket's TAT, advanced by one
// interval, is at most Burst intervals ahead of now; it then stores the
// advanced TAT. A refused call changes nothing and is told when the
// advanced TAT will be within reach.
func (m *memory) allow(_ context.Context, id string, lim *limit) (bool, time.Duration, error) {
	now := time.Since(m.base)
	m.mu.Lock()
	defer m.mu.Unlock()
	tat, ok := m.tat[id]
	if !ok || tat < now {
		tat = now
	}
	next := tat + lim.interval
	if at := next - lim.offset; at > now {
		return false, at - now, nil
	}
	m.tat[id] = next
	if len(m.tat) >= m.sweep {
		for k, t := range m.tat {
			if t <= now {
				delete(m.tat, k)
			}
		}
		m.sweep = max(2*len(m.tat), minSweep)
	}
	return true, 0, nil
}

// size returns the number of buckets kept, for tests.
func (m *memory) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.tat)
}
