package mcphandler_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mcphandler/mcphandler/approval/page"
	"github.com/mcphandler/mcphandler/internal/chromiumtest"
	"github.com/mcphandler/mcphandler/internal/oidctest"
	"github.com/mcphandler/mcphandler/mcptest"
)

// headless starts a headless Chromium for one test (see chromiumtest).
func headless(t *testing.T) context.Context {
	return chromiumtest.New(t, chromedp.WindowSize(900, 700))
}

// TestApprovePageEndToEnd: a 2025-11-25 client waits on replica A; a
// person signs in at the provider in a real browser, on the page served
// by replica B, sees the call and approves it; A runs the call once and
// the client gets the result. With MCPH_SCREENSHOTS set to a directory,
// the page is saved there as PNGs (the README's screenshots).
func TestApprovePageEndToEnd(t *testing.T) {
	browser := headless(t)
	idp := oidctest.New(t)
	var ph atomic.Pointer[page.Handler]
	pageSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ph.Load().ServeHTTP(w, r) }))
	t.Cleanup(pageSrv.Close)
	rig := newApprovalRigAt(t, 2, 20*time.Second, pageSrv.URL+"/approvals/")
	idp.AddRedirect(pageSrv.URL + "/approvals/callback")
	h, err := page.New(context.Background(), page.Config{Approvals: rig.stores[1], Store: rig.cl.replicas[1].store,
		Issuer: idp.Issuer(), ClientID: idp.ClientID, ClientSecret: idp.ClientSecret, RedirectURL: pageSrv.URL + "/approvals/callback",
		Keys: [][]byte{[]byte("0123456789abcdef0123456789abcdef")}, HTTPClient: idp.Client(), InsecureCookies: true,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ph.Store(h)
	idp.SignInAs(map[string]any{"sub": "bob", "tenant": "acme", "role": "admin"})

	decided := make(chan string, 1)
	c := mcptest.Dial(rig.cl.replicas[0].srv.URL, mcptest.WithToken("acme-viewer"), mcptest.WithCapabilities(urlCaps),
		mcptest.WithElicitationHandler(func(_ context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			go func() { decided <- approveInBrowser(t, browser, p.URL) }()
			return mcptest.ElicitResult{Action: "accept"}, nil
		}))
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.CallTool(ctx, "delete_thing", map[string]any{"id": "note-42"})
	if err != nil || res.IsError || res.Text() != "delete_thing ran for acme" {
		t.Fatalf("call: %+v, %v", res, err)
	}
	if status := <-decided; status != "Approved" {
		t.Fatalf("the page said %q", status)
	}
	if n := rig.f.count("delete_thing"); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
}

// approveInBrowser opens u (signing in at the provider on the way),
// checks that the page shows the caller, the tool and the argument, and
// approves; it returns the status heading of the page after the decision.
func approveInBrowser(t *testing.T, browser context.Context, u string) string {
	ctx, cancel := context.WithTimeout(browser, 30*time.Second)
	defer cancel()
	approve := chromedp.CSS(`button[name="decision"][value="approve"]`)
	err := chromedp.Do(ctx, chromedp.Navigate(u), chromedp.WaitVisible(approve))
	var before, after string
	if err == nil {
		before, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	}
	if err == nil {
		screenshot(ctx, "approval-page.png")
		_, err = chromedp.RunResponse(ctx, chromedp.Click(approve))
	}
	if err == nil {
		err = chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("#status")))
	}
	if err == nil {
		after, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#status")))
	}
	if err != nil {
		t.Errorf("browser: %v", err)
		return ""
	}
	screenshot(ctx, "approval-approved.png")
	for _, want := range []string{"alice", "acme", "delete_thing", `"note-42"`} {
		if !strings.Contains(before, want) {
			t.Errorf("the page does not show %s:\n%s", want, before)
		}
	}
	return strings.TrimSpace(after)
}

// screenshot saves the page to $MCPH_SCREENSHOTS/name, if set.
func screenshot(ctx context.Context, name string) {
	dir := os.Getenv("MCPH_SCREENSHOTS")
	if dir == "" {
		return
	}
	if png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
		os.WriteFile(filepath.Join(dir, name), png, 0o644)
	}
}
