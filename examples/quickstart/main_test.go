package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// The quickstart's tokens, tools and documents are a contract users and
// docs rely on; these tests pin it.

func connect(t *testing.T, token string, opts ...mcptest.Option) *mcptest.Client {
	t.Helper()
	c := mcptest.New(t, newDemo(newMemDocs()).handler(mcphandler.Config{}), append([]mcptest.Option{mcptest.WithToken(token)}, opts...)...)
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatalf("initialize as %s: %v", token, err)
	}
	return c
}

func TestUnknownTokenIsChallenged(t *testing.T) {
	for _, tok := range []string{"", "nope"} {
		c := mcptest.New(t, newDemo(newMemDocs()).handler(mcphandler.Config{}), mcptest.WithToken(tok))
		_, err := c.Initialize(context.Background())
		var he *mcptest.HTTPError
		if !errors.As(err, &he) || he.Status != 401 || he.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("token %q: %v, want 401 with a challenge", tok, err)
		}
	}
}

func TestToolsPerCaller(t *testing.T) {
	for tok, want := range map[string][]string{
		"acme-viewer":   {"whoami", "search_docs", "export_docs"},
		"acme-admin":    {"whoami", "search_docs", "export_docs", "delete_doc"},
		"globex-editor": {"whoami", "search_docs", "export_docs", "create_invoice"},
	} {
		c := connect(t, tok)
		tools, err := c.ListTools(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tl := range tools {
			got = append(got, tl.Name)
			if tl.Description == "" {
				t.Errorf("%s has no description", tl.Name)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s sees %v, want %v", tok, got, want)
		}
	}
}

func TestWhoami(t *testing.T) {
	c := connect(t, "globex-editor")
	res, err := c.CallTool(context.Background(), "whoami", nil)
	if err != nil || res.IsError {
		t.Fatalf("%+v, %v", res, err)
	}
	if got := string(res.StructuredContent); got != `{"tenant":"globex","subject":"carol","role":"editor"}` {
		t.Fatalf("structuredContent %s", got)
	}
}

func search(t *testing.T, c *mcptest.Client, args map[string]any) searchOut {
	t.Helper()
	res, err := c.CallTool(context.Background(), "search_docs", args)
	if err != nil || res.IsError {
		t.Fatalf("search_docs: %+v, %v", res, err)
	}
	var out searchOut
	if err := json.Unmarshal(res.StructuredContent, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSearchDocsIsTenantScoped(t *testing.T) {
	acme := search(t, connect(t, "acme-viewer"), map[string]any{})
	if acme.Count != 3 || acme.Docs[0] != (doc{"a1", "Q3 roadmap"}) || acme.Docs[2] != (doc{"a3", "Onboarding guide"}) {
		t.Fatalf("acme docs %+v", acme)
	}
	globex := search(t, connect(t, "globex-editor"), map[string]any{"query": ""})
	if globex.Count != 2 || globex.Docs[0] != (doc{"g1", "Price list"}) || globex.Docs[1] != (doc{"g2", "Supplier contracts"}) {
		t.Fatalf("globex docs %+v", globex)
	}
	hit := search(t, connect(t, "acme-viewer"), map[string]any{"query": "INCIDENT", "limit": 5})
	if hit.Count != 1 || hit.Docs[0].ID != "a2" {
		t.Fatalf("query: %+v", hit)
	}
	if got := search(t, connect(t, "acme-viewer"), map[string]any{"limit": 1}); got.Count != 1 {
		t.Fatalf("limit: %+v", got)
	}
	if got := search(t, connect(t, "acme-viewer"), map[string]any{"query": "price"}); got.Count != 0 {
		t.Fatalf("acme found globex's doc: %+v", got)
	}
}

func TestDeleteDocConfirmed(t *testing.T) {
	d := newDemo(newMemDocs())
	var asked []string
	c := mcptest.New(t, d.handler(mcphandler.Config{}), mcptest.WithToken("acme-admin"),
		mcptest.WithElicitationHandler(func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			asked = append(asked, p.Message)
			// The human reads the id in the question and types it.
			id := strings.Fields(strings.TrimPrefix(p.Message, "Delete document "))[0]
			return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"id": id}}, nil
		}))
	ctx := context.Background()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.CallTool(ctx, "delete_doc", map[string]any{"id": "a2"})
	if err != nil || res.IsError || string(res.StructuredContent) != `{"deleted":"a2"}` {
		t.Fatalf("delete: %+v, %v", res, err)
	}
	if len(asked) != 1 || !strings.Contains(asked[0], "Delete document a2 ") {
		t.Fatalf("confirm asked %q", asked)
	}
	if got := search(t, c, nil); got.Count != 2 {
		t.Fatalf("after delete: %+v", got)
	}
	res, err = c.CallTool(ctx, "delete_doc", map[string]any{"id": "zz"})
	if err != nil || !res.IsError || !strings.Contains(res.Text(), `"error":"not_found"`) {
		t.Fatalf("unknown id: %+v, %v", res, err)
	}
}

func TestDeleteDocDeclinedOrUnaskable(t *testing.T) {
	d := newDemo(newMemDocs())
	c := mcptest.New(t, d.handler(mcphandler.Config{}), mcptest.WithToken("acme-admin"),
		mcptest.WithElicitationHandler(func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			return mcptest.ElicitResult{Action: "decline"}, nil
		}))
	ctx := context.Background()
	c.Initialize(ctx)
	if res, err := c.CallTool(ctx, "delete_doc", map[string]any{"id": "a1"}); err != nil || !res.IsError {
		t.Fatalf("declined: %+v, %v", res, err)
	}
	// A client without elicitation cannot confirm: nothing is deleted.
	plain := mcptest.New(t, d.handler(mcphandler.Config{}), mcptest.WithToken("acme-admin"))
	plain.Initialize(ctx)
	if res, err := plain.CallTool(ctx, "delete_doc", map[string]any{"id": "a1"}); err != nil || !res.IsError {
		t.Fatalf("unaskable: %+v, %v", res, err)
	}
	if got := search(t, c, nil); got.Count != 3 {
		t.Fatalf("a document was deleted without a confirm: %+v", got)
	}
	// Viewers cannot even see delete_doc.
	viewer := mcptest.New(t, d.handler(mcphandler.Config{}), mcptest.WithToken("acme-viewer"))
	viewer.Initialize(ctx)
	var re *mcptest.RPCError
	if _, err := viewer.CallTool(ctx, "delete_doc", map[string]any{"id": "a1"}); !errors.As(err, &re) || re.Code != -32602 {
		t.Fatalf("viewer: %v", err)
	}
}

