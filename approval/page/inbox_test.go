package page

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/internal/oidctest"
	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// askAs makes a pending approval of delete_note asked by asker under p.
func (e *env) askAs(asker approval.Identity, p approval.Policy, args string) *approval.Approval {
	e.t.Helper()
	a, created, err := e.approvals.Begin(context.Background(), approval.Request{Asker: asker, Tool: "delete_note",
		Arguments: []byte(args), Message: "Delete the note?", Policy: p})
	if err != nil || !created {
		e.t.Fatalf("Begin: %v created=%v", err, created)
	}
	return a
}

var rowRE = regexp.MustCompile(`id="row-([A-Za-z0-9_-]{22})"`)

// rows are the ids of the rows of an inbox page, in order.
func rows(body string) []string {
	var out []string
	for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// decideIn is the form of a row of the inbox.
func decideIn(id, d, token string) url.Values {
	return url.Values{"id": {id}, "decision": {d}, "csrf": {token}}
}

var (
	edAsks  = approval.Identity{Subject: "ed", Tenant: "acme", Role: "editor"}
	eveAsks = approval.Identity{Subject: "eve", Tenant: "globex", Role: "admin"}
)

// TestInboxShowsWhatWaits: the inbox of an admin of the workspace lists
// the calls waiting for them, newest first, each with its asker, tool,
// arguments, expiry, time left and buttons; a viewer, the asker and an
// admin of another workspace see "Nothing waits for you" and nothing of
// the calls.
func TestInboxShowsWhatWaits(t *testing.T) {
	e := newEnv(t, envOpt{})
	first := e.ask(`{"id":"n1"}`)
	time.Sleep(2 * time.Millisecond)
	second := e.ask(`{"id":"n2","path":"/srv/a very long path/` + strings.Repeat("x", 1000) + `"}`)
	code, body := e.openInbox(newBrowser(t), admin)
	if code != http.StatusOK {
		t.Fatalf("inbox: %d\n%s", code, body)
	}
	if got := rows(body); len(got) != 2 || got[0] != second.ID || got[1] != first.ID {
		t.Fatalf("rows %v, want the newest first\n%s", got, body)
	}
	mustContain(t, body, "Waiting for you", "2 calls wait", `class="asker">ed (workspace acme)`, `<h2 class="tool">delete_note</h2>`,
		`&#34;id&#34;: &#34;n1&#34;`, "Destructive: may delete or overwrite data", "Open world",
		first.Expires.UTC().Format("2006-01-02 15:04:05"), "expires in 1 min", `name="id" value="`+first.ID+`"`,
		`<button type="submit" name="decision" value="approve">`, `href="/approvals/`+first.ID+`"`,
		"… (cut, ", "Signed in as ada (workspace acme, role admin)")
	if strings.Contains(body, strings.Repeat("x", 1000)) || strings.Contains(body, "<script") {
		t.Fatal("a long argument is not cut in the row, or the page carries a script")
	}
	for name, who := range map[string]map[string]any{"viewer": viewer, "asker": editor, "another workspace's admin": other} {
		code, body := e.openInbox(newBrowser(t), who)
		if code != http.StatusOK || !strings.Contains(body, "Nothing waits for you") || len(rows(body)) != 0 ||
			strings.Contains(body, "delete_note") || strings.Contains(body, "n1") || strings.Contains(body, `name="decision"`) {
			t.Fatalf("%s: %d\n%s", name, code, body)
		}
	}
	// The asker under the four-eyes rule: another person of the workspace
	// sees it, the asker does not.
	own := e.askAs(edAsks, approval.Policy{}, `{"id":"own"}`)
	if _, body := e.openInbox(newBrowser(t), editor); len(rows(body)) != 0 {
		t.Fatalf("the asker sees their own call:\n%s", body)
	}
	if _, body := e.openInbox(newBrowser(t), viewer); len(rows(body)) != 1 || rows(body)[0] != own.ID {
		t.Fatalf("a viewer under four eyes:\n%s", body)
	}
}

// TestInboxDecide: a decision from a row decides that approval once, for
// the signed-in person; the inbox comes back without it, with a line
// saying what was done. The call runs once.
func TestInboxDecide(t *testing.T) {
	e := newEnv(t, envOpt{})
	a, other := e.ask(`{"id":"n1"}`), e.ask(`{"id":"n2"}`)
	b := newBrowser(t)
	_, body := e.openInbox(b, admin)
	code, body := b.post(e.srv.URL+"/approvals/", decideIn(a.ID, "approve", csrfOf(t, body)), nil)
	if code != http.StatusOK || !strings.Contains(body, "Approved: delete_note, asked by ed. The call may run once.") ||
		len(rows(body)) != 1 || rows(body)[0] != other.ID {
		t.Fatalf("approve: %d\n%s", code, body)
	}
	got, err := e.approvals.Get(t.Context(), a.ID)
	if err != nil || got.State != approval.Approved || got.DecidedBy.Subject != "ada" || e.state(other.ID) != approval.Pending {
		t.Fatalf("record: %+v %v", got, err)
	}
	if _, err := e.approvals.Consume(t.Context(), a.ID, edAsks, "delete_note", []byte(`{"id":"n1"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.approvals.Consume(t.Context(), a.ID, edAsks, "delete_note", []byte(`{"id":"n1"}`)); err == nil {
		t.Fatal("consumed twice")
	}
	code, body = b.post(e.srv.URL+"/approvals/", decideIn(other.ID, "decline", csrfOf(t, body)), nil)
	if code != http.StatusOK || !strings.Contains(body, "Declined: delete_note") || !strings.Contains(body, "Nothing waits for you") ||
		e.state(other.ID) != approval.Declined {
		t.Fatalf("decline: %d\n%s", code, body)
	}
}

// TestInboxAttacks: what an attacker sends to the inbox decides nothing
// it may not: another workspace's admin, a viewer and the asker posting
// a genuine form of their own inbox; a forged, replayed or cross-site
// POST; a session of one approval; a token of another session; an id
// that is in nobody's inbox or malformed; huge and doubled forms.
// Decisions that lost a race (decided or expired meanwhile) say so in a
// plain line of the inbox.
func TestInboxAttacks(t *testing.T) {
	e := newEnv(t, envOpt{})
	inboxURL := e.srv.URL + "/approvals/"
	a := e.ask(`{"id":"secret-a"}`)
	own := e.askAs(edAsks, approval.Policy{}, `{"id":"secret-own"}`)
	theirs := e.askAs(eveAsks, approval.Policy{}, `{"id":"secret-globex"}`)

	// signedIn is a browser signed in to the inbox as who, and the token
	// of its session (which an empty inbox has no form to carry).
	signedIn := func(who map[string]any) (*browser, string) {
		b := newBrowser(t)
		e.openInbox(b, who)
		return b, e.h.csrfToken(sessionOf(t, e, b))
	}
	// Refused by the policy: a line of the inbox, nothing of the call.
	for _, c := range []struct {
		name   string
		who    map[string]any
		target *approval.Approval
		reason string
	}{
		{"another workspace's admin", other, a, "another workspace"},
		{"a viewer", viewer, a, "role is too low"},
		{"the asker", editor, own, "You asked for this call yourself"},
		{"acme's admin, globex's call", admin, theirs, "another workspace"},
	} {
		b, token := signedIn(c.who)
		for _, d := range []string{"approve", "decline"} {
			code, body := b.post(inboxURL, decideIn(c.target.ID, d, token), nil)
			if code != http.StatusForbidden || !strings.Contains(body, "You may not decide that call") || !strings.Contains(body, c.reason) ||
				!strings.Contains(body, `id="notice"`) {
				t.Fatalf("%s %s: %d\n%s", c.name, d, code, body)
			}
			// Nothing of the call: not its id, not its arguments.
			if strings.Contains(body, c.target.ID) || strings.Contains(body, string(c.target.Arguments[7:len(c.target.Arguments)-2])) {
				t.Fatalf("%s is shown the call:\n%s", c.name, body)
			}
		}
	}
	for _, x := range []*approval.Approval{a, own, theirs} {
		if s := e.state(x.ID); s != approval.Pending {
			t.Fatalf("a refused person decided %s: %s", x.ID, s)
		}
	}

	b, token := signedIn(admin)
	_, tokenOther := signedIn(admin2)
	detail := newBrowser(t)
	_, body := e.open(detail, admin, a)
	detailToken := csrfOf(t, body)
	for _, c := range []struct {
		name string
		b    *browser
		form url.Values
		hdr  map[string]string
		code int
		want string
	}{
		{"no session", newBrowser(t), decideIn(a.ID, "approve", token), nil, http.StatusUnauthorized, "Not signed in"},
		{"a session of one approval", detail, decideIn(a.ID, "approve", detailToken), nil, http.StatusForbidden, "not for the inbox"},
		{"token of another session", b, decideIn(a.ID, "approve", tokenOther), nil, http.StatusForbidden, "Form expired"},
		{"token of a session of one approval", b, decideIn(a.ID, "approve", detailToken), nil, http.StatusForbidden, "Form expired"},
		{"forged token", b, decideIn(a.ID, "approve", strings.Repeat("0", 32)), nil, http.StatusForbidden, "Form expired"},
		{"cross-site", b, decideIn(a.ID, "approve", token), map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
			http.StatusForbidden, "Cross-site request refused"},
		{"null origin", b, decideIn(a.ID, "approve", token), map[string]string{"Sec-Fetch-Site": "", "Origin": "null"},
			http.StatusForbidden, "Cross-site request refused"},
		{"no id", b, decision("approve", token), nil, http.StatusBadRequest, "one approval"},
		{"two ids", b, url.Values{"id": {a.ID, own.ID}, "decision": {"approve"}, "csrf": {token}}, nil, http.StatusBadRequest, "one approval"},
		{"malformed id", b, decideIn("../"+a.ID, "approve", token), nil, http.StatusBadRequest, "names no approval"},
		{"two decisions", b, url.Values{"id": {a.ID}, "decision": {"decline", "approve"}, "csrf": {token}}, nil, http.StatusBadRequest, "one decision"},
		{"huge", b, url.Values{"id": {a.ID}, "decision": {"approve"}, "csrf": {token}, "pad": {strings.Repeat("x", MaxFormBytes)}}, nil,
			http.StatusBadRequest, "larger than"},
		{"json", b, decideIn(a.ID, "approve", token), map[string]string{"Content-Type": "application/json"}, http.StatusBadRequest, "x-www-form-urlencoded"},
	} {
		code, body := c.b.post(inboxURL, c.form, c.hdr)
		if code != c.code || !strings.Contains(body, c.want) || !strings.Contains(body, "Nothing was decided") {
			t.Errorf("%s: %d, want %d with %q\n%s", c.name, code, c.code, c.want, body)
		}
	}
	if e.state(a.ID) != approval.Pending {
		t.Fatal("an attack decided")
	}
	// An id that is in no inbox: a line saying so.
	code, body := b.post(inboxURL, decideIn(strings.Repeat("A", approval.IDLen), "approve", token), nil)
	if code != http.StatusNotFound || !strings.Contains(body, "That approval is not found") || !strings.Contains(body, `id="status"`) {
		t.Fatalf("unknown id: %d\n%s", code, body)
	}
	// Decided meanwhile by another admin, then the form replayed.
	if _, err := e.approvals.Decide(t.Context(), a.ID, approval.Identity{Subject: "bob", Tenant: "acme", Role: "admin"}, true); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		code, body = b.post(inboxURL, decideIn(a.ID, "decline", token), nil)
		if code != http.StatusConflict || !strings.Contains(body, "Someone decided delete_note, asked by ed, before you: Approved — the call may run once (by bob)") ||
			!strings.Contains(body, "Waiting for you") || e.state(a.ID) != approval.Approved {
			t.Fatalf("decided meanwhile: %d %s\n%s", code, e.state(a.ID), body)
		}
	}
	// Withdrawn meanwhile.
	if _, err := e.approvals.Withdraw(t.Context(), own.ID, edAsks); err != nil {
		t.Fatal(err)
	}
	if code, body = b.post(inboxURL, decideIn(own.ID, "approve", token), nil); code != http.StatusGone || !strings.Contains(body, "withdrew that call") {
		t.Fatalf("withdrawn meanwhile: %d\n%s", code, body)
	}
	// An inbox session decides on an approval's own page too.
	x := e.ask(`{"id":"x"}`)
	if code, body = b.post(x.URL, decision("decline", token), nil); code != http.StatusOK || e.state(x.ID) != approval.Declined {
		t.Fatalf("an inbox session on the approval's page: %d\n%s", code, body)
	}
}

// TestInboxExpiredMeanwhile: a decision sent after the approval expired
// is a plain line of the inbox, and decides nothing.
func TestInboxExpiredMeanwhile(t *testing.T) {
	e := newEnv(t, envOpt{ttl: 500 * time.Millisecond})
	a := e.ask(`{"id":"n1"}`)
	b := newBrowser(t)
	_, body := e.openInbox(b, admin)
	if len(rows(body)) != 1 {
		t.Fatalf("inbox:\n%s", body)
	}
	time.Sleep(time.Until(a.Expires) + 50*time.Millisecond)
	code, body := b.post(e.srv.URL+"/approvals/", decideIn(a.ID, "approve", csrfOf(t, body)), nil)
	if code != http.StatusGone || !strings.Contains(body, "expired before your decision") || !strings.Contains(body, "Nothing waits for you") ||
		e.state(a.ID) != approval.Expired {
		t.Fatalf("after the expiry: %d %s\n%s", code, e.state(a.ID), body)
	}
}

// TestInboxSessionIsNotAnApprovals: a session made for one approval does
// not open the inbox (it signs in again), and still cannot decide another
// approval; the inbox's session is no approval's.
func TestInboxSessionIsNotAnApprovals(t *testing.T) {
	e := newEnv(t, envOpt{})
	a, other := e.ask(`{"id":"n1"}`), e.ask(`{"id":"n2"}`)
	b := newBrowser(t)
	_, body := e.open(b, admin, a)
	token := csrfOf(t, body)
	if code, body := b.post(other.URL, decision("approve", token), nil); code != http.StatusForbidden || !strings.Contains(body, "another approval") {
		t.Fatalf("a session of one approval on another: %d\n%s", code, body)
	}
	nb := b.noRedirects()
	resp, err := nb.c.Get(e.srv.URL + "/approvals/")
	if err != nil || resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), e.idp.Issuer()) {
		t.Fatalf("the inbox with a session of one approval: %v %v", err, resp)
	}
	resp.Body.Close()
	for _, s := range []sessionCookie{
		{Approval: a.ID, Inbox: true, Subject: "ada"}, // both
		{Subject: "ada"},                // neither
		{Approval: "x", Subject: "ada"}, // not an id
		{Inbox: true},                   // nobody
	} {
		if s.valid() {
			t.Errorf("%+v is a valid session", s)
		}
	}
	if e.state(a.ID) != approval.Pending || e.state(other.ID) != approval.Pending {
		t.Fatal("decided")
	}
}

// TestAttackInboxSignInMarks: anyone can start a sign-in to the inbox and
// answer its callback with a made-up code: nothing is written (the code
// is redeemed first). A person signed in by the provider makes marks,
// at most Config.MaxSignInsPerApproval within LoginTTL, then 429; another
// person is not affected.
func TestAttackInboxSignInMarks(t *testing.T) {
	st := &markCounter{Memory: session.NewMemory()}
	e := newEnv(t, envOpt{shared: st})
	start := func() (*browser, string) {
		b := newBrowser(t).noRedirects()
		resp, err := b.c.Get(e.srv.URL + "/approvals/")
		if err != nil || resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("start: %v %v", err, resp)
		}
		resp.Body.Close()
		to, _ := url.Parse(resp.Header.Get("Location"))
		return b, to.Query().Get("state")
	}
	for range 50 {
		b, state := start()
		code, body := b.get(e.srv.URL + "/approvals/callback?" + url.Values{"state": {state}, "code": {"made-up"}}.Encode())
		if code != http.StatusBadRequest || !strings.Contains(body, "could not be verified") {
			t.Fatalf("made-up code: %d\n%s", code, body)
		}
	}
	if n := st.count(); n != 0 {
		t.Fatalf("made-up codes wrote %d marks", n)
	}
	refused := 0
	for range defaultMaxSignIns + 3 {
		code, body := e.openInbox(newBrowser(t), admin)
		switch {
		case code == http.StatusOK && strings.Contains(body, "Nothing waits for you"):
		case code == http.StatusTooManyRequests && strings.Contains(body, "Too many sign-ins"):
			refused++
		default:
			t.Fatalf("%d\n%s", code, body)
		}
	}
	if refused != 3 || st.count() != defaultMaxSignIns {
		t.Fatalf("%d refused, %d marks", refused, st.count())
	}
	if code, _ := e.openInbox(newBrowser(t), admin2); code != http.StatusOK {
		t.Fatalf("another person: %d", code)
	}
}

// TestInboxBounded: past MaxInboxRows the inbox shows that many, newest
// first, and says more wait.
func TestInboxBounded(t *testing.T) {
	e := newEnv(t, envOpt{amod: func(c *approval.Config) { c.MaxPendingPerIdentity = MaxInboxRows + 5 }})
	var last *approval.Approval
	for i := range MaxInboxRows + 3 {
		last = e.ask(fmt.Sprintf(`{"id":"n%d"}`, i))
	}
	_, body := e.openInbox(newBrowser(t), admin)
	if got := rows(body); len(got) != MaxInboxRows || !strings.Contains(body, "More wait than the 100 shown") {
		t.Fatalf("%d rows:\n%.2000s", len(got), body)
	}
	if rows(body)[0] != last.ID {
		t.Fatal("not the newest first")
	}
}

// TestInboxReplicas: the inbox served by replica B lists the approvals
// replica A made, through Redis, and a decision from it reaches A.
func TestInboxReplicas(t *testing.T) {
	prefix := redistest.Prefix(t, redistest.Client(t))
	store := func() approval.Shared {
		st := redisstore.New(redistest.Client(t), redisstore.Options{Prefix: prefix})
		t.Cleanup(func() { st.Close() })
		return st
	}
	idp := oidctest.New(t)
	ra, rb := newEnv(t, envOpt{shared: store(), idp: idp}), newEnv(t, envOpt{shared: store(), idp: idp})
	a := ra.ask(`{"id":"n1"}`)
	b := newBrowser(t)
	_, body := rb.openInbox(b, admin)
	if got := rows(body); len(got) != 1 || got[0] != a.ID {
		t.Fatalf("replica B's inbox:\n%s", body)
	}
	if code, _ := b.post(rb.srv.URL+"/approvals/", decideIn(a.ID, "approve", csrfOf(t, body)), nil); code != http.StatusOK {
		t.Fatal(code)
	}
	if ra.state(a.ID) != approval.Approved {
		t.Fatal("replica A does not see the decision")
	}
}

// TestInboxSecureCookies: over HTTPS the inbox's sign-in sets the same
// cookies as an approval's (__Host-, Path=/, no Domain, HttpOnly, Secure,
// SameSite=Lax), and its decision goes through with them.
func TestInboxSecureCookies(t *testing.T) {
	e := newEnv(t, envOpt{tls: true})
	a := e.ask(`{"id":"n1"}`)
	b := e.tlsBrowser()
	var setCookies []string
	b.c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		setCookies = append(setCookies, req.Response.Header.Values("Set-Cookie")...)
		return nil
	}
	_, body := e.openInbox(b, admin)
	if len(setCookies) != 3 { // login cookie; login cookie deleted and session
		t.Fatalf("Set-Cookie: %q", setCookies)
	}
	for _, c := range setCookies {
		if !strings.HasPrefix(c, "__Host-mcphandler-approval") || !strings.Contains(c, "; Path=/;") || strings.Contains(c, "Domain") ||
			!strings.Contains(c, "; HttpOnly; Secure; SameSite=Lax") {
			t.Fatalf("cookie %q", c)
		}
	}
	if code, body := b.post(e.srv.URL+"/approvals/", decideIn(a.ID, "approve", csrfOf(t, body)), nil); code != http.StatusOK || e.state(a.ID) != approval.Approved {
		t.Fatalf("decision: %d\n%s", code, body)
	}
}

// downStore is a shared store whose records cannot be reached while down
// is set (Redis gone, a network cut): every Load, PutIfAbsent and
// CompareAndSwap fails with session.ErrUnavailable.
type downStore struct {
	*session.Memory
	down atomic.Bool
}

func (s *downStore) Load(ctx context.Context, key string) ([]byte, error) {
	if s.down.Load() {
		return nil, session.ErrUnavailable
	}
	return s.Memory.Load(ctx, key)
}

func (s *downStore) PutIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if s.down.Load() {
		return false, session.ErrUnavailable
	}
	return s.Memory.PutIfAbsent(ctx, key, value, ttl)
}

func (s *downStore) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if s.down.Load() {
		return false, session.ErrUnavailable
	}
	return s.Memory.CompareAndSwap(ctx, key, old, new, ttl)
}

// TestInboxStoreDown: while the store cannot be reached, the inbox of a
// signed-in admin answers 503 with a plain page, listing nothing, and a
// decision posted from it decides nothing; once the store is back, the
// same form decides, once.
func TestInboxStoreDown(t *testing.T) {
	st := &downStore{Memory: session.NewMemory()}
	e := newEnv(t, envOpt{shared: st})
	a := e.ask(`{"id":"n1"}`)
	b := newBrowser(t)
	_, body := e.openInbox(b, admin)
	csrf := csrfOf(t, body)
	st.down.Store(true)
	code, body := b.get(e.srv.URL + "/approvals/")
	if code != http.StatusServiceUnavailable || len(rows(body)) != 0 || strings.Contains(body, "n1") {
		t.Fatalf("inbox with the store down: %d\n%s", code, body)
	}
	code, body = b.post(e.srv.URL+"/approvals/", decideIn(a.ID, "approve", csrf), nil)
	if code != http.StatusServiceUnavailable || strings.Contains(body, "Approved:") {
		t.Fatalf("decision with the store down: %d\n%s", code, body)
	}
	st.down.Store(false)
	if e.state(a.ID) != approval.Pending {
		t.Fatal("decided while the store was down")
	}
	code, body = b.post(e.srv.URL+"/approvals/", decideIn(a.ID, "approve", csrf), nil)
	if code != http.StatusOK || !strings.Contains(body, "Approved: delete_note") || e.state(a.ID) != approval.Approved {
		t.Fatalf("decision once the store is back: %d\n%s", code, body)
	}
}
