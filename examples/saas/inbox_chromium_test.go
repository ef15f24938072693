package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/mcphandler/mcphandler/internal/chromiumtest"
	"github.com/mcphandler/mcphandler/mcptest"
)

// TestInboxInChromium: the server as run with -approvals, a real browser
// and a real MCP call. An editor's delete_note waits for an approval; a
// viewer of the workspace, the editor who asked and an admin of another
// workspace each sign in to /approvals/ and find nothing to decide; an
// admin of the workspace finds the call there, with its arguments,
// approves it from the list, and the waiting call deletes the note, once.
func TestInboxInChromium(t *testing.T) {
	browser := chromiumtest.New(t)
	env := startApprovals(t, options{approvalTTL: time.Minute})
	p, srv, audience := env.p, env.srv, env.audience
	token := env.token(map[string]any{"sub": "ed", "org_id": "acme"})
	asked := make(chan string, 1)
	c := mcptest.Dial(audience, mcptest.WithToken(token), mcptest.WithCapabilities(json.RawMessage(`{"elicitation":{"url":{}}}`)),
		mcptest.WithElicitationHandler(func(_ context.Context, e mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			asked <- e.URL // the person opens nothing: others decide in their inbox
			return mcptest.ElicitResult{Action: "accept"}, nil
		}))
	t.Cleanup(c.Close)
	ctx := t.Context()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"keep me", "delete me"} {
		if res, err := c.CallTool(ctx, "add_note", map[string]any{"text": text}); err != nil || res.IsError {
			t.Fatalf("add_note: %v %v", res, err)
		}
	}
	type result struct {
		res *mcptest.ToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := c.CallTool(ctx, "delete_note", map[string]any{"id": "2"})
		done <- result{res, err}
	}()
	var id string
	select {
	case u := <-asked:
		id = u[strings.LastIndex(u, "/")+1:]
	case r := <-done:
		t.Fatalf("delete_note answered before anyone decided: %+v %v", r.res, r.err)
	case <-time.After(20 * time.Second):
		t.Fatal("delete_note asked for no approval")
	}

	inbox := srv.URL + "/approvals/"
	show := func(who map[string]any) (status, text string, rows int) {
		t.Helper()
		if err := chromedp.Do(step(t, browser), clearCookies); err != nil {
			t.Fatal(err)
		}
		p.SignInAs(who)
		if err := chromedp.Do(step(t, browser), chromedp.Navigate(inbox)); err != nil {
			t.Fatal(err)
		}
		return shown(t, browser)
	}
	for name, who := range map[string]map[string]any{
		"a viewer of the workspace":     {"sub": "val", "org_id": "acme", "role": "viewer"},
		"the editor who asked":          {"sub": "ed", "org_id": "acme", "role": "editor"},
		"an admin of another workspace": {"sub": "gus", "org_id": "globex", "role": "admin"},
	} {
		status, text, rows := show(who)
		if status != "Nothing waits for you" || rows != 0 || strings.Contains(text, "delete_note") || strings.Contains(text, "delete me") {
			t.Fatalf("%s: %q, %d rows\n%s", name, status, rows, text)
		}
	}
	select {
	case r := <-done:
		t.Fatalf("delete_note answered though nobody decided: %+v %v", r.res, r.err)
	default:
	}

	status, text, rows := show(map[string]any{"sub": "ada", "org_id": "acme", "role": "admin"})
	if status != "Waiting for you" || rows != 1 || !strings.Contains(text, "ed (workspace acme)") || !strings.Contains(text, "delete_note") ||
		!strings.Contains(text, `"id": "2"`) || !strings.Contains(text, "Destructive") {
		t.Fatalf("the admin's inbox: %q, %d rows\n%s", status, rows, text)
	}
	sel := chromedp.CSS(fmt.Sprintf(`#row-%s button[name="decision"][value="approve"]`, id))
	if _, err := chromedp.RunResponse(step(t, browser), chromedp.Click(sel)); err != nil {
		t.Fatalf("approve from the inbox: %v", err)
	}
	if status, text, rows := shown(t, browser); status != "Nothing waits for you" || rows != 0 || !strings.Contains(text, "Approved") {
		t.Fatalf("after the approval: %q, %d rows\n%s", status, rows, text)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the approved call did not run")
	}
	if r.err != nil || r.res.IsError || !strings.Contains(r.res.Text(), "delete me") {
		t.Fatalf("delete_note: %+v %v", r.res, r.err)
	}
	// Once: the note is gone, the other is still there, and the approval
	// runs nothing more (the same call again asks anew).
	res, err := c.CallTool(ctx, "list_notes", nil)
	if err != nil || strings.Contains(res.Text(), "delete me") || !strings.Contains(res.Text(), "keep me") {
		t.Fatalf("notes after the delete: %+v %v", res, err)
	}
}

// clearCookies makes the browser forget every cookie: the next person
// signs in afresh.
func clearCookies(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
	_, err := cdp.Call(ctx, t, network.ClearBrowserCookies, cdp.Empty{})
	return chromedp.Void{}, err
}

// step bounds one browser action.
func step(t *testing.T, ctx context.Context) context.Context {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// shown returns the page's status heading, its text and its inbox rows.
func shown(t *testing.T, ctx context.Context) (status, text string, rows int) {
	t.Helper()
	ctx = step(t, ctx)
	if err := chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS("#status"))); err != nil {
		t.Fatalf("no status on the page: %v", err)
	}
	status, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#status")))
	if err == nil {
		text, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	}
	if err == nil {
		rows, err = chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('section.row').length`))
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(status), text, rows
}
