package realop_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/redis/go-redis/v9"
	"golang.org/x/oauth2"

	"github.com/mcphandler/mcphandler/internal/realop"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session/redisstore"
)

// TestGatewayUpstreamAuthorization runs the commands examples/gateway and
// examples/saas as a user would, against zitadel's provider: saas is an
// upstream of the gateway with "oauth", so that each person acts there
// with their own access token, which they authorize on the gateway's page
// in a headless Chromium (signed in at the provider, first as the
// gateway's user, then for saas). The gateway runs as two replicas on one
// Redis, behind a public address that sends each request to the next
// replica in turn: every step of a flow crosses replicas.
func TestGatewayUpstreamAuthorization(t *testing.T) {
	began := time.Now()
	bins := buildExamples(t)
	redisURL, rdb := redisDB(t)
	root := newBrowser(t)

	rr := &roundRobin{}
	public := httptest.NewServer(rr)
	t.Cleanup(public.Close)
	pub := public.URL
	// dave's own client redirects here; the Go-only flow stops at it.
	caller := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("signed in")) }))
	t.Cleanup(caller.Close)

	user := func(sub, tenant, role string) realop.User {
		return realop.User{ID: sub, Username: sub, Password: sub + "-password", Claims: map[string]any{"tenant": tenant, "role": role}}
	}
	// The subjects are those of the gateway's demo tokens: acme-viewer is
	// alice, acme-admin bob, globex-editor carol; dave has none.
	users := []realop.User{user("alice", "acme", "viewer"), user("bob", "acme", "admin"),
		user("carol", "globex", "editor"), user("dave", "acme", "editor")}
	loginClient := realop.Client{ID: "gateway-login", Secret: "gateway-login-secret",
		RedirectURIs: []string{pub + "/upstream-auth/login/callback"}}
	saasClient := realop.Client{ID: "gateway-at-saas", Secret: "gateway-at-saas-secret",
		RedirectURIs: []string{pub + "/upstream-auth/callback"}, JWTAccessTokens: true, Refresh: true}
	callerClient := realop.Client{ID: "mcp-caller", Secret: "mcp-caller-secret",
		RedirectURIs: []string{caller.URL + "/cb"}, JWTAccessTokens: true}
	p := realop.Start(t, realop.Config{Users: users, Clients: []realop.Client{loginClient, saasClient, callerClient}})

	saasAddr := freeAddr(t)
	saas := startProcess(t, "saas", bins.saas, "-addr", saasAddr, "-issuer", p.Issuer(), "-tenant-claim", "tenant")
	saas.waitHTTP(t, "http://"+saasAddr+"/.well-known/oauth-protected-resource/mcp")

	// saas's tools need no scope but add_note's; zitadel keeps openid,
	// profile, email, phone, address and offline_access and drops the
	// others (saas's challenge names mcp:tools). offline_access gets a
	// refresh token; openid is not required.
	upstreams, _ := json.Marshal(map[string]any{"upstreams": []any{map[string]any{
		"id": "notes", "url": "http://" + saasAddr + "/mcp", "tenants": []string{"acme", "globex"},
		"oauth": map[string]any{"client_id": saasClient.ID, "client_secret": saasClient.Secret,
			"scopes": []string{"offline_access"}},
	}}})
	file := filepath.Join(t.TempDir(), "upstreams.json")
	if err := os.WriteFile(file, upstreams, 0o600); err != nil {
		t.Fatal(err)
	}
	stateKey := make([]byte, 32)
	rand.Read(stateKey)
	var replicas []string
	for i := range 2 {
		addr := freeAddr(t)
		g := startProcess(t, fmt.Sprintf("gateway-%d", i+1), bins.gateway, "-addr", addr, "-public-url", pub,
			"-issuer", p.Issuer(), "-login-client-id", loginClient.ID, "-login-client-secret", loginClient.Secret,
			"-tenant-claim", "tenant", "-redis", redisURL, "-state-key", hex.EncodeToString(stateKey), "-upstreams", file)
		g.waitHTTP(t, "http://"+addr+"/mcp")
		replicas = append(replicas, "http://"+addr)
	}
	rr.set(t, replicas)
	t.Logf("started in %v", time.Since(began).Round(time.Millisecond))

	linkPrefix := pub + "/upstream-auth/start?l="
	browser := func(name string) *person {
		return newPerson(t, root, p, name)
	}
	aliceB, bobB := browser("alice"), browser("bob")

	// alice's answers to the gateway's questions, by phase.
	var mu sync.Mutex
	var aliceAsked []mcptest.ElicitParams
	aliceAnswer := func(mcptest.ElicitParams) string { return "decline" }
	alice := dial(t, pub, "acme-viewer", false, func(ep mcptest.ElicitParams) string {
		mu.Lock()
		aliceAsked = append(aliceAsked, ep)
		answer := aliceAnswer
		mu.Unlock()
		return answer(ep)
	})
	setAlice := func(f func(mcptest.ElicitParams) string) {
		mu.Lock()
		aliceAnswer = f
		mu.Unlock()
	}
	asked := func() []mcptest.ElicitParams {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(aliceAsked)
	}
	var aliceLink, daveToken string
	var bob *mcptest.Client

	// Each step builds on the ones before it: the first that fails ends
	// the test.
	step := func(name string, f func(t *testing.T)) {
		if !t.Failed() {
			t.Run(name, f)
		}
	}

	step("alice 2025-11-25 URL elicitation", func(t *testing.T) {
		link, names := listed(t, alice)
		if !strings.HasPrefix(link, linkPrefix) || slices.ContainsFunc(names, isNotes) {
			t.Fatalf("alice's list before she authorized: authorizeUrl %q, tools %v", link, names)
		}
		setAlice(func(ep mcptest.ElicitParams) string {
			if ep.Mode != "url" || !strings.HasPrefix(ep.URL, linkPrefix) || ep.ElicitationID == "" {
				t.Errorf("alice was asked %+v, want a URL elicitation of her link", ep)
				return "decline"
			}
			from := len(rr.pages())
			status, page, err := aliceB.visit(ep.URL, "upstream-auth-1-signin.png")
			if err != nil || status != http.StatusOK || page != "Upstream notes authorized" {
				t.Errorf("alice's authorization: %d %q, %v", status, page, err)
				return "decline"
			}
			// Signed in at the gateway first, then authorized at saas's
			// authorization server, each step on the replica after the
			// one before.
			steps := rr.pages()[from:]
			var paths []string
			for _, s := range steps {
				paths = append(paths, s.path)
			}
			t.Logf("alice's steps at the gateway: %v", steps)
			want := []string{"start", "login/callback", "start", "callback"}
			if !slices.Equal(paths, want) || !slices.ContainsFunc(steps, func(s pageHit) bool { return s.replica != steps[0].replica }) {
				t.Errorf("alice's steps at the gateway: %v, want %v across both replicas", steps, want)
			}
			aliceB.screenshot(t, "upstream-auth-2-authorized.png")
			if who, err := aliceB.textOf("#person"); who != "Signed in as alice (workspace acme)." {
				t.Errorf("the authorized page says %q (%v)", who, err)
			}
			return "accept"
		})
		info := call(t, alice, "alice")
		if info.Subject != "alice" || info.Workspace != "acme" || info.Role != "viewer" {
			t.Fatalf("alice's call ran at saas as %+v", info)
		}
		if got := asked(); len(got) != 1 {
			t.Fatalf("alice was asked %d times, want once", len(got))
		}
		aliceLink = asked()[0].URL
		if link, names := listed(t, alice); link != "" || !slices.Contains(names, "notes_workspace_info") {
			t.Fatalf("alice's list once she authorized: authorizeUrl %q, tools %v", link, names)
		}
	})

	step("bob 2026-07-28 input request", func(t *testing.T) {
		var bobMu sync.Mutex
		var bobAsked []mcptest.ElicitParams
		bob = dial(t, pub, "acme-admin", true, func(ep mcptest.ElicitParams) string {
			bobMu.Lock()
			bobAsked = append(bobAsked, ep)
			bobMu.Unlock()
			if ep.Mode != "url" || !strings.HasPrefix(ep.URL, linkPrefix) {
				t.Errorf("bob was asked %+v, want his link", ep)
				return "decline"
			}
			status, page, err := bobB.visit(ep.URL, "")
			if err != nil || status != http.StatusOK || page != "Upstream notes authorized" {
				t.Errorf("bob's authorization: %d %q, %v", status, page, err)
				return "decline"
			}
			return "accept"
		})
		info := call(t, bob, "bob")
		if info.Subject != "bob" || info.Workspace != "acme" || info.Role != "admin" {
			t.Fatalf("bob's call ran at saas as %+v", info)
		}
		if n := bob.Rounds(); n != 2 {
			t.Errorf("bob's call took %d rounds, want 2: the input request, then the retry", n)
		}
		bobMu.Lock()
		defer bobMu.Unlock()
		if len(bobAsked) != 1 || bobAsked[0].URL == aliceLink {
			t.Fatalf("bob was asked %+v, want once, his own link", bobAsked)
		}
	})

	step("dave own token without URL capability", func(t *testing.T) {
		daveToken = token(t, p, callerClient, pub, "dave")
		dave := dial(t, pub, daveToken, false, nil)
		if res, err := dave.CallTool(ctxFor(t), "whoami", map[string]any{}); err != nil || res.Text() != "tenant acme, subject dave, role editor" {
			t.Fatalf("dave's whoami: %+v, %v", res, err)
		}
		res, err := dave.CallTool(ctxFor(t), "notes_workspace_info", map[string]any{})
		if err != nil || !res.IsError || !strings.Contains(res.Text(), linkPrefix) {
			t.Fatalf("dave's call: %+v, %v; want an error naming his link", res, err)
		}
		if strings.Contains(res.Text(), aliceLink) {
			t.Errorf("dave's call names alice's link: %s", res.Text())
		}
		// saas took alice's and bob's calls only (the steps after this
		// one wait for exact lists too: a call of dave's would show).
		saas.waitCallers(t, "acme/alice", "acme/bob")
	})

	step("alice's link opened by bob", func(t *testing.T) {
		before := grants(t, rdb)
		status, page, err := bobB.visit(aliceLink, "")
		if err != nil || status != http.StatusForbidden || page != "Not your link" {
			t.Fatalf("alice's link opened by bob: %d %q, %v", status, page, err)
		}
		bobB.screenshot(t, "upstream-auth-4-not-your-link.png")
		if after := grants(t, rdb); !maps.Equal(before, after) {
			t.Fatalf("the grants in Redis changed when bob opened alice's link: %d before, %d after", len(before), len(after))
		}
		setAlice(func(ep mcptest.ElicitParams) string {
			t.Errorf("alice was asked again: %+v", ep)
			return "decline"
		})
		if info := call(t, alice, "alice"); info.Subject != "alice" {
			t.Fatalf("alice's call after bob opened her link ran as %+v", info)
		}
		if info := call(t, bob, "bob"); info.Subject != "bob" {
			t.Fatalf("bob's call after he opened alice's link ran as %+v", info)
		}
		saas.waitCallers(t, "acme/alice", "acme/bob", "acme/alice", "acme/bob")
	})

	step("tokens in Redis are sealed", func(t *testing.T) {
		// The tokens the gateway keeps for alice and bob never reach the
		// test: the gateway redeemed their codes itself, and saas does
		// not show the token it took. But every JWT this provider signs
		// starts with the same segment, the base64url of its header
		// {"alg":"RS256","kid":…,"typ":"JWT"}, which dave's token shows:
		// an access token kept in the clear, alone or in JSON, would show
		// it too. ("eyJ", the base64url of `{"` that starts any JWT,
		// would be no check on its own: the sealed values are base64url
		// of random bytes, where three given characters turn up about
		// once in a hundred values of this size.)
		if daveToken == "" {
			daveToken = token(t, p, callerClient, pub, "dave")
		}
		head, _, _ := strings.Cut(daveToken, ".")
		if !strings.HasPrefix(head, "eyJ") || len(head) < 40 {
			t.Fatalf("dave's token does not start with a JWT header: %q", head)
		}
		gs := grants(t, rdb)
		if len(gs) != 2 {
			t.Fatalf("%d grants in Redis, want alice's and bob's: %v", len(gs), slices.Collect(maps.Keys(gs)))
		}
		// Not in the grants, nor anywhere else in the gateway's database.
		ctx := ctxFor(t)
		iter := rdb.Scan(ctx, 0, "*", 100).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			var v string
			switch typ := rdb.Type(ctx, k).Val(); typ {
			case "string":
				v = rdb.Get(ctx, k).Val()
			case "list":
				v = strings.Join(rdb.LRange(ctx, k, 0, -1).Val(), "\n")
			case "none": // gone since the scan
			default:
				t.Logf("%s: a %s, not read", k, typ)
			}
			if strings.Contains(v, head) || strings.Contains(v, `"access_token"`) {
				t.Errorf("%s holds a token in the clear: %.80q…", k, v)
			}
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
	})

	step("revocation", func(t *testing.T) {
		status, page, err := aliceB.visit(pub+"/upstream-auth/", "")
		if err != nil || status != http.StatusOK || page != "Your upstream authorizations" {
			t.Fatalf("alice's index: %d %q, %v", status, page, err)
		}
		if s := aliceB.text(t, `tr[data-id="notes"]`); !strings.Contains(s, "authorized") || strings.Contains(s, "not authorized") {
			t.Fatalf("alice's index shows notes as %q", s)
		}
		aliceB.screenshot(t, "upstream-auth-3-index.png")
		if status, page, err := aliceB.click(`tr[data-id="notes"] button.revoke`); err != nil || status != http.StatusOK || page != "Upstream notes revoked" {
			t.Fatalf("revoke: %d %q, %v", status, page, err)
		}
		setAlice(func(ep mcptest.ElicitParams) string { return "decline" })
		n := len(asked())
		res, err := alice.CallTool(ctxFor(t), "notes_workspace_info", map[string]any{})
		if err != nil || !res.IsError || !strings.Contains(res.Text(), "not authorized") {
			t.Fatalf("alice's call after she revoked: %+v, %v", res, err)
		}
		if got := asked(); len(got) != n+1 || !strings.HasPrefix(got[n].URL, linkPrefix) {
			t.Fatalf("alice's call after she revoked did not ask her again: %+v", got[n:])
		}
		if link, names := listed(t, alice); !strings.HasPrefix(link, linkPrefix) || slices.ContainsFunc(names, isNotes) {
			t.Fatalf("alice's list after she revoked: authorizeUrl %q, tools %v", link, names)
		}
		if info := call(t, bob, "bob"); info.Subject != "bob" {
			t.Fatalf("bob's call after alice revoked ran as %+v", info)
		}
		saas.waitCallers(t, "acme/alice", "acme/bob", "acme/alice", "acme/bob", "acme/bob")
	})

	if !t.Failed() && !rr.crossed() {
		t.Errorf("the requests did not reach both replicas: %v", rr.counts())
	}
	t.Logf("requests by replica: %v; took %v", rr.counts(), time.Since(began).Round(time.Millisecond))
}

