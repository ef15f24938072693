package page

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/internal/oidctest"
	"github.com/mcphandler/mcphandler/internal/sign"
	"github.com/mcphandler/mcphandler/session"
)

var testKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}

// env is one replica of a host serving the page at /approvals/, with the
// fake provider it signs in with.
type env struct {
	t         testing.TB
	idp       *oidctest.Provider
	srv       *httptest.Server
	h         *Handler
	approvals *approval.Store
	shared    approval.Shared
}

type envOpt struct {
	shared approval.Shared
	idp    *oidctest.Provider
	ttl    time.Duration
	tls    bool // serve over HTTPS, with the production cookies
	mod    func(*Config)
	amod   func(*approval.Config) // the approval store's
}

func newEnv(t testing.TB, o envOpt) *env {
	t.Helper()
	if o.shared == nil {
		o.shared = session.NewMemory()
	}
	if o.idp == nil {
		o.idp = oidctest.New(t)
	}
	e := &env{t: t, idp: o.idp, shared: o.shared}
	var h atomic.Pointer[Handler]
	mux := http.NewServeMux()
	mux.Handle("/approvals/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.Load().ServeHTTP(w, r) }))
	if o.tls {
		e.srv = httptest.NewTLSServer(mux)
	} else {
		e.srv = httptest.NewServer(mux)
	}
	t.Cleanup(e.srv.Close)
	var err error
	acfg := approval.Config{Store: o.shared, Keys: testKeys, URL: e.srv.URL + "/approvals/",
		TTL: o.ttl, Roles: []string{"viewer", "editor", "admin"}}
	if o.amod != nil {
		o.amod(&acfg)
	}
	e.approvals, err = approval.New(acfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.approvals.Close() })
	e.idp.AddRedirect(e.srv.URL + "/approvals/callback")
	cfg := Config{Approvals: e.approvals, Store: o.shared, Issuer: e.idp.Issuer(), ClientID: e.idp.ClientID,
		ClientSecret: e.idp.ClientSecret, RedirectURL: e.srv.URL + "/approvals/callback", Keys: testKeys,
		HTTPClient: e.idp.Client(), InsecureCookies: !o.tls, Logger: slog.New(slog.DiscardHandler)}
	if o.mod != nil {
		o.mod(&cfg)
	}
	e.h, err = New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.Store(e.h)
	return e
}

var (
	editor = map[string]any{"sub": "ed", "tenant": "acme", "role": "editor"}
	admin  = map[string]any{"sub": "ada", "tenant": "acme", "role": "admin"}
	admin2 = map[string]any{"sub": "bob", "tenant": "acme", "role": "admin"}
	viewer = map[string]any{"sub": "vi", "tenant": "acme", "role": "viewer"}
	other  = map[string]any{"sub": "eve", "tenant": "globex", "role": "admin"}
)

// ask makes a pending approval of delete_note asked by the editor, which
// an admin of acme other than the editor may decide.
func (e *env) ask(args string) *approval.Approval {
	e.t.Helper()
	a, created, err := e.approvals.Begin(context.Background(), approval.Request{
		Asker: approval.Identity{Subject: "ed", Tenant: "acme", Role: "editor"}, Tool: "delete_note",
		Arguments: []byte(args), Message: "Delete the note?", Policy: approval.Policy{MinRole: "admin"},
	})
	if err != nil || !created {
		e.t.Fatalf("Begin: %v created=%v", err, created)
	}
	return a
}

func (e *env) state(id string) approval.State {
	e.t.Helper()
	a, err := e.approvals.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return a.State
}

// browser is a cookie-keeping HTTP client, like a browser without
// JavaScript.
type browser struct {
	t *testing.T
	c *http.Client
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, c: &http.Client{Jar: jar, Timeout: 10 * time.Second}}
}

// tlsBrowser is a browser that trusts e's HTTPS server.
func (e *env) tlsBrowser() *browser {
	jar, _ := cookiejar.New(nil)
	c := e.srv.Client()
	c.Jar, c.Timeout = jar, 10*time.Second
	return &browser{t: e.t.(*testing.T), c: c}
}

// noRedirects makes b stop at the first redirect.
func (b *browser) noRedirects() *browser {
	c := *b.c
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{t: b.t, c: &c}
}

func (b *browser) do(req *http.Request) (int, string) {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (b *browser) get(u string) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	return b.do(req)
}

// post sends a form as a same-origin browser would.
func (b *browser) post(u string, form url.Values, hdr map[string]string) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	pu, _ := url.Parse(u)
	req.Header.Set("Origin", pu.Scheme+"://"+pu.Host)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return b.do(req)
}

// open signs in as who and opens approval a's page.
func (e *env) open(b *browser, who map[string]any, a *approval.Approval) (int, string) {
	e.t.Helper()
	e.idp.SignInAs(who)
	return b.get(e.srv.URL + "/approvals/" + a.ID)
}

// openInbox signs in as who and opens the inbox.
func (e *env) openInbox(b *browser, who map[string]any) (int, string) {
	e.t.Helper()
	e.idp.SignInAs(who)
	return b.get(e.srv.URL + "/approvals/")
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no form on the page:\n%s", body)
	}
	return m[1]
}

func decision(d, token string) url.Values { return url.Values{"decision": {d}, "csrf": {token}} }

func mustContain(t *testing.T, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Fatalf("page lacks %q:\n%s", w, body)
		}
	}
}

func otherSigner(t *testing.T) *sign.Signer {
	s, err := sign.NewSigner("approval-page-cookie", []byte("another key of at least 32 bytes!!"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
