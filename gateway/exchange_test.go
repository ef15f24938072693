package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/auth"
	"github.com/mcphandler/mcphandler/gateway"
	"github.com/mcphandler/mcphandler/mcptest"
)

// tokenEndpoint is an authorization server's RFC 8693 token endpoint: it
// authenticates this gateway as a client, trades the token of a caller
// of the gateway (users) for one of its own for the upstream,
// xchg-<subject>-<n>, and counts the exchanges per subject.
type tokenEndpoint struct {
	srv       *httptest.Server
	expiresIn atomic.Int64 // 0: no expires_in

	mu    sync.Mutex
	hits  map[string]int // exchanges per subject
	forms []url.Values
	fail  map[string]int // subject -> the HTTP status that refuses it
	typ   string         // token_type, if not Bearer
}

func newTokenEndpoint(t testing.TB) *tokenEndpoint {
	t.Helper()
	te := &tokenEndpoint{hits: map[string]int{}, fail: map[string]int{}}
	te.expiresIn.Store(3600)
	te.srv = httptest.NewServer(http.HandlerFunc(te.serve))
	t.Cleanup(te.srv.Close)
	return te
}

func (te *tokenEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	answer := func(status int, v map[string]any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	if id, secret, ok := r.BasicAuth(); !ok || id != "gateway" || secret != "gateway-secret" {
		answer(http.StatusUnauthorized, map[string]any{"error": "invalid_client"})
		return
	}
	if r.ParseForm() != nil || r.PostForm.Get("grant_type") != auth.GrantTypeTokenExchange ||
		r.PostForm.Get("subject_token_type") != auth.TokenTypeAccessToken {
		answer(http.StatusBadRequest, map[string]any{"error": "invalid_request"})
		return
	}
	te.mu.Lock()
	defer te.mu.Unlock()
	te.forms = append(te.forms, r.PostForm)
	id, ok := users[r.PostForm.Get("subject_token")]
	if who, any := strings.CutPrefix(r.PostForm.Get("subject_token"), "any-"); any {
		id, ok = mcphandler.Identity{Tenant: "acme", Subject: who}, true
	}
	if !ok || id.Tenant != "acme" { // only acme's people may act upstream
		answer(http.StatusBadRequest, map[string]any{"error": "invalid_grant"})
		return
	}
	if status := te.fail[id.Subject]; status != 0 {
		answer(status, map[string]any{"error": "temporarily_unavailable"})
		return
	}
	te.hits[id.Subject]++
	res := map[string]any{
		"access_token":      "xchg-" + id.Subject + "-" + strconv.Itoa(te.hits[id.Subject]),
		"issued_token_type": auth.TokenTypeAccessToken,
		"token_type":        "Bearer",
	}
	if te.typ != "" {
		res["token_type"] = te.typ
	}
	if n := te.expiresIn.Load(); n > 0 {
		res["expires_in"] = n
	}
	answer(http.StatusOK, res)
}

func (te *tokenEndpoint) exchanges(subject string) int {
	te.mu.Lock()
	defer te.mu.Unlock()
	return te.hits[subject]
}

func (te *tokenEndpoint) set(f func(te *tokenEndpoint)) {
	te.mu.Lock()
	defer te.mu.Unlock()
	f(te)
}

// exchangedOnly accepts the tokens the token endpoint issues, as the
// person they were issued for.
func exchangedOnly(tok string) (string, bool) {
	rest, ok := strings.CutPrefix(tok, "xchg-")
	if !ok {
		return "", false
	}
	who, _, ok := strings.Cut(rest, "-")
	return who, ok
}

// exchangeGateway is a gateway in front of up whose callers' credentials
// there are exchanged at te, with one TokenExchange.
func exchangeGateway(t *testing.T, te *tokenEndpoint, up *personal, era gateway.Era) (*gatewayHost, *gateway.TokenExchange) {
	t.Helper()
	src, err := gateway.NewTokenExchange(gateway.ExchangeConfig{Exchange: auth.TokenExchangeConfig{
		TokenURL: te.srv.URL + "/token", ClientID: "gateway", ClientSecret: "gateway-secret", Scopes: []string{"docs.read"}}})
	if err != nil {
		t.Fatal(err)
	}
	gh := newGateway(t, gateway.Config{Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
		return []gateway.Upstream{{ID: "docs", URL: up.srv.URL, Era: era, Credentials: src}}, nil
	}})
	return gh, src
}