func isNotes(name string) bool { return strings.HasPrefix(name, "notes_") }

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// dial is an MCP client of the gateway with token: 2025-11-25 (initialized),
// or 2026-07-28 when modern; declaring URL-mode elicitation, answered by
// answer, when answer is set.
func dial(t *testing.T, pub, token string, modern bool, answer func(mcptest.ElicitParams) string) *mcptest.Client {
	t.Helper()
	// A connection per request. With connections kept alive, about one
	// run in fifteen under the race detector saw the client's tools/call
	// stream, on a reused connection, closed by the client's side (the
	// proxy's inbound request cancelled) right as the client answered the
	// gateway's question on another connection: the gateway rightly took
	// it for a client that left, and the answer found nobody waiting. Not
	// yet explained; it is not the gateway's, which saw the close.
	opts := []mcptest.Option{mcptest.WithToken(token), mcptest.WithHTTPClient(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}})}
	if answer != nil {
		opts = append(opts, mcptest.WithCapabilities(json.RawMessage(`{"elicitation":{"url":{}}}`)),
			mcptest.WithElicitationHandler(func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
				return mcptest.ElicitResult{Action: answer(p)}, nil
			}))
	}
	if modern {
		c := mcptest.DialModern(pub+"/mcp", opts...)
		t.Cleanup(c.Close)
		return c
	}
	c := mcptest.Dial(pub+"/mcp", opts...)
	t.Cleanup(c.Close)
	if _, err := c.Initialize(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	return c
}

