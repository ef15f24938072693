package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/auth"
	"github.com/mcphandler/mcphandler/gateway"
	"github.com/mcphandler/mcphandler/internal/oidctest"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// The people of the OAuth tests, as both providers sign them in and as
// the gateway's callers authenticate (token "person-<sub>").
var people = map[string]map[string]any{
	"alice": {"sub": "alice", "tenant": "acme", "role": "editor"},
	"bob":   {"sub": "bob", "tenant": "acme", "role": "editor"},
	"carol": {"sub": "carol", "tenant": "acme", "role": "editor"},
	"dave":  {"sub": "dave", "tenant": "globex", "role": "editor"},
}

// oauthRig is a gateway in front of one upstream that wants each
// person's own token: its authorization server (as), the gateway's own
// sign-in (login), and the gateway's replicas behind one public address
// that sends each request to the next replica in turn.
type oauthRig struct {
	login, as *oidctest.Provider
	upURL     string
	public    *httptest.Server
	replicas  []*oauthReplica
	next      atomic.Int64
	refuse    atomic.Bool           // the upstream refuses every token (401)
	store     func() session.Store  // a new store on the rig's (Redis or memory)
	redis     redis.UniversalClient // on Redis, and its prefix
	prefix    string

	mu      sync.Mutex
	ranAs   []string // the upstream tool's callers, by subject
	decided []string // the tools BeforeCall decided on, by description
	tokens  []string // the tokens the upstream accepted
}

type oauthReplica struct {
	gw  *gateway.Gateway
	h   *mcphandler.Handler
	mux *http.ServeMux
}

// newOAuthRig starts the rig with n replicas, sharing a Redis when
// onRedis, else one memory store.
func newOAuthRig(t *testing.T, n int, onRedis bool) *oauthRig {
	t.Helper()
	rig := &oauthRig{login: oidctest.New(t), as: oidctest.New(t)}
	rig.as.ClientID, rig.as.ClientSecret = "gateway-at-docs", "docs:secret/with odd chars"
	rig.upURL = rig.startUpstream(t)
	rig.public = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rig.replicas[int(rig.next.Add(1))%len(rig.replicas)].mux.ServeHTTP(w, r)
	}))
	t.Cleanup(rig.public.Close)
	authURL := rig.public.URL + "/upstream-auth/"
	rig.login.AddRedirect(authURL + "login/callback")
	rig.as.AddRedirect(authURL + "callback")
	if onRedis {
		client := redistest.Client(t)
		prefix := redistest.Prefix(t, client)
		rig.redis, rig.prefix = client, prefix
		rig.store = func() session.Store {
			s := redisstore.New(client, redisstore.Options{Prefix: prefix})
			t.Cleanup(func() { s.Close() })
			return s
		}
	} else {
		m := session.NewMemory()
		rig.store = func() session.Store { return m }
	}
	for range n {
		rig.replicas = append(rig.replicas, rig.newReplica(t, rig.store(), testKeys))
	}
	return rig
}

