package gateway_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
)

// Upstream tools are listed as <id>_<name>, sorted, with where they come
// from; the upstream's hints stay untrusted.
func TestToolsMergedWithOrigin(t *testing.T) {
	docs := newUpstream(t, upstreamTool{name: "search", readOnly: true}, upstreamTool{name: "delete"})
	wiki := newUpstream(t, upstreamTool{name: "search", readOnly: true})
	gh := newGateway(t, gateway.Config{Upstreams: upstreamsFor(map[string]*fakeUpstream{"docs": docs, "wiki": wiki}, gateway.EraDetect)})
	ctx := context.Background()
	c := connect(t, gh.h, "acme-admin")
	if got, want := toolNames(t, c), []string{"docs_delete", "docs_search", "wiki_search"}; !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	tools, err := gh.gw.Tools(ctxAs(t, gh, "acme-admin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		o := tl.Origin
		if o == nil || o.Upstream == "" || len(o.Digest) != 64 || !strings.HasPrefix(tl.Name, o.Upstream+"_"+o.Name) || o.Era == "" {
			t.Fatalf("%s: origin %+v", tl.Name, o)
		}
		if !tl.Destructive() {
			t.Fatalf("%s: an untrusted upstream's read-only hint made it non-destructive", tl.Name)
		}
	}
	_ = ctx
}

// ctxAs is a context of a request of token's caller, as a hook sees it.
func ctxAs(t *testing.T, gh *gatewayHost, token string) context.Context {
	t.Helper()
	var got context.Context
	probe := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			got = context.WithoutCancel(ctx)
			return nil, nil
		},
	})
	defer probe.Close()
	c := connect(t, probe, token)
	c.ListTools(context.Background())
	return got
}

// A call runs upstream with the caller's tenant's credentials, never the
// caller's own token nor another tenant's, and relays the result.
func TestCallWithCallersCredentials(t *testing.T) {
	docs := newUpstream(t, upstreamTool{name: "search", readOnly: true})
	gh := newGateway(t, gateway.Config{Upstreams: upstreamsFor(map[string]*fakeUpstream{"docs": docs}, gateway.EraDetect)})
	ctx := context.Background()
	for _, tok := range []string{"acme-admin", "globex-editor"} {
		c := connect(t, gh.h, tok)
		res, err := c.CallTool(ctx, "docs_search", map[string]any{"q": "x"})
		if err != nil || res.IsError {
			t.Fatalf("%s: %+v %v", tok, res, err)
		}
		tenant := users[tok].Tenant
		if want := "search ran for upstream-" + tenant + ` args={"q":"x"}`; resultText(res) != want {
			t.Fatalf("%s: %q, want %q", tok, resultText(res), want)
		}
	}
	for _, a := range docs.sawAuth() {
		if a != "Bearer upstream-acme" && a != "Bearer upstream-globex" {
			t.Fatalf("the upstream saw credentials %q", a)
		}
	}
}

// The client's capabilities are what the upstream is told: no more.
func TestUpstreamToldClientCapabilities(t *testing.T) {
	docs := newUpstream(t, upstreamTool{name: "search", readOnly: true})
	gh := newGateway(t, gateway.Config{Upstreams: upstreamsFor(map[string]*fakeUpstream{"docs": docs}, gateway.EraSessions)})
	ctx := context.Background()
	plain := connect(t, gh.h, "acme-admin")
	if _, err := plain.CallTool(ctx, "docs_search", nil); err != nil {
		t.Fatal(err)
	}
	a := &answerer{}
	asking := connect(t, gh.h, "acme-admin", mcptest.WithElicitationHandler(a.handler()))
	if _, err := asking.CallTool(ctx, "docs_search", nil); err != nil {
		t.Fatal(err)
	}
	docs.mu.Lock()
	defer docs.mu.Unlock()
	if len(docs.caps) != 2 || docs.caps[0] != 0 || docs.caps[1] != session.CapElicitationForm {
		t.Fatalf("upstream told %v, want [0 %b]", docs.caps, session.CapElicitationForm)
	}
}