// listed is the notes upstream's authorizeUrl in c's tools/list _meta
// ("" if none), and the names of the tools listed.
func listed(t *testing.T, c *mcptest.Client) (string, []string) {
	t.Helper()
	res, err := c.Call(ctxFor(t), "tools/list", nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var r struct {
		Meta struct {
			Ups map[string]struct {
				AuthorizeURL string `json:"authorizeUrl"`
			} `json:"dev.mcphandler/upstreams"`
		} `json:"_meta"`
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range r.Tools {
		names = append(names, tl.Name)
	}
	return r.Meta.Ups["notes"].AuthorizeURL, names
}

// workspaceInfo is saas's answer to workspace_info.
type workspaceInfo struct {
	Workspace, Subject, Role string
}

// call calls notes_workspace_info as who, and fails t unless it ran.
func call(t *testing.T, c *mcptest.Client, who string) workspaceInfo {
	t.Helper()
	res, err := c.CallTool(ctxFor(t), "notes_workspace_info", map[string]any{})
	if err != nil || res.IsError {
		text := ""
		if res != nil {
			text = res.Text()
		}
		t.Fatalf("%s's call of notes_workspace_info: %v %s", who, err, text)
	}
	var info workspaceInfo
	raw := res.StructuredContent
	if len(raw) == 0 {
		raw = []byte(res.Text())
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		t.Fatalf("%s's call of notes_workspace_info answered %s: %v", who, raw, err)
	}
	return info
}

// token is an access token of who for the gateway (the resource
// pub/mcp), from the provider's code flow run by Go alone as the client c.
func token(t *testing.T, p *realop.Provider, c realop.Client, pub, who string) string {
	t.Helper()
	r := newRP(t, p, c, oidc.ScopeOpenID)
	g := r.start(oauth2.SetAuthURLParam("resource", pub+"/mcp"))
	return r.exchange(t, g, r.code(t, g, who, who+"-password")).AccessToken
}

// person is the browser of one person: a browser context of the test's Chromium of their
// own (cookies), one tab, 1000 px wide.
type person struct {
	name string
	p    *realop.Provider
	ctx  context.Context
}

func newPerson(t *testing.T, root context.Context, p *realop.Provider, name string) *person {
	t.Helper()
	ctx, cancel := chromedp.NewContext(root, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	// The first run opens the tab: without a deadline, which would close it.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1000, 800)); err != nil {
		t.Fatalf("%s's browser: %v", name, err)
	}
	return &person{name: name, p: p, ctx: ctx}
}

// visit opens u and signs in at the provider as the person whenever its
// login form shows (the gateway's sign-in, then the upstream's
// authorization), until the browser rests elsewhere; it returns that
// page's HTTP status and heading. shot names a screenshot of the first
// login form ("": none).
func (b *person) visit(u, shot string) (int, string, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
		return 0, "", fmt.Errorf("opening %s: %w", u, err)
	}
	for logins := 0; ; logins++ {
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			return 0, "", err
		}
		if !strings.HasPrefix(loc, b.p.Issuer()+"/login/") {
			break
		}
		if logins == 2 {
			return 0, "", fmt.Errorf("asked to sign in a third time, at %s", loc)
		}
		if logins == 0 && shot != "" {
			if err := b.save(ctx, shot); err != nil {
				return 0, "", err
			}
		}
		if err := b.p.Login(ctx, b.name, b.name+"-password"); err != nil {
			return 0, "", err
		}
	}
	return b.page(ctx)
}