func TestCreateInvoice(t *testing.T) {
	c := connect(t, "globex-editor")
	ctx := context.Background()
	res, err := c.CallTool(ctx, "create_invoice", map[string]any{"customer": "Initech", "amount_cents": 1250})
	if err != nil || res.IsError || string(res.StructuredContent) != `{"invoice_id":"inv-globex-0001"}` {
		t.Fatalf("%+v, %v", res, err)
	}
	res, err = c.CallTool(ctx, "create_invoice", map[string]any{"customer": "Initech", "amount_cents": "lots"})
	if err != nil || !res.IsError || !strings.Contains(res.Text(), "amount_cents") {
		t.Fatalf("bad amount: %+v, %v", res, err)
	}
	acme := connect(t, "acme-admin")
	var re *mcptest.RPCError
	if _, err := acme.CallTool(ctx, "create_invoice", map[string]any{"customer": "x", "amount_cents": 1}); !errors.As(err, &re) || re.Code != -32602 {
		t.Fatalf("acme calling globex's tool: %v", err)
	}
}

func TestDocsResourceIsTenantScoped(t *testing.T) {
	ctx := context.Background()
	acme := connect(t, "acme-viewer")
	raw, err := acme.Call(ctx, "resources/read", map[string]any{"uri": "docs://a2"})
	if err != nil || !strings.Contains(string(raw), "Incident 42 postmortem: a config push") {
		t.Fatalf("acme reading a2: %s %v", raw, err)
	}
	var re *mcptest.RPCError
	if _, err := acme.Call(ctx, "resources/read", map[string]any{"uri": "docs://g1"}); !errors.As(err, &re) || re.Code != -32002 {
		t.Fatalf("acme reading globex's g1: %v", err)
	}
	raw, err = acme.Call(ctx, "resources/templates/list", nil)
	if err != nil || !strings.Contains(string(raw), `"uriTemplate":"docs://{id}"`) {
		t.Fatalf("templates: %s %v", raw, err)
	}
}