// A confirm declined at the gateway sends nothing upstream: no call, no
// session, not a byte of the arguments.
func TestDeclineSendsNothingUpstream(t *testing.T) {
	docs := newUpstream(t, upstreamTool{name: "delete"})
	gh := newGateway(t, gateway.Config{Upstreams: upstreamsFor(map[string]*fakeUpstream{"docs": docs}, gateway.EraSessions)})
	ctx := context.Background()
	a := &answerer{action: "decline"}
	c := connect(t, gh.h, "acme-admin", mcptest.WithElicitationHandler(a.handler()))
	before := docs.sawMethod("tools/call")
	res, err := c.CallTool(ctx, "docs_delete", map[string]any{"q": "secret"})
	if err != nil || !res.IsError {
		t.Fatalf("declined call: %+v, %v", res, err)
	}
	if n := docs.count("delete"); n != 0 || docs.sawMethod("tools/call") != before {
		t.Fatalf("the upstream ran %d times, saw %d tools/call", n, docs.sawMethod("tools/call")-before)
	}
	if q := a.questions(); len(q) != 1 || q[0] != "Forward docs_delete?" {
		t.Fatalf("asked %q", q)
	}
}

// A hidden upstream tool answers exactly like an unknown one.
func TestHiddenUpstreamToolIsUnknown(t *testing.T) {
	docs := newUpstream(t, upstreamTool{name: "search", readOnly: true}, upstreamTool{name: "delete"})
	gh := newGateway(t, gateway.Config{Upstreams: upstreamsFor(map[string]*fakeUpstream{"docs": docs}, gateway.EraSessions)})
	ctx := context.Background()
	c := connect(t, gh.h, "acme-viewer")
	if got := toolNames(t, c); !slices.Equal(got, []string{"docs_search"}) {
		t.Fatalf("a viewer sees %v", got)
	}
	_, hidden := c.CallTool(ctx, "docs_delete", nil)
	_, unknown := c.CallTool(ctx, "docs_nothing", nil)
	if hidden == nil || unknown == nil || strings.ReplaceAll(hidden.Error(), "docs_delete", "X") != strings.ReplaceAll(unknown.Error(), "docs_nothing", "X") {
		t.Fatalf("hidden: %v\nunknown: %v", hidden, unknown)
	}
	if docs.count("delete") != 0 {
		t.Fatal("a hidden tool ran upstream")
	}
}

// Names: one claimed twice drops every claimant; one too long is dropped,
// never cut; an alias serves a tool under the host's name.
func TestNames(t *testing.T) {
	long := strings.Repeat("x", 60)
	docs := newUpstream(t, upstreamTool{name: "search", readOnly: true}, upstreamTool{name: long, readOnly: true}, upstreamTool{name: "find", readOnly: true})
	wiki := newUpstream(t, upstreamTool{name: "lookup", readOnly: true}, upstreamTool{name: "fetch", readOnly: true})
	gh := newGateway(t, gateway.Config{Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
		return []gateway.Upstream{
			{ID: "docs", URL: docs.srv.URL, Aliases: map[string]string{"find": "lookup"}},
			{ID: "wiki", URL: wiki.srv.URL, Aliases: map[string]string{"lookup": "lookup", "fetch": "get"}},
			{ID: "Bad_ID", URL: wiki.srv.URL},
		}, nil
	}})
	c := connect(t, gh.h, "acme-admin")
	if got, want := toolNames(t, c), []string{"docs_search", "get"}; !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
}

// A failing upstream is left out and the rest listed; in strict mode the
// list fails.
func TestFailingUpstream(t *testing.T) {
	docs := newUpstream(t, upstreamTool{name: "search", readOnly: true})
	down := newUpstream(t, upstreamTool{name: "search", readOnly: true})
	down.failList.Store(true)
	ups := upstreamsFor(map[string]*fakeUpstream{"docs": docs, "down": down}, gateway.EraDetect)
	gh := newGateway(t, gateway.Config{Upstreams: ups})
	if got := toolNames(t, connect(t, gh.h, "acme-admin")); !slices.Equal(got, []string{"docs_search"}) {
		t.Fatalf("listed %v", got)
	}
	strict := newGateway(t, gateway.Config{Upstreams: ups, Strict: true})
	if _, err := connect(t, strict.h, "acme-admin").ListTools(context.Background()); err == nil {
		t.Fatal("strict: a failing upstream did not fail the list")
	}
}