// click clicks the button sel, and returns the page it leads to.
func (b *person) click(sel string) (int, string, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		return 0, "", fmt.Errorf("clicking %s: %w", sel, err)
	}
	return b.page(ctx)
}

// page is the HTTP status of the page shown (Navigation Timing: the
// gateway's pages run no script, but the browser knows) and its heading.
func (b *person) page(ctx context.Context) (int, string, error) {
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int]("performance.getEntriesByType('navigation')[0].responseStatus"))
	if err != nil {
		return 0, "", err
	}
	h, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("h1")))
	if err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		return status, "", fmt.Errorf("no heading on %s: %w", loc, err)
	}
	return status, strings.TrimSpace(h), nil
}

// textOf is the text of the element sel of the page shown.
func (b *person) textOf(sel string) (string, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	return strings.TrimSpace(s), err
}

func (b *person) text(t *testing.T, sel string) string {
	t.Helper()
	s, err := b.textOf(sel)
	if err != nil {
		t.Fatalf("%s's page: %s: %v", b.name, sel, err)
	}
	return s
}

func (b *person) screenshot(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if err := b.save(ctx, name); err != nil {
		t.Error(err)
	}
}

// save writes a full-page PNG of the page shown to $SCREENSHOTS/name,
// when SCREENSHOTS names a directory.
func (b *person) save(ctx context.Context, name string) error {
	dir := os.Getenv("SCREENSHOTS")
	if dir == "" {
		return nil
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return fmt.Errorf("screenshot %s: %w", name, err)
	}
	return os.WriteFile(filepath.Join(dir, name), png, 0o644)
}

