package approval

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

var testKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}

func newTestStore(t *testing.T, sh Shared, mod func(*Config)) *Store {
	t.Helper()
	cfg := Config{Store: sh, Keys: testKeys, URL: "https://app.example/approvals/", Roles: []string{"viewer", "editor", "admin"}}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var (
	editor  = Identity{Subject: "ed", Tenant: "acme", Role: "editor"}
	admin   = Identity{Subject: "ada", Tenant: "acme", Role: "admin"}
	admin2  = Identity{Subject: "bob", Tenant: "acme", Role: "admin"}
	viewer  = Identity{Subject: "vi", Tenant: "acme", Role: "viewer"}
	foreign = Identity{Subject: "eve", Tenant: "globex", Role: "admin"}
)

func deleteReq(args string) Request {
	return Request{Asker: editor, Tool: "delete_note", Arguments: []byte(args), Message: "Delete a note", Policy: Policy{MinRole: "admin"}}
}

func begin(t *testing.T, s *Store, req Request) *Approval {
	t.Helper()
	a, created, err := s.Begin(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !created || a.State != Pending {
		t.Fatalf("Begin: created=%v state=%s, want a new pending approval", created, a.State)
	}
	return a
}

// distinct is the i-th call of editor that is not the same call as any
// other (its arguments differ).
func distinct(i int) Request { return deleteReq(fmt.Sprintf(`{"id":"n%d"}`, i)) }

// backend is one shared store, with a constructor of replicas (each a
// Store of its own over its own connection) and the attacker's hands on
// the raw keys.
type backend struct {
	t       *testing.T
	replica func() Shared
	// snapshot copies the values of keys as they are now and returns what
	// writes them back, byte for byte and without expiry.
	snapshot func(keys ...string) (restore func())
	// put writes raw under key, without expiry.
	put func(key string, raw []byte)
}

// eachBackend runs f on memory and on real Redis (where the attacker
// copies keys with DUMP and writes them back with RESTORE).
func eachBackend(t *testing.T, f func(t *testing.T, b *backend)) {
	t.Run("memory", func(t *testing.T) {
		m := session.NewMemory()
		f(t, &backend{t: t, replica: func() Shared { return m }, snapshot: func(keys ...string) func() {
			saved := make(map[string][]byte)
			for _, k := range keys {
				raw, err := m.Load(context.Background(), k)
				if err != nil {
					t.Fatalf("snapshot %s: %v", k, err)
				}
				saved[k] = raw
			}
			return func() {
				for k, raw := range saved {
					plantMemory(t, m, k, raw)
				}
			}
		}, put: func(key string, raw []byte) { plantMemory(t, m, key, raw) }})
	})
	t.Run("redis", func(t *testing.T) {
		rc := redistest.Client(t)
		prefix := redistest.Prefix(t, rc)
		b := redisBackend(t, rc, prefix)
		b.replica = func() Shared {
			st := redisstore.New(redistest.Client(t), redisstore.Options{Prefix: prefix})
			t.Cleanup(func() { st.Close() })
			return st
		}
		f(t, b)
	})
}

// redisBackend is the attacker's hands on the keys under prefix, through
// rc: DUMP to copy, RESTORE (without expiry) to write back, SET to plant.
func redisBackend(t *testing.T, rc redis.UniversalClient, prefix string) *backend {
	ctx := context.Background()
	return &backend{t: t, snapshot: func(keys ...string) func() {
		dumps := make(map[string]string)
		for _, k := range keys {
			raw := prefix + "{" + k + "}:r"
			d, err := rc.Dump(ctx, raw).Result()
			if err != nil {
				t.Fatalf("DUMP %s: %v", raw, err)
			}
			dumps[raw] = d
		}
		return func() {
			for raw, d := range dumps {
				if err := rc.RestoreReplace(ctx, raw, 0, d).Err(); err != nil {
					t.Fatalf("RESTORE %s: %v", raw, err)
				}
			}
		}
	}, put: func(key string, raw []byte) {
		if err := rc.Set(ctx, prefix+"{"+key+"}:r", raw, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}}
}

// plantMemory writes raw under key in m, whatever is there now, to live
// for a day (as good as forever for a test).
func plantMemory(t *testing.T, m *session.Memory, key string, raw []byte) {
	t.Helper()
	ctx := context.Background()
	for range 8 {
		cur, err := m.Load(ctx, key)
		if errors.Is(err, session.ErrNotFound) {
			if ok, _ := m.PutIfAbsent(ctx, key, raw, 24*time.Hour); ok {
				return
			}
			continue
		}
		if ok, _ := m.CompareAndSwap(ctx, key, cur, raw, 24*time.Hour); ok {
			return
		}
	}
	t.Fatalf("cannot plant %s", key)
}

// store is a new replica.
func (b *backend) store(mod func(*Config)) *Store { return newTestStore(b.t, b.replica(), mod) }

// at sets s's clock to t (the records the attacker writes back never
// expire from the store, so only the signed times inside them can end
// them).
func at(s *Store, t time.Time) *Store {
	s.now = func() time.Time { return t }
	return s
}
