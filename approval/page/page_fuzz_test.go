package page

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler/approval"
)

// FuzzOpenCookie: no cookie value an attacker sends opens, except one
// this handler signed; none panics.
func FuzzOpenCookie(f *testing.F) {
	e := newEnv(f, envOpt{})
	good := e.h.encodeCookie(e.h.name, &sessionCookie{Approval: strings.Repeat("a", 22), Subject: "ada", Nonce: "n", Exp: 1 << 40})
	for _, s := range []string{"", "x", good, good + "A", good[:len(good)-1], "=" + good, strings.Repeat("A", MaxCookieBytes+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		var s sessionCookie
		// Strict base64: one encoding per value, so only good itself opens.
		if e.h.openCookie(e.h.name, v, &s) && v != good {
			t.Fatalf("a cookie the handler did not sign opened: %q", v)
		}
	})
}

// FuzzServeHTTP sends arbitrary requests — path, query, form, cookie,
// headers — to the page: none may panic, answer 5xx, or decide the
// pending approval (only a signed-in approver with a token can).
func FuzzServeHTTP(f *testing.F) {
	e := newEnv(f, envOpt{})
	a, _, err := e.approvals.Begin(context.Background(), approval.Request{
		Asker: approval.Identity{Subject: "ed", Tenant: "acme"}, Tool: "delete_note", Arguments: []byte(`{"id":"n1"}`)})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("GET", "/approvals/"+a.ID, "", "")
	f.Add("POST", "/approvals/"+a.ID, "decision=approve&csrf=x", "approval=x")
	f.Add("POST", "/approvals/"+a.ID, "decision=approve&decision=decline&csrf=%zz", "approval-login=AAAA")
	f.Add("GET", "/approvals/callback?state=a&code=b", "", "approval-login=x")
	f.Add("GET", "/approvals/callback?error=x&error_description=%00", "", "")
	f.Add("PUT", "/approvals/"+a.ID, strings.Repeat("a=b&", 2000), "")
	f.Add("GET", "/approvals/", "", "")
	f.Add("POST", "/approvals/", "id="+a.ID+"&decision=approve&csrf=x", "mcphandler-approval=x")
	f.Add("POST", "/approvals/x/", "id="+a.ID+"&id=x&decision=approve", "")
	f.Fuzz(func(t *testing.T, method, target, body, cookie string) {
		if !validMethod(method) {
			return
		}
		req, err := http.NewRequest(method, "http://page.test"+target, strings.NewReader(body))
		if err != nil || !strings.HasPrefix(req.URL.Path, "/approvals/") {
			return
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Cookie", cookie)
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %s: %d\n%s", method, target, w.Code, w.Body)
		}
		if got, err := e.approvals.Get(context.Background(), a.ID); err != nil || got.State != approval.Pending {
			t.Fatalf("decided by %s %s %q: %v %v", method, target, body, got, err)
		}
	})
}

func validMethod(m string) bool {
	if m == "" || len(m) > 16 {
		return false
	}
	for _, c := range m {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

// FuzzInboxForm posts arbitrary forms to the inbox with genuine inbox
// sessions of people the approval's policy refuses (its asker under the
// four-eyes rule, another workspace's admin), with or without their
// genuine form token: none may answer 5xx or decide it.
func FuzzInboxForm(f *testing.F) {
	e := newEnv(f, envOpt{})
	a, _, err := e.approvals.Begin(context.Background(), approval.Request{
		Asker: approval.Identity{Subject: "ed", Tenant: "acme"}, Tool: "delete_note", Arguments: []byte(`{"id":"n1"}`)})
	if err != nil {
		f.Fatal(err)
	}
	var people []*sessionCookie
	for _, who := range []approval.Identity{{Subject: "ed", Tenant: "acme"}, {Subject: "eve", Tenant: "globex", Role: "admin"}} {
		people = append(people, &sessionCookie{Inbox: true, Subject: who.Subject, Tenant: who.Tenant, Role: who.Role, Nonce: "n", Exp: 1 << 40})
	}
	f.Add("id="+a.ID+"&decision=approve", true, false)
	f.Add("id="+a.ID+"&decision=decline", true, true)
	f.Add("id="+a.ID+"&id="+a.ID+"&decision=approve", true, false)
	f.Add("id=%zz&decision=approve&csrf=", false, true)
	f.Add(strings.Repeat("id="+a.ID+"&", 300), true, false)
	f.Fuzz(func(t *testing.T, body string, withToken, second bool) {
		sess := people[0]
		if second {
			sess = people[1]
		}
		if withToken {
			body += "&csrf=" + e.h.csrfToken(sess)
		}
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/approvals/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.AddCookie(&http.Cookie{Name: e.h.name, Value: e.h.encodeCookie(e.h.name, sess)})
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%q: %d\n%s", body, w.Code, w.Body)
		}
		if got, err := e.approvals.Get(context.Background(), a.ID); err != nil || got.State != approval.Pending {
			t.Fatalf("decided by %q: %v %v", body, got, err)
		}
	})
}