func TestSummarizePrompt(t *testing.T) {
	ctx := context.Background()
	globex := connect(t, "globex-editor")
	raw, err := globex.Call(ctx, "prompts/get", map[string]any{"name": "summarize_doc", "arguments": map[string]string{"id": "g2"}})
	if err != nil || !strings.Contains(string(raw), `"type":"resource"`) || !strings.Contains(string(raw), "Supplier contracts: three suppliers") {
		t.Fatalf("prompt: %s %v", raw, err)
	}
	var re *mcptest.RPCError
	if _, err := globex.Call(ctx, "prompts/get", map[string]any{"name": "summarize_doc", "arguments": map[string]string{"id": "a1"}}); !errors.As(err, &re) || re.Code != -32602 {
		t.Fatalf("globex summarizing acme's a1: %v", err)
	}
	if _, err := globex.Call(ctx, "prompts/get", map[string]any{"name": "summarize_doc"}); !errors.As(err, &re) || re.Code != -32602 {
		t.Fatalf("missing id: %v", err)
	}
}

// With -redis, two quickstart processes behave as one service: a session
// opened on one is served by the other, a 2026-07-28 confirm asked by one
// is completed by the other, and both see the same documents.
func TestTwoProcessesShareRedis(t *testing.T) {
	testTwoProcesses(t, func() redis.UniversalClient { return redistest.Client(t) })
}

// TestTwoProcessesShareCluster: the same on a Redis Cluster.
func TestTwoProcessesShareCluster(t *testing.T) {
	cl := redistest.SharedCluster(t)
	testTwoProcesses(t, func() redis.UniversalClient { return cl.Client(t) })
}

// TestTwoProcessesShareSentinel: the same on a master watched by Sentinels.
func TestTwoProcessesShareSentinel(t *testing.T) {
	s := redistest.SharedSentinel(t)
	testTwoProcesses(t, func() redis.UniversalClient { return s.Client(t) })
}

func testTwoProcesses(t *testing.T, clients func() redis.UniversalClient) {
	ctx := context.Background()
	first := clients()
	prefix := redistest.Prefix(t, first)
	var handlers []http.Handler
	for _, c := range []redis.UniversalClient{first, clients()} {
		d, cfg, err := withRedis(ctx, c, prefix, []byte("a secret both processes share, 32+ bytes"))
		if err != nil {
			t.Fatal(err)
		}
		h := d.handler(cfg)
		t.Cleanup(func() { h.Close(); cfg.Store.(*redisstore.Store).Close() })
		handlers = append(handlers, h)
	}
	// A 2025 session opened on process 0 lists tools on process 1.
	a := mcptest.New(t, handlers[0], mcptest.WithToken("acme-viewer"))
	if _, err := a.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	b := mcptest.New(t, handlers[1], mcptest.WithToken("acme-viewer"))
	b.SetSessionID(a.SessionID())
	b.SetProtocolVersion(a.ProtocolVersion())
	if got := search(t, b, nil); got.Count != 3 {
		t.Fatalf("process 1 in process 0's session: %+v", got)
	}
	// A 2026-07-28 delete: asked by process 0, answered to process 1.
	var m0 *mcptest.ModernClient
	m0 = mcptest.NewModern(t, handlers[0], mcptest.WithToken("acme-admin"), mcptest.WithElicitationHandler(func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"id": "a3"}}, nil
	}))
	msg, _, err := m0.CallOnce(ctx, "tools/call", map[string]any{"name": "delete_doc", "arguments": map[string]any{"id": "a3"}})
	if err != nil {
		t.Fatal(err)
	}
	ir, err := mcptest.ParseInputRequired(msg.Result)
	if err != nil || ir == nil {
		t.Fatalf("round 1: %s %v", msg.Result, err)
	}
	m1 := mcptest.NewModern(t, handlers[1], mcptest.WithToken("acme-admin"), mcptest.WithCapabilities(json.RawMessage(`{"elicitation":{}}`)))
	var key string
	for k := range ir.InputRequests {
		key = k
	}
	res, err := m1.Retry(ctx, "tools/call", map[string]any{"name": "delete_doc", "arguments": map[string]any{"id": "a3"}},
		map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"id": "a3"}}}, ir.RequestState)
	if err != nil || res.Error != nil || !strings.Contains(string(res.Result), `"deleted":"a3"`) {
		t.Fatalf("retry on process 1: %+v %v", res, err)
	}
	if got := search(t, a, nil); got.Count != 2 {
		t.Fatalf("process 0 still sees the deleted document: %+v", got)
	}
}

