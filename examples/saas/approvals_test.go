package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/internal/oidctest"
	"github.com/mcphandler/mcphandler/mcptest"
)

// TestDeleteNoteNeedsAnAdminsApproval: with -approvals, an editor's
// delete_note waits for an approval; the editor cannot approve it
// themselves ("Not allowed"); an admin of the workspace approves it on the
// page, and the note is deleted, once.
func TestDeleteNoteNeedsAnAdminsApproval(t *testing.T) {
	p := oidctest.New(t)
	outer := http.NewServeMux()
	srv := httptest.NewServer(outer)
	t.Cleanup(srv.Close)
	audience := srv.URL + "/mcp"
	p.AddRedirect(srv.URL + "/approvals/callback")
	mux, _, err := newServer(t.Context(), options{issuer: p.Issuer(), audience: audience, tenantClaim: "org_id",
		scopes: []string{"mcp:tools"}, defaultRole: "editor", httpClient: p.Client(),
		approvals: true, approvalID: p.ClientID, approvalSecret: p.ClientSecret, approvalTTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	outer.Handle("/", mux)
	token := p.Sign(map[string]any{"iss": p.Issuer(), "aud": audience, "sub": "ed", "org_id": "acme",
		"scope": "mcp:tools notes:write", "exp": time.Now().Add(time.Hour).Unix()})
	pages := make(chan string, 2)
	c := mcptest.Dial(audience, mcptest.WithToken(token), mcptest.WithCapabilities(json.RawMessage(`{"elicitation":{"url":{}}}`)),
		mcptest.WithElicitationHandler(func(_ context.Context, e mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			go func() {
				pages <- p.Decide(t, map[string]any{"sub": "ed", "org_id": "acme", "role": "editor"}, e.URL, "approve")
				pages <- p.Decide(t, map[string]any{"sub": "ada", "org_id": "acme", "role": "admin"}, e.URL, "approve")
			}()
			return mcptest.ElicitResult{Action: "accept"}, nil
		}))
	t.Cleanup(c.Close)
	ctx := t.Context()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := c.CallTool(ctx, "add_note", map[string]any{"text": "to delete"}); err != nil || res.IsError {
		t.Fatalf("add_note: %v %v", res, err)
	}
	res, err := c.CallTool(ctx, "delete_note", map[string]any{"id": "1"})
	if err != nil || res.IsError || !strings.Contains(res.Text(), "to delete") {
		t.Fatalf("delete_note: %+v %v", res, err)
	}
	if self := <-pages; !strings.Contains(self, "Not allowed") {
		t.Fatalf("self-approval page:\n%s", self)
	}
	if admin := <-pages; !strings.Contains(admin, "Approved") {
		t.Fatalf("admin's page:\n%s", admin)
	}
	res, err = c.CallTool(ctx, "list_notes", nil)
	if err != nil || strings.Contains(res.Text(), "to delete") {
		t.Fatalf("after the delete: %v %v", res, err)
	}
}