// The upstream's question mid-call reaches a 2025 client on the call's
// stream, after the gateway's own confirm, and the answer goes upstream.
func TestUpstreamQuestionRelayed(t *testing.T) {
	for _, era := range []gateway.Era{gateway.EraSessions, gateway.EraStateless, gateway.EraLegacy} {
		t.Run(fmt.Sprint("upstream ", era), func(t *testing.T) {
			docs := newUpstream(t, upstreamTool{name: "delete", ask: true})
			ups := upstreamsFor(map[string]*fakeUpstream{"docs": docs}, era)
			if era == gateway.EraLegacy {
				ups = legacyUpstreams(t, docs)
			}
			gh := newGateway(t, gateway.Config{Upstreams: ups})
			a := &answerer{}
			c := connect(t, gh.h, "acme-admin", mcptest.WithElicitationHandler(a.handler()))
			res, err := c.CallTool(context.Background(), "docs_delete", map[string]any{"q": "x"})
			if err != nil || res.IsError {
				t.Fatalf("%+v %v", res, err)
			}
			if got := resultText(res); !strings.HasSuffix(got, "answer=accept") {
				t.Fatalf("result %q", got)
			}
			if q := a.questions(); !slices.Equal(q, []string{"Forward docs_delete?", "Sure?"}) {
				t.Fatalf("asked %q", q)
			}
			if n := docs.count("delete"); n != 1 {
				t.Fatalf("ran %d times upstream", n)
			}
		})
	}
}

// legacyUpstreams serves docs over the 2024-11-05 transport.
func legacyUpstreams(t *testing.T, docs *fakeUpstream) gateway.UpstreamsFunc {
	sse, msgs := docs.h.LegacySSE("/messages")
	mux := http.NewServeMux()
	mux.Handle("/sse", sse)
	mux.Handle("/messages", msgs)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
		return []gateway.Upstream{{ID: "docs", URL: srv.URL + "/sse", Era: gateway.EraLegacy,
			Header: http.Header{"Authorization": {"Bearer upstream-" + id.Tenant}}}}, nil
	}
}

// A 2026-07-28 client without tasks cannot answer mid-call: the upstream
// is not re-run, and the error says why.
func TestUpstreamQuestionStatelessClient(t *testing.T) {
	docs := newUpstream(t, upstreamTool{name: "search", readOnly: true, ask: true})
	gh := newGateway(t, gateway.Config{Upstreams: upstreamsFor(map[string]*fakeUpstream{"docs": docs}, gateway.EraSessions)})
	a := &answerer{}
	c := mcptest.NewModern(t, gh.h, mcptest.WithToken("acme-admin"), mcptest.WithElicitationHandler(a.handler()))
	res, err := c.CallTool(context.Background(), "docs_search", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(resultText(res), "tasks extension") {
		t.Fatalf("result %+v", res)
	}
	if n, calls := docs.count("search"), docs.sawMethod("tools/call"); n != 0 || calls != 1 {
		t.Fatalf("called %d times upstream, acted %d times; want one call that did not act", calls, n)
	}
	if q := a.questions(); len(q) != 0 {
		t.Fatalf("asked %q", q)
	}
}

// A list made with one tenant's credentials never serves another's, even
// when both are cached: what an upstream shows one caller stays theirs.
func TestListNotSharedAcrossCredentials(t *testing.T) {
	u := &fakeUpstream{}
	u.h = mcphandler.New(mcphandler.Config{
		Authenticate: func(r *http.Request) (mcphandler.Identity, error) {
			tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			return mcphandler.Identity{Tenant: tok}, nil
		},
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			id, _ := mcphandler.IdentityFrom(ctx)
			return []mcphandler.Tool{u.tool(upstreamTool{name: "only_for_" + strings.TrimPrefix(id.Tenant, "upstream-"), readOnly: true})}, nil
		},
	})
	u.srv = httptest.NewServer(u.h)
	t.Cleanup(func() { u.srv.Close(); u.h.Close() })
	gh := newGateway(t, gateway.Config{Upstreams: upstreamsFor(map[string]*fakeUpstream{"docs": u}, gateway.EraDetect)})
	for range 2 { // the second round from the cache
		for tok, want := range map[string]string{"acme-admin": "docs_only_for_acme", "globex-editor": "docs_only_for_globex"} {
			if got := toolNames(t, connect(t, gh.h, tok)); !slices.Equal(got, []string{want}) {
				t.Fatalf("%s sees %v, want [%s]", tok, got, want)
			}
		}
	}
	c := connect(t, gh.h, "globex-editor")
	if _, err := c.CallTool(context.Background(), "docs_only_for_acme", nil); err == nil {
		t.Fatal("globex called acme's tool")
	}
}