// A 2026-07-28 client deletes a document: the first round asks the human
// to type the id (input_required), the retry with the answer deletes it.
func TestDeleteDocConfirmed2026(t *testing.T) {
	d := newDemo(newMemDocs())
	h := d.handler(mcphandler.Config{})
	var asked string
	c := mcptest.NewModern(t, h, mcptest.WithToken("acme-admin"),
		mcptest.WithElicitationHandler(func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			asked = p.Message
			return mcptest.ElicitResult{Action: "accept", Content: map[string]any{"id": "a1"}}, nil
		}))
	ctx := context.Background()
	res, err := c.CallTool(ctx, "delete_doc", map[string]any{"id": "a1"})
	if err != nil || res.IsError || string(res.StructuredContent) != `{"deleted":"a1"}` {
		t.Fatalf("delete: %+v, %v", res, err)
	}
	if c.Rounds() != 2 || !strings.Contains(asked, "Delete document a1 ") {
		t.Fatalf("rounds %d, asked %q", c.Rounds(), asked)
	}
	docs, _ := d.docs.list(ctx, "acme")
	if len(docs) != 2 {
		t.Fatalf("after delete: %+v", docs)
	}
}

// Started with -redis only, every process takes the same demo key from
// Redis, so they still work as one service; a key shorter than 32 bytes
// is refused.
func TestRedisWithoutStateKey(t *testing.T) {
	ctx := context.Background()
	first := redistest.Client(t)
	prefix := redistest.Prefix(t, first)
	var keys [][]byte
	for _, c := range []redis.UniversalClient{first, redistest.Client(t)} {
		_, cfg, err := withRedis(ctx, c, prefix, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cfg.Store.(*redisstore.Store).Close() })
		if len(cfg.StateKeys) != 1 || len(cfg.StateKeys[0]) < 32 {
			t.Fatalf("state keys %q", cfg.StateKeys)
		}
		keys = append(keys, cfg.StateKeys[0])
	}
	if !bytes.Equal(keys[0], keys[1]) {
		t.Fatal("two processes without -state-key use different keys")
	}
	if _, _, err := withRedis(ctx, first, prefix, []byte("short")); err == nil {
		t.Fatal("a 5-byte state key was accepted")
	}
}

