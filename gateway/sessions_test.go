package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/gateway"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

var testKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}

// statefulUpstream is an MCP server (this library) whose tools keep state
// per upstream session, as a browser or a shell would: remember stores a
// value in the session that carries the call, recall reads it back. It
// records the session id of every request and those it issued and
// ended.
type statefulUpstream struct {
	srv *httptest.Server
	h   *mcphandler.Handler

	mu       sync.Mutex
	notes    map[string]string // upstream session id -> remembered
	calls    []string          // the Mcp-Session-Id of each tools/call POST
	statuses []int             // the status of each tools/call POST
	issued   []string          // the session ids initialize gave
	deleted  []string          // the session ids DELETEd
	runs     map[string]int    // tool -> runs

	refuseAnswers atomic.Bool // answer 404 to the responses POSTed to questions
}

func newStatefulUpstream(t testing.TB, ttl time.Duration) *statefulUpstream {
	t.Helper()
	u := &statefulUpstream{notes: map[string]string{}, runs: map[string]int{}}
	ro := &mcphandler.ToolAnnotations{ReadOnlyHint: true}
	ran := func(name string) {
		u.mu.Lock()
		u.runs[name]++
		u.mu.Unlock()
	}
	tools := []mcphandler.Tool{
		{Name: "remember", Description: "keeps v in this session", Annotations: ro,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"v":{"type":"string"}}}`),
			Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				ran("remember")
				var a struct{ V string }
				json.Unmarshal(call.Arguments, &a)
				u.mu.Lock()
				u.notes[call.SessionID] = a.V
				u.mu.Unlock()
				return mcphandler.TextResult("remembered"), nil
			}},
		{Name: "recall", Description: "what this session keeps", Annotations: ro,
			Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				ran("recall")
				u.mu.Lock()
				defer u.mu.Unlock()
				if v, ok := u.notes[call.SessionID]; ok {
					return mcphandler.TextResult("recalled " + v), nil
				}
				return mcphandler.TextResult("nothing"), nil
			}},
		{Name: "ask", Description: "asks, then acts", Annotations: ro,
			Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				ran("ask")
				if _, err := call.Elicit(ctx, mcphandler.ElicitRequest{Message: "Sure?",
					Schema: elicitation.NewSchema().Boolean("sure", elicitation.Required())}); err != nil {
					return nil, err
				}
				return mcphandler.TextResult("asked"), nil
			}},
	}
	u.h = mcphandler.New(mcphandler.Config{
		Name: "stateful", Version: "1",
		Authenticate: func(r *http.Request) (mcphandler.Identity, error) {
			tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			return mcphandler.Identity{Tenant: tok, Subject: "gateway"}, nil
		},
		ListTools: func(context.Context) ([]mcphandler.Tool, error) { return tools, nil },
		Sessions:  mcphandler.SessionOptions{TTL: ttl},
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sid := r.Header.Get("Mcp-Session-Id")
		if r.Method == http.MethodDelete {
			u.mu.Lock()
			u.deleted = append(u.deleted, sid)
			u.mu.Unlock()
			u.h.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodPost {
			u.h.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
		}
		json.Unmarshal(body, &m)
		if m.Method == "" && len(m.Result) > 0 && u.refuseAnswers.Load() {
			http.Error(w, "no such session", http.StatusNotFound)
			return
		}
		// Recorded before the answer goes: a client may have it before
		// ServeHTTP returns.
		rec := &statusRecorder{ResponseWriter: w, at: func(status int) {
			u.mu.Lock()
			defer u.mu.Unlock()
			switch m.Method {
			case "initialize":
				if id := w.Header().Get("Mcp-Session-Id"); id != "" {
					u.issued = append(u.issued, id)
				}
			case "tools/call":
				u.calls = append(u.calls, sid)
				u.statuses = append(u.statuses, status)
			}
		}}
		u.h.ServeHTTP(rec, r)
		rec.WriteHeader(http.StatusOK) // no-op once written
	}))
	t.Cleanup(func() { u.srv.Close(); u.h.Close() })
	return u
}

// statusRecorder calls at once, with the status, before the header goes.
type statusRecorder struct {
	http.ResponseWriter
	at    func(status int)
	wrote bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.wrote {
		return
	}
	s.wrote = true
	s.at(code)
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.WriteHeader(http.StatusOK)
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Flush() {
	s.WriteHeader(http.StatusOK)
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// seen is what the upstream saw so far.
type seen struct {
	calls, issued, deleted []string
	statuses               []int
}

func (u *statefulUpstream) seen() seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return seen{calls: append([]string(nil), u.calls...), issued: append([]string(nil), u.issued...),
		deleted: append([]string(nil), u.deleted...), statuses: append([]int(nil), u.statuses...)}
}

func (u *statefulUpstream) ran(tool string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.runs[tool]
}

// since is what the upstream saw after s.
func (u *statefulUpstream) since(s seen) seen {
	n := u.seen()
	return seen{calls: n.calls[len(s.calls):], issued: n.issued[len(s.issued):], deleted: n.deleted[len(s.deleted):],
		statuses: n.statuses[len(s.statuses):]}
}

// endUpstreamSession DELETEs the upstream session sid as the gateway's
// credentials for tenant, behind the gateway's back.
func (u *statefulUpstream) endUpstreamSession(t *testing.T, tenant, sid string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, u.srv.URL, nil)
	req.Header.Set("Authorization", "Bearer upstream-"+tenant)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("ending upstream session %s: %v %v", sid, resp, err)
	}
	resp.Body.Close()
}

// keptGateway is one replica of a gateway whose upstream "up" keeps
// sessions by mode, every tool allowed, sharing store (nil: its own) with
// the other replicas for both its downstream sessions and its kept
// upstream sessions.
func keptGateway(t testing.TB, store session.Store, u *statefulUpstream, mode gateway.SessionMode, tune func(*gateway.Config)) *gatewayHost {
	t.Helper()
	if store == nil {
		store = session.NewMemory()
	}
	cfg := gateway.Config{
		Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
			return []gateway.Upstream{{ID: "up", URL: u.srv.URL, Era: gateway.EraSessions, Sessions: mode,
				Header: http.Header{"Authorization": {"Bearer upstream-" + id.Tenant}}}}, nil
		},
		Store: store, StateKeys: testKeys,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		MaxWatches: -1, // watch_test.go; their requests would count here
	}
	if tune != nil {
		tune(&cfg)
	}
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	gh := &gatewayHost{gw: gw, events: make(chan mcphandler.CallEvent, 100)}
	gh.h = mcphandler.New(mcphandler.Config{
		Name: "gateway", Version: "1",
		Authenticate: bearer,
		ListTools:    gw.Tools,
		Store:        store, StateKeys: testKeys,
		Interceptors: []mcphandler.Interceptor{gw.Interceptor()},
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	t.Cleanup(func() { gh.h.Close() })
	return gh
}

// balance serves hs in turn, one request each, as a load balancer
// without affinity.
func balance(t testing.TB, hs ...*gatewayHost) string {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hs[int(n.Add(1))%len(hs)].h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func dialAt(t *testing.T, url, token string, opts ...mcptest.Option) *mcptest.Client {
	t.Helper()
	c := mcptest.Dial(url, append([]mcptest.Option{mcptest.WithToken(token)}, opts...)...)
	t.Cleanup(c.Close)
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

// call calls tool and returns its text, failing t on any error.
func call(t *testing.T, c *mcptest.Client, tool string, args map[string]any) string {
	t.Helper()
	res, err := c.CallTool(context.Background(), tool, args)
	if err != nil || res.IsError {
		t.Fatalf("%s: %+v %v", tool, res, err)
	}
	return resultText(res)
}

// distinct is the distinct values of ss, in order.
func distinct(ss []string) []string {
	var out []string
	for _, s := range ss {
		if !containsString(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// PerSession: one initialize for N calls of a downstream session, every
// call in one upstream session, none ended; the state one call leaves,
// the next finds. PerCall: a session per call, each ended.
func TestUpstreamSessionPerSession(t *testing.T) {
	u := newStatefulUpstream(t, 0)
	gh := keptGateway(t, nil, u, gateway.PerSession, nil)
	c := connect(t, gh.h, "acme-admin")
	toolNames(t, c) // the list: its own session
	before := u.seen()
	call(t, c, "up_remember", map[string]any{"v": "page 1"})
	for range 4 {
		if got := call(t, c, "up_recall", nil); got != "recalled page 1" {
			t.Fatalf("recall: %q", got)
		}
	}
	s := u.since(before)
	if len(s.issued) != 1 || len(s.calls) != 5 || len(distinct(s.calls)) != 1 || s.calls[0] != s.issued[0] || len(s.deleted) != 0 {
		t.Fatalf("upstream saw %d initializes, calls in %v, DELETEs %v; want one session for the 5 calls, kept",
			len(s.issued), distinct(s.calls), s.deleted)
	}

	pc := keptGateway(t, nil, u, gateway.PerCall, nil)
	c2 := connect(t, pc.h, "acme-admin")
	toolNames(t, c2)
	before = u.seen()
	call(t, c2, "up_remember", map[string]any{"v": "lost"})
	if got := call(t, c2, "up_recall", nil); got != "nothing" {
		t.Fatalf("PerCall kept state: %q", got)
	}
	if s := u.since(before); len(s.issued) != 2 || len(distinct(s.calls)) != 2 || len(s.deleted) != 2 {
		t.Fatalf("PerCall: %d initializes, %d sessions, %d DELETEs; want 2 of each", len(s.issued), len(distinct(s.calls)), len(s.deleted))
	}
}

// Isolation: two downstream sessions never share an upstream session,
// even of one person with one credential upstream; nor two persons of
// one tenant (who send the upstream the same credentials) under
// PerPerson; a person's two clients do.
func TestUpstreamSessionIsolation(t *testing.T) {
	u := newStatefulUpstream(t, 0)
	t.Run("PerSession", func(t *testing.T) {
		gh := keptGateway(t, nil, u, gateway.PerSession, nil)
		victim := connect(t, gh.h, "acme-admin")
		attacker := connect(t, gh.h, "acme-admin") // the same person, another session
		call(t, victim, "up_remember", map[string]any{"v": "victim's secret"})
		if got := call(t, attacker, "up_recall", nil); got != "nothing" {
			t.Fatalf("another downstream session reached the victim's upstream session: %q", got)
		}
		if got := call(t, victim, "up_recall", nil); got != "recalled victim's secret" {
			t.Fatalf("the victim lost its state: %q", got)
		}
	})
	t.Run("PerPerson", func(t *testing.T) {
		gh := keptGateway(t, nil, u, gateway.PerPerson, nil)
		alice := connect(t, gh.h, "acme-viewer")
		bob := connect(t, gh.h, "acme-admin") // same tenant: the same upstream credentials
		call(t, alice, "up_remember", map[string]any{"v": "alice's secret"})
		if got := call(t, bob, "up_recall", nil); got != "nothing" {
			t.Fatalf("another person reached alice's upstream session: %q", got)
		}
		alice2 := connect(t, gh.h, "acme-viewer") // alice's other client
		if got := call(t, alice2, "up_recall", nil); got != "recalled alice's secret" {
			t.Fatalf("alice's other client: %q, want her session", got)
		}
		a := &answerer{}
		alice3 := connect(t, gh.h, "acme-viewer", mcptest.WithElicitationHandler(a.handler()))
		if got := call(t, alice3, "up_recall", nil); got != "nothing" {
			t.Fatalf("a client of other capabilities shares the session told the first one's: %q", got)
		}
	})
	t.Run("PerSessionStateless", func(t *testing.T) {
		gh := keptGateway(t, nil, u, gateway.PerSession, nil)
		c := mcptest.NewModern(t, gh.h, mcptest.WithToken("acme-admin"))
		before := u.seen()
		call(t, c, "up_remember", map[string]any{"v": "x"})
		if got := call(t, c, "up_recall", nil); got != "nothing" {
			t.Fatalf("a 2026-07-28 client, which has no session: %q, want per call", got)
		}
		if s := u.since(before); len(s.deleted) < 2 {
			t.Fatalf("per call: %d DELETEs", len(s.deleted))
		}
	})
	t.Run("PerPersonAnonymous", func(t *testing.T) {
		gh := keptGateway(t, nil, u, gateway.PerPerson, nil)
		// An identity without tenant and subject cannot be told apart:
		// PerPerson goes per call.
		anon := mcphandler.New(mcphandler.Config{Authenticate: mcphandler.InsecureAnonymous, ListTools: gh.gw.Tools,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		t.Cleanup(func() { anon.Close() })
		c1, c2 := connect(t, anon, "x"), connect(t, anon, "y")
		call(t, c1, "up_remember", map[string]any{"v": "anonymous"})
		if got := call(t, c2, "up_recall", nil); got != "nothing" {
			t.Fatalf("two anonymous callers shared a session: %q", got)
		}
	})
}

// Any replica reuses the session kept in the shared store: two gateway
// Handlers behind a balancer without affinity, the calls of one
// downstream session alternating between them, the upstream sees one
// session; with memory and with real Redis.
func TestUpstreamSessionAnyReplica(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) func() session.Store
	}{
		{"memory", func(t *testing.T) func() session.Store {
			m := session.NewMemory()
			return func() session.Store { return m }
		}},
		{"redis", func(t *testing.T) func() session.Store {
			prefix := redistest.Prefix(t, redistest.Client(t))
			return func() session.Store {
				st := redisstore.New(redistest.Client(t), redisstore.Options{Prefix: prefix})
				t.Cleanup(func() { st.Close() })
				return st
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newStatefulUpstream(t, 0)
			replica := tc.store(t)
			a := keptGateway(t, replica(), u, gateway.PerSession, nil)
			b := keptGateway(t, replica(), u, gateway.PerSession, nil)
			c := dialAt(t, balance(t, a, b), "acme-admin")
			for range 4 { // each replica lists the upstream once, in a session of its own
				toolNames(t, c)
			}
			call(t, c, "up_remember", map[string]any{"v": "kept"})
			before := u.seen()
			for range 6 {
				if got := call(t, c, "up_recall", nil); got != "recalled kept" {
					t.Fatalf("recall: %q", got)
				}
			}
			if s := u.since(before); len(s.calls) != 6 || len(distinct(s.calls)) != 1 || len(s.deleted) != 0 {
				t.Fatalf("calls in sessions %v, DELETEs %v: want one session", distinct(s.calls), s.deleted)
			}

			// Calls that find no session at once, on both replicas: one
			// session is kept, every call runs in it, the others are
			// ended upstream.
			c2 := dialAt(t, balance(t, a, b), "acme-admin")
			toolNames(t, c2)
			before = u.seen()
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					if res, err := c2.CallTool(context.Background(), "up_recall", nil); err != nil || res.IsError {
						t.Errorf("%+v %v", res, err)
					}
				})
			}
			wg.Wait()
			s := u.since(before)
			t.Logf("8 concurrent first calls opened %d sessions upstream", len(s.issued))
			if len(distinct(s.calls)) != 1 {
				t.Fatalf("concurrent first calls ran in %d sessions, want 1", len(distinct(s.calls)))
			}
			for _, id := range s.issued {
				if id != s.calls[0] && !containsString(s.deleted, id) {
					t.Fatalf("session %s, opened by a call that lost, was not ended (ended %v)", id, s.deleted)
				}
			}
		})
	}
}

// An upstream session that expired, or was ended, between calls is
// opened again once: the call refused with 404 runs once in the new
// session, which the next calls use.
func TestUpstreamSessionExpired(t *testing.T) {
	u := newStatefulUpstream(t, 300*time.Millisecond)
	gh := keptGateway(t, nil, u, gateway.PerSession, nil)
	c := connect(t, gh.h, "acme-admin")
	call(t, c, "up_remember", map[string]any{"v": "old"})
	first := u.seen().calls
	time.Sleep(600 * time.Millisecond) // the upstream forgets it
	before := u.seen()
	if got := call(t, c, "up_recall", nil); got != "nothing" {
		t.Fatalf("recall: %q", got)
	}
	s := u.since(before)
	if len(s.calls) != 2 || s.statuses[0] != http.StatusNotFound || s.calls[0] != first[len(first)-1] ||
		len(s.issued) != 1 || s.calls[1] != s.issued[0] || u.ran("recall") != 1 {
		t.Fatalf("after expiry: calls %v (%v), opened %v, recall ran %d; want the old session refused, one new, one run",
			s.calls, s.statuses, s.issued, u.ran("recall"))
	}
	renewed := s.issued[0]
	before = u.seen()
	call(t, c, "up_remember", map[string]any{"v": "new"})
	if s := u.since(before); len(s.calls) != 1 || s.calls[0] != renewed || len(s.issued) != 0 {
		t.Fatalf("the next call: %v, opened %v; want the new session", s.calls, s.issued)
	}

	// Ended behind the gateway's back: the same.
	u.endUpstreamSession(t, "acme", renewed)
	before = u.seen()
	if got := call(t, c, "up_recall", nil); got != "nothing" {
		t.Fatalf("recall: %q", got)
	}
	if s := u.since(before); len(s.calls) != 2 || s.statuses[0] != http.StatusNotFound || len(s.issued) != 1 {
		t.Fatalf("after an upstream DELETE: calls %v (%v), opened %v", s.calls, s.statuses, s.issued)
	}
}

// A session that ends once the call is under way (the answer to the
// upstream's question gets 404) is not run again: the call ends with an
// error that says it may have run.
func TestUpstreamSessionEndsMidCall(t *testing.T) {
	u := newStatefulUpstream(t, 0)
	gh := keptGateway(t, nil, u, gateway.PerSession, nil)
	a := &answerer{}
	c := connect(t, gh.h, "acme-admin", mcptest.WithElicitationHandler(a.handler()))
	call(t, c, "up_recall", nil)
	u.refuseAnswers.Store(true)
	before := u.seen()
	res, err := c.CallTool(context.Background(), "up_ask", nil)
	if err != nil || !res.IsError || !strings.Contains(resultText(res), "may have run there: it was not run again") {
		t.Fatalf("%+v %v", res, err)
	}
	if s := u.since(before); len(s.calls) != 1 || len(s.issued) != 0 || u.ran("ask") != 1 {
		t.Fatalf("calls %v, opened %v, ask ran %d: want one call, not repeated", s.calls, s.issued, u.ran("ask"))
	}
}

// spyRecords is a store that notes the keys of kept upstream sessions in
// the order they were first written.
type spyRecords struct {
	session.Records
	mu   sync.Mutex
	keys []string
}

func (s *spyRecords) note(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.HasPrefix(key, "gw-session/") && !containsString(s.keys, key) {
		s.keys = append(s.keys, key)
	}
}

func (s *spyRecords) PutIfAbsent(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	s.note(key)
	return s.Records.PutIfAbsent(ctx, key, v, ttl)
}

func (s *spyRecords) CompareAndSwap(ctx context.Context, key string, old, v []byte, ttl time.Duration) (bool, error) {
	s.note(key)
	return s.Records.CompareAndSwap(ctx, key, old, v, ttl)
}

func (s *spyRecords) key(i int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[i]
}

// What can write the store cannot make the gateway send one person's
// upstream session on another's call: a value copied from another key, or
// altered, or of another shape, does not open; the call opens a fresh
// session and keeps it in place of the foreign value.
func TestAttackUpstreamSessionStoreValue(t *testing.T) {
	u := newStatefulUpstream(t, 0)
	mem := session.NewMemory()
	spy := &spyRecords{Records: mem}
	gh := keptGateway(t, nil, u, gateway.PerPerson, func(c *gateway.Config) { c.Store = spy })
	ctx := context.Background()
	alice, bob := connect(t, gh.h, "acme-viewer"), connect(t, gh.h, "acme-admin")
	call(t, alice, "up_remember", map[string]any{"v": "alice's secret"})
	call(t, bob, "up_remember", map[string]any{"v": "bob's"})
	aliceKey, bobKey := spy.key(0), spy.key(1)
	aliceVal, _ := mem.Load(ctx, aliceKey)
	if bytes.Contains(aliceVal, []byte(u.seen().calls[0])) {
		t.Fatal("the stored value shows the upstream session id")
	}
	for _, tc := range []struct {
		name string
		val  func(cur []byte) []byte
	}{
		{"copied from another person's key", func([]byte) []byte { return aliceVal }},
		{"altered", func(cur []byte) []byte {
			b := bytes.Clone(cur)
			b[len(b)-3] ^= 1
			return b
		}},
		{"another shape", func([]byte) []byte { return []byte(`{"s":"` + u.seen().calls[0] + `","v":"2025-11-25"}`) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur, err := mem.Load(ctx, bobKey)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := mem.CompareAndSwap(ctx, bobKey, cur, tc.val(cur), time.Minute); !ok || err != nil {
				t.Fatal("could not write the store", err)
			}
			before := u.seen()
			if got := call(t, bob, "up_recall", nil); got != "nothing" {
				t.Fatalf("bob's call: %q", got)
			}
			s := u.since(before)
			if len(s.issued) != 1 || len(s.calls) != 1 || s.calls[0] != s.issued[0] {
				t.Fatalf("bob's call ran in %v, opened %v: want a fresh session", s.calls, s.issued)
			}
			before = u.seen()
			call(t, bob, "up_recall", nil)
			if s2 := u.since(before); len(s2.issued) != 0 || s2.calls[0] != s.issued[0] {
				t.Fatalf("the fresh session was not kept in place of the foreign value: %v", s2.calls)
			}
		})
	}
	if got := call(t, alice, "up_recall", nil); got != "recalled alice's secret" {
		t.Fatalf("alice: %q", got)
	}
}

// Bounds: one identity keeps at most MaxUpstreamSessions; past it a call
// goes per call (its session ended after it), others are not affected,
// and a downstream session's DELETE ends its upstream session (through
// the Interceptor) and makes room.
func TestUpstreamSessionsBounded(t *testing.T) {
	u := newStatefulUpstream(t, 0)
	gh := keptGateway(t, nil, u, gateway.PerSession, func(c *gateway.Config) { c.MaxUpstreamSessions = 2 })
	ctx := context.Background()
	c1, c2, c3 := connect(t, gh.h, "acme-admin"), connect(t, gh.h, "acme-admin"), connect(t, gh.h, "acme-admin")
	call(t, c1, "up_remember", map[string]any{"v": "1"})
	call(t, c2, "up_remember", map[string]any{"v": "2"})
	before := u.seen()
	call(t, c3, "up_remember", map[string]any{"v": "3"})
	if got := call(t, c3, "up_recall", nil); got != "nothing" {
		t.Fatalf("past the bound: %q, want per call", got)
	}
	if s := u.since(before); len(s.issued) != 2 || len(s.deleted) != 2 {
		t.Fatalf("past the bound: opened %v, ended %v; want each call's own, ended", s.issued, s.deleted)
	}
	other := connect(t, gh.h, "globex-editor")
	call(t, other, "up_remember", map[string]any{"v": "g"})
	if got := call(t, other, "up_recall", nil); got != "recalled g" {
		t.Fatalf("another identity: %q", got)
	}
	if got := call(t, c1, "up_recall", nil); got != "recalled 1" {
		t.Fatalf("a kept session: %q", got)
	}

	kept1 := u.seen().calls[0]
	before = u.seen()
	if err := c1.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if s := u.since(before); len(s.deleted) != 1 || s.deleted[0] != kept1 {
		t.Fatalf("the downstream DELETE ended %v upstream, want %s", s.deleted, kept1)
	}
	call(t, c3, "up_remember", map[string]any{"v": "3"})
	if got := call(t, c3, "up_recall", nil); got != "recalled 3" {
		t.Fatalf("after a DELETE made room: %q", got)
	}
}

// The gateway keeps nothing it cannot trust: a shared store without
// StateKeys is refused.
func TestUpstreamSessionsNeedKeys(t *testing.T) {
	st := redisstore.New(redistest.Client(t), redisstore.Options{Prefix: redistest.Prefix(t, redistest.Client(t))})
	defer st.Close()
	_, err := gateway.New(gateway.Config{Upstreams: upstreamsFor(nil, gateway.EraSessions), Store: st})
	if err == nil || !strings.Contains(err.Error(), "StateKeys") {
		t.Fatalf("a shared store without keys: %v", err)
	}
	if _, err := gateway.New(gateway.Config{Upstreams: upstreamsFor(nil, gateway.EraSessions), Store: st, StateKeys: [][]byte{[]byte("short")}}); err == nil {
		t.Fatal("a short key accepted")
	}
}

// A kept session lives SessionTTL after its last call: calls closer than
// that keep one session for as long as they go on; after a longer pause
// the next call opens a new one.
func TestUpstreamSessionTTL(t *testing.T) {
	u := newStatefulUpstream(t, 0)
	gh := keptGateway(t, nil, u, gateway.PerSession, func(c *gateway.Config) {
		inner := c.Upstreams
		c.Upstreams = func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
			ups, err := inner(ctx, id)
			ups[0].SessionTTL = time.Minute
			return ups, err
		}
	})
	clk := newClock(gh)
	c := connect(t, gh.h, "acme-admin")
	call(t, c, "up_remember", map[string]any{"v": "x"})
	for range 6 { // 2 minutes in all, never a minute apart
		clk.add(20 * time.Second)
		if got := call(t, c, "up_recall", nil); got != "recalled x" {
			t.Fatalf("within the TTL of the last call: %q", got)
		}
	}
	if n := len(distinct(u.seen().calls)); n != 1 {
		t.Fatalf("%d sessions, want 1", n)
	}
	clk.add(61 * time.Second)
	if got := call(t, c, "up_recall", nil); got != "nothing" {
		t.Fatalf("past the TTL: %q, want a new session", got)
	}
	if n := len(distinct(u.seen().calls)); n != 2 {
		t.Fatalf("%d sessions, want 2", n)
	}
}
