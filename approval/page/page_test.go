package page

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/internal/oidctest"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

func TestApprove(t *testing.T) {
	e := newEnv(t, envOpt{})
	a := e.ask(`{"id":"n1","note":"bidi \u202e here","deep":{"b":[1,2.50,1e3],"a":null}}`)
	b := newBrowser(t)
	code, body := e.open(b, admin, a)
	if code != http.StatusOK {
		t.Fatalf("page: %d\n%s", code, body)
	}
	mustContain(t, body, "Approve this call?", `id="asker">ed (workspace acme)`, `id="tool">delete_note`,
		`<button type="submit" name="decision" value="approve">`, `<button type="submit" name="decision" value="decline">`,
		// Every argument, canonical, nothing invisible.
		`>id</dt>`, `&#34;n1&#34;`, `>deep</dt>`, "{\n  &#34;a&#34;: null,\n  &#34;b&#34;: [\n    1,\n    2.5,\n    1000\n  ]\n}", `\u202e`,
		a.Expires.UTC().Format("2006-01-02 15:04:05"), "Signed in as ada (workspace acme, role admin)")
	if strings.Contains(body, "\u202e") || strings.Contains(body, "<script") {
		t.Fatal("the page carries an invisible character or a script")
	}
	code, body = b.post(a.URL, decision("approve", csrfOf(t, body)), nil)
	if code != http.StatusOK {
		t.Fatalf("decision: %d\n%s", code, body)
	}
	mustContain(t, body, "Approved")
	if got, _ := e.approvals.Get(t.Context(), a.ID); got.State != approval.Approved || got.DecidedBy.Subject != "ada" {
		t.Fatalf("record: %+v", got)
	}
}

func TestDecline(t *testing.T) {
	e := newEnv(t, envOpt{})
	a := e.ask(`{"id":"n1"}`)
	b := newBrowser(t)
	_, body := e.open(b, admin, a)
	code, body := b.post(a.URL, decision("decline", csrfOf(t, body)), nil)
	if code != http.StatusOK || !strings.Contains(body, "Declined") || e.state(a.ID) != approval.Declined {
		t.Fatalf("decline: %d %s\n%s", code, e.state(a.ID), body)
	}
}

// TestNotAllowed: the caller themselves, another workspace and a role too
// low see "Not allowed" and no form; a POST they forge with a valid token
// of their own session decides nothing.
func TestNotAllowed(t *testing.T) {
	e := newEnv(t, envOpt{})
	for name, who := range map[string]map[string]any{"self": editor, "other workspace": other, "role too low": viewer} {
		t.Run(name, func(t *testing.T) {
			a := e.ask(`{"id":"` + name + `"}`)
			b := newBrowser(t)
			code, body := e.open(b, who, a)
			if code != http.StatusForbidden || strings.Contains(body, `name="decision"`) {
				t.Fatalf("page: %d\n%s", code, body)
			}
			mustContain(t, body, "Not allowed", "Nothing was decided")
			if strings.Contains(body, "delete_note") || strings.Contains(body, "arg-value") {
				t.Fatalf("a refused approver is shown the call:\n%s", body)
			}
			sess := sessionOf(t, e, b)
			for _, d := range []string{"approve", "decline"} {
				code, body = b.post(a.URL, decision(d, e.h.csrfToken(sess)), nil)
				if code != http.StatusForbidden || !strings.Contains(body, "Not allowed") {
					t.Fatalf("%s: %d\n%s", d, code, body)
				}
			}
			if s := e.state(a.ID); s != approval.Pending {
				t.Fatalf("a refused approver decided: %s", s)
			}
		})
	}
}

// sessionOf reads the session cookie b holds for e.
func sessionOf(t *testing.T, e *env, b *browser) *sessionCookie {
	t.Helper()
	u, _ := url.Parse(e.srv.URL + "/approvals/")
	for _, c := range b.c.Jar.Cookies(u) {
		var s sessionCookie
		if c.Name == e.h.name && e.h.openCookie(e.h.name, c.Value, &s) {
			return &s
		}
	}
	t.Fatal("no session cookie")
	return nil
}

