package main

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/internal/oidctest"
	"github.com/mcphandler/mcphandler/mcptest"
)

// approvalsEnv is the example with -approvals, signing in at a fake
// provider that issues both the access tokens and the page's ID tokens.
type approvalsEnv struct {
	p        *oidctest.Provider
	srv      *httptest.Server
	audience string
}

func startApprovals(t *testing.T, o options) *approvalsEnv {
	p := oidctest.New(t)
	outer := http.NewServeMux()
	srv := httptest.NewServer(outer)
	t.Cleanup(srv.Close)
	e := &approvalsEnv{p: p, srv: srv, audience: srv.URL + "/mcp"}
	p.AddRedirect(srv.URL + "/approvals/callback")
	o.issuer, o.audience, o.httpClient = p.Issuer(), e.audience, p.Client()
	o.approvals, o.approvalID, o.approvalSecret = true, p.ClientID, p.ClientSecret
	if o.tenantClaim == "" {
		o.tenantClaim = "org_id"
	}
	if o.defaultRole == "" {
		o.defaultRole = "editor"
	}
	o.scopes = []string{"mcp:tools"}
	if o.approvalTTL == 0 {
		o.approvalTTL = 30 * time.Second
	}
	mux, _, err := newServer(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	outer.Handle("/", mux)
	return e
}

// token is an access token for the MCP endpoint carrying claims.
func (e *approvalsEnv) token(claims map[string]any) string {
	c := map[string]any{"iss": e.p.Issuer(), "aud": e.audience, "scope": "mcp:tools notes:write",
		"exp": time.Now().Add(time.Hour).Unix()}
	maps.Copy(c, claims)
	return e.p.Sign(c)
}

// dial connects a client with claims' access token and opts; nil if the
// token is refused.
func (e *approvalsEnv) dial(t *testing.T, claims map[string]any, opts ...mcptest.Option) (*mcptest.Client, error) {
	c := mcptest.Dial(e.audience, append([]mcptest.Option{mcptest.WithToken(e.token(claims))}, opts...)...)
	t.Cleanup(c.Close)
	_, err := c.Initialize(t.Context())
	return c, err
}

// who is the identity a path gave: "refused" if it gave none.
type who struct{ Subject, Tenant, Role string }

func (w who) String() string { return fmt.Sprintf("%s/%s/%s", w.Tenant, w.Subject, w.Role) }

var refusedWho = who{Subject: "refused"}

// bearerWho is who the MCP endpoint says the caller with claims is
// (workspace_info), or refusedWho.
func (e *approvalsEnv) bearerWho(t *testing.T, claims map[string]any) who {
	c, err := e.dial(t, claims)
	if err != nil {
		return refusedWho
	}
	res, err := c.CallTool(t.Context(), "workspace_info", nil)
	if err != nil || res.IsError {
		t.Fatalf("workspace_info: %v %v", res, err)
	}
	var out infoOut
	if err := json.Unmarshal(res.StructuredContent, &out); err != nil {
		t.Fatal(err)
	}
	return who{out.Subject, out.Workspace, out.Role}
}

var signedInRE = regexp.MustCompile(`Signed in as ([^ ]*) \(workspace ([^,)]*)(?:, role ([^)]*))?\)`)

// pageWho is who the approval page at u says the person with the ID token
// claims is, or refusedWho if the sign-in failed.
func (e *approvalsEnv) pageWho(t *testing.T, claims map[string]any, u string) who {
	body := e.p.Decide(t, claims, u, "")
	m := signedInRE.FindStringSubmatch(body)
	if m == nil {
		if strings.Contains(body, "Sign-in failed") {
			return refusedWho
		}
		t.Fatalf("page without an approver:\n%s", body)
	}
	return who{html.UnescapeString(m[1]), html.UnescapeString(m[2]), html.UnescapeString(m[3])}
}

// pendingURL makes an editor of acme ask for delete_note of note id
// without URL elicitation and returns the approval page's URL from the
// result: one approval per id.
func (e *approvalsEnv) pendingURL(t *testing.T, id string) string {
	c, err := e.dial(t, map[string]any{"sub": "ed", "org_id": "acme", "role": "editor"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.CallTool(t.Context(), "add_note", map[string]any{"text": "to delete"}); err != nil || res.IsError {
		t.Fatalf("add_note: %v %v", res, err)
	}
	res, err := c.CallTool(t.Context(), "delete_note", map[string]any{"id": id})
	if err != nil || !res.IsError {
		t.Fatalf("delete_note without URL mode: %v %v", res, err)
	}
	u := regexp.MustCompile(`https?://\S+/approvals/[A-Za-z0-9_-]{22}`).FindString(res.Text())
	if u == "" {
		t.Fatalf("no approval URL in %q", res.Text())
	}
	return u
}

// manyRoles is n roles of no meaning to the server, then extra.
func manyRoles(n int, extra ...any) []any {
	out := make([]any, 0, n+len(extra))
	for i := range n {
		out = append(out, fmt.Sprintf("r%d", i))
	}
	return append(out, extra...)
}

// TestOneIdentityForCallsAndApprovals: the same claims in an access token
// and in the approval page's ID token make the same person — same
// workspace, subject and role, or refused on both sides — whatever the
// shape of the role claims: the role is the highest of viewer < editor <
// admin named by "role" or "roles", unknown roles are ignored, and
// -default-role applies when none is named.
func TestOneIdentityForCallsAndApprovals(t *testing.T) {
	e := startApprovals(t, options{})
	var u string
	admin := who{"ada", "acme", "admin"}
	for i, c := range []struct {
		name   string
		claims map[string]any
		want   who
	}{
		{"role string", map[string]any{"role": "admin"}, admin},
		{"roles array", map[string]any{"roles": []any{"admin"}}, admin},
		{"roles, admin last", map[string]any{"roles": []any{"viewer", "editor", "admin"}}, admin},
		{"roles, admin first", map[string]any{"roles": []any{"admin", "editor", "viewer"}}, admin},
		{"roles with unknown ones", map[string]any{"roles": []any{"Reader", "Task.Write", "admin", "Owner"}}, admin},
		{"only unknown roles", map[string]any{"roles": []any{"Reader", "superuser"}}, who{"ada", "acme", "editor"}},
		{"unknown role string", map[string]any{"role": "superuser"}, who{"ada", "acme", "editor"}},
		{"no role claim", map[string]any{}, who{"ada", "acme", "editor"}},
		{"role and roles", map[string]any{"role": "viewer", "roles": []any{"admin"}}, admin},
		{"roles and a lower role", map[string]any{"role": "admin", "roles": []any{"viewer"}}, admin},
		{"roles a string", map[string]any{"roles": "admin"}, admin},
		{"huge roles array", map[string]any{"roles": manyRoles(1500, "admin")}, admin},
		{"empty roles", map[string]any{"roles": []any{}}, who{"ada", "acme", "editor"}},
		{"null role", map[string]any{"role": nil, "roles": []any{"admin"}}, admin},
		{"numeric tenant", map[string]any{"org_id": 4242, "role": "admin"}, who{"ada", "4242", "admin"}},
		{"non-string element", map[string]any{"roles": []any{"admin", 1}}, refusedWho},
		{"nested element", map[string]any{"roles": []any{[]any{"admin"}}}, refusedWho},
		{"role an object", map[string]any{"role": map[string]any{"name": "admin"}}, refusedWho},
		{"role a number", map[string]any{"role": 3}, refusedWho},
		{"no tenant", map[string]any{"org_id": nil, "role": "admin"}, refusedWho},
		{"tenant an object", map[string]any{"org_id": map[string]any{"id": "acme"}, "role": "admin"}, refusedWho},
		{"tenant too long", map[string]any{"org_id": strings.Repeat("a", 600), "role": "admin"}, refusedWho},
	} {
		// The page takes a bounded number of sign-ins per approval
		// (page.Config.MaxSignInsPerApproval): a fresh one every ten.
		if i%10 == 0 {
			u = e.pendingURL(t, strconv.Itoa(i+1))
		}
		t.Run(c.name, func(t *testing.T) {
			claims := map[string]any{"sub": "ada", "org_id": "acme"}
			maps.Copy(claims, c.claims)
			if claims["org_id"] == nil {
				delete(claims, "org_id")
			}
			bearer, page := e.bearerWho(t, claims), e.pageWho(t, claims, u)
			if bearer != c.want || page != c.want {
				t.Fatalf("bearer token: %v, approval page: %v, want %v on both", bearer, page, c.want)
			}
		})
	}
}

// TestRolesArrayAdminApproves: with a provider that gives roles as an
// array (Entra ID app roles, Keycloak, Auth0 Actions), an admin of the
// workspace both calls tools as admin and approves an editor's
// delete_note on the page; the call then runs once.
func TestRolesArrayAdminApproves(t *testing.T) {
	e := startApprovals(t, options{})
	adaClaims := map[string]any{"sub": "ada", "org_id": "acme", "roles": []any{"Reader", "viewer", "admin"}}
	if got := e.bearerWho(t, adaClaims); got != (who{"ada", "acme", "admin"}) {
		t.Fatalf("ada calls tools as %v", got)
	}
	pages := make(chan string, 1)
	c, err := e.dial(t, map[string]any{"sub": "ed", "org_id": "acme", "roles": []any{"editor"}},
		mcptest.WithCapabilities(json.RawMessage(`{"elicitation":{"url":{}}}`)),
		mcptest.WithElicitationHandler(func(_ context.Context, el mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			go func() { pages <- e.p.Decide(t, adaClaims, el.URL, "approve") }()
			return mcptest.ElicitResult{Action: "accept"}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if res, err := c.CallTool(ctx, "add_note", map[string]any{"text": "to delete"}); err != nil || res.IsError {
		t.Fatalf("add_note: %v %v", res, err)
	}
	res, err := c.CallTool(ctx, "delete_note", map[string]any{"id": "1"})
	if page := <-pages; !strings.Contains(page, "Approved") {
		t.Fatalf("ada's page:\n%s", page)
	}
	if err != nil || res.IsError || !strings.Contains(res.Text(), "to delete") {
		t.Fatalf("delete_note: %+v %v", res, err)
	}
	res, err = c.CallTool(ctx, "list_notes", nil)
	if err != nil || strings.Contains(res.Text(), "to delete") {
		t.Fatalf("after the delete: %v %v", res, err)
	}
}

// TestRoleClaimsFlag: with -role-claims /realm_access/roles (Keycloak's
// realm roles, nested), an admin is an admin for calls and on the page
// alike, and the top-level "role" is no longer read.
func TestRoleClaimsFlag(t *testing.T) {
	e := startApprovals(t, options{roleClaims: []string{"/realm_access/roles"}})
	u := e.pendingURL(t, "1")
	for _, c := range []struct {
		claims map[string]any
		want   who
	}{
		{map[string]any{"realm_access": map[string]any{"roles": []any{"offline_access", "admin", "viewer"}}}, who{"ada", "acme", "admin"}},
		{map[string]any{"role": "admin"}, who{"ada", "acme", "editor"}},
	} {
		claims := map[string]any{"sub": "ada", "org_id": "acme"}
		maps.Copy(claims, c.claims)
		if bearer, page := e.bearerWho(t, claims), e.pageWho(t, claims, u); bearer != c.want || page != c.want {
			t.Fatalf("%v: bearer token %v, approval page %v, want %v", c.claims, bearer, page, c.want)
		}
	}
}
