package record

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/internal/sign"
	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

func TestCreateLoadSwap(t *testing.T) {
	eachStore(t, func(t *testing.T, w *world) {
		k, _ := w.process()
		ctx := ctxT(t)
		raw := mustCreate(t, k, "thing/a", &thing{St: "new"})
		if got := payload(raw); got != `{"st":"new","n":0,"rev":1}` {
			t.Fatalf("stored %s, want revision 1", got)
		}
		if _, ok, err := k.Create(ctx, "thing/a", &thing{St: "other"}, time.Minute); ok || err != nil {
			t.Fatalf("Create over an existing record = %v, %v; want false, nil", ok, err)
		}
		v, raw := mustLoad(t, k, "thing/a")
		if v.St != "new" || v.Rev != 1 {
			t.Fatalf("loaded %+v", v)
		}
		// A next built from scratch still gets the revision after the
		// stored one: the revision comes from the bytes swapped from.
		b, ok, err := k.Swap(ctx, "thing/a", raw, &thing{St: "moved", N: 1}, time.Minute)
		if err != nil || !ok {
			t.Fatalf("Swap = %v, %v", ok, err)
		}
		if got := payload(b); got != `{"st":"moved","n":1,"rev":2}` {
			t.Fatalf("swapped to %s", got)
		}
		if _, ok, err := k.Swap(ctx, "thing/a", raw, &thing{St: "again"}, time.Minute); ok || err != nil {
			t.Fatalf("Swap from the replaced bytes = %v, %v; want false, nil", ok, err)
		}
		if v, _ := mustLoad(t, k, "thing/a"); v.St != "moved" || v.Rev != 2 {
			t.Fatalf("loaded %+v after the swap", v)
		}
		if _, _, err := k.Load(ctx, "thing/none"); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("Load of a missing record: %v, want session.ErrNotFound", err)
		}
	})
}

// Of processes racing to move one record from the same bytes, exactly one
// moves it, on every store.
func TestSwapExactlyOneWins(t *testing.T) {
	eachStore(t, func(t *testing.T, w *world) {
		k0, _ := w.process()
		raw := mustCreate(t, k0, "thing/race", &thing{St: "new"})
		const n = 16
		var wins sync.WaitGroup
		won := make(chan int, n)
		for i := range n {
			k, _ := w.process()
			wins.Add(1)
			go func() {
				defer wins.Done()
				if _, ok, err := k.Swap(context.Background(), "thing/race", raw, &thing{St: "won", N: i}, time.Minute); ok && err == nil {
					won <- i
				}
			}()
		}
		wins.Wait()
		close(won)
		var winners []int
		for i := range won {
			winners = append(winners, i)
		}
		if len(winners) != 1 {
			t.Fatalf("%d processes moved the record (%v), want exactly 1", len(winners), winners)
		}
		if v, _ := mustLoad(t, k0, "thing/race"); v.N != winners[0] || v.Rev != 2 {
			t.Fatalf("stored %+v, winner %d", v, winners[0])
		}
	})
}