// TestSingleUse: once decided, a link shows "already decided" to anyone,
// and the decision POST replayed — same cookie, same token — changes
// nothing.
func TestSingleUse(t *testing.T) {
	e := newEnv(t, envOpt{})
	a := e.ask(`{"id":"n1"}`)
	b := newBrowser(t)
	_, body := e.open(b, admin, a)
	form := decision("decline", csrfOf(t, body))
	if code, _ := b.post(a.URL, form, nil); code != http.StatusOK {
		t.Fatal(code)
	}
	for range 2 {
		code, body := b.post(a.URL, form, nil)
		if code != http.StatusConflict || !strings.Contains(body, "already decided") {
			t.Fatalf("replay: %d\n%s", code, body)
		}
		code, body = b.post(a.URL, decision("approve", form.Get("csrf")), nil)
		if code != http.StatusConflict || e.state(a.ID) != approval.Declined {
			t.Fatalf("replay as approve: %d %s", code, e.state(a.ID))
		}
	}
	code, body := e.open(newBrowser(t), admin2, a)
	if code != http.StatusConflict || !strings.Contains(body, "already decided") || strings.Contains(body, `name="decision"`) {
		t.Fatalf("second approver: %d\n%s", code, body)
	}
	mustContain(t, body, "Declined — the call does not run", "ada")
	// Someone of another workspace learns nothing of the call.
	code, body = e.open(newBrowser(t), other, a)
	if code != http.StatusConflict || !strings.Contains(body, "already decided") || strings.Contains(body, "delete_note") || strings.Contains(body, "n1") {
		t.Fatalf("other workspace: %d\n%s", code, body)
	}
}

func TestExpired(t *testing.T) {
	e := newEnv(t, envOpt{ttl: 500 * time.Millisecond})
	a := e.ask(`{"id":"n1"}`)
	b := newBrowser(t)
	_, body := e.open(b, admin, a)
	token := csrfOf(t, body)
	time.Sleep(time.Until(a.Expires) + 50*time.Millisecond)
	code, body := b.post(a.URL, decision("approve", token), nil)
	if code != http.StatusGone || !strings.Contains(body, "Expired") || e.state(a.ID) != approval.Expired {
		t.Fatalf("post after expiry: %d %s\n%s", code, e.state(a.ID), body)
	}
	code, body = b.get(a.URL)
	if code != http.StatusGone || !strings.Contains(body, "Expired") {
		t.Fatalf("page after expiry: %d\n%s", code, body)
	}
}

