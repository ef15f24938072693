package record

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/internal/revs"
	"github.com/mcphandler/mcphandler/internal/sign"
	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

var testKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}

// thing is the record of the tests: a state, a counter and its life.
type thing struct {
	St  string `json:"st"`
	N   int    `json:"n"`
	Rev uint64 `json:"rev,omitempty"`
	End int64  `json:"x,omitempty"`
}

func (t *thing) Valid() bool    { return t.St != "" && t.N >= 0 }
func (t *thing) Life() Life     { return Life{Rev: t.Rev, End: t.End} }
func (t *thing) SetLife(l Life) { t.Rev, t.End = l.Rev, l.End }

type things = Kind[thing, *thing]

// world is one shared store and what each process of a test keeps.
type world struct {
	t      testing.TB
	store  session.Records
	client redis.UniversalClient // nil on the memory store
	prefix string
}

// eachStore runs f on the memory store and on real Redis.
func eachStore(t *testing.T, f func(t *testing.T, w *world)) {
	t.Run("memory", func(t *testing.T) { f(t, &world{t: t, store: session.NewMemory()}) })
	t.Run("redis", func(t *testing.T) {
		c := redistest.Client(t)
		w := &world{t: t, client: c, prefix: redistest.Prefix(t, c)}
		w.store = w.redisStore(c)
		f(t, w)
	})
}

func (w *world) redisStore(c redis.UniversalClient) session.Records {
	st := redisstore.New(c, redisstore.Options{Prefix: w.prefix, OpTimeout: 300 * time.Millisecond})
	w.t.Cleanup(func() { st.Close() })
	return st
}

// process is a new process's Kind over the world's store: its own memory
// of revisions, the refusals it logged in dropped.
func (w *world) process() (*things, *dropLog) {
	return w.processOn(w.store)
}

func (w *world) processOn(st session.Records) (*things, *dropLog) {
	s, err := sign.NewSigner("test-thing", testKeys...)
	if err != nil {
		w.t.Fatal(err)
	}
	d := &dropLog{}
	return &things{Store: st, Signer: s, Revs: &revs.Memory{}, Span: time.Minute, Dropped: d.add}, d
}

type dropLog struct {
	mu   sync.Mutex
	errs []error
}

func (d *dropLog) add(key string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.errs = append(d.errs, err)
}

func (d *dropLog) has(target error) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.errs {
		if errors.Is(e, target) {
			return true
		}
	}
	return false
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustCreate(t testing.TB, k *things, key string, v *thing) []byte {
	t.Helper()
	raw, ok, err := k.Create(ctxT(t), key, v, time.Minute)
	if err != nil || !ok {
		t.Fatalf("Create(%s) = %v, %v", key, ok, err)
	}
	return raw
}

func mustLoad(t testing.TB, k *things, key string) (thing, []byte) {
	t.Helper()
	v, raw, err := k.Load(ctxT(t), key)
	if err != nil {
		t.Fatalf("Load(%s): %v", key, err)
	}
	return v, raw
}

// payload is the JSON of a stored record, after its signature.
func payload(raw []byte) string { return string(raw[sign.RecordOverhead:]) }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// failing is a store whose calls fail while fail is set.
type failing struct {
	session.Records
	mu   sync.Mutex
	fail bool
}

var errDown = errors.New("store down")

func (f *failing) set(v bool) { f.mu.Lock(); f.fail = v; f.mu.Unlock() }
func (f *failing) down() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.fail }

func (f *failing) PutIfAbsent(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	if f.down() {
		return false, errDown
	}
	return f.Records.PutIfAbsent(ctx, key, v, ttl)
}

func (f *failing) Load(ctx context.Context, key string) ([]byte, error) {
	if f.down() {
		return nil, errDown
	}
	return f.Records.Load(ctx, key)
}

func (f *failing) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if f.down() {
		return false, errDown
	}
	return f.Records.CompareAndSwap(ctx, key, old, new, ttl)
}
