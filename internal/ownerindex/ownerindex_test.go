package ownerindex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/internal/sign"
	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

var testKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}

func signer(t testing.TB) *sign.Signer {
	s, err := sign.NewSigner("test-owner", testKeys...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newIndex(t testing.TB, st session.Records, max int, now func() time.Time) *Index {
	return New(Config{Store: st, Signer: signer(t), Max: max, ValidID: validID, MaxIDLen: 4, Now: now})
}

// eachStore runs f on memory and on real Redis, with a constructor of
// replicas' stores.
func eachStore(t *testing.T, f func(t *testing.T, replica func() session.Records)) {
	t.Run("memory", func(t *testing.T) {
		m := session.NewMemory()
		f(t, func() session.Records { return m })
	})
	t.Run("redis", func(t *testing.T) {
		prefix := redistest.Prefix(t, redistest.Client(t))
		f(t, func() session.Records {
			st := redisstore.New(redistest.Client(t), redisstore.Options{Prefix: prefix})
			t.Cleanup(func() { st.Close() })
			return st
		})
	})
}

func id(i int) string { return fmt.Sprintf("id%02d", i) }

// TestBound: an owner holds at most Max live entries; past it a FullError
// says how many and when the first stops counting; a removal or an entry
// that stopped counting makes room; other owners are not affected.
func TestBound(t *testing.T) {
	eachStore(t, func(t *testing.T, replica func() session.Records) {
		ctx := context.Background()
		var clock atomic.Int64
		clock.Store(time.Now().UnixMilli())
		now := func() time.Time { return time.UnixMilli(clock.Load()) }
		x := newIndex(t, replica(), 3, now)
		t0 := clock.Load()
		for i, until := range []int64{t0 + 3000, t0 + 1000, t0 + 2000} {
			if err := x.Admit(ctx, "o/a", id(i), until, nil); err != nil {
				t.Fatal(err)
			}
		}
		err := x.Admit(ctx, "o/a", id(3), t0+5000, nil)
		full, ok := errors.AsType[*FullError](err)
		if !ok || full.Held != 3 || full.Max != 3 || !full.Oldest.Equal(time.UnixMilli(t0+1000)) ||
			!strings.Contains(err.Error(), "3 held, at most 3") {
			t.Fatalf("past the bound: %v", err)
		}
		if err := x.Admit(ctx, "o/b", id(3), t0+5000, nil); err != nil {
			t.Fatalf("another owner: %v", err)
		}
		if err := x.Remove(ctx, "o/a", id(0)); err != nil {
			t.Fatal(err)
		}
		if err := x.Remove(ctx, "o/a", id(9)); err != nil {
			t.Fatalf("removing what is not there: %v", err)
		}
		if err := x.Admit(ctx, "o/a", id(3), t0+5000, nil); err != nil {
			t.Fatalf("after a removal: %v", err)
		}
		clock.Store(t0 + 1000) // id01 stops counting
		if err := x.Admit(ctx, "o/a", id(4), t0+5000, nil); err != nil {
			t.Fatalf("after an entry stopped counting: %v", err)
		}
		live, err := x.Live(ctx, "o/a")
		if err != nil || len(live) != 3 || live[0].ID != id(2) || live[2].ID != id(4) {
			t.Fatalf("live: %+v %v", live, err)
		}
	})
}

// TestConcurrentAdmit: concurrent admissions for one owner on four
// replicas never leave more than Max.
func TestConcurrentAdmit(t *testing.T) {
	eachStore(t, func(t *testing.T, replica func() session.Records) {
		ctx := context.Background()
		until := time.Now().Add(time.Minute).UnixMilli()
		var admitted, full atomic.Int64
		var wg sync.WaitGroup
		for r := range 4 {
			x := newIndex(t, replica(), 10, nil)
			for i := range 10 {
				wg.Go(func() {
					err := x.Admit(ctx, "o/a", id(r*10+i), until, nil)
					if _, ok := errors.AsType[*FullError](err); ok {
						full.Add(1)
					} else if err == nil {
						admitted.Add(1)
					} else {
						t.Error(err)
					}
				})
			}
		}
		wg.Wait()
		live, _ := newIndex(t, replica(), 10, nil).Live(ctx, "o/a")
		if admitted.Load() != 10 || full.Load() != 30 || len(live) != 10 {
			t.Fatalf("admitted %d, full %d, live %d; want 10, 30, 10", admitted.Load(), full.Load(), len(live))
		}
	})
}

// TestCheck: at the bound, Admit asks its check which entries still
// count, at most once per Recheck for one owner, and keeps its answer.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	var clock atomic.Int64
	clock.Store(time.Now().UnixMilli())
	now := func() time.Time { return time.UnixMilli(clock.Load()) }
	m := session.NewMemory()
	x := New(Config{Store: m, Signer: signer(t), Max: 2, ValidID: validID, MaxIDLen: 4, Recheck: time.Second, Now: now})
	until := clock.Load() + 60_000
	var calls atomic.Int64
	gone := map[string]bool{}
	check := func(_ context.Context, live []Entry) ([]Entry, error) {
		calls.Add(1)
		var keep []Entry
		for _, e := range live {
			if !gone[e.ID] {
				keep = append(keep, e)
			}
		}
		return keep, nil
	}
	for i := range 2 {
		if err := x.Admit(ctx, "o", id(i), until, check); err != nil {
			t.Fatal(err)
		}
	}
	if calls.Load() != 0 {
		t.Fatal("the check ran below the bound")
	}
	for range 3 {
		if _, ok := errors.AsType[*FullError](x.Admit(ctx, "o", id(5), until, check)); !ok {
			t.Fatal("admitted past the bound")
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("the check ran %d times within Recheck, want 1", calls.Load())
	}
	gone[id(0)] = true
	clock.Add(999)
	if _, ok := errors.AsType[*FullError](x.Admit(ctx, "o", id(5), until, check)); !ok || calls.Load() != 1 {
		t.Fatalf("before Recheck: checked %d times", calls.Load())
	}
	clock.Add(1)
	if err := x.Admit(ctx, "o", id(5), until, check); err != nil || calls.Load() != 2 {
		t.Fatalf("at Recheck: %v, checked %d times", err, calls.Load())
	}
	boom := errors.New("store down")
	clock.Add(1000)
	if err := x.Admit(ctx, "o", id(6), until, func(context.Context, []Entry) ([]Entry, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("a failing check: %v", err)
	}
}

// TestTampered: an index that is garbage, forged, altered, of another
// owner, naming ids the caller refuses, or longer than any index can be
// reads as empty (no entry counts) and is replaced by the next admission.
func TestTampered(t *testing.T) {
	ctx := context.Background()
	m := session.NewMemory()
	x := newIndex(t, m, 2, nil)
	s := signer(t)
	other, _ := sign.NewSigner("test-owner", []byte("another key of 32 bytes at least!"))
	until := time.Now().Add(time.Minute).UnixMilli()
	entries := func(ids ...string) []byte {
		var idx index
		for _, i := range ids {
			idx.E = append(idx.E, Entry{ID: i, Until: until})
		}
		b, _ := json.Marshal(idx)
		return b
	}
	huge := make([]Entry, MaxEntries+1)
	for i := range huge {
		huge[i] = Entry{ID: "aaaa", Until: until}
	}
	hugeJSON, _ := json.Marshal(index{E: huge})
	altered := s.Sign("o", entries(id(1), id(2)))
	altered[len(altered)-10] ^= 1
	for name, raw := range map[string][]byte{
		"garbage":          []byte("garbage"),
		"other keys":       other.Sign("o", entries(id(1), id(2))),
		"altered":          altered,
		"another owner's":  s.Sign("o2", entries(id(1), id(2))),
		"an id refused":    s.Sign("o", entries(id(1), "../x")),
		"too many entries": s.Sign("o", hugeJSON),
		"too long":         append(s.Sign("o", entries(id(1), id(2))), make([]byte, x.maxBytes)...),
		"negative check":   s.Sign("o", []byte(`{"e":[],"c":-1}`)),
	} {
		cur, _ := m.Load(ctx, "o")
		if cur == nil {
			m.PutIfAbsent(ctx, "o", raw, time.Minute)
		} else {
			m.CompareAndSwap(ctx, "o", cur, raw, time.Minute)
		}
		if live, err := x.Live(ctx, "o"); err != nil || len(live) != 0 {
			t.Fatalf("%s: live %v %v", name, live, err)
		}
		if err := x.Admit(ctx, "o", id(7), until, nil); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if live, err := x.Live(ctx, "o"); err != nil || len(live) != 1 || live[0].ID != id(7) {
			t.Fatalf("%s: after the admission %v %v", name, live, err)
		}
	}
}

// FuzzIndex feeds arbitrary bytes, signed and not, to the reading of an
// index: nothing panics, what is accepted holds only ids the caller
// accepts and never more than MaxEntries, and an admission over it
// succeeds or is refused for the bound.
func FuzzIndex(f *testing.F) {
	f.Add([]byte(`{"e":[{"i":"id01","x":99999999999999}]}`), true)
	f.Add([]byte(`{"e":[{"i":"id01","x":1},{"i":"id02","x":99999999999999}],"c":5}`), true)
	f.Add([]byte(`{"e":[{"i":"ID01","x":99999999999999}]}`), true)
	f.Add([]byte(`{"e":null}`), true)
	f.Add([]byte(`{"e":[{"i":"id01","x":99999999999999}]}`), false)
	f.Fuzz(func(t *testing.T, payload []byte, signed bool) {
		m := session.NewMemory()
		x := newIndex(t, m, 3, nil)
		raw := payload
		if signed {
			raw = signer(t).Sign("o", payload)
		}
		ctx := context.Background()
		m.PutIfAbsent(ctx, "o", raw, time.Minute)
		live, err := x.Live(ctx, "o")
		if err != nil || len(live) > MaxEntries {
			t.Fatalf("Live: %d entries, %v", len(live), err)
		}
		for _, e := range live {
			if !validID(e.ID) {
				t.Fatalf("accepted id %q", e.ID)
			}
		}
		err = x.Admit(ctx, "o", "zz99", time.Now().Add(time.Minute).UnixMilli(), nil)
		if _, full := errors.AsType[*FullError](err); err != nil && !full {
			t.Fatalf("Admit: %v", err)
		}
		if after, _ := x.Live(ctx, "o"); len(after) > max(3, len(live)) {
			t.Fatalf("%d entries after an admission over %d", len(after), len(live))
		}
	})
}

// BenchmarkLoadOversized is the cost of reading an index a byte longer
// than the longest one can be: it is refused before it is verified (the
// memory store's copy of the value is most of it).
func BenchmarkLoadOversized(b *testing.B) {
	m := session.NewMemory()
	x := newIndex(b, m, 100, nil)
	ctx := context.Background()
	m.PutIfAbsent(ctx, "o", make([]byte, x.maxBytes+1), time.Hour)
	for b.Loop() {
		x.Live(ctx, "o")
	}
}

// BenchmarkLoadLongest is the cost of reading the longest index that is
// verified: MaxEntries entries.
func BenchmarkLoadLongest(b *testing.B) {
	m := session.NewMemory()
	x := newIndex(b, m, 100, nil)
	ctx := context.Background()
	e := make([]Entry, MaxEntries)
	for i := range e {
		e[i] = Entry{ID: "aaaa", Until: time.Now().Add(time.Hour).UnixMilli()}
	}
	p, _ := json.Marshal(index{E: e})
	m.PutIfAbsent(ctx, "o", signer(b).Sign("o", p), time.Hour)
	for b.Loop() {
		x.Live(ctx, "o")
	}
}

// TestHold: holding an id the index counts already makes it count longer,
// never twice and never refused at the bound; a new id is admitted within
// it.
func TestHold(t *testing.T) {
	eachStore(t, func(t *testing.T, replica func() session.Records) {
		ctx := context.Background()
		var clock atomic.Int64
		clock.Store(time.Now().UnixMilli())
		now := func() time.Time { return time.UnixMilli(clock.Load()) }
		x := newIndex(t, replica(), 2, now)
		t0 := clock.Load()
		for i := range 2 {
			if err := x.Hold(ctx, "o/a", id(i), t0+1000); err != nil {
				t.Fatal(err)
			}
		}
		if err := x.Hold(ctx, "o/a", id(0), t0+5000); err != nil {
			t.Fatalf("renewing at the bound: %v", err)
		}
		if err := x.Hold(ctx, "o/a", id(0), t0+2000); err != nil {
			t.Fatalf("holding for less: %v", err)
		}
		if _, ok := errors.AsType[*FullError](x.Hold(ctx, "o/a", id(2), t0+5000)); !ok {
			t.Fatal("a third id admitted past the bound")
		}
		live, err := x.Live(ctx, "o/a")
		if err != nil || len(live) != 2 || live[0].ID != id(0) || live[0].Until != t0+5000 {
			t.Fatalf("live: %+v %v", live, err)
		}
		clock.Store(t0 + 1000) // id01 stops counting; id00 was renewed
		if err := x.Hold(ctx, "o/a", id(2), t0+5000); err != nil {
			t.Fatalf("after an entry stopped counting: %v", err)
		}
		if live, _ := x.Live(ctx, "o/a"); len(live) != 2 {
			t.Fatalf("live: %+v", live)
		}
	})
}