// TestCrossSitePOST: a decision sent from another site is refused before
// anything else, even with the right cookie and token.
func TestCrossSitePOST(t *testing.T) {
	e := newEnv(t, envOpt{})
	a := e.ask(`{"id":"n1"}`)
	b := newBrowser(t)
	_, body := e.open(b, admin, a)
	token := csrfOf(t, body)
	for name, hdr := range map[string]map[string]string{
		"sec-fetch-site cross-site": {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
		"sec-fetch-site same-site":  {"Sec-Fetch-Site": "same-site", "Origin": "http://sub.127.0.0.1"},
		"origin only":               {"Sec-Fetch-Site": "", "Origin": "https://evil.example"},
		"null origin":               {"Sec-Fetch-Site": "", "Origin": "null"},
	} {
		code, body := b.post(a.URL, decision("approve", token), hdr)
		if code != http.StatusForbidden || !strings.Contains(body, "Cross-site request refused") {
			t.Fatalf("%s: %d\n%s", name, code, body)
		}
	}
	if s := e.state(a.ID); s != approval.Pending {
		t.Fatalf("a cross-site POST decided: %s", s)
	}
}

// TestBadForms: a POST without the session, with another approval's
// session, with a wrong, missing or doubled token or decision, too large
// or of another type decides nothing.
func TestBadForms(t *testing.T) {
	e := newEnv(t, envOpt{})
	a, other := e.ask(`{"id":"n1"}`), e.ask(`{"id":"n2"}`)
	b := newBrowser(t)
	_, body := e.open(b, admin, a)
	token := csrfOf(t, body)
	bo := newBrowser(t)
	_, bodyOther := e.open(bo, admin, other)
	tokenOther := csrfOf(t, bodyOther)
	cases := []struct {
		name string
		b    *browser
		form url.Values
		hdr  map[string]string
		code int
		want string
	}{
		{"no session", newBrowser(t), decision("approve", token), nil, http.StatusUnauthorized, "Not signed in"},
		{"cookie of another approval", bo, decision("approve", tokenOther), nil, http.StatusForbidden, "another approval"},
		{"token of another approval", b, decision("approve", tokenOther), nil, http.StatusForbidden, "Form expired"},
		{"wrong token", b, decision("approve", strings.Repeat("0", 32)), nil, http.StatusForbidden, "Form expired"},
		{"no token", b, url.Values{"decision": {"approve"}}, nil, http.StatusBadRequest, "one token"},
		{"two decisions", b, url.Values{"decision": {"decline", "approve"}, "csrf": {token}}, nil, http.StatusBadRequest, "one decision"},
		{"odd decision", b, decision("APPROVE", token), nil, http.StatusBadRequest, `&#34;approve&#34; or &#34;decline&#34;`},
		{"huge", b, url.Values{"decision": {"approve"}, "csrf": {token}, "pad": {strings.Repeat("x", MaxFormBytes)}}, nil, http.StatusBadRequest, "larger than"},
		{"json", b, decision("approve", token), map[string]string{"Content-Type": "application/json"}, http.StatusBadRequest, "x-www-form-urlencoded"},
		{"multipart", b, decision("approve", token), map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, http.StatusBadRequest, "x-www-form-urlencoded"},
	}
	for _, c := range cases {
		code, body := c.b.post(a.URL, c.form, c.hdr)
		if code != c.code || !strings.Contains(body, c.want) || !strings.Contains(body, "Nothing was decided") {
			t.Errorf("%s: %d, want %d with %q\n%s", c.name, code, c.code, c.want, body)
		}
	}
	// The token sent in the query instead of the body is not read.
	code, _ := b.post(a.URL+"?csrf="+token+"&decision=approve", url.Values{}, nil)
	if code != http.StatusBadRequest {
		t.Errorf("query form: %d", code)
	}
	if e.state(a.ID) != approval.Pending || e.state(other.ID) != approval.Pending {
		t.Fatal("a bad form decided")
	}
	// The right form still works afterwards.
	if code, body := b.post(a.URL, decision("approve", token), nil); code != http.StatusOK || !strings.Contains(body, "Approved") {
		t.Fatalf("good form: %d\n%s", code, body)
	}
}

// TestCallbackAttacks: a forged or replayed state, a forged or replayed
// code, an ID token for another audience or with another nonce: an error
// page, no session.
func TestCallbackAttacks(t *testing.T) {
	e := newEnv(t, envOpt{})
	a := e.ask(`{"id":"n1"}`)
	// start begins a sign-in as who and returns the callback URL the
	// provider redirects to, without following it.
	start := func(b *browser, who map[string]any) string {
		e.idp.SignInAs(who)
		nb := b.noRedirects()
		resp, err := nb.c.Get(a.URL)
		if err != nil || resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("start: %v %v", err, resp)
		}
		resp.Body.Close()
		resp, err = nb.c.Get(resp.Header.Get("Location"))
		if err != nil || resp.StatusCode != http.StatusFound {
			t.Fatalf("provider: %v %v", err, resp)
		}
		resp.Body.Close()
		return resp.Header.Get("Location")
	}
	refused := func(name string, b *browser, u string, want string) {
		t.Helper()
		code, body := b.noRedirects().get(u)
		if code < 400 || !strings.Contains(body, want) || !strings.Contains(body, "Nothing was decided") {
			t.Fatalf("%s: %d\n%s", name, code, body)
		}
		if _, ok := sessionCookieIn(e, b); ok {
			t.Fatalf("%s: a session was set", name)
		}
	}
	with := func(u, key, val string) string {
		pu, _ := url.Parse(u)
		q := pu.Query()
		q.Set(key, val)
		pu.RawQuery = q.Encode()
		return pu.String()
	}

	b := newBrowser(t)
	cb := start(b, admin)
	refused("forged state", b, with(cb, "state", "forged"), "not recognised")
	refused("no state", b, with(cb, "state", ""), "malformed")
	refused("long state", b, with(cb, "state", strings.Repeat("s", MaxStateBytes+1)), "malformed")
	refused("another browser", newBrowser(t), cb, "not recognised")
	refused("provider error", b, e.srv.URL+"/approvals/callback?error=access_denied&state=x", "did not sign you in")
	refused("forged code", b, with(cb, "code", "forged"), "could not be verified")
	// The state was used up by the forged code: the genuine code with it
	// is refused too.
	refused("replayed state", b, cb, "used before")

	b = newBrowser(t)
	cb = start(b, admin)
	if code, body := b.get(cb); code != http.StatusOK || !strings.Contains(body, "Approve this call?") {
		t.Fatalf("genuine callback: %d\n%s", code, body)
	}
	b2 := newBrowser(t)
	cb2 := start(b2, admin)
	refused("replayed code", b2, with(cb2, "code", e.idp.Codes()[1]), "could not be verified")

	for name, claims := range map[string]map[string]any{
		"other audience": {"sub": "ada", "tenant": "acme", "role": "admin", "aud": "someone-else"},
		"other issuer":   {"sub": "ada", "tenant": "acme", "role": "admin", "iss": "https://evil.example"},
		"other nonce":    {"sub": "ada", "tenant": "acme", "role": "admin", "nonce": "forged"},
		"expired token":  {"sub": "ada", "tenant": "acme", "role": "admin", "exp": time.Now().Add(-time.Hour).Unix()},
		"no subject":     {"sub": "", "tenant": "acme"},
	} {
		b := newBrowser(t)
		refused(name, b, start(b, claims), "could not be verified")
	}
	if e.state(a.ID) != approval.Pending {
		t.Fatal("decided")
	}
}