// Whatever the store holds that this kind did not sign for this key reads
// as invalid, is reported, and is never remembered.
func TestAttackForgedRecords(t *testing.T) {
	eachStore(t, func(t *testing.T, w *world) {
		k, drops := w.process()
		other, err := sign.NewSigner("test-other", []byte("another key of 32 bytes at least!"))
		if err != nil {
			t.Fatal(err)
		}
		samePurposeOtherKey, _ := sign.NewSigner("test-thing", []byte("another key of 32 bytes at least!"))
		good := k.Encode("thing/elsewhere", &thing{St: "new", Rev: 1})
		cases := map[string][]byte{
			"empty":                   {},
			"garbage":                 []byte("not a record"),
			"truncated":               good[:sign.RecordOverhead-1],
			"copied from another key": good,
			"another purpose":         other.Sign("thing/x", mustJSON(&thing{St: "new", Rev: 1})),
			"another secret":          samePurposeOtherKey.Sign("thing/x", mustJSON(&thing{St: "new", Rev: 1})),
			"signed, not JSON":        k.Signer.Sign("thing/x", []byte("{")),
			"signed, not an object":   k.Signer.Sign("thing/x", []byte(`[1,2]`)),
			"signed, fails Valid":     k.Signer.Sign("thing/x", []byte(`{"st":"","n":0,"rev":1}`)),
			"signed, huge number":     k.Signer.Sign("thing/x", []byte(`{"st":"a","n":1`+strings.Repeat("0", 1<<20)+`,"rev":1}`)),
			"signed, nested deep":     k.Signer.Sign("thing/x", []byte(`{"st":"a","z":`+strings.Repeat("[", 20000)+strings.Repeat("]", 20000)+`}`)),
			"signed, negative rev":    k.Signer.Sign("thing/x", []byte(`{"st":"a","rev":-1}`)),
		}
		ctx := ctxT(t)
		for name, b := range cases {
			t.Run(name, func(t *testing.T) {
				key := "thing/x"
				if w.client != nil {
					w.client.Del(ctx, w.prefix+key)
				}
				if ok, err := w.store.PutIfAbsent(ctx, key, b, time.Minute); err != nil {
					t.Fatal(err)
				} else if !ok {
					if ok, err := w.store.CompareAndSwap(ctx, key, mustLoadRaw(t, w, key), b, time.Minute); !ok || err != nil {
						t.Fatalf("planting: %v %v", ok, err)
					}
				}
				v, raw, err := k.Load(ctx, key)
				if !errors.Is(err, ErrInvalid) || raw != nil || v != (thing{}) {
					t.Fatalf("Load = %+v, %q, %v; want ErrInvalid and nothing", v, raw, err)
				}
			})
		}
		if k.Revs.Len() != 0 {
			t.Fatalf("%d revisions remembered from forged records", k.Revs.Len())
		}
		if !drops.has(sign.ErrForged) && !drops.has(sign.ErrMalformed) {
			t.Fatalf("no signature failure reported: %v", drops.errs)
		}
	})
}

