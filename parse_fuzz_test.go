package mcphandler

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// costGuard fails t when f, given an input of n bytes, takes longer than a
// fixed budget: 1 ms plus 100 ms per MB, generous enough for the race
// detector and a loaded machine, far below what a quadratic parser needs
// for a large input. The best of three timings counts, so that one
// preemption does not fail it.
func costGuard(t *testing.T, n int, f func()) {
	t.Helper()
	best := time.Duration(1<<63 - 1)
	for range 3 {
		start := time.Now()
		f()
		best = min(best, time.Since(start))
	}
	if budget := time.Millisecond + time.Duration(n)*100*time.Nanosecond; best > budget {
		t.Fatalf("handling %d bytes took %v, over the budget of %v", n, best, budget)
	}
}

// FuzzLastEventID checks the parser of the Last-Event-ID header: it never
// panics, costs time linear in its input, accepts only the ids the streams
// make ("p" + 16 hex digits, "-", a sequence number), and reads back
// exactly what an accepted id says.
func FuzzLastEventID(f *testing.F) {
	for _, s := range []string{
		"p0123456789abcdef-1", "p0123456789abcdef-18446744073709551615", "p0123456789abcdef-18446744073709551616",
		"p0123456789abcdef-", "p0123456789abcdef-+1", "p0123456789abcdef--1", "p0123456789ABCDEF-1",
		"g0123456789abcdef-1", "p-1", "p01-2-3", "", "-", "p", strings.Repeat("p", 1<<16) + "-1",
		"p0123456789abcdef-0001", "p0123456789abcdef-1\n", "p0123456789abcdeg-1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, last string) {
		var (
			stream string
			after  uint64
			ok     bool
		)
		costGuard(t, len(last), func() { stream, after, ok = parseLastEventID(last) })
		if !ok {
			return
		}
		if len(stream) != 17 || stream[0] != 'p' || !strings.HasPrefix(last, stream+"-") {
			t.Fatalf("%q: stream %q", last, stream)
		}
		seq := strings.TrimLeft(last[18:], "0")
		if seq == "" {
			seq = "0"
		}
		if strconv.FormatUint(after, 10) != seq {
			t.Fatalf("%q: after %d", last, after)
		}
		again, after2, ok2 := parseLastEventID(stream + "-" + strconv.FormatUint(after, 10))
		if !ok2 || again != stream || after2 != after {
			t.Fatalf("%q does not read back", last)
		}
	})
}

// FuzzCursor checks the list cursor parser: it never panics, costs time
// linear in its input, accepts only the cursors encodeCursor makes for
// offsets within the list, and every offset within the list round-trips.
func FuzzCursor(f *testing.F) {
	for _, c := range []string{
		encodeCursor(0), encodeCursor(500), encodeCursor(1 << 40), "MTA", "LTE", "KzE", "MDE", "LTA", "",
		"!!!", "MTA=", "MTAx" + strings.Repeat("A", 1<<16), strings.Repeat("OTk5", 1<<14),
	} {
		f.Add(c, 1000)
	}
	f.Fuzz(func(t *testing.T, cursor string, n int) {
		n = min(max(n, 0), 1<<20)
		var (
			off int
			ok  bool
		)
		costGuard(t, len(cursor), func() { off, ok = decodeCursor(cursor, n) })
		if ok && (off < 0 || off > n || encodeCursor(off) != cursor) {
			t.Fatalf("decodeCursor(%q, %d) = %d", cursor, n, off)
		}
		for _, o := range []int{0, n / 2, n} {
			if got, ok := decodeCursor(encodeCursor(o), n); !ok || got != o {
				t.Fatalf("offset %d of %d does not round-trip: %d %v", o, n, got, ok)
			}
		}
		if _, ok := decodeCursor(encodeCursor(n+1), n); ok {
			t.Fatalf("an offset past the list's %d entries decoded", n)
		}
	})
}