func sessionCookieIn(e *env, b *browser) (*sessionCookie, bool) {
	u, _ := url.Parse(e.srv.URL + "/approvals/")
	for _, c := range b.c.Jar.Cookies(u) {
		var s sessionCookie
		if c.Name == e.h.name && e.h.openCookie(e.h.name, c.Value, &s) {
			return &s, true
		}
	}
	return nil, false
}

// TestCookies: a forged, altered, oversized, expired or other-purpose
// cookie counts as no sign-in.
func TestCookies(t *testing.T) {
	e := newEnv(t, envOpt{})
	a := e.ask(`{"id":"n1"}`)
	b := newBrowser(t)
	_, body := e.open(b, admin, a)
	token := csrfOf(t, body)
	good, _ := sessionCookieIn(e, b)
	expired := *good
	expired.Exp = time.Now().Add(-time.Second).Unix()
	enc := e.h.encodeCookie(e.h.name, good)
	for name, value := range map[string]string{
		"garbage":       "garbage",
		"altered":       enc[:len(enc)-2] + "AA",
		"expired":       e.h.encodeCookie(e.h.name, &expired),
		"login cookie":  e.h.encodeCookie(e.h.name+"-login", good),
		"huge":          enc + strings.Repeat("A", MaxCookieBytes),
		"other keys":    (&Handler{mac: otherSigner(t)}).encodeCookie(e.h.name, good),
		"padded base64": enc + "=",
	} {
		req, _ := http.NewRequest(http.MethodPost, a.URL, strings.NewReader(decision("approve", token).Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: e.h.name, Value: value})
		code, body := newBrowser(t).do(req)
		if code != http.StatusUnauthorized || !strings.Contains(body, "Not signed in") {
			t.Fatalf("%s: %d\n%s", name, code, body)
		}
	}
	if e.state(a.ID) != approval.Pending {
		t.Fatal("decided")
	}
}