func mustLoadRaw(t *testing.T, w *world, key string) []byte {
	t.Helper()
	b, err := w.store.Load(ctxT(t), key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A genuine record written back after it moved on is refused by every
// process that saw the later revision, and no transition starts from it.
// A process that never saw the later one takes it once: that is the
// documented bound (see package revs).
func TestAttackRolledBack(t *testing.T) {
	eachStore(t, func(t *testing.T, w *world) {
		a, drops := w.process()
		ctx := ctxT(t)
		old := mustCreate(t, a, "thing/rb", &thing{St: "new"})
		cur, ok, err := a.Swap(ctx, "thing/rb", old, &thing{St: "used"}, time.Minute)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		// Something that can write the store writes the old bytes back.
		if ok, err := w.store.CompareAndSwap(ctx, "thing/rb", cur, old, time.Minute); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if _, _, err := a.Load(ctx, "thing/rb"); !errors.Is(err, ErrRolledBack) || !errors.Is(err, ErrInvalid) {
			t.Fatalf("Load of the rolled-back record: %v, want ErrRolledBack (ErrInvalid)", err)
		}
		if !drops.has(ErrRolledBack) {
			t.Fatal("the rollback was not reported")
		}
		if _, ok, err := a.Swap(ctx, "thing/rb", old, &thing{St: "used again"}, time.Minute); ok || err != nil {
			t.Fatalf("Swap from the rolled-back bytes = %v, %v; want false, nil", ok, err)
		}
		if got := payload(mustLoadRaw(t, w, "thing/rb")); got != payload(old) {
			t.Fatalf("store now holds %s", got)
		}
		b, _ := w.process()
		if v, _ := mustLoad(t, b, "thing/rb"); v.St != "new" {
			t.Fatalf("a process that never saw revision 2 read %+v", v)
		}
	})
}

// A read that began before this process's own write may return the
// revision before it: a stale read, not a rollback. It loads, but no
// transition starts from it.
func TestStaleReadIsNotARollback(t *testing.T) {
	mem := session.NewMemory()
	st := &beforeLoad{Records: mem}
	w := &world{t: t, store: st}
	k, drops := w.process()
	ctx := ctxT(t)
	old := mustCreate(t, k, "thing/s", &thing{St: "new"})
	st.hook = func() {
		// While the read is under way, this process moves the record.
		if _, ok, err := k.Swap(ctx, "thing/s", old, &thing{St: "moved"}, time.Minute); !ok || err != nil {
			t.Error("Swap during the read:", ok, err)
		}
	}
	st.hold = old
	v, raw, err := k.Load(ctx, "thing/s")
	if err != nil || v.St != "new" {
		t.Fatalf("stale read: %+v, %v; want the revision before the write", v, err)
	}
	if drops.has(ErrRolledBack) {
		t.Fatal("a stale read was reported as a rollback")
	}
	if _, ok, err := k.Swap(ctx, "thing/s", raw, &thing{St: "from stale"}, time.Minute); ok || err != nil {
		t.Fatalf("Swap from a stale read = %v, %v; want false, nil", ok, err)
	}
}

// beforeLoad runs hook once during the next Load and returns hold.
type beforeLoad struct {
	session.Records
	hook func()
	hold []byte
}

func (b *beforeLoad) Load(ctx context.Context, key string) ([]byte, error) {
	if h := b.hook; h != nil {
		b.hook = nil
		h()
		return b.hold, nil
	}
	return b.Records.Load(ctx, key)
}

// No process acts on a record at or past its signed end of life, nor on
// one that says none past the end its kind implies; a record without
// either lives as long as the store keeps it.
func TestEndOfLife(t *testing.T) {
	w := &world{t: t, store: session.NewMemory()}
	k, drops := w.process()
	now := time.UnixMilli(1_800_000_000_000)
	k.Now = func() time.Time { return now }
	ctx := ctxT(t)
	mustCreate(t, k, "thing/e", &thing{St: "new", End: now.Add(time.Second).UnixMilli()})
	mustCreate(t, k, "thing/none", &thing{St: "new"})
	for _, at := range []time.Duration{0, 999 * time.Millisecond} {
		now = time.UnixMilli(1_800_000_000_000).Add(at)
		if _, _, err := k.Load(ctx, "thing/e"); err != nil {
			t.Fatalf("at +%v: %v", at, err)
		}
	}
	for _, at := range []time.Duration{time.Second, time.Hour} {
		now = time.UnixMilli(1_800_000_000_000).Add(at)
		if _, _, err := k.Load(ctx, "thing/e"); !errors.Is(err, ErrEnded) {
			t.Fatalf("at +%v: %v, want ErrEnded", at, err)
		}
	}
	if !drops.has(ErrEnded) {
		t.Fatal("the ended record was not reported")
	}
	if _, _, err := k.Load(ctx, "thing/none"); err != nil {
		t.Fatalf("no end at all: %v", err)
	}
	// The end a record implies is read from the record itself: here its
	// counter, as seconds from the start.
	start := time.UnixMilli(1_800_000_000_000)
	k.Implied = func(v *thing) int64 { return start.Add(time.Duration(v.N) * time.Second).UnixMilli() }
	mustCreate(t, k, "thing/implied", &thing{St: "new", N: 5})
	for at, want := range map[time.Duration]error{0: nil, 4999 * time.Millisecond: nil, 5 * time.Second: ErrEnded, time.Hour: ErrEnded} {
		now = start.Add(at)
		if _, _, err := k.Load(ctx, "thing/implied"); !errors.Is(err, want) || want == nil && err != nil {
			t.Fatalf("implied end, at +%v: %v, want %v", at, err, want)
		}
	}
	// A said end wins over the implied one.
	now = start
	mustCreate(t, k, "thing/said", &thing{St: "new", N: 5, End: start.Add(time.Hour).UnixMilli()})
	now = start.Add(time.Minute)
	if _, _, err := k.Load(ctx, "thing/said"); err != nil {
		t.Fatalf("a said end of life an hour ahead: %v", err)
	}
}

// A kind without a memory of revisions writes none and refuses nothing
// for its revision.
func TestKindWithoutRevisions(t *testing.T) {
	w := &world{t: t, store: session.NewMemory()}
	k, _ := w.process()
	k.Revs = nil
	ctx := ctxT(t)
	old := mustCreate(t, k, "thing/n", &thing{St: "new"})
	if got := payload(old); got != `{"st":"new","n":0}` {
		t.Fatalf("stored %s, want no revision", got)
	}
	cur, ok, err := k.Swap(ctx, "thing/n", old, &thing{St: "moved"}, time.Minute)
	if !ok || err != nil || payload(cur) != `{"st":"moved","n":0}` {
		t.Fatalf("Swap = %s, %v, %v", cur, ok, err)
	}
	w.store.CompareAndSwap(ctx, "thing/n", cur, old, time.Minute)
	if v, _ := mustLoad(t, k, "thing/n"); v.St != "new" {
		t.Fatalf("loaded %+v", v)
	}
}

// A swap that fails in the store, or whose reply is lost, is not
// remembered as written: the next read decides, and a transition never
// reads as made when the store did not make it.
func TestSwapStoreFaults(t *testing.T) {
	t.Run("failing", func(t *testing.T) {
		st := &failing{Records: session.NewMemory()}
		w := &world{t: t, store: st}
		k, _ := w.process()
		ctx := ctxT(t)
		raw := mustCreate(t, k, "thing/f", &thing{St: "new"})
		st.set(true)
		if _, ok, err := k.Swap(ctx, "thing/f", raw, &thing{St: "moved"}, time.Minute); ok || !errors.Is(err, errDown) {
			t.Fatalf("Swap on a failing store = %v, %v", ok, err)
		}
		if _, _, err := k.Load(ctx, "thing/f"); !errors.Is(err, errDown) {
			t.Fatalf("Load on a failing store: %v", err)
		}
		st.set(false)
		v, raw := mustLoad(t, k, "thing/f")
		if v.St != "new" {
			t.Fatalf("after the failed swap: %+v", v)
		}
		if _, ok, err := k.Swap(ctx, "thing/f", raw, &thing{St: "moved"}, time.Minute); !ok || err != nil {
			t.Fatalf("Swap after the store came back = %v, %v", ok, err)
		}
	})
	t.Run("redis: connection cut mid-swap", func(t *testing.T) {
		// The store may retry a command whose connection was cut: what
		// Swap reports must be what the store holds, whichever happened.
		for _, n := range []int{1, 8, 40, 120} {
			w, k, p := viaProxy(t)
			ctx := ctxT(t)
			key := fmt.Sprintf("thing/c%d", n)
			raw := mustCreate(t, k, key, &thing{St: "new"})
			p.CutAfter(n)
			_, ok, err := k.Swap(ctx, key, raw, &thing{St: "moved"}, time.Minute)
			p.ClearCuts()
			direct, _ := w.process()
			v, _ := mustLoad(t, direct, key)
			if ok && (err != nil || v.St != "moved") || !ok && err == nil && v.St == "new" {
				t.Fatalf("cut after %d bytes: Swap = %v, %v; the store holds %+v", n, ok, err, v)
			}
			if got, _ := mustLoad(t, k, key); got != v {
				t.Fatalf("cut after %d bytes: the writer reads %+v, the store holds %+v", n, got, v)
			}
		}
	})
	t.Run("redis: reply lost after it ran", func(t *testing.T) {
		w, k, p := viaProxy(t)
		ctx := ctxT(t)
		raw := mustCreate(t, k, "thing/l", &thing{St: "new"})
		p.SetLatency(0, 2*time.Second) // past the store's 300 ms op timeout
		_, ok, err := k.Swap(ctx, "thing/l", raw, &thing{St: "moved"}, time.Minute)
		p.SetLatency(0, 0)
		if ok || err == nil {
			t.Fatalf("Swap whose reply was lost = %v, %v; want an error", ok, err)
		}
		direct, _ := w.process()
		if v, _ := mustLoad(t, direct, "thing/l"); v.St != "moved" || v.Rev != 2 {
			t.Fatalf("Redis ran the swap, the store holds %+v", v)
		}
		// The process that lost the reply reads what was made, and moves
		// on from it; not from the bytes before.
		v, cur := mustLoad(t, k, "thing/l")
		if v.St != "moved" {
			t.Fatalf("the writer reads %+v", v)
		}
		if _, ok, err := k.Swap(ctx, "thing/l", raw, &thing{St: "twice"}, time.Minute); ok || err != nil {
			t.Fatalf("Swap from the bytes before = %v, %v; want false, nil", ok, err)
		}
		if _, ok, err := k.Swap(ctx, "thing/l", cur, &thing{St: "next"}, time.Minute); !ok || err != nil {
			t.Fatalf("Swap from what was made = %v, %v", ok, err)
		}
	})
}

// viaProxy is a Redis world and a process whose connections go through a
// fault proxy.
func viaProxy(t *testing.T) (*world, *things, *redistest.Proxy) {
	c := redistest.Client(t)
	w := &world{t: t, client: c, prefix: redistest.Prefix(t, c)}
	w.store = w.redisStore(c)
	p := redistest.NewProxy(t, "")
	k, _ := w.processOn(w.redisStore(p.Client(t)))
	return w, k, p
}
