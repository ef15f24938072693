package page

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/internal/chromiumtest"
	"github.com/mcphandler/mcphandler/internal/oidctest"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// newChromium starts a headless Chromium for one test (see chromiumtest).
func newChromium(t *testing.T, more ...chromedp.ExecAllocatorOption) context.Context {
	return chromiumtest.New(t, more...)
}

// step bounds one browser action.
func step(t *testing.T, ctx context.Context) context.Context {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// page returns the status heading and body text of the page shown.
func page(t *testing.T, ctx context.Context) (status, text string) {
	t.Helper()
	ctx = step(t, ctx)
	if err := chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS("#status"))); err != nil {
		t.Fatalf("no status on the page: %v", err)
	}
	status, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#status")))
	if err != nil {
		t.Fatal(err)
	}
	text, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(status), text
}

// visit navigates to u and returns the page's status heading and body
// text.
func visit(t *testing.T, ctx context.Context, u string) (status, text string) {
	t.Helper()
	if err := chromedp.Do(step(t, ctx), chromedp.Navigate(u)); err != nil {
		t.Fatalf("visit %s: %v", u, err)
	}
	return page(t, ctx)
}

// click presses the decision button value, waits for the page it loads
// and returns its status heading and body text.
func click(t *testing.T, ctx context.Context, value string) (status, text string) {
	t.Helper()
	sel := chromedp.CSS(fmt.Sprintf(`button[name="decision"][value=%q]`, value))
	if _, err := chromedp.RunResponse(step(t, ctx), chromedp.Click(sel)); err != nil {
		t.Fatalf("click %s: %v", value, err)
	}
	return page(t, ctx)
}

func hasButtons(t *testing.T, ctx context.Context) bool {
	t.Helper()
	n, err := chromedp.Run(step(t, ctx), chromedp.Evaluate[int](`document.querySelectorAll('button[name="decision"]').length`))
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// TestChromium drives a real browser through the page: sign-in at the
// provider, the approval shown, the decision, and every refusal.
func TestChromium(t *testing.T) {
	ctx := newChromium(t)
	e := newEnv(t, envOpt{})

	t.Run("approve decides once", func(t *testing.T) {
		a := e.ask(`{"id":"n1"}`)
		e.idp.SignInAs(admin)
		status, text := visit(t, ctx, a.URL)
		if status != "Approve this call?" || !strings.Contains(text, "ed (workspace acme)") || !strings.Contains(text, "delete_note") ||
			!strings.Contains(text, `"n1"`) || !strings.Contains(text, a.Expires.UTC().Format("2006-01-02 15:04:05")) {
			t.Fatalf("page: %q\n%s", status, text)
		}
		if status, _ = click(t, ctx, "approve"); status != "Approved" {
			t.Fatalf("after approve: %q", status)
		}
		got, err := e.approvals.Wait(t.Context(), a.ID)
		if err != nil || got.State != approval.Approved || got.DecidedBy.Subject != "ada" {
			t.Fatalf("record: %+v %v", got, err)
		}
		// Single use: the link shows "already decided", without buttons.
		status, text = visit(t, ctx, a.URL)
		if !strings.Contains(status, "already decided") || !strings.Contains(text, "Approved — the call may run once") || hasButtons(t, ctx) {
			t.Fatalf("revisit: %q\n%s", status, text)
		}
		// The call runs once.
		asker := approval.Identity{Subject: "ed", Tenant: "acme"}
		if _, err := e.approvals.Consume(t.Context(), a.ID, asker, "delete_note", []byte(`{"id":"n1"}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := e.approvals.Consume(t.Context(), a.ID, asker, "delete_note", []byte(`{"id":"n1"}`)); err == nil {
			t.Fatal("consumed twice")
		}
	})

	t.Run("decline", func(t *testing.T) {
		a := e.ask(`{"id":"n2"}`)
		e.idp.SignInAs(admin2)
		if status, _ := visit(t, ctx, a.URL); status != "Approve this call?" {
			t.Fatal(status)
		}
		if status, _ := click(t, ctx, "decline"); status != "Declined" || e.state(a.ID) != approval.Declined {
			t.Fatalf("after decline: %q %s", status, e.state(a.ID))
		}
	})

	for name, who := range map[string]map[string]any{"self-approval": editor, "other workspace": other, "role too low": viewer} {
		t.Run(name+" refused", func(t *testing.T) {
			a := e.ask(`{"id":"` + name + `"}`)
			e.idp.SignInAs(who)
			status, text := visit(t, ctx, a.URL)
			if status != "Not allowed" || hasButtons(t, ctx) || !strings.Contains(text, "Nothing was decided") {
				t.Fatalf("page: %q\n%s", status, text)
			}
			if e.state(a.ID) != approval.Pending {
				t.Fatal("decided")
			}
		})
	}

	t.Run("expiry", func(t *testing.T) {
		short := newEnv(t, envOpt{idp: e.idp, ttl: 1500 * time.Millisecond})
		a := short.ask(`{"id":"n3"}`)
		e.idp.SignInAs(admin)
		if status, _ := visit(t, ctx, a.URL); status != "Approve this call?" {
			t.Fatal(status)
		}
		time.Sleep(time.Until(a.Expires) + 100*time.Millisecond)
		if status, _ := click(t, ctx, "approve"); status != "Expired" || short.state(a.ID) != approval.Expired {
			t.Fatalf("after expiry: %q %s", status, short.state(a.ID))
		}
	})

	t.Run("cross-site POST refused", func(t *testing.T) {
		a := e.ask(`{"id":"n4"}`)
		e.idp.SignInAs(admin)
		if status, _ := visit(t, ctx, a.URL); status != "Approve this call?" {
			t.Fatal(status)
		}
		// Another site (localhost is another site than 127.0.0.1) serves
		// a form that posts the decision to the page.
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<h1 id="status">Win a prize</h1><form method="post" action="%s"><input type="hidden" name="csrf" value="guess"><button name="decision" value="approve">Claim</button></form>`, a.URL)
		}))
		defer evil.Close()
		visit(t, ctx, strings.Replace(evil.URL, "127.0.0.1", "localhost", 1))
		status, text := click(t, ctx, "approve")
		if status != "Cross-site request refused" || !strings.Contains(text, "Nothing was decided") || e.state(a.ID) != approval.Pending {
			t.Fatalf("cross-site: %q %s\n%s", status, e.state(a.ID), text)
		}
	})

	t.Run("forged state", func(t *testing.T) {
		a := e.ask(`{"id":"n5"}`)
		// A sign-in for the approval is in progress in this browser (the
		// provider has not signed anyone in yet); a callback arrives with
		// a genuine code of the provider and a state of the attacker's.
		e.idp.SignInAs(nil)
		if err := chromedp.Do(step(t, ctx), chromedp.Navigate(a.URL)); err != nil {
			t.Fatal(err)
		}
		status, text := visit(t, ctx, e.srv.URL+"/approvals/callback?state=forged&code="+e.idp.Codes()[0])
		if status != "Sign-in not recognised" || !strings.Contains(text, "Nothing was decided") {
			t.Fatalf("forged state: %q\n%s", status, text)
		}
		if e.state(a.ID) != approval.Pending {
			t.Fatal("decided")
		}
	})
}