// roundRobin is the gateway's public address: each request goes to the
// next replica.
type roundRobin struct {
	next     atomic.Int64
	replicas atomic.Pointer[[]*httputil.ReverseProxy]
	mu       sync.Mutex
	count    map[string]int // by replica and kind of request
	steps    []pageHit      // the requests of the pages, in order
}

// pageHit is a request of one of the gateway's pages (/upstream-auth/…).
type pageHit struct {
	replica int
	path    string // below /upstream-auth/
}

func (p pageHit) String() string { return fmt.Sprintf("%s on gateway-%d", p.path, p.replica) }

func (rr *roundRobin) pages() []pageHit {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return slices.Clone(rr.steps)
}

func (rr *roundRobin) set(t *testing.T, targets []string) {
	var proxies []*httputil.ReverseProxy
	for _, s := range targets {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		proxies = append(proxies, &httputil.ReverseProxy{
			Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = r.In.Host },
			FlushInterval: -1, // streams (SSE) as they come
			// A connection per request, as for the MCP clients (see dial).
			Transport: &http.Transport{DisableKeepAlives: true},
		})
	}
	rr.count = map[string]int{}
	rr.replicas.Store(&proxies)
}

func (rr *roundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ps := rr.replicas.Load()
	if ps == nil {
		http.Error(w, "no replica yet", http.StatusServiceUnavailable)
		return
	}
	i := int(rr.next.Add(1)) % len(*ps)
	kind := "page"
	if r.URL.Path == "/mcp" {
		kind = "mcp"
	}
	rr.mu.Lock()
	rr.count[fmt.Sprintf("gateway-%d %s", i+1, kind)]++
	if rest, ok := strings.CutPrefix(r.URL.Path, "/upstream-auth/"); ok {
		rr.steps = append(rr.steps, pageHit{replica: i + 1, path: rest})
	}
	rr.mu.Unlock()
	(*ps)[i].ServeHTTP(w, r)
}

