package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler/internal/oidctest"
	"github.com/mcphandler/mcphandler/mcptest"
)

// start serves the example with a fake OpenID provider standing for the
// one given with -issuer.
func start(t *testing.T) (*oidctest.Provider, string) {
	p := oidctest.New(t)
	outer := http.NewServeMux()
	srv := httptest.NewServer(outer)
	t.Cleanup(srv.Close)
	p.AddRedirect(srv.URL + "/approvals/callback")
	mux, h, err := newServer(t.Context(), srv.URL, provider{p.Issuer(), p.ClientID, p.ClientSecret, "tenant"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	outer.Handle("/", mux)
	return p, srv.URL
}

var (
	admin   = map[string]any{"sub": "dana", "tenant": "acme", "roles": []any{"admin"}}
	linkRE  = regexp.MustCompile(`http://[^\s"]+/approvals/[A-Za-z0-9_-]{22}`)
	project = map[string]any{"Project": "apollo"}
)

// TestApprovalByRepeat: a client that cannot open a URL gets the link in
// a tool error; nobody but an admin of acme other than the caller can
// approve; the same call repeated then runs once, and once only.
func TestApprovalByRepeat(t *testing.T) {
	p, base := start(t)
	c := mcptest.Dial(base+"/mcp", mcptest.WithToken("alice"))
	defer c.Close()
	ctx := t.Context()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.CallTool(ctx, "delete_project", project)
	link := linkRE.FindString(res.Text())
	if err != nil || !res.IsError || link == "" {
		t.Fatalf("first call: %v %v", res, err)
	}
	for _, who := range []map[string]any{
		{"sub": "alice", "tenant": "acme", "role": "admin"}, // the caller
		{"sub": "erin", "tenant": "acme", "role": "editor"}, // too low
		{"sub": "gus", "tenant": "globex", "role": "admin"}, // another workspace
	} {
		if page := p.Decide(t, who, link, "approve"); !strings.Contains(page, "Not allowed") {
			t.Fatalf("%v approving:\n%s", who, page)
		}
	}
	if page := p.Decide(t, admin, link, "approve"); !strings.Contains(page, "Approved") {
		t.Fatalf("the admin's page:\n%s", page)
	}
	res, err = c.CallTool(ctx, "delete_project", project)
	if err != nil || res.IsError || res.Text() != "deleted apollo of acme" {
		t.Fatalf("the repeated call: %v %v", res, err)
	}
	res, err = c.CallTool(ctx, "delete_project", project)
	if again := linkRE.FindString(res.Text()); err != nil || !res.IsError || again == "" || again == link {
		t.Fatalf("a third call must ask again: %v %v", res, err)
	}
}

// TestApprovalURLMode: a 2026-07-28 client with URL-mode elicitation is
// sent the link as an input request; its retry waits for the admin's
// decision and runs the call.
func TestApprovalURLMode(t *testing.T) {
	p, base := start(t)
	pages := make(chan string, 1)
	c := mcptest.Dial(base+"/mcp", mcptest.WithToken("alice"), mcptest.WithEra(mcptest.Stateless),
		mcptest.WithCapabilities(json.RawMessage(`{"elicitation":{"url":{}}}`)),
		mcptest.WithElicitationHandler(func(_ context.Context, e mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			go func() { pages <- p.Decide(t, admin, e.URL, "approve") }()
			return mcptest.ElicitResult{Action: mcptest.ActionAccept}, nil
		}))
	defer c.Close()
	res, err := c.CallTool(t.Context(), "delete_project", project)
	if err != nil || res.IsError || res.Text() != "deleted apollo of acme" {
		t.Fatalf("delete_project: %v %v", res, err)
	}
	if page := <-pages; !strings.Contains(page, "Approved") {
		t.Fatalf("the admin's page:\n%s", page)
	}
}