// rateLimited calls whoami n times through clients in turn and returns
// how many calls were admitted and how long the calls took; every refusal
// must be the tenant limit's -32000.
func rateLimited(t *testing.T, n, rate int, clients ...*mcptest.Client) (int, time.Duration) {
	t.Helper()
	admitted := 0
	start := time.Now()
	for i := range n {
		_, err := clients[i%len(clients)].CallTool(context.Background(), "whoami", nil)
		if err == nil {
			admitted++
			continue
		}
		var re *mcptest.RPCError
		var data struct {
			Limit struct {
				Name  string `json:"name"`
				Rate  int    `json:"rate"`
				Burst int    `json:"burst"`
			} `json:"limit"`
			RetryAfterMs int64 `json:"retryAfterMs"`
		}
		if !errors.As(err, &re) || re.Code != mcphandler.CodeRateLimited || json.Unmarshal(re.Data, &data) != nil ||
			data.Limit.Name != "tenant" || data.Limit.Rate != rate || data.Limit.Burst != rate || data.RetryAfterMs <= 0 {
			t.Fatalf("call %d: %v, want a -32000 of the tenant limit", i, err)
		}
	}
	return admitted, time.Since(start)
}

// checkAdmitted fails the test unless admitted is what a bucket of rate
// per second and burst rate admits over took: rate, plus one per 1/rate
// seconds, within one either way.
func checkAdmitted(t *testing.T, admitted, rate int, took time.Duration) {
	t.Helper()
	most := rate + int(took.Seconds()*float64(rate)) + 1
	if admitted < rate || admitted > most {
		t.Fatalf("%d calls admitted in %v, want %d–%d", admitted, took, rate, most)
	}
}

// With -rate-limit, in memory: a tenant gets its N calls, then -32000;
// another tenant still gets its own; a refused delete_doc asks nobody.
func TestRateLimit(t *testing.T) {
	const rate = 3
	d := newDemo(newMemDocs())
	var err error
	if d.limits, err = tenantLimit(rate, nil, ""); err != nil {
		t.Fatal(err)
	}
	asked := 0
	h := d.handler(mcphandler.Config{})
	acme := mcptest.New(t, h, mcptest.WithToken("acme-admin"), mcptest.WithElicitationHandler(func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		asked++
		return mcptest.ElicitResult{Action: "decline"}, nil
	}))
	if _, err := acme.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	admitted, took := rateLimited(t, 4*rate, rate, acme)
	checkAdmitted(t, admitted, rate, took)
	for i := 0; ; i++ {
		before := asked
		_, err := acme.CallTool(context.Background(), "delete_doc", map[string]any{"id": "a1"})
		var re *mcptest.RPCError
		if errors.As(err, &re) && re.Code == mcphandler.CodeRateLimited {
			if asked != before {
				t.Fatal("a rate-limited delete_doc asked a human")
			}
			break
		}
		if i == 10 {
			t.Fatalf("10 delete_doc calls not refused by a limit of %d per second: %v", rate, err)
		}
	}
	if _, err := connect(t, "globex-editor").CallTool(context.Background(), "whoami", nil); err != nil {
		t.Fatalf("globex after acme's calls: %v", err)
	}
}

// With -redis and -rate-limit, the limit holds across processes: a tenant
// calling both gets N per second in all, not N from each.
func TestRateLimitAcrossProcesses(t *testing.T) {
	const rate = 3
	ctx := context.Background()
	first := redistest.Client(t)
	prefix := redistest.Prefix(t, first)
	t.Cleanup(func() {
		for _, k := range redistest.Keys(t, first, "rate:"+prefix) {
			first.Del(context.Background(), k)
		}
	})
	var clients []*mcptest.Client
	for _, c := range []redis.UniversalClient{first, redistest.Client(t)} {
		d, cfg, err := withRedis(ctx, c, prefix, []byte("a secret both processes share, 32+ bytes"))
		if err != nil {
			t.Fatal(err)
		}
		store := cfg.Store.(*redisstore.Store)
		if d.limits, err = tenantLimit(rate, store, prefix); err != nil {
			t.Fatal(err)
		}
		h := d.handler(cfg)
		t.Cleanup(func() { h.Close(); store.Close() })
		c := mcptest.New(t, h, mcptest.WithToken("acme-viewer"))
		if _, err := c.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	admitted, took := rateLimited(t, 4*rate, rate, clients...)
	checkAdmitted(t, admitted, rate, took)
}
