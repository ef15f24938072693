package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// hinted is a 2026-07-28 upstream (this library) whose lists say ttlMs
// ttl, with one read-only tool per tenant of the caller's token; it counts
// the tools/list requests that reach it, and can be taken down.
type hinted struct {
	srv   *httptest.Server
	lists atomic.Int64
	down  atomic.Bool
	slow  atomic.Int64 // a tools/list takes this long (ns)
}

func newHinted(t testing.TB, ttl time.Duration) *hinted {
	t.Helper()
	u := &hinted{}
	h := mcphandler.New(mcphandler.Config{
		Name: "hinted", Version: "1", CacheTTL: ttl,
		Authenticate: func(r *http.Request) (mcphandler.Identity, error) {
			tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			return mcphandler.Identity{Tenant: tok, Subject: "gateway"}, nil
		},
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			id, _ := mcphandler.IdentityFrom(ctx)
			return []mcphandler.Tool{{Name: "read_" + strings.TrimPrefix(id.Tenant, "upstream-"),
				InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
				Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					return mcphandler.TextResult("read for " + call.Identity.Tenant), nil
				}}}, nil
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u.down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		if r.Header.Get("Mcp-Method") == "tools/list" {
			u.lists.Add(1)
			time.Sleep(time.Duration(u.slow.Load()))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { u.srv.Close(); h.Close() })
	return u
}

// hintedGateway is a gateway in front of u for every caller, with the
// tenant's credentials there, its Handler's lists fresh for a minute
// (CacheTTL), keeping lists in store (nil: its own).
func hintedGateway(t testing.TB, u *hinted, store session.Store, tune func(*gateway.Config)) *gatewayHost {
	cfg := gateway.Config{
		Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
			return []gateway.Upstream{{ID: "docs", URL: u.srv.URL, Era: gateway.EraStateless,
				Header: http.Header{"Authorization": {"Bearer upstream-" + id.Tenant}}}}, nil
		},
		StateKeys: testKeys,
	}
	if store != nil {
		cfg.Store = store
	}
	if tune != nil {
		tune(&cfg)
	}
	return newGateway(t, cfg, func(c *mcphandler.Config) { c.CacheTTL = time.Minute })
}

// ttlOf lists c's tools (c speaks 2026-07-28) and returns the result's
// ttlMs and the names listed.
func ttlOf(t *testing.T, c *mcptest.Client) (int64, []string) {
	t.Helper()
	res, err := c.Call(context.Background(), "tools/list", nil)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		TTL   int64 `json:"ttlMs"`
		Tools []struct{ Name string }
	}
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range r.Tools {
		names = append(names, tl.Name)
	}
	return r.TTL, names
}

// An upstream's list is listed again no later than its ttlMs says (here
// sooner than ListTTL), and the gateway's own list says how long it stays
// fresh: what is left of the upstream's. A call's lookup takes a list up
// to ListTTL old, whatever the ttlMs: the upstream checks the call itself.
func TestListHonorsUpstreamTTL(t *testing.T) {
	u := newHinted(t, 10*time.Second)
	gh := hintedGateway(t, u, nil, nil)
	clk := newClock(gh)
	c := mcptest.NewModern(t, gh.h, mcptest.WithToken("acme-viewer"))
	step := func(after time.Duration, wantTTL, wantLists int64) {
		t.Helper()
		clk.add(after)
		ttl, names := ttlOf(t, c)
		if ttl != wantTTL || !slices.Equal(names, []string{"docs_read_acme"}) || u.lists.Load() != wantLists {
			t.Fatalf("ttlMs %d, names %v, %d lists upstream; want ttlMs %d, %d lists", ttl, names, u.lists.Load(), wantTTL, wantLists)
		}
	}
	step(0, 10000, 1)
	step(4*time.Second, 6000, 1)
	step(6*time.Second, 10000, 2) // fresh no more: listed again
	clk.add(15 * time.Second)
	if res, err := c.CallTool(context.Background(), "docs_read_acme", nil); err != nil || res.IsError || u.lists.Load() != 2 {
		t.Fatalf("%+v %v; %d lists upstream", res, err, u.lists.Load())
	}
	clk.add(16 * time.Second) // past ListTTL: the lookup lists it again
	if res, err := c.CallTool(context.Background(), "docs_read_acme", nil); err != nil || res.IsError || u.lists.Load() != 3 {
		t.Fatalf("%+v %v; %d lists upstream", res, err, u.lists.Load())
	}
}

