package page

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/mcphandler/mcphandler/approval"
)

// TestIdentityMapping: how the approver's tenant and role come from the ID
// token is the host's: here a namespaced organisation claim and a list of
// groups, and a refusal of unverified emails.
func TestIdentityMapping(t *testing.T) {
	mapClaims := func(_ context.Context, tok *oidc.IDToken) (approval.Identity, error) {
		var c struct {
			Org      string   `json:"https://example.com/org"`
			Groups   []string `json:"groups"`
			Verified bool     `json:"email_verified"`
		}
		if err := tok.Claims(&c); err != nil {
			return approval.Identity{}, err
		}
		if !c.Verified {
			return approval.Identity{}, errors.New("email not verified")
		}
		role := "viewer"
		for _, g := range c.Groups {
			if g == "acme-admins" {
				role = "admin"
			}
		}
		return approval.Identity{Subject: tok.Subject, Tenant: c.Org, Role: role}, nil
	}
	e := newEnv(t, envOpt{mod: func(c *Config) { c.Identity = mapClaims }})
	a := e.ask(`{"id":"n1"}`)
	b := newBrowser(t)
	// The default claim names mean nothing to this host.
	code, body := e.open(b, map[string]any{"sub": "ada", "tenant": "acme", "role": "admin", "email_verified": true}, a)
	if code != http.StatusForbidden || !strings.Contains(body, "Not allowed") {
		t.Fatalf("default claims: %d\n%s", code, body)
	}
	b = newBrowser(t)
	code, body = e.open(b, map[string]any{"sub": "ada", "https://example.com/org": "acme", "groups": []string{"acme-admins"}}, a)
	if code != http.StatusBadRequest || !strings.Contains(body, "could not be verified") {
		t.Fatalf("unverified: %d\n%s", code, body)
	}
	code, body = e.open(b, map[string]any{"sub": "ada", "https://example.com/org": "acme", "groups": []string{"staff", "acme-admins"}, "email_verified": true}, a)
	if code != http.StatusOK || !strings.Contains(body, "Signed in as ada (workspace acme, role admin)") {
		t.Fatalf("mapped: %d\n%s", code, body)
	}
}

// TestTemplates: the host's own page replaces the built-in one.
func TestTemplates(t *testing.T) {
	tmpl := template.Must(template.New("page").Parse(`<p id="status">{{.Status}}</p>{{with .Approval}}<i>{{.Tool}}</i>{{end}}{{if .CSRF}}<form method="post" action="{{.Action}}"><input name="csrf" value="{{.CSRF}}"><button name="decision" value="approve">OK</button></form>{{end}}`))
	e := newEnv(t, envOpt{mod: func(c *Config) { c.Templates = tmpl }})
	a := e.ask(`{"id":"n1"}`)
	b := newBrowser(t)
	_, body := e.open(b, admin, a)
	if !strings.HasPrefix(body, `<p id="status">ask</p><i>delete_note</i>`) {
		t.Fatalf("host page: %s", body)
	}
	if _, body = b.post(a.URL, decision("approve", csrfOf(t, body)), nil); body != `<p id="status">approved</p><i>delete_note</i>` {
		t.Fatalf("host result: %s", body)
	}
	if _, err := New(t.Context(), func() Config { c := e.h.cfg; c.Templates = template.Must(template.New("x").Parse("x")); return c }()); err == nil {
		t.Fatal(`templates without "page" accepted`)
	}
}