func TestRoutes(t *testing.T) {
	e := newEnv(t, envOpt{})
	a := e.ask(`{"id":"n1"}`)
	b := newBrowser(t)
	for path, code := range map[string]int{
		"/approvals/x":                          http.StatusNotFound,
		"/approvals/" + strings.Repeat("a", 22): http.StatusNotFound, // well formed, no such approval
		"/approvals/" + strings.Repeat("a", 23): http.StatusNotFound,
		"/approvals/" + a.ID[:21] + "%2F":       http.StatusNotFound,
		"/approvals/" + strings.Repeat("é", 11): http.StatusNotFound,
	} {
		if got, body := b.get(e.srv.URL + path); got != code || !strings.Contains(body, "Not found") {
			t.Errorf("%s: %d\n%s", path, got, body)
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, a.URL, nil)
	if code, _ := b.do(req); code != http.StatusMethodNotAllowed {
		t.Errorf("DELETE: %d", code)
	}
	resp, err := b.noRedirects().c.Get(a.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for k, v := range map[string]string{"Cache-Control": "no-store", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
		if resp.Header.Get(k) != v {
			t.Errorf("%s: %q", k, resp.Header.Get(k))
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q", csp)
	}
}

func TestNewRefuses(t *testing.T) {
	e := newEnv(t, envOpt{})
	base := e.h.cfg
	for name, mod := range map[string]func(*Config){
		"no approvals":      func(c *Config) { c.Approvals = nil },
		"no store":          func(c *Config) { c.Store = nil },
		"no issuer":         func(c *Config) { c.Issuer = "" },
		"no client":         func(c *Config) { c.ClientID = "" },
		"relative redirect": func(c *Config) { c.RedirectURL = "/approvals/callback" },
		"not callback":      func(c *Config) { c.RedirectURL = e.srv.URL + "/approvals/cb" },
		"short key":         func(c *Config) { c.Keys = [][]byte{[]byte("short")} },
		"no keys":           func(c *Config) { c.Keys = nil },
		"unreachable":       func(c *Config) { c.Issuer = "http://127.0.0.1:1" },
	} {
		cfg := base
		mod(&cfg)
		if _, err := New(t.Context(), cfg); err == nil {
			t.Errorf("%s: New accepted", name)
		}
	}
}

// TestStateOnceAcrossReplicas: a callback replayed on another replica is
// refused, since the mark of a used state lives in the shared store.
func TestStateOnceAcrossReplicas(t *testing.T) {
	prefix := redistest.Prefix(t, redistest.Client(t))
	shared := func() approval.Shared {
		st := redisstore.New(redistest.Client(t), redisstore.Options{Prefix: prefix})
		t.Cleanup(func() { st.Close() })
		return st
	}
	idp := oidctest.New(t)
	a, b := newEnv(t, envOpt{shared: shared(), idp: idp}), newEnv(t, envOpt{shared: shared(), idp: idp})
	ap := a.ask(`{"id":"n1"}`)
	br := newBrowser(t)
	idp.SignInAs(admin)
	nb := br.noRedirects()
	resp, err := nb.c.Get(ap.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = nb.c.Get(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cb, _ := url.Parse(resp.Header.Get("Location"))
	login := br.c.Jar.Cookies(cb) // the sign-in in progress, as the callback will receive it
	if code, body := nb.get(cb.String()); code != http.StatusSeeOther {
		t.Fatalf("callback on A: %d\n%s", code, body)
	}
	// The same callback, with the same cookies, on replica B.
	req, _ := http.NewRequest(http.MethodGet, b.srv.URL+"/approvals/callback?"+cb.RawQuery, nil)
	for _, c := range login {
		req.AddCookie(c)
	}
	if code, body := newBrowser(t).noRedirects().do(req); code != http.StatusBadRequest || !strings.Contains(body, "used before") {
		t.Fatalf("replay on B: %d\n%s", code, body)
	}
	if len(login) == 0 {
		t.Fatal("no login cookie")
	}
}

// TestSecureCookies: over HTTPS, without InsecureCookies, the cookies are
// __Host- cookies (Secure, Path=/, no Domain), HttpOnly and SameSite=Lax,
// and the whole flow works with them.
func TestSecureCookies(t *testing.T) {
	e := newEnv(t, envOpt{tls: true})
	a := e.ask(`{"id":"n1"}`)
	b := e.tlsBrowser()
	var setCookies []string
	b.c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		setCookies = append(setCookies, req.Response.Header.Values("Set-Cookie")...)
		return nil
	}
	_, body := e.open(b, admin, a)
	if len(setCookies) != 3 { // login cookie; login cookie deleted and session
		t.Fatalf("Set-Cookie: %q", setCookies)
	}
	for _, c := range setCookies {
		if !strings.HasPrefix(c, "__Host-mcphandler-approval") || !strings.Contains(c, "; Path=/;") || strings.Contains(c, "Domain") ||
			!strings.Contains(c, "; HttpOnly; Secure; SameSite=Lax") {
			t.Fatalf("cookie %q", c)
		}
	}
	if code, body := b.post(a.URL, decision("approve", csrfOf(t, body)), nil); code != http.StatusOK || !strings.Contains(body, "Approved") {
		t.Fatalf("decision: %d\n%s", code, body)
	}
}

// TestWithdrawn: once the caller cancelled the call, the page says so and
// a decision sent anyway decides nothing.
func TestWithdrawn(t *testing.T) {
	e := newEnv(t, envOpt{})
	a := e.ask(`{"id":"n1"}`)
	b := newBrowser(t)
	_, body := e.open(b, admin, a)
	token := csrfOf(t, body)
	if _, err := e.approvals.Withdraw(t.Context(), a.ID, approval.Identity{Subject: "ed", Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	code, body := b.post(a.URL, decision("approve", token), nil)
	if code != http.StatusGone || !strings.Contains(body, "Withdrawn") || e.state(a.ID) != approval.Withdrawn {
		t.Fatalf("post: %d %s\n%s", code, e.state(a.ID), body)
	}
	if code, body = b.get(a.URL); code != http.StatusGone || !strings.Contains(body, "The call was cancelled") {
		t.Fatalf("page: %d\n%s", code, body)
	}
}
