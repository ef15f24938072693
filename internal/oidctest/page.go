package oidctest

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// csrfRE finds the CSRF token of the approval page's form.
var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// Decide opens the approval page at pageURL (package approval/page) in a
// browser of its own that keeps cookies, signing in at p as who on the
// way (see SignInAs, which it calls: do not run two at once), and, if the
// page offers its form, posts decision ("approve" or "decline"; "" posts
// nothing) from the page's origin. It returns the page shown last; a
// request that fails is an error of t.
func (p *Provider) Decide(t testing.TB, who map[string]any, pageURL, decision string) string {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Transport: p.Client().Transport, Timeout: 10 * time.Second}
	p.SignInAs(who)
	body := func(resp *http.Response, err error) string {
		if err != nil {
			t.Errorf("approval page: %v", err)
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	page := body(c.Get(pageURL))
	m := csrfRE.FindStringSubmatch(page)
	if m == nil || decision == "" {
		return page
	}
	req, _ := http.NewRequest(http.MethodPost, pageURL, strings.NewReader(url.Values{"decision": {decision}, "csrf": {m[1]}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	u, _ := url.Parse(pageURL)
	req.Header.Set("Origin", u.Scheme+"://"+u.Host)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return body(c.Do(req))
}
