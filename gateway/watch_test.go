package gateway_test

import (
	"cmp"
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
)

// changing is an upstream (this library, at /mcp and, 2024-11-05, /sse)
// whose tools change, lists fresh for an hour: a gateway lists it again
// within the hour only when told. It counts the watches open on it.
type changing struct {
	srv     *httptest.Server
	h       *mcphandler.Handler
	mu      sync.Mutex
	names   []string
	lists   atomic.Int64 // 2026-07-28 tools/list requests
	watches atomic.Int64 // 2025 GET streams and 2026-07-28 listen streams ever opened (the Handler may
	// serve a stream after ServeHTTP returned: which are open cannot be told from here)
	globex atomic.Int64           // of which with globex's credentials
	during atomic.Pointer[func()] // run once by the next tools/list, between making and answering it
}

func newChanging(t testing.TB) *changing {
	t.Helper()
	u := &changing{names: []string{"first"}}
	u.h = mcphandler.New(mcphandler.Config{
		Name: "changing", Version: "1", CacheTTL: time.Hour,
		Authenticate: func(r *http.Request) (mcphandler.Identity, error) {
			tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			return mcphandler.Identity{Tenant: tok, Subject: "gateway"}, nil
		},
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			u.mu.Lock()
			names := slices.Clone(u.names)
			u.mu.Unlock()
			if f := u.during.Swap(nil); f != nil {
				(*f)() // after the list was made, before it is answered
			}
			var out []mcphandler.Tool
			for _, n := range names {
				out = append(out, mcphandler.Tool{Name: n, InputSchema: json.RawMessage(`{"type":"object"}`),
					Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
					Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
						return mcphandler.TextResult(n), nil
					}})
			}
			return out, nil
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	sse, msgs := u.h.LegacySSE("/messages")
	mux := http.NewServeMux()
	mux.Handle("/mcp", u.h)
	mux.Handle("/sse", sse)
	mux.Handle("/messages", msgs)
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Mcp-Method") == "tools/list":
			u.lists.Add(1)
		case r.Method == http.MethodGet && r.URL.Path == "/mcp" || r.Header.Get("Mcp-Method") == "subscriptions/listen":
			u.watches.Add(1)
			if strings.Contains(r.Header.Get("Authorization"), "globex") {
				u.globex.Add(1)
			}
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { u.srv.Close(); u.h.Close() })
	return u
}

// add adds a tool and tells acme's connections to the upstream (the
// gateway's watch of acme's scope) of the change.
func (u *changing) add(name string) {
	u.mu.Lock()
	u.names = append(u.names, name)
	u.mu.Unlock()
	u.tell()
}

func (u *changing) tell() {
	u.h.NotifyToolsChanged(context.Background(), mcphandler.TenantOf("upstream-acme"))
}

// changingGateway is a gateway in front of u (era; its URL at /sse for
// 2024-11-05) that passes list changes on, sharing store (nil: its own).
func changingGateway(t testing.TB, u *changing, era gateway.Era, store session.Store, tune func(*gateway.Config)) *gatewayHost {
	path := "/mcp"
	if era == gateway.EraLegacy {
		path = "/sse"
	}
	var h atomic.Pointer[mcphandler.Handler]
	cfg := gateway.Config{
		Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
			return []gateway.Upstream{{ID: "docs", URL: u.srv.URL + path, Era: era,
				Header: http.Header{"Authorization": {"Bearer upstream-" + id.Tenant}}}}, nil
		},
		ToolsChanged: func(ctx context.Context, t mcphandler.Target) error {
			return h.Load().NotifyToolsChanged(ctx, t)
		},
		MaxWatches: 16, StateKeys: testKeys,
	}
	if store != nil {
		cfg.Store = store
	}
	if tune != nil {
		tune(&cfg)
	}
	gh := newGateway(t, cfg, func(c *mcphandler.Config) {
		if store != nil {
			c.Store, c.StateKeys = store, testKeys
		}
	})
	h.Store(gh.h)
	return gh
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("never: %s", what)
}

// names lists c's tools.
func names(t *testing.T, c *mcptest.Client) []string {
	t.Helper()
	got, _ := listed(t, c)
	return got
}