// TestChromiumReplicas: the page served by replica B decides the approval
// a call waits for on replica A, through Redis.
func TestChromiumReplicas(t *testing.T) {
	ctx := newChromium(t)
	prefix := redistest.Prefix(t, redistest.Client(t))
	store := func() approval.Shared {
		st := redisstore.New(redistest.Client(t), redisstore.Options{Prefix: prefix})
		t.Cleanup(func() { st.Close() })
		return st
	}
	idp := oidctest.New(t)
	a, b := newEnv(t, envOpt{shared: store(), idp: idp}), newEnv(t, envOpt{shared: store(), idp: idp})
	ap := a.ask(`{"id":"n1"}`)
	waited := make(chan *approval.Approval, 1)
	go func() {
		w, err := a.approvals.Wait(ctx, ap.ID)
		if err != nil {
			t.Error(err)
		}
		waited <- w
	}()
	idp.SignInAs(admin)
	if status, _ := visit(t, ctx, b.srv.URL+"/approvals/"+ap.ID); status != "Approve this call?" {
		t.Fatal(status)
	}
	if status, _ := click(t, ctx, "approve"); status != "Approved" {
		t.Fatal(status)
	}
	select {
	case w := <-waited:
		if w == nil || w.State != approval.Approved || w.DecidedBy.Subject != "ada" {
			t.Fatalf("replica A got %+v", w)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("replica A's waiter did not see the decision")
	}
}

// TestChromiumTLS: over HTTPS with the production cookies (__Host-,
// Secure), a browser signs in and approves.
func TestChromiumTLS(t *testing.T) {
	// The test server's certificate is its own: the browser is told to
	// accept it (its profile is thrown away with the test).
	ctx := newChromium(t, chromedp.Flag("ignore-certificate-errors", true))
	e := newEnv(t, envOpt{tls: true})
	a := e.ask(`{"id":"n1"}`)
	e.idp.SignInAs(admin)
	if status, text := visit(t, ctx, a.URL); status != "Approve this call?" {
		t.Fatalf("page: %q\n%s", status, text)
	}
	if status, _ := click(t, ctx, "approve"); status != "Approved" || e.state(a.ID) != approval.Approved {
		t.Fatalf("after approve: %q %s", status, e.state(a.ID))
	}
}