// Without Config.HTTPClient, concurrent calls of one upstream reuse the
// gateway's connections to it: a batch of 16 calls at once, made 4
// times, opens about 16 connections, where a transport that keeps 2 idle
// would open some 16 more per batch.
func TestConnectionsReused(t *testing.T) {
	up := newUpstream(t, upstreamTool{name: "search", readOnly: true})
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(up.h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	gh := newGateway(t, gateway.Config{Upstreams: func(context.Context, mcphandler.Identity) ([]gateway.Upstream, error) {
		return []gateway.Upstream{{ID: "docs", URL: srv.URL, Era: gateway.EraStateless}}, nil
	}})
	const n = 16
	clients := make([]*mcptest.Client, n)
	for i := range clients {
		clients[i] = connect(t, gh.h, "acme-admin")
	}
	for range 4 {
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Go(func() {
				if res, err := c.CallTool(context.Background(), "docs_search", map[string]any{"q": "x"}); err != nil || res.IsError {
					t.Error(res, err)
				}
			})
		}
		wg.Wait()
	}
	if got := opened.Load(); got > 2*n {
		t.Fatalf("%d connections opened upstream for 4 batches of %d calls: they are not kept for reuse", got, n)
	}
}

// The tools of a list kept are made again for an upstream whose
// configuration changed since (here its aliases and hints): what a list
// or a call finds is always what the host's Upstreams says now, and what
// a host changes in the tools Tools returned is its own.
func TestToolsFollowUpstreamConfig(t *testing.T) {
	docs := newUpstream(t, upstreamTool{name: "search", readOnly: true})
	var alias atomic.Value
	alias.Store("")
	gh := newGateway(t, gateway.Config{Upstreams: func(context.Context, mcphandler.Identity) ([]gateway.Upstream, error) {
		u := gateway.Upstream{ID: "docs", URL: docs.srv.URL}
		if a := alias.Load().(string); a != "" {
			u.Aliases, u.TrustHints = map[string]string{"search": a}, true
		}
		return []gateway.Upstream{u}, nil
	}})
	ctx := ctxAs(t, gh, "acme-admin")
	names := func() []string {
		tools, err := gh.gw.Tools(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for i := range tools {
			out = append(out, fmt.Sprintf("%s trusted=%v", tools[i].Name, tools[i].Origin.TrustHints))
			tools[i].Name = "changed by the host"
		}
		return out
	}
	for _, want := range []string{"docs_search trusted=false", "docs_search trusted=false", "find trusted=true", "find trusted=true"} {
		if want == "find trusted=true" {
			alias.Store("find")
		}
		if got := names(); !slices.Equal(got, []string{want}) {
			t.Fatalf("tools %v, want [%s]", got, want)
		}
	}
	c := connect(t, gh.h, "acme-admin")
	if res, err := c.CallTool(context.Background(), "find", map[string]any{"q": "x"}); err != nil || res.IsError {
		t.Fatalf("find: %+v, %v", res, err)
	}
}
