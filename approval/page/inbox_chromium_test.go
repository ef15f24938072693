package page

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/mcphandler/mcphandler/approval"
)

// rowsShown counts the rows of the inbox in the browser.
func rowsShown(t *testing.T, ctx context.Context) int {
	t.Helper()
	n, err := chromedp.Run(step(t, ctx), chromedp.Evaluate[int](`document.querySelectorAll('section.row').length`))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// clickIn presses the decision button value of the row of approval id,
// waits for the page it loads and returns its status and body text.
func clickIn(t *testing.T, ctx context.Context, id, value string) (status, text string) {
	t.Helper()
	sel := chromedp.CSS(fmt.Sprintf(`#row-%s button[name="decision"][value=%q]`, id, value))
	if _, err := chromedp.RunResponse(step(t, ctx), chromedp.Click(sel)); err != nil {
		t.Fatalf("click %s in %s: %v", value, id, err)
	}
	return page(t, ctx)
}

// noHorizontalScroll fails unless the page shown fits the viewport's
// width: nothing scrolls sideways.
func noHorizontalScroll(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	w, err := chromedp.Run(step(t, ctx), chromedp.Evaluate[[]int](
		`[document.documentElement.scrollWidth, document.documentElement.clientWidth, document.body.scrollWidth, window.innerWidth]`))
	if err != nil {
		t.Fatal(err)
	}
	if w[1] <= 0 || w[1] > 400 || w[0] > w[1] || w[2] > w[1] {
		t.Fatalf("%s scrolls sideways at a phone's width: scrollWidth %d, body %d, clientWidth %d, innerWidth %d", what, w[0], w[2], w[1], w[3])
	}
}

// clearCookies makes the browser forget every cookie.
func clearCookies(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
	_, err := cdp.Call(ctx, t, network.ClearBrowserCookies, cdp.Empty{})
	return chromedp.Void{}, err
}

// saveScreenshot writes a PNG of the page to $MCPH_SCREENSHOTS/name, if
// set (the README's screenshots): the viewport, or the whole page.
func saveScreenshot(t *testing.T, ctx context.Context, name string, whole bool) {
	dir := os.Getenv("MCPH_SCREENSHOTS")
	if dir == "" {
		return
	}
	shot := chromedp.CaptureScreenshot()
	if whole {
		shot = chromedp.FullScreenshot(100)
	}
	png, err := chromedp.Run(step(t, ctx), shot)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestChromiumInbox: in a real browser, an admin of the workspace signs in
// to the inbox, sees the two pending calls and approves one from its row:
// the call runs once. A viewer, the asker and another workspace's admin
// see nothing to decide.
func TestChromiumInbox(t *testing.T) {
	ctx := newChromium(t)
	e := newEnv(t, envOpt{})
	inboxURL := e.srv.URL + "/approvals/"
	first := e.ask(`{"id":"note-17","reason":"duplicate of note-12"}`)
	// A tool that says it destroys data but reaches nothing outside.
	second, _, err := e.approvals.Begin(t.Context(), approval.Request{
		Asker: approval.Identity{Subject: "carol", Tenant: "acme", Role: "editor"}, Tool: "archive_note", Message: "Archive the minutes?",
		Arguments:   []byte(`{"id":"note-21","path":"/shared/minutes/2026/board-meeting-notes-draft-final.md"}`),
		Policy:      approval.Policy{MinRole: "admin"},
		Annotations: &approval.Annotations{Destructive: new(true), OpenWorld: new(false), Idempotent: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(step(t, ctx), chromedp.EmulateViewport(800, 900)); err != nil {
		t.Fatal(err)
	}

	e.idp.SignInAs(admin)
	status, text := visit(t, ctx, inboxURL)
	if status != "Waiting for you" || rowsShown(t, ctx) != 2 || !strings.Contains(text, "ed (workspace acme)") ||
		!strings.Contains(text, "carol (workspace acme)") || !strings.Contains(text, `"note-17"`) || !strings.Contains(text, "expires in") ||
		!strings.Contains(text, "Destructive") || !strings.Contains(text, "Open world") || !strings.Contains(text, "Closed world") ||
		!strings.Contains(text, "Idempotent") {
		t.Fatalf("inbox: %q\n%s", status, text)
	}
	saveScreenshot(t, ctx, "approval-inbox.png", true)
	status, text = clickIn(t, ctx, first.ID, "approve")
	if status != "Waiting for you" || !strings.Contains(text, "Approved: delete_note, asked by ed. The call may run once.") || rowsShown(t, ctx) != 1 {
		t.Fatalf("after approve: %q\n%s", status, text)
	}
	asker := approval.Identity{Subject: "ed", Tenant: "acme"}
	if _, err := e.approvals.Consume(t.Context(), first.ID, asker, "delete_note", first.Arguments); err != nil {
		t.Fatal(err)
	}
	if _, err := e.approvals.Consume(t.Context(), first.ID, asker, "delete_note", first.Arguments); err == nil {
		t.Fatal("the call ran twice")
	}
	if e.state(second.ID) != approval.Pending {
		t.Fatal("the other call was decided")
	}

	for name, who := range map[string]map[string]any{"viewer": viewer, "asker": editor, "another workspace's admin": other} {
		// A fresh sign-in: the browser forgets the admin's session.
		if err := chromedp.Do(step(t, ctx), clearCookies); err != nil {
			t.Fatal(err)
		}
		e.idp.SignInAs(who)
		status, text := visit(t, ctx, inboxURL)
		if status != "Nothing waits for you" || rowsShown(t, ctx) != 0 || hasButtons(t, ctx) || strings.Contains(text, "note-21") {
			t.Fatalf("%s: %q\n%s", name, status, text)
		}
	}
	if e.state(second.ID) != approval.Pending {
		t.Fatal("decided")
	}
}

// TestChromiumPhone: at a phone's viewport (390×844) the inbox and an
// approval's page with a long argument scroll only downwards, and the
// buttons are large enough to touch.
func TestChromiumPhone(t *testing.T) {
	ctx := newChromium(t)
	e := newEnv(t, envOpt{})
	long := strings.Repeat("a-very-long-path-segment-without-spaces/", 40)
	a := e.ask(`{"id":"note-17","path":"/` + long + `","mode":"permanent","tags":["q3","finance","board"]}`)
	if err := chromedp.Do(step(t, ctx), chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	e.idp.SignInAs(admin)
	if status, _ := visit(t, ctx, e.srv.URL+"/approvals/"); status != "Waiting for you" {
		t.Fatal(status)
	}
	noHorizontalScroll(t, ctx, "the inbox")
	status, text := visit(t, ctx, a.URL)
	if status != "Approve this call?" || !strings.Contains(text, long) || !strings.Contains(text, "Waiting for a decision") {
		t.Fatalf("page: %q\n%s", status, text)
	}
	noHorizontalScroll(t, ctx, "the approval's page")
	h, err := chromedp.Run(step(t, ctx), chromedp.Evaluate[float64](
		`Math.min(...[...document.querySelectorAll('button[name="decision"]')].map(b => b.getBoundingClientRect().height))`))
	if err != nil || h < 44 {
		t.Fatalf("buttons %v px high (%v), want at least 44", h, err)
	}
	saveScreenshot(t, ctx, "approval-phone.png", false)
}