// An upstream that says ttlMs 0 is listed for every list, and the
// gateway's list says 0; a ListTTL shorter than the upstream's ttlMs wins.
func TestListTTLZeroAndShorterListTTL(t *testing.T) {
	u := newHinted(t, 0)
	gh := hintedGateway(t, u, nil, nil)
	c := mcptest.NewModern(t, gh.h, mcptest.WithToken("acme-viewer"))
	for i := int64(1); i <= 3; i++ {
		if ttl, _ := ttlOf(t, c); ttl != 0 || u.lists.Load() != i {
			t.Fatalf("list %d: ttlMs %d, %d lists upstream", i, ttl, u.lists.Load())
		}
	}
	long := newHinted(t, time.Hour)
	gh = hintedGateway(t, long, nil, func(cfg *gateway.Config) { cfg.ListTTL = 20 * time.Second })
	newClock(gh)
	c = mcptest.NewModern(t, gh.h, mcptest.WithToken("acme-viewer"))
	if ttl, _ := ttlOf(t, c); ttl != 20000 {
		t.Fatalf("ttlMs %d, want ListTTL's 20000", ttl)
	}
}

// A list missing an upstream that failed says it is fresh only until the
// upstream may be asked again: at once after a failure, until its breaker
// closes while it is open.
func TestListTTLAfterFailure(t *testing.T) {
	u := newHinted(t, time.Minute)
	gh := hintedGateway(t, u, nil, func(cfg *gateway.Config) {
		cfg.FailureThreshold, cfg.CoolDown, cfg.Grace, cfg.ListTTL = 2, 10*time.Second, -1, 2*time.Minute
	})
	clk := newClock(gh)
	c := mcptest.NewModern(t, gh.h, mcptest.WithToken("acme-viewer"))
	if ttl, _ := ttlOf(t, c); ttl != 60000 {
		t.Fatalf("ttlMs %d", ttl)
	}
	u.down.Store(true)
	clk.add(61 * time.Second)
	if ttl, names := ttlOf(t, c); ttl != 0 || len(names) != 0 {
		t.Fatalf("after one failure: ttlMs %d, %v", ttl, names)
	}
	if ttl, _ := ttlOf(t, c); ttl != 10000 {
		t.Fatalf("breaker open: ttlMs %d, want 10000", ttl)
	}
	clk.add(3 * time.Second)
	if ttl, _ := ttlOf(t, c); ttl != 7000 {
		t.Fatalf("breaker open: ttlMs %d, want 7000", ttl)
	}
}

// stores runs f with a store factory shared by replicas: memory and Redis.
func stores(t *testing.T, f func(t *testing.T, store func() session.Store)) {
	t.Run("memory", func(t *testing.T) {
		st := session.NewMemory()
		f(t, func() session.Store { return st })
	})
	t.Run("redis", func(t *testing.T) {
		prefix := redistest.Prefix(t, redistest.Client(t))
		f(t, func() session.Store { return redisstore.New(redistest.Client(t), redisstore.Options{Prefix: prefix}) })
	})
}

// A list one replica fetched is served by another from the shared store,
// without the upstream; never to another tenant, even one sending the
// same credentials upstream; and a replica started after the upstream
// failed lists its last good tools, stale, from the store.
func TestListSharedByReplicas(t *testing.T) {
	stores(t, func(t *testing.T, store func() session.Store) {
		u := newHinted(t, time.Minute)
		a := hintedGateway(t, u, store(), nil)
		b := hintedGateway(t, u, store(), nil)
		expect(t, connect(t, a.h, "acme-viewer"), []string{"docs_read_acme"}, "docs", "ok//-")
		expect(t, connect(t, b.h, "acme-admin"), []string{"docs_read_acme"}, "docs", "ok//-")
		if n := u.lists.Load(); n != 1 {
			t.Fatalf("%d lists upstream, want the first replica's only", n)
		}
		same := hintedGateway(t, u, store(), func(cfg *gateway.Config) {
			cfg.Upstreams = func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
				return []gateway.Upstream{{ID: "docs", URL: u.srv.URL, Era: gateway.EraStateless,
					Header: http.Header{"Authorization": {"Bearer upstream-acme"}}}}, nil // every tenant sends acme's
			}
		})
		expect(t, connect(t, same.h, "globex-editor"), []string{"docs_read_acme"}, "docs", "ok//-")
		if n := u.lists.Load(); n != 2 {
			t.Fatalf("%d lists upstream: another tenant was served acme's list from the store", n)
		}

		u.down.Store(true)
		late := hintedGateway(t, u, store(), nil)
		// Two minutes on, the stored list is fresh no more.
		gateway.SetClock(late.gw, (&clock{t: time.Now().Add(2 * time.Minute)}).now)
		expect(t, connect(t, late.h, "acme-viewer"), []string{"docs_read_acme"}, "docs", "stale/http_status/-")
	})
}

