package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway"
	"github.com/mcphandler/mcphandler/mcptest"
)

// Faults of upstreams, on the wire: each upstream is this library behind
// a door that counts every request reaching it, fails them all while
// down, and can hold its tools/list requests.

// door stands in front of a fake upstream.
type door struct {
	up       *fakeUpstream
	srv      *httptest.Server
	requests atomic.Int64 // every HTTP request that reached the upstream
	down     atomic.Bool  // answer every request with 503

	mu      sync.Mutex
	methods []string      // the JSON-RPC method of every POST that got through
	hold    chan struct{} // when set, tools/list waits until it is closed
	held    chan struct{} // a tools/list is waiting
}

func newDoor(t *testing.T, tools ...upstreamTool) *door {
	t.Helper()
	d := &door{up: newUpstream(t, tools...), held: make(chan struct{}, 64)}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.requests.Add(1)
		if d.down.Load() {
			http.Error(w, "upstream text that must never reach a client", http.StatusServiceUnavailable)
			return
		}
		if r.Method == http.MethodPost {
			m := postedMethod(r)
			d.mu.Lock()
			d.methods = append(d.methods, m)
			hold := d.hold
			d.mu.Unlock()
			if hold != nil && m == "tools/list" {
				d.held <- struct{}{}
				select { // never for ever: a test that fails must not hang
				case <-hold:
				case <-time.After(5 * time.Second):
				}
			}
		}
		d.up.h.ServeHTTP(w, r)
	}))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *door) saw(method string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return countMethod(d.methods, method)
}

// upstreamsAt gives every caller the doors, with its tenant's
// credentials there.
func upstreamsAt(doors map[string]*door) gateway.UpstreamsFunc {
	return func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
		var out []gateway.Upstream
		for name, d := range doors {
			out = append(out, gateway.Upstream{ID: name, URL: d.srv.URL, Era: gateway.EraSessions,
				Header: http.Header{"Authorization": {"Bearer upstream-" + id.Tenant}}})
		}
		return out, nil
	}
}

// clock is a time the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(gh *gatewayHost) *clock {
	c := &clock{t: time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)}
	gateway.SetClock(gh.gw, c.now)
	return c
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// upStatus is one upstream's entry under gateway.StatusMetaKey.
type upStatus struct {
	Status       string `json:"status"`
	Error        string `json:"error"`
	RetryAfterMs *int64 `json:"retryAfterMs"`
}

func (s upStatus) String() string {
	r := "-"
	if s.RetryAfterMs != nil {
		r = strconv.FormatInt(*s.RetryAfterMs, 10)
	}
	return s.Status + "/" + s.Error + "/" + r
}