func (rr *roundRobin) counts() map[string]int {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return maps.Clone(rr.count)
}

// crossed reports whether each replica served both MCP requests and
// pages.
func (rr *roundRobin) crossed() bool {
	c := rr.counts()
	return c["gateway-1 mcp"] > 0 && c["gateway-2 mcp"] > 0 && c["gateway-1 page"] > 0 && c["gateway-2 page"] > 0
}

// grants are the people's tokens the gateway keeps in Redis (the store's
// records gw-oauth/<key>, under the example's prefix "gateway:"), by
// Redis key: the non-empty ones (a revoked one is written empty for a
// moment), without the marks of refreshes under way.
func grants(t *testing.T, rdb redis.UniversalClient) map[string]string {
	t.Helper()
	ctx := ctxFor(t)
	out := map[string]string{}
	iter := rdb.Scan(ctx, 0, "gateway:{gw-oauth/*", 100).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		if strings.Contains(k, "/refresh/") {
			continue
		}
		v, err := rdb.Get(ctx, k).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			t.Fatalf("GET %s: %v", k, err)
		}
		if v != "" {
			out[k] = v
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN: %v", err)
	}
	return out
}

// Building the commands, once for the test binary.

type binaries struct{ saas, gateway string }

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

func buildExamples(t *testing.T) binaries {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "realop-examples-"); buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", buildDir+string(os.PathSeparator), "./examples/saas", "./examples/gateway")
		cmd.Dir = filepath.Join("..", "..") // the repository's root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binaries{saas: filepath.Join(buildDir, "saas"), gateway: filepath.Join(buildDir, "gateway")}
}

