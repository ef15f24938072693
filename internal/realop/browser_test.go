package realop_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/mcphandler/mcphandler/auth"
	"github.com/mcphandler/mcphandler/internal/realop"
)

// TestBrowserLogin: a headless Chromium follows the authorization URL to
// the provider's login page; Login fills it, first with a wrong password
// (refused, the form is shown again), then with the right one, and the
// browser reaches the client's redirect URI with a code that the client
// exchanges for tokens.
func TestBrowserLogin(t *testing.T) {
	codes := make(chan url.Values, 1)
	client := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cb" {
			http.NotFound(w, r)
			return
		}
		select {
		case codes <- r.URL.Query():
		default:
		}
		w.Write([]byte("signed in"))
	}))
	t.Cleanup(client.Close)
	c := webClient(client.URL + "/cb")
	p := realop.Start(t, realop.Config{Users: []realop.User{alice}, Clients: []realop.Client{c}})
	r := newRP(t, p, c, oidc.ScopeOpenID)
	g := r.start(oauth2.SetAuthURLParam("resource", resource))

	ctx := newBrowser(t)
	nav, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := chromedp.Do(nav, chromedp.Navigate(g.url)); err != nil {
		t.Fatal(err)
	}
	if err := p.Login(ctx, "alice", "not-her-password"); err == nil || !strings.Contains(err.Error(), "username or password wrong") {
		t.Fatalf("Login with a wrong password: %v", err)
	}
	if err := p.Login(ctx, "alice", "alice-password"); err != nil {
		t.Fatal(err)
	}

	var q url.Values
	select {
	case q = <-codes:
	case <-time.After(10 * time.Second):
		t.Fatal("the browser did not reach the redirect URI")
	}
	if q.Get("state") != g.state || q.Get("code") == "" {
		t.Fatalf("redirect query %v", q)
	}
	tok := r.exchange(t, g, q.Get("code"))
	raw, _ := tok.Extra("id_token").(string)
	idt, err := r.provider.Verifier(&oidc.Config{ClientID: c.ID}).Verify(t.Context(), raw)
	if err != nil || idt.Subject != alice.ID || idt.Nonce != g.nonce {
		t.Fatalf("ID token %+v: %v", idt, err)
	}
	o, err := auth.NewOIDC(t.Context(), auth.OIDCConfig{Issuer: p.Issuer(), Audience: resource,
		Claims: auth.ClaimsMapping{Roles: []string{"viewer", "admin"}}.Map})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := o.Authenticate(bearer(t, tok.AccessToken)); err != nil || id.Tenant != "acme" || id.Role != "admin" {
		t.Errorf("access token: %+v, %v", id, err)
	}
}

// newBrowser starts a headless Chromium with a fresh profile, closed when
// the test ends, and returns the context of its first tab: $CHROMIUM, else
// chromium, chromium-browser or google-chrome on PATH. Without one the
// test fails when CI is set (CI installs Debian's chromium), and is
// skipped otherwise. (The root module's internal/chromiumtest does the
// same; this module may not import it.)
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("CHROMIUM")
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path == "" {
			path, _ = exec.LookPath(name)
		}
	}
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no Chromium found (set CHROMIUM, or apt-get install chromium): the browser tests must run in CI")
		}
		t.Skip("no Chromium found (set CHROMIUM, or apt-get install chromium)")
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}