// onlyExchanged fails t unless every request up saw carried a token the
// token endpoint issued: never a caller's own token, never none.
func onlyExchanged(t *testing.T, up *personal) {
	t.Helper()
	for _, a := range up.saw("Authorization") {
		tok, _ := strings.CutPrefix(a, "Bearer ")
		if _, ok := exchangedOnly(tok); !ok {
			t.Fatalf("the upstream saw Authorization %q", a)
		}
	}
}

// Each person's lists and calls go upstream with a token exchanged for
// that person's own, which never goes upstream itself: one exchange per
// person until it expires, asked for the upstream and the scope, and each
// person's list is theirs (and cached for them).
func TestTokenExchangePerPerson(t *testing.T) {
	te := newTokenEndpoint(t)
	up := newPersonal(t, exchangedOnly)
	gh, src := exchangeGateway(t, te, up, gateway.EraSessions)
	alice, bob := connect(t, gh.h, "acme-viewer"), connect(t, gh.h, "acme-admin")

	expect(t, alice, []string{"docs_mine_alice", "docs_search"}, "docs", "ok//-")
	n := up.requests.Load()
	expect(t, alice, []string{"docs_mine_alice", "docs_search"}, "docs", "ok//-")
	if up.requests.Load() != n {
		t.Fatal("alice's second list was not served from the cache")
	}
	expect(t, bob, []string{"docs_mine_bob", "docs_search"}, "docs", "ok//-")
	for range 2 {
		if text, isErr := callText(t, alice, "docs_search"); isErr || text != "search as alice with xchg-alice-1" {
			t.Fatalf("alice: %q", text)
		}
		if text, isErr := callText(t, bob, "docs_mine_bob"); isErr || text != "mine_bob as bob with xchg-bob-1" {
			t.Fatalf("bob: %q", text)
		}
	}
	if ev := lastEvent(t, gh); ev.CredentialKind != "token-exchange" || ev.Upstream != "docs" {
		t.Fatalf("event %+v", ev)
	}
	if a, b := te.exchanges("alice"), te.exchanges("bob"); a != 1 || b != 1 {
		t.Fatalf("exchanges: alice %d, bob %d; want one each", a, b)
	}
	if k := gateway.ExchangeTokens(src); k != 2 {
		t.Fatalf("%d tokens kept, want 2", k)
	}
	onlyExchanged(t, up)
	te.mu.Lock()
	defer te.mu.Unlock()
	for _, f := range te.forms {
		if tok := f.Get("subject_token"); tok != "acme-viewer" && tok != "acme-admin" {
			t.Fatalf("subject_token %q: not the caller's own", tok)
		}
		if f.Get("resource") != up.srv.URL || f.Get("scope") != "docs.read" || f.Has("audience") {
			t.Fatalf("exchange asked for %v", f)
		}
	}
}

