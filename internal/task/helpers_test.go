package task

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

var testKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}

// testLease is the lease of the tests' managers: a dead runner's task is
// failed within about this long.
const testLease = 600 * time.Millisecond

// replicas gives a test managers that share one store, as replicas of one
// deployment do. Each call of add returns a new replica: with Redis, its
// own client and Store (through proxy when it is not nil).
type replicas struct {
	t      testing.TB
	redis  bool
	mem    *session.Memory
	prefix string
	tune   func(*Config)
}

// eachStore runs f once on the memory store and once on real Redis.
func eachStore(t *testing.T, f func(t *testing.T, rs *replicas)) {
	t.Run("memory", func(t *testing.T) { f(t, &replicas{t: t, mem: session.NewMemory()}) })
	t.Run("redis", func(t *testing.T) {
		rs := &replicas{t: t, redis: true}
		rs.prefix = redistest.Prefix(t, redistest.Client(t))
		f(t, rs)
	})
}

func (rs *replicas) config(st Store) Config {
	cfg := Config{Store: st, Keys: testKeys, Lease: testLease, PollInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if rs.tune != nil {
		rs.tune(&cfg)
	}
	return cfg
}

// add returns a new replica's Manager, closed when the test ends.
func (rs *replicas) add() *Manager {
	rs.t.Helper()
	if !rs.redis {
		return rs.manager(rs.mem)
	}
	return rs.manager(rs.redisStore(redistest.Client(rs.t)))
}

// addVia returns a new replica whose Redis connections go through a
// fault proxy.
func (rs *replicas) addVia(p *redistest.Proxy) *Manager {
	rs.t.Helper()
	return rs.manager(rs.redisStore(p.Client(rs.t)))
}

func (rs *replicas) redisStore(c redis.UniversalClient) Store {
	st := redisstore.New(c, redisstore.Options{Prefix: rs.prefix, OpTimeout: 300 * time.Millisecond})
	rs.t.Cleanup(func() { st.Close() })
	return st
}

func (rs *replicas) manager(st Store) *Manager {
	rs.t.Helper()
	m, err := New(rs.config(st))
	if err != nil {
		rs.t.Fatal(err)
	}
	rs.t.Cleanup(func() { m.close(false) })
	return m
}

var (
	alice   = Owner{Tenant: "acme", Subject: "alice"}
	bob     = Owner{Tenant: "acme", Subject: "bob"}
	mallory = Owner{Tenant: "evil", Subject: "alice"}
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustCreate(t testing.TB, m *Manager, o Owner) (*Run, DetailedTask) {
	t.Helper()
	r, d, err := m.Create(ctxT(t), o, "export_docs", 0)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return r, d
}

func mustGet(t testing.TB, m *Manager, o Owner, id string) DetailedTask {
	t.Helper()
	d, err := m.Get(ctxT(t), o, id)
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	return d
}

// eventually polls f every 20ms until it is true or d passed.
func eventually(t *testing.T, d time.Duration, what string, f func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !f() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

func result(text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}})
	return b
}

func (r *recording) only(t *testing.T, channel string) []byte {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]byte
	for _, m := range r.msgs {
		if m.channel == channel {
			out = append(out, m.msg)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d messages on %q, want 1", len(out), channel)
	}
	return out[0]
}

// recording is a store that keeps what is published on it, as something
// subscribed to every channel would.
type recording struct {
	Store
	mu   sync.Mutex
	msgs []recorded
}

type recorded struct {
	channel string
	msg     []byte
}

func (r *recording) Publish(ctx context.Context, channel string, msg []byte) (int, error) {
	r.mu.Lock()
	r.msgs = append(r.msgs, recorded{channel, bytes.Clone(msg)})
	r.mu.Unlock()
	return r.Store.Publish(ctx, channel, msg)
}

// encode returns the bytes the record of task id is stored as.
func (m *Manager) encode(id string, r *taskRecord) []byte {
	return m.records.Encode(taskKey(id), r)
}

// decode reads raw as the record of task id, as the Manager's records
// check it (signature, decoding, Valid) but whatever its expiry and
// revision: through a copy of m.records on a store of its own, with no
// memory of revisions and a clock before every record's life.
func (m *Manager) decode(id string, raw []byte) (taskRecord, bool) {
	k := m.records
	k.Store, k.Revs = session.NewMemory(), nil
	k.Now = func() time.Time { return time.UnixMilli(0) }
	ctx := context.Background()
	k.Store.PutIfAbsent(ctx, taskKey(id), raw, time.Minute)
	rec, _, err := k.Load(ctx, taskKey(id))
	return rec, err == nil
}