// spyStore is a store whose Records writes are seen: the keys of the
// gateway's lists.
type spyStore struct {
	session.Store
	mu   sync.Mutex
	keys []string
}

func (s *spyStore) PutIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	if !slices.Contains(s.keys, key) {
		s.keys = append(s.keys, key)
	}
	s.mu.Unlock()
	return s.Store.PutIfAbsent(ctx, key, value, ttl)
}

func (s *spyStore) listKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, k := range s.keys {
		if strings.HasPrefix(k, "gw-list/") {
			out = append(out, k)
		}
	}
	return out
}

// overwrite replaces the value under key with v.
func (s *spyStore) overwrite(t *testing.T, key string, v []byte) {
	t.Helper()
	old, err := s.Load(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.CompareAndSwap(context.Background(), key, old, v, time.Minute); !ok || err != nil {
		t.Fatalf("overwrite: %v %v", ok, err)
	}
}

// What the store holds is input like a client's: a list value altered,
// forged, oversized, or copied from another tenant's key is no list. A
// replica reading it lists the upstream itself, and never serves another
// tenant's tools.
func TestAttackListStoreValue(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  func(acme, globex []byte) []byte
	}{
		{"garbage", func(_, _ []byte) []byte { return []byte("not a list") }},
		{"flipped", func(_, g []byte) []byte { b := slices.Clone(g); b[len(b)/2] ^= 1; return b }},
		{"another tenant's", func(a, _ []byte) []byte { return a }},
		{"oversized", func(_, _ []byte) []byte { return []byte(strings.Repeat("v", 8<<20)) }},
		{"empty", func(_, _ []byte) []byte { return []byte{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spy := &spyStore{Store: session.NewMemory()}
			u := newHinted(t, time.Minute)
			a := hintedGateway(t, u, spy, nil)
			expect(t, connect(t, a.h, "acme-viewer"), []string{"docs_read_acme"}, "docs", "ok//-")
			acmeKey := spy.listKeys()
			expect(t, connect(t, a.h, "globex-editor"), []string{"docs_read_globex"}, "docs", "ok//-")
			keys := spy.listKeys()
			if len(acmeKey) != 1 || len(keys) != 2 {
				t.Fatalf("list keys %v", keys)
			}
			globexKey := keys[1]
			if keys[0] != acmeKey[0] {
				globexKey = keys[0]
			}
			av, _ := spy.Load(context.Background(), acmeKey[0])
			gv, _ := spy.Load(context.Background(), globexKey)
			spy.overwrite(t, globexKey, tc.bad(av, gv))
			n := u.lists.Load()
			b := hintedGateway(t, u, spy, nil) // a replica with nothing of its own
			expect(t, connect(t, b.h, "globex-editor"), []string{"docs_read_globex"}, "docs", "ok//-")
			if u.lists.Load() != n+1 {
				t.Fatalf("%d lists upstream, want the replica's own", u.lists.Load()-n)
			}
		})
	}
}

// Lists that find the kept list stale at the same time make one request
// upstream, not one each: a list expiring under load is no stampede. A
// caller that goes away while it waits fails none of the others.
func TestListFetchedOnceForConcurrentLists(t *testing.T) {
	u := newHinted(t, time.Minute)
	gh := hintedGateway(t, u, nil, nil)
	clk := newClock(gh)
	c := connect(t, gh.h, "acme-viewer")
	expect(t, c, []string{"docs_read_acme"}, "docs", "ok//-")
	u.slow.Store(int64(200 * time.Millisecond))
	clk.add(time.Minute)
	n := u.lists.Load()
	gone, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	go c.Call(gone, "tools/list", nil) // the first to ask, perhaps: it goes away
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, sts := listed(t, c)
			if !slices.Equal(got, []string{"docs_read_acme"}) || sts["docs"].String() != "ok//-" {
				t.Errorf("listed %v, %v", got, sts)
			}
		}()
	}
	wg.Wait()
	if got := u.lists.Load() - n; got != 1 {
		t.Fatalf("%d lists upstream for 17 lists at once", got)
	}
}