// An upstream's list_changed, in every era it is spoken to, makes the
// gateway list it again at once, though its list said it was fresh for an
// hour, and reaches the tenant's sessions on their GET streams.
func TestListChangedPassedOn(t *testing.T) {
	for _, era := range []gateway.Era{gateway.EraSessions, gateway.EraStateless, gateway.EraLegacy, gateway.EraDetect} {
		t.Run(cmp.Or(string(era), "detect"), func(t *testing.T) {
			u := newChanging(t)
			gh := changingGateway(t, u, era, nil, nil)
			c := connect(t, gh.h, "acme-viewer")
			stream, err := c.OpenStream(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			// Another tenant, whose initialize lists (and watches) its own
			// scope: the upstream tells acme's scope only.
			other := connect(t, gh.h, "globex-editor")
			otherStream, err := other.OpenStream(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer otherStream.Close()
			if got := names(t, c); !slices.Equal(got, []string{"docs_first"}) {
				t.Fatalf("listed %v", got)
			}
			lists := u.lists.Load()
			// The watch opens after the list, and the upstream's own
			// stream may not be subscribed yet when it shows: tell again
			// until the gateway heard it.
			got := []string{}
			for i := 0; i < 250 && !slices.Contains(got, "docs_second"); i++ {
				if i == 0 {
					u.add("second")
				} else {
					u.tell()
				}
				time.Sleep(20 * time.Millisecond)
				got = names(t, c)
			}
			if !slices.Equal(got, []string{"docs_first", "docs_second"}) || era == gateway.EraStateless && u.lists.Load() == lists {
				t.Fatalf("listed %v after the change, %d lists upstream", got, u.lists.Load()-lists)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			for {
				ev, err := stream.Next(ctx)
				if err != nil {
					t.Fatalf("no list_changed reached the session: %v", err)
				}
				if ev.Message != nil && ev.Message.Method == "notifications/tools/list_changed" {
					break
				}
			}
			short, cancel2 := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel2()
			for {
				ev, err := otherStream.Next(short)
				if err != nil {
					break // nothing for globex
				}
				if ev.Message != nil && ev.Message.Method == "notifications/tools/list_changed" {
					t.Fatal("another tenant's session was told of acme's upstream change")
				}
			}
		})
	}
}

// Two replicas that both serve a scope's list hold one watch upstream
// between them; a change heard by either makes both list again at once.
// When the watching replica stops, the other takes the watch over once
// its lease lapsed.
func TestListChangedAcrossReplicas(t *testing.T) {
	stores(t, func(t *testing.T, store func() session.Store) {
		u := newChanging(t)
		a := changingGateway(t, u, gateway.EraSessions, store(), nil)
		b := changingGateway(t, u, gateway.EraSessions, store(), nil)
		for _, gh := range []*gatewayHost{a, b} {
			gateway.SetWatchTimes(gh.gw, 300*time.Millisecond, time.Minute)
		}
		ca, cb := connect(t, a.h, "acme-viewer"), connect(t, b.h, "acme-admin")
		names(t, ca)
		eventually(t, "a watch open upstream", func() bool { return u.watches.Load() == 1 })
		names(t, cb) // b wants the scope too, and finds it watched
		time.Sleep(200 * time.Millisecond)
		if n := u.watches.Load(); n != 1 {
			t.Fatalf("%d watches opened upstream for one scope", n)
		}
		u.add("second")
		want := []string{"docs_first", "docs_second"}
		eventually(t, "both replicas list the change", func() bool {
			u.tell()
			return slices.Equal(names(t, ca), want) && slices.Equal(names(t, cb), want)
		})

		// The watching replica stops: the other takes the watch over.
		a.gw.Close()
		eventually(t, "the other replica watches", func() bool {
			names(t, cb) // its lists keep the scope wanted
			return u.watches.Load() == 2
		})
		u.add("third")
		eventually(t, "the change heard by the replica that took over", func() bool {
			u.tell()
			return slices.Contains(names(t, cb), "docs_third")
		})
	})
}

// An upstream that floods list_changed is heard at most once a second
// per scope: the notifications within a second are folded into one, and
// the change is still passed on.
func TestAttackListChangedFlood(t *testing.T) {
	u := newChanging(t)
	var passed atomic.Int64
	gh := changingGateway(t, u, gateway.EraStateless, nil, func(cfg *gateway.Config) {
		pass := cfg.ToolsChanged
		cfg.ToolsChanged = func(ctx context.Context, t mcphandler.Target) error {
			passed.Add(1)
			return pass(ctx, t)
		}
	})
	c := connect(t, gh.h, "acme-viewer")
	names(t, c)
	eventually(t, "a change passed on", func() bool { u.tell(); return passed.Load() > 0 })
	time.Sleep(1100 * time.Millisecond) // the next change is heard at once
	passed.Store(0)
	start := time.Now()
	for range 500 {
		u.tell()
	}
	flood := time.Since(start)
	time.Sleep(1500 * time.Millisecond)
	// At once, then once a second while it lasts, then once at its end.
	if n, most := passed.Load(), 2+int64(flood/time.Second); n < 1 || n > most {
		t.Fatalf("%d changes passed on for 500 notifications in %v, want 1 to %d", n, flood, most)
	}
}

// One replica watches at most MaxWatches scopes; a scope past it is not
// watched (its lists expire by their TTL).
func TestWatchesBounded(t *testing.T) {
	u := newChanging(t)
	gh := changingGateway(t, u, gateway.EraStateless, nil, func(cfg *gateway.Config) { cfg.MaxWatches = 1 })
	names(t, connect(t, gh.h, "acme-viewer"))
	names(t, connect(t, gh.h, "globex-editor"))
	eventually(t, "a watch open upstream", func() bool { return u.watches.Load() == 1 })
	time.Sleep(200 * time.Millisecond)
	if n := u.watches.Load(); n != 1 {
		t.Fatalf("%d watches opened, past MaxWatches 1", n)
	}
}

// A watch ends once its scope was not listed for a while, and the next
// list opens a new one.
func TestWatchEndsWhenIdle(t *testing.T) {
	u := newChanging(t)
	gh := changingGateway(t, u, gateway.EraStateless, nil, nil)
	gateway.SetWatchTimes(gh.gw, 300*time.Millisecond, 200*time.Millisecond)
	c := connect(t, gh.h, "acme-viewer")
	names(t, c)
	eventually(t, "a watch open upstream", func() bool { return u.watches.Load() == 1 })
	time.Sleep(700 * time.Millisecond) // idle, and its lease lapsed
	names(t, c)
	eventually(t, "a new watch after the idle one ended", func() bool { return u.watches.Load() == 2 })
}

// A scope another replica watches holds no place of this replica's
// MaxWatches once it is no longer listed here: the next scope is watched.
func TestWatchesBoundedForgetsOthersScopes(t *testing.T) {
	u := newChanging(t)
	store := session.NewMemory()
	one := func(cfg *gateway.Config) { cfg.MaxWatches = 1 }
	a := changingGateway(t, u, gateway.EraStateless, store, one)
	b := changingGateway(t, u, gateway.EraStateless, store, one)
	for _, gh := range []*gatewayHost{a, b} {
		gateway.SetWatchTimes(gh.gw, time.Minute, 200*time.Millisecond)
	}
	names(t, connect(t, a.h, "acme-viewer"))
	eventually(t, "a watches acme's scope", func() bool { return u.watches.Load() == 1 })
	names(t, connect(t, b.h, "acme-admin")) // b finds it watched: its place is taken, for now
	time.Sleep(300 * time.Millisecond)      // acme's scope idle on b
	names(t, connect(t, a.h, "acme-viewer"))
	names(t, connect(t, b.h, "globex-editor"))
	eventually(t, "b watches globex's scope", func() bool { return u.globex.Load() == 1 })
}

// A list_changed that comes while the gateway lists the upstream leaves
// that list stale: it may predate the change, so the next list asks the
// upstream again, though the list said it was fresh for an hour.
func TestListChangedDuringTheList(t *testing.T) {
	u := newChanging(t)
	gh := changingGateway(t, u, gateway.EraStateless, nil, nil)
	clk := newClock(gh)
	c := connect(t, gh.h, "acme-viewer")
	names(t, c)
	// The watch is open once a change is heard.
	u.add("second")
	eventually(t, "a change heard", func() bool { u.tell(); return slices.Contains(names(t, c), "docs_second") })
	time.Sleep(2200 * time.Millisecond) // past the last change and any folded into it: the next is heard at once
	heard := make(chan struct{})
	f := func() {
		u.add("third")
		time.Sleep(300 * time.Millisecond) // the gateway hears it before this list is answered
		close(heard)
	}
	u.during.Store(&f)
	clk.add(time.Hour) // the kept list is fresh no more: the next list asks
	if got := names(t, c); slices.Contains(got, "docs_third") {
		t.Fatalf("the list made before the change has it: %v", got)
	}
	<-heard
	if got := names(t, c); !slices.Contains(got, "docs_third") {
		t.Fatalf("a list made before a change heard during it was served as fresh: %v", got)
	}
}
