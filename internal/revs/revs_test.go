package revs

import (
	"strconv"
	"sync"
	"testing"
)

// A record read at revision 3 and then at 2 was rolled back: refused, at
// every later read, until its end of life; a newer revision is taken.
func TestRolledBackIsRefused(t *testing.T) {
	var m Memory
	const end = 1000
	for _, tc := range []struct {
		rev  uint64
		now  int64
		want bool
	}{
		{1, 10, true},
		{3, 20, true},
		{3, 30, true}, // the same revision read again
		{2, 40, false},
		{1, 50, false},
		{4, 60, true},
		{3, 70, false},
		{3, end, true}, // past its end of life the memory has nothing to say
	} {
		if got := m.See("confirm/x", tc.rev, end, tc.now, m.Begin()); got != tc.want {
			t.Errorf("rev %d at %d: %v, want %v", tc.rev, tc.now, got, tc.want)
		}
	}
	if !m.See("confirm/y", 1, end, 80, m.Begin()) {
		t.Error("another key's first revision was refused")
	}
}

// A read that began before this process learnt of a later revision (it
// raced the write that made it) may return the earlier one: a stale read,
// not a rollback. A read that began after may not.
func TestStaleReadIsNotARollback(t *testing.T) {
	var m Memory
	m.See("k", 1, 1000, 0, m.Begin())
	since := m.Begin()                // a read begins
	m.See("k", 2, 1000, 0, m.Begin()) // another goroutine's write returns
	if !m.See("k", 1, 1000, 0, since) {
		t.Fatal("a read that raced a write was taken for a rollback")
	}
	if m.See("k", 1, 1000, 0, m.Begin()) {
		t.Fatal("a read that began after the write returned the earlier revision, and was taken")
	}
	// Whichever read returned revision 1, no transition starts from it.
	if !m.Newer("k", 1, 0) || m.Newer("k", 2, 0) || m.Newer("k", 1, 1000) || m.Newer("other", 0, 0) {
		t.Fatal("Newer")
	}
}

// A later read may report a later end of life for the same revision (a
// record rewritten): the memory keeps the later one.
func TestEndOfLifeOnlyGrows(t *testing.T) {
	var m Memory
	m.See("k", 5, 100, 0, m.Begin())
	m.See("k", 5, 200, 0, m.Begin())
	if m.See("k", 4, 0, 150, m.Begin()) {
		t.Fatal("forgot a record before its latest end of life")
	}
}

// The memory holds at most its capacity: past it, the oldest record is
// forgotten first, and the newer ones are kept.
func TestCapacity(t *testing.T) {
	m := Memory{Capacity: 8}
	for i := range 20 {
		m.See("k"+strconv.Itoa(i), 5, 1000, 0, m.Begin())
		if n := m.Len(); n > 8 {
			t.Fatalf("%d records remembered, capacity 8", n)
		}
	}
	if !m.See("k0", 1, 1000, 0, m.Begin()) {
		t.Error("the oldest record was not forgotten")
	}
	for i := 13; i < 20; i++ {
		if m.See("k"+strconv.Itoa(i), 1, 1000, 0, m.Begin()) {
			t.Errorf("k%d, among the newest, was forgotten", i)
		}
	}
}

func TestConcurrent(t *testing.T) {
	var m Memory
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				m.See("k"+strconv.Itoa(i%50), uint64(g*1000+i), 1<<40, 0, m.Begin())
			}
		})
	}
	wg.Wait()
	if m.See("k1", 0, 1<<40, 0, m.Begin()) {
		t.Fatal("revision 0 after thousands")
	}
}

func BenchmarkSee(b *testing.B) {
	var m Memory
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "confirm/mcphc-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		m.See(keys[i%len(keys)], uint64(i), 1<<40, 0, m.Begin())
	}
}
