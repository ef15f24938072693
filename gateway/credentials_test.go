package gateway_test

import (
	"context"
	"errors"
	"fmt"
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
)

// personal is an upstream (this library) whose callers are people: it
// accepts only the tokens accept maps to a person (401 for any other),
// records the headers of every request, and lists each person a tool of
// their own next to search, which answers with the person and the token
// it ran with.
type personal struct {
	srv      *httptest.Server
	h        *mcphandler.Handler
	requests atomic.Int64

	mu   sync.Mutex
	seen []http.Header // of every request
}

func newPersonal(t testing.TB, accept func(token string) (string, bool)) *personal {
	t.Helper()
	p := &personal{}
	p.h = mcphandler.New(mcphandler.Config{
		Name: "personal", Version: "1",
		CacheTTL: time.Minute, // its 2026-07-28 lists say ttlMs 60000: the gateway may reuse them
		Authenticate: func(r *http.Request) (mcphandler.Identity, error) {
			tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			who, ok := accept(tok)
			if !ok {
				return mcphandler.Identity{}, errors.New("not a token of ours")
			}
			return mcphandler.Identity{Tenant: "up", Subject: who, Attributes: map[string]any{"token": tok}}, nil
		},
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			id, _ := mcphandler.IdentityFrom(ctx)
			ro := &mcphandler.ToolAnnotations{ReadOnlyHint: true}
			run := func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				return mcphandler.TextResult(fmt.Sprintf("%s as %s with %s", call.Tool.Name, call.Identity.Subject, call.Identity.Attributes["token"])), nil
			}
			return []mcphandler.Tool{
				{Name: "search", Annotations: ro, Handler: run},
				{Name: "mine_" + id.Subject, Annotations: ro, Handler: run},
			}, nil
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		p.mu.Lock()
		p.seen = append(p.seen, r.Header.Clone())
		p.mu.Unlock()
		p.h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { p.srv.Close(); p.h.Close() })
	return p
}

// saw returns the values of header name of every request.
func (p *personal) saw(name string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.seen))
	for _, h := range p.seen {
		out = append(out, h.Get(name))
	}
	return out
}

// personSource gives each person the token of creds, by subject; fail
// makes it fail for a subject with that error.
type personSource struct {
	mu    sync.Mutex
	creds map[string]string
	fail  map[string]error
}

func (s *personSource) Credentials(_ context.Context, id mcphandler.Identity, _ *gateway.Upstream) (http.Header, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail[id.Subject]; err != nil {
		return nil, err
	}
	tok, ok := s.creds[id.Subject]
	if !ok {
		return nil, fmt.Errorf("%w: %s has not authorized the upstream", gateway.ErrNoCredentials, id.Subject)
	}
	return http.Header{"Authorization": {"Bearer " + tok}}, nil
}

func (s *personSource) Kind() string { return "per-person" }