// startUpstream starts the upstream: an MCP server that takes the
// tokens of the rig's authorization server for its own URL only, says
// where to get them (RFC 9728), and whose tool whoami says whose token
// it ran with.
func (rig *oauthRig) startUpstream(t *testing.T) string {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	resource := srv.URL + "/mcp"
	oidc, err := auth.NewOIDC(context.Background(), auth.OIDCConfig{Issuer: rig.as.Issuer(), Audience: resource})
	if err != nil {
		t.Fatal(err)
	}
	prm := &auth.ProtectedResource{Resource: resource, AuthorizationServers: []string{rig.as.Issuer()}, Scopes: []string{"docs:read"}}
	prm.Mount(mux)
	h := mcphandler.New(mcphandler.Config{
		Name: "docs", Version: "1",
		Authenticate: func(r *http.Request) (mcphandler.Identity, error) {
			id, err := oidc.Authenticate(r)
			if rig.refuse.Load() {
				return mcphandler.Identity{}, &auth.TokenError{Reason: "revoked"}
			}
			if err == nil {
				rig.mu.Lock()
				rig.tokens = append(rig.tokens, r.Header.Get("Authorization"))
				rig.mu.Unlock()
			}
			return id, err
		},
		Challenge: prm.Challenge,
		ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{{
				Name: "whoami", Description: "Says whose token it ran with.",
				InputSchema: json.RawMessage(`{"type":"object"}`),
				Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
				Handler: func(_ context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					rig.mu.Lock()
					rig.ranAs = append(rig.ranAs, call.Identity.Subject)
					rig.mu.Unlock()
					return mcphandler.TextResult("whoami ran as " + call.Identity.Tenant + "/" + call.Identity.Subject), nil
				},
			}}, nil
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	t.Cleanup(func() { h.Close() })
	mux.Handle("/mcp", h)
	return resource
}

// newReplica is one replica of the gateway on store, with keys.
func (rig *oauthRig) newReplica(t *testing.T, store session.Store, keys [][]byte) *oauthReplica {
	t.Helper()
	authURL := rig.public.URL + "/upstream-auth/"
	r := &oauthReplica{mux: http.NewServeMux()}
	gw, err := gateway.New(gateway.Config{
		Upstreams: func(_ context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
			if id.Tenant != "acme" {
				return nil, nil
			}
			return []gateway.Upstream{{ID: "docs", URL: rig.upURL, Era: gateway.EraSessions, TrustHints: true,
				OAuth: &gateway.OAuthClient{ClientID: rig.as.ClientID, ClientSecret: rig.as.ClientSecret}}}, nil
		},
		AuthURL: authURL, AuthWait: 20 * time.Second, Store: store, StateKeys: keys, MaxWatches: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	r.gw = gw
	r.h = mcphandler.New(mcphandler.Config{
		Name: "gateway", Version: "1",
		Authenticate: func(req *http.Request) (mcphandler.Identity, error) {
			tok, _ := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer person-")
			if p, ok := people[tok]; ok {
				return mcphandler.Identity{Tenant: p["tenant"].(string), Subject: tok, Role: "editor"}, nil
			}
			return mcphandler.Identity{}, errors.New("bad token")
		},
		Roles:     []string{"viewer", "editor", "admin"},
		ListTools: gw.Tools,
		BeforeCall: func(_ context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
			rig.mu.Lock()
			rig.decided = append(rig.decided, call.Tool.Description)
			rig.mu.Unlock()
			return mcphandler.Allow(), nil
		},
		Store: store, StateKeys: keys,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	t.Cleanup(func() { r.h.Close() })
	page, err := gw.AuthPage(context.Background(), gateway.AuthPageConfig{Issuer: rig.login.Issuer(),
		ClientID: rig.login.ClientID, ClientSecret: rig.login.ClientSecret, InsecureCookies: true})
	if err != nil {
		t.Fatal(err)
	}
	r.mux.Handle("/mcp", r.h)
	r.mux.Handle("/upstream-auth/", page)
	return r
}

// client is an initialized client of the public address for person, on
// 2025-11-25 (declaring URL-mode elicitation when ask is set, answered by
// ask), or 2026-07-28 when modern.
func (rig *oauthRig) client(t *testing.T, person string, modern bool, ask func(p mcptest.ElicitParams) string) *mcptest.Client {
	t.Helper()
	opts := []mcptest.Option{mcptest.WithToken("person-" + person)}
	if ask != nil {
		opts = append(opts, mcptest.WithCapabilities(json.RawMessage(`{"elicitation":{"form":{},"url":{}}}`)),
			mcptest.WithElicitationHandler(func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
				return mcptest.ElicitResult{Action: ask(p)}, nil
			}))
	}
	if modern {
		return mcptest.DialModern(rig.public.URL+"/mcp", opts...)
	}
	c := mcptest.Dial(rig.public.URL+"/mcp", opts...)
	t.Cleanup(func() { c.Close() })
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

// browser is a person's browser: it keeps cookies and follows redirects.
type browser struct {
	t   *testing.T
	rig *oauthRig
	c   *http.Client
}

func (rig *oauthRig) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, rig: rig, c: &http.Client{Jar: jar, Timeout: 10 * time.Second}}
}

// open follows u to its last page, signing in at the gateway as
// signIn and at the upstream's authorization server as authorize (each
// nil: nobody is queued there), and returns its status and body.
func (b *browser) open(u string, signIn, authorize map[string]any) (int, string) {
	if signIn != nil {
		b.rig.login.SignInNext(signIn)
	}
	if authorize != nil {
		b.rig.as.SignInNext(authorize)
	}
	resp, err := b.c.Get(u)
	if err != nil {
		b.t.Fatalf("browser: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// revoke revokes upstream on the index page, signed in already.
func (b *browser) revoke(upstream string) (int, string) {
	_, page := b.open(b.rig.public.URL+"/upstream-auth/", nil, nil)
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("no revoke form on the index: %s", page)
	}
	req, _ := http.NewRequest(http.MethodPost, b.rig.public.URL+"/upstream-auth/revoke",
		strings.NewReader(url.Values{"upstream": {upstream}, "csrf": {m[1]}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.rig.public.URL)
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("revoke: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// authorizeURL is the authorization link of the upstream docs in a
// tools/list result's _meta, or "".
func authorizeURL(t *testing.T, c *mcptest.Client) (string, []string) {
	t.Helper()
	res, err := c.Call(context.Background(), "tools/list", nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var r struct {
		Meta struct {
			Ups map[string]struct {
				Status, Error, AuthorizeURL string
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
	return r.Meta.Ups["docs"].AuthorizeURL, names
}

func (rig *oauthRig) ran() []string {
	rig.mu.Lock()
	defer rig.mu.Unlock()
	return append([]string(nil), rig.ranAs...)
}

// authorize has person authorize the upstream in a browser of their own
// through the link of their list, and fails t unless it is done.
func (rig *oauthRig) authorize(t *testing.T, c *mcptest.Client, person string) {
	t.Helper()
	link, _ := authorizeURL(t, c)
	if link == "" {
		t.Fatalf("%s's list names no authorization link", person)
	}
	if code, page := rig.browser(t).open(link, people[person], people[person]); code != http.StatusOK || !strings.Contains(page, "docs authorized") {
		t.Fatalf("%s's authorization: %d %s", person, code, page)
	}
}

// setClock makes every replica read the time from now.
func (rig *oauthRig) setClock(now func() time.Time) {
	for _, r := range rig.replicas {
		gateway.SetClock(r.gw, now)
	}
}

// lastToken is the last token the upstream accepted.
func (rig *oauthRig) lastToken() string {
	rig.mu.Lock()
	defer rig.mu.Unlock()
	if len(rig.tokens) == 0 {
		return ""
	}
	return rig.tokens[len(rig.tokens)-1]
}