// removeBuilt removes the commands built, at the end of the test binary.
func removeBuilt() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// redisDB is a Redis database of the test's own on $REDIS_URL's server
// (else 127.0.0.1:6379): the gateway's prefix is fixed, so the test takes
// a database number, one of 1–15 picked at random among the empty ones
// (no other test of the repository uses them), flushed before and after.
// The test is skipped without a Redis, unless CI is set.
func redisDB(t *testing.T) (string, redis.UniversalClient) {
	t.Helper()
	base := os.Getenv("REDIS_URL")
	if base == "" {
		base = "redis://127.0.0.1:6379"
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("REDIS_URL: %v", err)
	}
	open := func(db int) (string, redis.UniversalClient) {
		u.Path = "/" + strconv.Itoa(db)
		c, err := redisstore.NewClient(redisstore.Single, u.String())
		if err != nil {
			t.Fatal(err)
		}
		return u.String(), c
	}
	ctx := ctxFor(t)
	var chosen string
	var rdb redis.UniversalClient
	for _, db := range mrand.Perm(15) {
		s, c := open(db + 1)
		n, err := c.DBSize(ctx).Result()
		if err != nil {
			c.Close()
			if os.Getenv("CI") != "" {
				t.Fatalf("Redis at %s: %v", u.Host, err)
			}
			t.Skipf("no Redis at %s (set REDIS_URL): %v", u.Host, err)
		}
		if n == 0 || rdb == nil {
			if rdb != nil {
				rdb.Close()
			}
			chosen, rdb = s, c
		} else {
			c.Close()
		}
		if n == 0 {
			break
		}
	}
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rdb.FlushDB(context.Background())
		rdb.Close()
	})
	return chosen, rdb
}

// freeAddr is a free address of 127.0.0.1 for a process to listen on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// process is a command the test runs, killed when the test ends; its
// output is logged if the test failed.
type process struct {
	name string
	done chan struct{}
	mu   sync.Mutex
	out  bytes.Buffer
}

func (p *process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func startProcess(t *testing.T, name, bin string, args ...string) *process {
	t.Helper()
	p := &process{name: name, done: make(chan struct{})}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = p, p
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("output of %s %s:\n%s", name, strings.Join(args, " "), p.output())
		}
	})
	return p
}

// waitHTTP waits, up to 15 s, for the process to answer u (any status).
func (p *process) waitHTTP(t *testing.T, u string) {
	t.Helper()
	hc := &http.Client{Timeout: time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	deadline := time.Now().Add(15 * time.Second)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		resp, err := hc.Get(u)
		if err == nil {
			resp.Body.Close()
			return
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited:\n%s", p.name, p.output())
		case <-time.After(wait):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer %s: %v", p.name, u, err)
		}
	}
}

var callLine = regexp.MustCompile(`call tool=workspace_info workspace=(\S*) subject=(\S*) `)

// waitCallers waits, up to 5 s, for saas's log to name the callers want
// (workspace/subject) of workspace_info, in order, and no other: it logs
// each call it took, whatever its outcome, once it answered it.
func (p *process) waitCallers(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		var got []string
		for _, m := range callLine.FindAllStringSubmatch(p.output(), -1) {
			got = append(got, m[1]+"/"+m[2])
		}
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("saas ran workspace_info for %v, want %v", got, want)
		}
		time.Sleep(wait)
	}
}
