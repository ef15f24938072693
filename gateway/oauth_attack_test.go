package gateway_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway"
)

// get sends a GET of u in b, without following redirects, and returns
// its status, Location and body.
func (b *browser) get(u string) (int, string, string) {
	c := *b.c
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(u)
	if err != nil {
		b.t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	loc := ""
	if l, err := resp.Location(); err == nil {
		loc = l.String() // resolved against u
	}
	return resp.StatusCode, loc, sb.String()
}

// The page refuses what a person did not start, or someone else did:
// forged, cut, expired and other people's links, a callback of another
// browser, of another person signed in since, replayed, or malformed,
// and a revocation from another site or without the form's token; none
// of it keeps a token for anyone.
func TestAuthPageAttacks(t *testing.T) {
	rig := newOAuthRig(t, 1, false)
	ctx := context.Background()
	alice := rig.client(t, "alice", false, nil)
	link := mustLink(t, alice)
	base := rig.public.URL + "/upstream-auth/"
	_, l, _ := strings.Cut(link, "?l=")

	for name, u := range map[string]string{
		"forged":   base + "start?l=" + strings.Repeat("A", 200),
		"cut":      base + "start?l=" + l[:len(l)-2],
		"empty":    base + "start?l=",
		"twice":    base + "start?l=" + l + "&l=" + l,
		"huge":     base + "start?l=" + strings.Repeat("A", 5000),
		"tampered": base + "start?l=" + strings.Replace(l, l[10:11], string(l[10]^1), 1),
	} {
		if code, _, body := rig.browser(t).get(u); code != http.StatusBadRequest || !strings.Contains(body, "Link not valid") {
			t.Errorf("%s link: %d %s", name, code, body)
		}
	}
	// Expired: links live 30 minutes.
	gateway.SetClock(rig.replicas[0].gw, func() time.Time { return time.Now().Add(31 * time.Minute) })
	if code, _, _ := rig.browser(t).get(link); code != http.StatusBadRequest {
		t.Errorf("expired link: %d", code)
	}
	gateway.SetClock(rig.replicas[0].gw, time.Now)

	// A callback this browser did not start, and malformed ones.
	for name, q := range map[string]string{
		"no cookie":      "state=x&code=y",
		"no state":       "code=y",
		"repeated state": "state=x&state=x&code=y",
		"huge code":      "state=x&code=" + strings.Repeat("c", 5000),
	} {
		for _, path := range []string{"callback", "login/callback"} {
			if code, _, body := rig.browser(t).get(base + path + "?" + q); code != http.StatusBadRequest {
				t.Errorf("%s at %s: %d %s", name, path, code, body)
			}
		}
	}

	// alice starts an authorization; bob signs in in her browser before
	// the authorization server answers: the callback is refused.
	b := rig.browser(t)
	rig.login.SignInNext(people["alice"])
	code, loc, _ := b.get(link)
	for i := 0; (code == http.StatusSeeOther || code == http.StatusFound) && !strings.HasPrefix(loc, rig.as.Issuer()+"/authorize?") && i < 8; i++ {
		code, loc, _ = b.get(loc)
	}
	if !strings.Contains(loc, rig.as.Issuer()+"/authorize?") {
		t.Fatalf("alice's authorization did not reach the authorization server: %d %s", code, loc)
	}
	asURL, _ := url.Parse(loc)
	if got := asURL.Query().Get("resource"); got != rig.upURL || asURL.Query().Get("code_challenge_method") != "S256" {
		t.Fatalf("the authorization request: resource %q, %s", got, loc)
	}
	rig.as.SignInNext(people["alice"])
	_, cb, _ := b.get(loc) // the authorization server's redirect to the gateway's callback
	// bob's session, signed in elsewhere, lands in alice's browser.
	bobs := rig.browser(t)
	if code, _ := bobs.open(base, people["bob"], nil); code != http.StatusOK {
		t.Fatalf("bob's sign-in at the index: %d", code)
	}
	pub, _ := url.Parse(base)
	for _, ck := range bobs.c.Jar.Cookies(pub) {
		if ck.Name == "mcphandler-gateway" {
			b.c.Jar.SetCookies(pub, []*http.Cookie{{Name: ck.Name, Value: ck.Value, Path: "/upstream-auth/"}})
		}
	}
	if code, _, body := b.get(cb); code != http.StatusForbidden || !strings.Contains(body, "someone else") {
		t.Fatalf("alice's callback with bob signed in: %d %s", code, body)
	}
	// Another browser, with the callback's URL: not started there.
	if code, _, _ := rig.browser(t).get(cb); code != http.StatusBadRequest {
		t.Fatalf("the callback in another browser: %d", code)
	}
	if res, _ := alice.CallTool(ctx, "docs_whoami", map[string]any{}); !res.IsError || len(rig.ran()) != 0 {
		t.Fatalf("after the refused callbacks alice's call ran: %+v, %v", res, rig.ran())
	}

	// A completed authorization's callback, replayed: refused, nothing new.
	bob := rig.client(t, "bob", false, nil)
	hits := rig.as.TokenHits.Load()
	b2 := rig.browser(t)
	rig.login.SignInNext(people["bob"])
	rig.as.SignInNext(people["bob"])
	code, loc, _ = b2.get(mustLink(t, bob))
	for i := 0; (code == http.StatusSeeOther || code == http.StatusFound) && !strings.Contains(loc, "/upstream-auth/callback?") && i < 8; i++ {
		code, loc, _ = b2.get(loc)
	}
	if code, _, body := b2.get(loc); code != http.StatusOK {
		t.Fatalf("the second authorization: %d %s", code, body)
	}
	if code, _, _ := b2.get(loc); code == http.StatusOK {
		t.Fatal("a replayed callback was taken")
	}
	if n := rig.as.TokenHits.Load() - hits; n > 3 {
		t.Fatalf("%d token requests for one authorization and its replay", n)
	}

	// Revocation: from another site, or without the form's token.
	for name, mod := range map[string]func(*http.Request){
		"cross-site": func(r *http.Request) {
			r.Header.Set("Origin", "https://evil.test")
			r.Header.Set("Sec-Fetch-Site", "cross-site")
		},
		"no csrf": func(r *http.Request) { r.Body = http.NoBody; r.ContentLength = 0 },
	} {
		req, _ := http.NewRequest(http.MethodPost, base+"revoke", strings.NewReader(url.Values{"upstream": {"docs"}, "csrf": {"x"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", rig.public.URL)
		mod(req)
		resp, err := b2.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("%s revocation: %d", name, resp.StatusCode)
		}
	}
	if res, err := bob.CallTool(ctx, "docs_whoami", map[string]any{}); err != nil || res.IsError || resultText(res) != "whoami ran as acme/bob" {
		t.Fatalf("bob's call after the refused revocations: %+v, %v", res, err)
	}
}

// One person's sign-ins and authorizations are bounded: each uses up a
// mark for LoginTTL, and past 20 held at once the page answers 429 and
// keeps nothing; another person is not affected.
func TestAuthPageMarksPerPerson(t *testing.T) {
	rig := newOAuthRig(t, 1, false)
	gw := rig.replicas[0].gw
	link := func(sub string) string {
		return gateway.AuthLink(gw, mcphandler.Identity{Tenant: "acme", Subject: sub}, "docs")
	}
	b := rig.browser(t)
	if code, page := b.open(link("bob"), people["bob"], people["bob"]); code != http.StatusOK { // a sign-in and an authorization: 2
		t.Fatalf("bob's first authorization: %d %s", code, page)
	}
	for i := 3; i <= 20; i++ {
		if code, page := b.open(link("bob"), nil, people["bob"]); code != http.StatusOK {
			t.Fatalf("bob's authorization %d: %d %s", i, code, page)
		}
	}
	hits := rig.as.TokenHits.Load()
	code, page := b.open(link("bob"), nil, people["bob"])
	if code != http.StatusTooManyRequests || !strings.Contains(page, "Too many") {
		t.Fatalf("bob's 21st mark: %d %s", code, page)
	}
	if rig.as.TokenHits.Load() != hits+1 {
		t.Fatalf("token requests: %d more", rig.as.TokenHits.Load()-hits)
	}
	if code, _ := rig.browser(t).open(link("alice"), people["alice"], people["alice"]); code != http.StatusOK {
		t.Fatalf("alice's authorization while bob is at his bound: %d", code)
	}
}