func (s *personSource) set(f func(s *personSource)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// callText calls tool as c and returns the result's text, failing the
// test on a protocol error.
func callText(t *testing.T, c *mcptest.Client, tool string) (string, bool) {
	t.Helper()
	res, err := c.CallTool(context.Background(), tool, nil)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return resultText(res), res.IsError
}

// Each caller's list and calls go with that caller's credentials, merged
// over the upstream's Header; a caller without any is never sent
// another's, nor the Header's alone, nor none: the upstream is not
// contacted for them, and the list says why.
func TestCredentialsPerCallerNeverAnother(t *testing.T) {
	up := newPersonal(t, func(tok string) (string, bool) {
		who, ok := strings.CutPrefix(tok, "up-")
		return who, ok
	})
	src := &personSource{creds: map[string]string{"alice": "up-alice", "bob": "up-bob"}}
	gh := newGateway(t, gateway.Config{Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
		return []gateway.Upstream{{ID: "docs", URL: up.srv.URL, Era: gateway.EraSessions, Credentials: src,
			Header: http.Header{"Authorization": {"Bearer tenant-fallback"}, "X-Tenant": {id.Tenant}}}}, nil
	}})
	clk := newClock(gh)
	alice, bob, carol := connect(t, gh.h, "acme-viewer"), connect(t, gh.h, "acme-admin"), connect(t, gh.h, "globex-editor")

	expect(t, alice, []string{"docs_mine_alice", "docs_search"}, "docs", "ok//-")
	expect(t, bob, []string{"docs_mine_bob", "docs_search"}, "docs", "ok//-")
	before := up.requests.Load()
	expect(t, carol, []string{}, "docs", "failed/credentials/-")
	if n := up.requests.Load(); n != before {
		t.Fatalf("a caller without credentials made %d requests upstream", n-before)
	}
	if text, isErr := callText(t, alice, "docs_search"); isErr || text != "search as alice with up-alice" {
		t.Fatalf("alice: %q", text)
	}
	if text, isErr := callText(t, bob, "docs_mine_bob"); isErr || text != "mine_bob as bob with up-bob" {
		t.Fatalf("bob: %q", text)
	}
	if ev := lastEvent(t, gh); ev.CredentialKind != "per-person" || ev.Upstream != "docs" {
		t.Fatalf("event %+v: want the source's kind", ev)
	}
	if res, err := alice.CallTool(context.Background(), "docs_mine_bob", nil); err == nil && (!res.IsError || strings.Contains(resultText(res), "as bob")) {
		t.Fatalf("alice called bob's tool: %q", resultText(res))
	}
	for _, a := range up.saw("Authorization") {
		if a != "Bearer up-alice" && a != "Bearer up-bob" {
			t.Fatalf("the upstream saw Authorization %q", a)
		}
	}
	if ts := up.saw("X-Tenant"); slices.ContainsFunc(ts, func(v string) bool { return v != "acme" }) {
		t.Fatalf("Header not merged: X-Tenant %v", ts)
	}

	// Bob's credentials gone (revoked during his session): his last list
	// stays, stale, his calls fail at once, and no breaker counts it.
	src.set(func(s *personSource) { delete(s.creds, "bob") })
	before = up.requests.Load()
	for range 5 { // more than FailureThreshold
		expect(t, bob, []string{"docs_mine_bob", "docs_search"}, "docs", "stale/credentials/-")
	}
	text, isErr := callText(t, bob, "docs_search")
	if !isErr || !strings.Contains(text, "upstream docs: no credentials for this caller there") || !strings.Contains(text, `"retryable":false`) {
		t.Fatalf("bob without credentials: %q", text)
	}
	if n := up.requests.Load(); n != before {
		t.Fatalf("bob without credentials: %d requests upstream", n-before)
	}
	if b := gateway.Breakers(gh.gw); b != 0 {
		t.Fatalf("a missing credential counted against %d breakers", b)
	}
	if text, isErr := callText(t, alice, "docs_search"); isErr || text != "search as alice with up-alice" {
		t.Fatalf("alice while bob has none: %q", text)
	}

	// A source that cannot get them now: retryable.
	src.set(func(s *personSource) { s.fail = map[string]error{"bob": errors.New("vault down")} })
	text, isErr = callText(t, bob, "docs_search")
	if !isErr || !strings.Contains(text, "could not be obtained now") || !strings.Contains(text, `"retryable":true`) || strings.Contains(text, "vault") {
		t.Fatalf("bob, source failing: %q", text)
	}

	// Past Grace after his list expired, bob's tools are left out.
	clk.add(30*time.Second + 5*time.Minute - time.Second)
	expect(t, bob, []string{"docs_mine_bob", "docs_search"}, "docs", "stale/credentials/-")
	clk.add(time.Second)
	expect(t, bob, []string{}, "docs", "failed/credentials/-")
	expect(t, alice, []string{"docs_mine_alice", "docs_search"}, "docs", "ok//-")
}

// lastEvent is the newest CallEvent gh reported.
func lastEvent(t *testing.T, gh *gatewayHost) mcphandler.CallEvent {
	t.Helper()
	var ev mcphandler.CallEvent
	select {
	case ev = <-gh.events:
	case <-time.After(5 * time.Second):
		t.Fatal("no CallEvent")
	}
	for {
		select {
		case ev = <-gh.events:
		default:
			return ev
		}
	}
}

// A header with no value is no credential; a static source gives a
// tenant's callers one list (fetched once), labelled "static"; a host's
// CredentialKind wins over the source's.
func TestStaticCredentials(t *testing.T) {
	up := newPersonal(t, func(tok string) (string, bool) { return "acme-service", tok == "up-acme" })
	acme := gateway.StaticCredentials(http.Header{"Authorization": {"Bearer up-acme"}})
	empty := gateway.StaticCredentials(http.Header{"Authorization": {""}})
	var kind atomic.Value
	kind.Store("")
	gh := newGateway(t, gateway.Config{Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
		src := acme
		if id.Tenant != "acme" {
			src = empty
		}
		return []gateway.Upstream{{ID: "docs", URL: up.srv.URL, Era: gateway.EraStateless, Credentials: src, CredentialKind: kind.Load().(string)}}, nil
	}})
	alice, bob, carol := connect(t, gh.h, "acme-viewer"), connect(t, gh.h, "acme-admin"), connect(t, gh.h, "globex-editor")
	want := []string{"docs_mine_acme-service", "docs_search"}
	expect(t, alice, want, "docs", "ok//-")
	n := up.requests.Load()
	expect(t, bob, want, "docs", "ok//-")
	if up.requests.Load() != n {
		t.Fatal("one tenant's static credentials: the list was not shared")
	}
	expect(t, carol, []string{}, "docs", "failed/credentials/-")
	if text, isErr := callText(t, bob, "docs_search"); isErr || text != "search as acme-service with up-acme" {
		t.Fatalf("bob: %q", text)
	}
	if ev := lastEvent(t, gh); ev.CredentialKind != "static" {
		t.Fatalf("kind %q, want static", ev.CredentialKind)
	}
	kind.Store("tenant-key")
	callText(t, bob, "docs_search")
	if ev := lastEvent(t, gh); ev.CredentialKind != "tenant-key" {
		t.Fatalf("kind %q, want the host's", ev.CredentialKind)
	}
}