// Alice and Bob calling at once, many times: each call carries its own
// caller's exchanged token, never the other's, and the first calls of
// each, their tokens expired, wait for one exchange.
func TestTokenExchangeConcurrent(t *testing.T) {
	te := newTokenEndpoint(t)
	up := newPersonal(t, exchangedOnly)
	gh, src := exchangeGateway(t, te, up, gateway.EraStateless)
	clk := &clock{t: time.Now()}
	gateway.SetExchangeClock(src, clk.now)
	const clients, calls = 6, 8
	type caller struct {
		c       *mcptest.Client
		subject string
	}
	var callers []caller
	for i := range 2 * clients {
		tok := []string{"acme-viewer", "acme-admin"}[i%2]
		callers = append(callers, caller{connect(t, gh.h, tok), users[tok].Subject})
	}
	// Initializing may list the caller's tools: whatever was exchanged
	// then expires now.
	clk.add(2 * time.Hour)
	ea, eb := te.exchanges("alice"), te.exchanges("bob")
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, cl := range callers {
		wg.Go(func() {
			<-start
			want := "search as " + cl.subject + " with xchg-" + cl.subject + "-" + strconv.Itoa(map[string]int{"alice": ea, "bob": eb}[cl.subject]+1)
			for range calls {
				res, err := cl.c.CallTool(context.Background(), "docs_search", nil)
				if err != nil || res.IsError || resultText(res) != want {
					t.Errorf("%s: %v %v, want %q", cl.subject, res, err, want)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if a, b := te.exchanges("alice")-ea, te.exchanges("bob")-eb; a != 1 || b != 1 {
		t.Fatalf("exchanges at once: alice %d, bob %d; want one each", a, b)
	}
	onlyExchanged(t, up)
}

// A token is used until 30 s before it expires, then exchanged again; a
// token without expires_in is used once.
func TestTokenExchangeRefreshed(t *testing.T) {
	te := newTokenEndpoint(t)
	te.expiresIn.Store(120)
	up := newPersonal(t, exchangedOnly)
	gh, src := exchangeGateway(t, te, up, gateway.EraStateless)
	clk := &clock{t: time.Now()}
	gateway.SetExchangeClock(src, clk.now)
	alice := connect(t, gh.h, "acme-viewer")
	want := func(tok string) {
		t.Helper()
		if text, isErr := callText(t, alice, "docs_search"); isErr || text != "search as alice with "+tok {
			t.Fatalf("%q, want the token %s", text, tok)
		}
	}
	want("xchg-alice-1")
	clk.add(89 * time.Second)
	want("xchg-alice-1")
	clk.add(2 * time.Second)
	want("xchg-alice-2")
	if n := te.exchanges("alice"); n != 2 {
		t.Fatalf("%d exchanges, want 2", n)
	}

	te.expiresIn.Store(0)
	clk.add(2 * time.Minute)
	want("xchg-alice-4") // one for the call's lookup, one for the call
	if n := gateway.ExchangeTokens(src); n != 0 {
		t.Fatalf("%d tokens kept, want none", n)
	}
}

// A token endpoint that fails for Bob fails Bob's calls, with an error
// that says so, and nothing else: Alice's work, Bob is not sent another
// credential, and the upstream's breaker does not count it. A refused
// exchange is final, an endpoint that is down retryable, and Bob works
// again once it answers.
func TestTokenExchangeFailsForOnePerson(t *testing.T) {
	te := newTokenEndpoint(t)
	up := newPersonal(t, exchangedOnly)
	gh, src := exchangeGateway(t, te, up, gateway.EraSessions)
	clk := &clock{t: time.Now()}
	gateway.SetExchangeClock(src, clk.now)
	alice, bob, carol := connect(t, gh.h, "acme-viewer"), connect(t, gh.h, "acme-admin"), connect(t, gh.h, "globex-editor")
	expect(t, bob, []string{"docs_mine_bob", "docs_search"}, "docs", "ok//-")
	if text, isErr := callText(t, bob, "docs_search"); isErr || text != "search as bob with xchg-bob-1" {
		t.Fatalf("bob: %q", text)
	}
	expect(t, carol, []string{}, "docs", "failed/credentials/-") // refused: not acme's

	clk.add(time.Hour) // every token expired
	te.set(func(te *tokenEndpoint) { te.fail["bob"] = http.StatusServiceUnavailable })
	n := up.requests.Load()
	for range 5 { // more than FailureThreshold
		expect(t, bob, []string{"docs_mine_bob", "docs_search"}, "docs", "stale/credentials/-")
	}
	text, isErr := callText(t, bob, "docs_search")
	if !isErr || !strings.Contains(text, "upstream docs: this caller's credentials there could not be obtained now") ||
		!strings.Contains(text, `"retryable":true`) || strings.Contains(text, "temporarily_unavailable") {
		t.Fatalf("bob, token endpoint down: %q", text)
	}
	if up.requests.Load() != n {
		t.Fatalf("bob without a token: %d requests upstream", up.requests.Load()-n)
	}
	if text, isErr := callText(t, alice, "docs_search"); isErr || !strings.HasPrefix(text, "search as alice with xchg-alice-") {
		t.Fatalf("alice while bob's exchange fails: %q", text)
	}
	if b := gateway.Breakers(gh.gw); b != 0 {
		t.Fatalf("bob's failed exchanges counted against %d breakers", b)
	}

	te.set(func(te *tokenEndpoint) { te.fail["bob"] = http.StatusBadRequest })
	text, isErr = callText(t, bob, "docs_search")
	if !isErr || !strings.Contains(text, "upstream docs: no credentials for this caller there") || !strings.Contains(text, `"retryable":false`) {
		t.Fatalf("bob, exchange refused: %q", text)
	}

	te.set(func(te *tokenEndpoint) { delete(te.fail, "bob") })
	if text, isErr := callText(t, bob, "docs_search"); isErr || text != "search as bob with xchg-bob-2" {
		t.Fatalf("bob, token endpoint back: %q", text)
	}
	expect(t, bob, []string{"docs_mine_bob", "docs_search"}, "docs", "ok//-")
	onlyExchanged(t, up)

	// A token that is not a bearer token is no credential.
	clk.add(time.Hour)
	te.set(func(te *tokenEndpoint) { te.typ = "N_A" })
	if text, isErr := callText(t, bob, "docs_search"); !isErr || !strings.Contains(text, "no credentials for this caller") {
		t.Fatalf("bob, a token of type N_A: %q", text)
	}
}

// The subject token is the caller's own: from a request of someone else,
// or from no request, there is none, and the token endpoint is not asked.
func TestTokenExchangeSubjectIsTheCaller(t *testing.T) {
	te := newTokenEndpoint(t)
	up := newPersonal(t, exchangedOnly)
	gh, src := exchangeGateway(t, te, up, gateway.EraStateless)
	u := &gateway.Upstream{ID: "docs", URL: up.srv.URL}
	for _, ctx := range []context.Context{context.Background(), ctxAs(t, gh, "acme-admin")} {
		if _, err := src.Credentials(ctx, users["acme-viewer"], u); !errors.Is(err, gateway.ErrNoCredentials) {
			t.Fatalf("alice's credentials from a request that is not hers: %v", err)
		}
	}
	h, err := src.Credentials(ctxAs(t, gh, "acme-admin"), users["acme-admin"], u)
	if err != nil || h.Get("Authorization") != "Bearer xchg-bob-1" {
		t.Fatalf("bob's: %v %v", h, err)
	}
	if te.exchanges("alice") != 0 {
		t.Fatal("the token endpoint was asked for alice")
	}
	if _, err := gateway.NewTokenExchange(gateway.ExchangeConfig{}); err == nil {
		t.Fatal("no TokenURL accepted")
	}
}

// Tokens of ever new people are kept up to MaxTokens, the least recently
// used forgotten first.
func TestTokenExchangeBounded(t *testing.T) {
	te := newTokenEndpoint(t)
	src, err := gateway.NewTokenExchange(gateway.ExchangeConfig{MaxTokens: 8,
		Exchange:     auth.TokenExchangeConfig{TokenURL: te.srv.URL, ClientID: "gateway", ClientSecret: "gateway-secret", Audience: "docs"},
		SubjectToken: func(_ context.Context, id mcphandler.Identity) (string, bool) { return "any-" + id.Subject, true }})
	if err != nil {
		t.Fatal(err)
	}
	u := &gateway.Upstream{ID: "docs", URL: "http://docs.example/mcp"}
	get := func(who string) string {
		t.Helper()
		h, err := src.Credentials(context.Background(), mcphandler.Identity{Tenant: "acme", Subject: who}, u)
		if err != nil {
			t.Fatal(err)
		}
		return h.Get("Authorization")
	}
	for i := range 50 {
		who := "p" + strconv.Itoa(i)
		if got := get(who); got != "Bearer xchg-"+who+"-1" {
			t.Fatalf("%s: %q", who, got)
		}
		get("p0") // p0 stays the most recently used
		if n := gateway.ExchangeTokens(src); n > 8 {
			t.Fatalf("%d tokens kept, at most 8", n)
		}
	}
	get("p49")
	if te.exchanges("p0") != 1 || te.exchanges("p49") != 1 {
		t.Fatal("a recently used token was forgotten")
	}
	get("p1")
	if te.exchanges("p1") != 2 {
		t.Fatal("the least recently used token was kept past MaxTokens")
	}
	te.mu.Lock()
	defer te.mu.Unlock()
	if f := te.forms[0]; f.Get("audience") != "docs" || f.Has("resource") {
		t.Fatalf("with an Audience, the exchange asked for %v", f)
	}
}