// listed lists c's tools and returns their names and the upstreams'
// statuses the list reported.
func listed(t *testing.T, c *mcptest.Client) ([]string, map[string]upStatus) {
	t.Helper()
	res, err := c.Call(context.Background(), "tools/list", nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if strings.Contains(string(res), "must never reach") {
		t.Fatalf("the upstream's text reached the client: %s", res)
	}
	var r struct {
		Meta struct {
			Upstreams map[string]upStatus `json:"dev.mcphandler/upstreams"`
		} `json:"_meta"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatalf("tools/list %s: %v", res, err)
	}
	names := []string{}
	for _, tl := range r.Tools {
		names = append(names, tl.Name)
	}
	return names, r.Meta.Upstreams
}

// expect lists c's tools and fails unless they are names and the status
// of upstream id is want ("status/error/retryAfterMs", "-" for none).
func expect(t *testing.T, c *mcptest.Client, names []string, id, want string) {
	t.Helper()
	got, sts := listed(t, c)
	if !slices.Equal(got, names) || sts[id].String() != want {
		t.Fatalf("listed %v with %s %s, want %v with %s", got, id, sts[id], names, want)
	}
}

// An upstream that fails stays listed with its last good tools, marked
// stale; after FailureThreshold failures it is no longer contacted until
// the cool-down ran out, and then one list finds it recovered.
func TestBreakerFailsThenRecovers(t *testing.T) {
	docs := newDoor(t, upstreamTool{name: "search", readOnly: true})
	gh := newGateway(t, gateway.Config{Upstreams: upstreamsAt(map[string]*door{"docs": docs}),
		FailureThreshold: 2, CoolDown: 10 * time.Second})
	clk := newClock(gh)
	c := connect(t, gh.h, "acme-admin")
	search := []string{"docs_search"}
	expect(t, c, search, "docs", "ok//-")

	docs.down.Store(true)
	clk.add(31 * time.Second) // the list kept is no longer fresh
	expect(t, c, search, "docs", "stale/http_status/-")
	expect(t, c, search, "docs", "stale/http_status/10000") // the second: open for 10 s
	n := docs.requests.Load()
	clk.add(4 * time.Second)
	expect(t, c, search, "docs", "stale/http_status/6000")
	if got := docs.requests.Load(); got != n {
		t.Fatalf("an open breaker's upstream got %d requests", got-n)
	}

	docs.down.Store(false)
	clk.add(6 * time.Second) // the cool-down ran out: the next list probes
	expect(t, c, search, "docs", "ok//-")
	if docs.requests.Load() == n || gateway.Breakers(gh.gw) != 0 {
		t.Fatalf("recovered: %d requests, %d breakers", docs.requests.Load()-n, gateway.Breakers(gh.gw))
	}
	n = docs.requests.Load()
	expect(t, c, search, "docs", "ok//-") // from the cache again
	if docs.requests.Load() != n {
		t.Fatal("a fresh list was not reused after the recovery")
	}
}

// A flapping upstream that answers between failures never opens its
// breaker; one that keeps failing its probes is left alone twice as long
// each time, up to MaxCoolDown.
func TestBreakerFlapping(t *testing.T) {
	docs := newDoor(t, upstreamTool{name: "search", readOnly: true})
	gh := newGateway(t, gateway.Config{Upstreams: upstreamsAt(map[string]*door{"docs": docs}),
		FailureThreshold: 3, CoolDown: time.Second, MaxCoolDown: 3 * time.Second})
	clk := newClock(gh)
	c := connect(t, gh.h, "acme-admin")
	search := []string{"docs_search"}
	for i := range 6 {
		down := i%2 == 0
		docs.down.Store(down)
		clk.add(31 * time.Second)
		n := docs.requests.Load()
		want := "ok//-"
		if down {
			want = "stale/http_status/-"
		}
		expect(t, c, search, "docs", want)
		if docs.requests.Load() == n {
			t.Fatalf("flap %d: the upstream was not contacted", i)
		}
	}
	docs.down.Store(true)
	clk.add(31 * time.Second)
	expect(t, c, search, "docs", "stale/http_status/-")
	expect(t, c, search, "docs", "stale/http_status/-")
	expect(t, c, search, "docs", "stale/http_status/1000")
	for _, next := range []string{"2000", "3000", "3000"} { // doubled, then capped
		clk.add(3 * time.Second)
		expect(t, c, search, "docs", "stale/http_status/"+next)
	}
	docs.down.Store(false)
	clk.add(3 * time.Second)
	expect(t, c, search, "docs", "ok//-")
}

// Of two upstreams, the one that is down is reported failed, with the
// class of its failure and nothing of its text, and the other's tools
// and status are as ever: on every era of the client.
func TestBreakerOneOfTwoDown(t *testing.T) {
	docs := newDoor(t, upstreamTool{name: "search", readOnly: true})
	down := newDoor(t, upstreamTool{name: "search", readOnly: true})
	down.down.Store(true)
	gh := newGateway(t, gateway.Config{Upstreams: upstreamsAt(map[string]*door{"docs": docs, "down": down})})
	for _, c := range []*mcptest.Client{
		connect(t, gh.h, "acme-admin"),
		mcptest.NewModern(t, gh.h, mcptest.WithToken("acme-admin")),
	} {
		names, sts := listed(t, c)
		if !slices.Equal(names, []string{"docs_search"}) || len(sts) != 2 ||
			sts["docs"].String() != "ok//-" || sts["down"].Status != "failed" || sts["down"].Error != "http_status" {
			t.Fatalf("%v: listed %v, %v", c.Era(), names, sts)
		}
	}
}

// While its breaker is open, a call of an upstream's tool fails at once,
// retryable, saying when to retry, and nothing reaches the upstream,
// although it would answer.
func TestBreakerCallsNotForwardedWhileOpen(t *testing.T) {
	docs := newDoor(t, upstreamTool{name: "search", readOnly: true})
	gh := newGateway(t, gateway.Config{Upstreams: upstreamsAt(map[string]*door{"docs": docs}),
		FailureThreshold: 2, CoolDown: time.Minute})
	clk := newClock(gh)
	c := connect(t, gh.h, "acme-admin")
	modern := mcptest.NewModern(t, gh.h, mcptest.WithToken("acme-admin"))
	listed(t, c)
	listed(t, modern)
	docs.down.Store(true)
	clk.add(31 * time.Second)
	listed(t, c)
	expect(t, c, []string{"docs_search"}, "docs", "stale/http_status/60000")
	docs.down.Store(false) // it would answer now: nothing may ask it
	n := docs.requests.Load()
	for _, cl := range []*mcptest.Client{c, modern, c} {
		res, err := cl.CallTool(context.Background(), "docs_search", map[string]any{"q": "x"})
		if err != nil || !res.IsError {
			t.Fatalf("%v: %+v %v", cl.Era(), res, err)
		}
		var e struct {
			Error     string `json:"error"`
			Retryable bool   `json:"retryable"`
			Detail    string `json:"detail"`
		}
		if json.Unmarshal([]byte(resultText(res)), &e) != nil || e.Error != "backend_unavailable" || !e.Retryable ||
			!strings.Contains(e.Detail, "retryAfterMs: 60000") || !strings.Contains(e.Detail, "http_status") {
			t.Fatalf("%v: %s", cl.Era(), resultText(res))
		}
		if ev := <-gh.events; !ev.IsError || ev.ErrorClass != mcphandler.ClassBackendUnavailable {
			t.Fatalf("OnCall: %+v", ev)
		}
	}
	if got := docs.requests.Load(); got != n || docs.up.count("search") != 0 {
		t.Fatalf("an open breaker's upstream got %d requests, ran %d calls", got-n, docs.up.count("search"))
	}
}

// Calls that get no answer count as failures too: the breaker opens, and
// the next call goes nowhere.
func TestBreakerOpensOnCallFailures(t *testing.T) {
	docs := newDoor(t, upstreamTool{name: "search", readOnly: true})
	gh := newGateway(t, gateway.Config{Upstreams: upstreamsAt(map[string]*door{"docs": docs}),
		FailureThreshold: 2, CoolDown: time.Minute})
	newClock(gh) // the list stays fresh: the calls find the tool without asking the upstream
	c := connect(t, gh.h, "acme-admin")
	expect(t, c, []string{"docs_search"}, "docs", "ok//-")
	docs.down.Store(true)
	call := func() string {
		res, err := c.CallTool(context.Background(), "docs_search", nil)
		if err != nil || !res.IsError {
			t.Fatalf("%+v %v", res, err)
		}
		return resultText(res)
	}
	for i := range 2 {
		n := docs.requests.Load()
		if text := call(); !strings.Contains(text, "backend_unavailable") || docs.requests.Load() == n {
			t.Fatalf("call %d: %s, %d requests", i, text, docs.requests.Load()-n)
		}
	}
	n := docs.requests.Load()
	if text := call(); !strings.Contains(text, "retryAfterMs: 60000") || docs.requests.Load() != n {
		t.Fatalf("after 2 failed calls: %s, %d requests", text, docs.requests.Load()-n)
	}
	expect(t, c, []string{"docs_search"}, "docs", "stale/http_status/60000")
}

// Past the grace period, counted from the first failure, an upstream's
// tools are left out and reported failed; its tools are then unknown.
// Real time, short durations.
func TestBreakerGraceExpires(t *testing.T) {
	docs := newDoor(t, upstreamTool{name: "search", readOnly: true})
	const grace = 150 * time.Millisecond
	gh := newGateway(t, gateway.Config{Upstreams: upstreamsAt(map[string]*door{"docs": docs}),
		FailureThreshold: 1, CoolDown: time.Minute, Grace: grace, ListTTL: time.Nanosecond})
	c := connect(t, gh.h, "acme-admin")
	expect(t, c, []string{"docs_search"}, "docs", "ok//-")
	docs.down.Store(true)
	start := time.Now()
	if names, sts := listed(t, c); time.Since(start) < grace &&
		(!slices.Equal(names, []string{"docs_search"}) || sts["docs"].Status != "stale") {
		t.Fatalf("within the grace period: %v %v", names, sts)
	}
	n := docs.requests.Load()
	for {
		names, sts := listed(t, c)
		if sts["docs"].Status == "failed" {
			if elapsed := time.Since(start); elapsed < grace || len(names) != 0 || sts["docs"].RetryAfterMs == nil {
				t.Fatalf("after %v: %v %v", elapsed, names, sts)
			}
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("still %v after 5 s", sts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c.CallTool(context.Background(), "docs_search", nil); err == nil || !strings.Contains(err.Error(), "Unknown tool") {
		t.Fatalf("a tool left out was called: %v", err)
	}
	if got := docs.requests.Load(); got != n {
		t.Fatalf("an open breaker's upstream got %d requests", got-n)
	}
}

// Strict fails a list that would leave out an upstream's tools, not one
// that lists them stale; with a negative Grace, at the first failure.
func TestBreakerStrict(t *testing.T) {
	docs := newDoor(t, upstreamTool{name: "search", readOnly: true})
	ups := upstreamsAt(map[string]*door{"docs": docs})
	gh := newGateway(t, gateway.Config{Upstreams: ups, Strict: true, FailureThreshold: 1, Grace: time.Minute})
	clk := newClock(gh)
	c := connect(t, gh.h, "acme-admin")
	expect(t, c, []string{"docs_search"}, "docs", "ok//-")
	docs.down.Store(true)
	clk.add(31 * time.Second)
	expect(t, c, []string{"docs_search"}, "docs", "stale/http_status/30000")
	clk.add(61 * time.Second)
	if _, err := c.ListTools(context.Background()); err == nil {
		t.Fatal("strict: a list past the grace period did not fail")
	}

	docs.down.Store(false)
	noGrace := newGateway(t, gateway.Config{Upstreams: ups, Strict: true, Grace: -1})
	clk = newClock(noGrace)
	c = connect(t, noGrace.h, "acme-admin")
	expect(t, c, []string{"docs_search"}, "docs", "ok//-")
	docs.down.Store(true)
	clk.add(31 * time.Second)
	if _, err := c.ListTools(context.Background()); err == nil {
		t.Fatal("strict without grace: a failing upstream did not fail the list")
	}
}

// Callers with ever new failing credentials make the gateway remember at
// most MaxBreakers upstreams, and keep no list.
func TestBreakerMemoryBounded(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	var n atomic.Int64
	gw, err := gateway.New(gateway.Config{MaxBreakers: 16, FailureThreshold: 1, MaxWatches: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
			k := strconv.FormatInt(n.Add(1), 10)
			return []gateway.Upstream{{ID: "down", URL: down.URL, Era: gateway.EraSessions,
				Header: http.Header{"Authorization": {"Bearer attacker-" + k}}}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	for i := range 300 {
		if tools, err := gw.Tools(context.Background()); err != nil || len(tools) != 0 {
			t.Fatalf("%d: %v %v", i, tools, err)
		}
		if b := gateway.Breakers(gw); b > 16 {
			t.Fatalf("%d breakers kept, at most 16", b)
		}
	}
	if b, l := gateway.Breakers(gw), gateway.CachedLists(gw); b != 16 || l != 0 {
		t.Fatalf("%d breakers and %d lists kept", b, l)
	}
}

// Two lists while half-open: one probes the upstream, the other is
// answered at once with the stale tools, and only one list reaches the
// upstream; a call meanwhile fails at once too.
func TestBreakerOneProbeWhileHalfOpen(t *testing.T) {
	docs := newDoor(t, upstreamTool{name: "search", readOnly: true})
	gh := newGateway(t, gateway.Config{Upstreams: upstreamsAt(map[string]*door{"docs": docs}),
		FailureThreshold: 1, CoolDown: 10 * time.Second})
	clk := newClock(gh)
	a := connect(t, gh.h, "acme-admin")
	b := connect(t, gh.h, "acme-admin")
	search := []string{"docs_search"}
	expect(t, a, search, "docs", "ok//-")
	docs.down.Store(true)
	clk.add(31 * time.Second)
	expect(t, a, search, "docs", "stale/http_status/10000")

	docs.down.Store(false)
	hold := make(chan struct{})
	docs.mu.Lock()
	docs.hold = hold
	docs.mu.Unlock()
	lists, inits := docs.saw("tools/list"), docs.saw("initialize")
	clk.add(10 * time.Second)
	probe := make(chan map[string]upStatus, 1)
	go func() {
		res, err := a.Call(context.Background(), "tools/list", nil)
		var r struct {
			Meta struct {
				Upstreams map[string]upStatus `json:"dev.mcphandler/upstreams"`
			} `json:"_meta"`
		}
		if err == nil {
			err = json.Unmarshal(res, &r)
		}
		if err != nil {
			t.Error(err)
		}
		probe <- r.Meta.Upstreams
	}()
	select {
	case <-docs.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the probe did not reach the upstream")
	}
	n := docs.requests.Load()
	expect(t, b, search, "docs", "stale/http_status/1000")
	res, err := b.CallTool(context.Background(), "docs_search", nil)
	if err != nil || !strings.Contains(resultText(res), "retryAfterMs: 1000") {
		t.Fatalf("a call during the probe: %+v %v", res, err)
	}
	if got := docs.requests.Load(); got != n {
		t.Fatalf("%d more requests reached the upstream during the probe", got-n)
	}
	close(hold)
	if sts := <-probe; sts["docs"].String() != "ok//-" {
		t.Fatalf("the probe: %v", sts)
	}
	if l, i := docs.saw("tools/list")-lists, docs.saw("initialize")-inits; l != 1 || i != 1 {
		t.Fatalf("half-open: %d lists and %d sessions upstream, want 1", l, i)
	}
	expect(t, b, search, "docs", "ok//-")
}

// A host that keeps its tools between requests lists no upstream on a
// call: after the cool-down, the call itself probes, with a list of the
// upstream's tools before it goes, and only when that answered.
func TestBreakerCallProbes(t *testing.T) {
	docs := newDoor(t, upstreamTool{name: "search", readOnly: true})
	gw, err := gateway.New(gateway.Config{Upstreams: upstreamsAt(map[string]*door{"docs": docs}),
		FailureThreshold: 1, CoolDown: 10 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		MaxWatches: -1}) // the requests counted are the calls' (watch_test.go tests watches)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	gh := &gatewayHost{gw: gw}
	clk := newClock(gh)
	var (
		once  sync.Once
		tools []mcphandler.Tool
	)
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			once.Do(func() { tools, err = gw.Tools(ctx) })
			return tools, err
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	t.Cleanup(func() { h.Close() })
	c := connect(t, h, "acme-admin")
	call := func() string {
		t.Helper()
		res, err := c.CallTool(context.Background(), "docs_search", nil)
		if err != nil {
			t.Fatal(err)
		}
		return resultText(res)
	}
	if text := call(); !strings.HasPrefix(text, "search ran") {
		t.Fatal(text)
	}
	docs.down.Store(true)
	if text := call(); !strings.Contains(text, "backend_unavailable") { // the failure that opens it
		t.Fatal(text)
	}
	clk.add(10 * time.Second)
	lists := docs.saw("tools/list")
	if text := call(); !strings.Contains(text, "retryAfterMs: 20000") { // the probe failed: twice as long
		t.Fatal(text)
	}
	docs.down.Store(false)
	n := docs.requests.Load()
	if text := call(); !strings.Contains(text, "retryAfterMs: 20000") || docs.requests.Load() != n {
		t.Fatalf("%s, %d requests", text, docs.requests.Load()-n)
	}
	clk.add(20 * time.Second)
	if text := call(); !strings.HasPrefix(text, "search ran") || docs.saw("tools/list") != lists+1 || docs.up.count("search") != 2 {
		t.Fatalf("%s: %d lists, %d runs", text, docs.saw("tools/list")-lists, docs.up.count("search"))
	}
}