func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ünïcode ✓":  "plain text, ünïcode ✓",
		"rm -rf \u202e/ etc":     `rm -rf \u{202E}/ etc`,
		"zero\u200bwidth":        `zero\u{200B}width`,
		"tab\tnew\nline\x00":     `tab\u{9}new\u{A}line\u{0}`,
		`back\slash \u{41}`:      `back\\slash \\u{41}`,
		"nbsp\u00a0and\u2028sep": `nbsp\u{A0}and\u{2028}sep`,
		"bad \xff utf8":          `bad \u{FFFD} utf8`,
	} {
		if got := Visible(in); got != want {
			t.Errorf("Visible(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLongArguments: the approval's page shows every argument in full,
// canonical and indented, whatever its length (no value is cut there);
// a row of the inbox cuts them after MaxSummaryBytes with a visible
// marker counting what is left out, which no value can forge.
func TestLongArguments(t *testing.T) {
	e := newEnv(t, envOpt{})
	long := strings.Repeat("x", 30_000)
	a := e.ask(`{"a":"` + long + `","b":[` + strings.Repeat("1,", 12_000) + `1],"zz":true,"m":"\u2026 (cut, 5 bytes more)"}`)
	v := viewOf(a, time.Now(), "/approvals/")
	if len(v.Arguments) != 4 || v.Arguments[0].Name != "a" || v.Arguments[3].Name != "zz" || v.Arguments[3].Value != "true" {
		t.Fatalf("arguments %v", v.Arguments[3])
	}
	if v.Arguments[0].Value != `"`+long+`"` {
		t.Fatal("a 30 000-character string was cut")
	}
	if b := v.Arguments[1].Value; strings.Count(b, "\n  1") != 12_001 || strings.Contains(b, "more items") {
		t.Fatalf("the long array is not shown whole, one item a line: %d bytes, %q…", len(b), b[:80])
	}
	if !strings.Contains(v.Pretty, long) || strings.Count(v.Pretty, "\n    1") != 12_001 || !strings.Contains(v.Pretty, `"m": "\u2026 (cut, 5 bytes more)"`) {
		t.Fatal("the whole arguments are not shown in full")
	}
	s := cut(v.Pretty, MaxSummaryBytes)
	head, tail, ok := strings.Cut(s, "… (cut, ")
	if !ok || len(head) > MaxSummaryBytes || !strings.HasPrefix(v.Pretty, head) || tail != fmt.Sprintf("%d bytes more)", len(v.Pretty)-len(head)) {
		t.Fatalf("the summary: %q", s)
	}
	if short := `{"id": "n1"}`; cut(short, MaxSummaryBytes) != short {
		t.Fatal("a short summary was cut")
	}
}

func TestClaimsIdentity(t *testing.T) {
	roles := []string{"viewer", "editor", "admin"}
	cases := []struct {
		name         string
		tenant, role string
		claims       map[string]any
		want         approval.Identity
		fails        bool
	}{
		{"entra", "tid", "roles", map[string]any{"sub": "ada", "tid": "t-1", "roles": []string{"editor", "Reader", "admin", "viewer"}},
			approval.Identity{Subject: "ada", Tenant: "t-1", Role: "admin"}, false},
		{"no known role", "tid", "roles", map[string]any{"sub": "ada", "tid": "t-1", "roles": []string{"Reader"}},
			approval.Identity{Subject: "ada", Tenant: "t-1"}, false},
		{"string role", "org", "role", map[string]any{"sub": "ada", "org": "acme", "role": "editor"},
			approval.Identity{Subject: "ada", Tenant: "acme", Role: "editor"}, false},
		{"google", "hd", "", map[string]any{"sub": "ada", "hd": "acme.example", "role": "admin"},
			approval.Identity{Subject: "ada", Tenant: "acme.example"}, false},
		// Like a bearer token (auth.ClaimsMapping): no workspace, no
		// sign-in; a tenant is a string or an integer.
		{"missing", "tid", "roles", map[string]any{"sub": "ada"}, approval.Identity{}, true},
		{"tenant an integer", "tid", "roles", map[string]any{"sub": "ada", "tid": 7}, approval.Identity{Subject: "ada", Tenant: "7"}, false},
		{"tenant a fraction", "tid", "roles", map[string]any{"sub": "ada", "tid": 7.5}, approval.Identity{}, true},
		{"tenant not a string", "tid", "roles", map[string]any{"sub": "ada", "tid": []string{"acme"}}, approval.Identity{}, true},
		// With a tenant, so that only the role claim can refuse them.
		{"role an object", "tid", "roles", map[string]any{"sub": "ada", "tid": "t-1", "roles": map[string]any{"a": 1}}, approval.Identity{}, true},
		{"roles of numbers", "tid", "roles", map[string]any{"sub": "ada", "tid": "t-1", "roles": []int{1}}, approval.Identity{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, envOpt{mod: func(cfg *Config) { cfg.Identity = ClaimsIdentity(c.tenant, c.role, roles) }})
			claims := map[string]any{"iss": e.idp.Issuer(), "aud": e.idp.ClientID, "exp": time.Now().Add(time.Minute).Unix(), "iat": time.Now().Unix()}
			maps.Copy(claims, c.claims)
			tok, err := e.h.verifier.Verify(t.Context(), e.idp.Sign(claims))
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.h.cfg.Identity(t.Context(), tok)
			if (err != nil) != c.fails || got != c.want {
				t.Fatalf("got %+v %v, want %+v (fails %v)", got, err, c.want, c.fails)
			}
		})
	}
}
