package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/internal/oidctest"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
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

// TestApprovalWebhook: with -approval-webhook, each new pending approval
// is posted once, as JSON naming its page, tool, tenant, asker and
// expiry; a webhook that hangs holds no call up (the calls are answered,
// and the approval declined on the page, while it hangs); the call
// repeated while pending is not posted again, and once declined, the
// same call is a new approval, posted once.
func TestApprovalWebhook(t *testing.T) {
	p := oidctest.New(t)
	hooks := make(chan pendingNotice, 4)
	hang := make(chan struct{})
	webhook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n pendingNotice
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			t.Errorf("webhook body: %v", err)
		}
		hooks <- n
		select { // the host's endpoint does not answer
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(webhook.Close)
	t.Cleanup(func() { close(hang) }) // first: the webhook's request returns
	outer := http.NewServeMux()
	srv := httptest.NewServer(outer)
	t.Cleanup(srv.Close)
	audience := srv.URL + "/mcp"
	p.AddRedirect(srv.URL + "/approvals/callback")
	mux, _, err := newServer(t.Context(), options{issuer: p.Issuer(), audience: audience, tenantClaim: "org_id",
		scopes: []string{"mcp:tools"}, defaultRole: "editor", httpClient: p.Client(),
		approvals: true, approvalID: p.ClientID, approvalSecret: p.ClientSecret, approvalTTL: 30 * time.Second,
		approvalWebhook: webhook.URL})
	if err != nil {
		t.Fatal(err)
	}
	outer.Handle("/", mux)
	token := p.Sign(map[string]any{"iss": p.Issuer(), "aud": audience, "sub": "ed", "org_id": "acme",
		"scope": "mcp:tools notes:write", "exp": time.Now().Add(time.Hour).Unix()})
	c := mcptest.Dial(audience, mcptest.WithToken(token)) // no URL mode: told the page, calls again
	t.Cleanup(c.Close)
	ctx := t.Context()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := c.CallTool(ctx, "add_note", map[string]any{"text": "to delete"}); err != nil || res.IsError {
		t.Fatalf("add_note: %v %v", res, err)
	}
	for range 2 { // the call, and the same call repeated while pending
		if res, err := c.CallTool(ctx, "delete_note", map[string]any{"id": "1"}); err != nil || !res.IsError {
			t.Fatalf("delete_note while pending: %+v %v", res, err)
		}
	}
	n := <-hooks
	if n.URL != srv.URL+"/approvals/"+n.ID || n.Tool != "delete_note" || n.Tenant != "acme" || n.Asker != "ed" || !n.Expires.After(time.Now()) {
		t.Fatalf("notice %+v", n)
	}
	if page := p.Decide(t, map[string]any{"sub": "ada", "org_id": "acme", "role": "admin"}, n.URL, "decline"); !strings.Contains(page, "Declined") {
		t.Fatalf("admin's page:\n%s", page)
	}
	// Declined, the same call is a new approval, and a new notice.
	if res, err := c.CallTool(ctx, "delete_note", map[string]any{"id": "1"}); err != nil || !res.IsError {
		t.Fatalf("delete_note once declined: %+v %v", res, err)
	}
	if n2 := <-hooks; n2.ID == n.ID || n2.Tool != "delete_note" {
		t.Fatalf("the notice of the new approval: %+v after %+v", n2, n)
	}
	select {
	case again := <-hooks:
		t.Fatalf("a second notice: %+v", again)
	default:
	}
}

// TestApprovalsAcrossReplicas: two replicas started with the same -redis
// and -state-key, every request going to the other one: the webhook hears
// of an approval once, though both replicas see the call (it is repeated
// on the second while pending); the approval made on one is declined on
// the page served by both, and the call made again is a new approval,
// heard of once.
func TestApprovalsAcrossReplicas(t *testing.T) {
	p := oidctest.New(t)
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t, rdb)
	hooks := make(chan pendingNotice, 8)
	webhook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n pendingNotice
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			t.Errorf("webhook body: %v", err)
		}
		hooks <- n
	}))
	t.Cleanup(webhook.Close)
	var replicas [2]http.Handler
	var turn atomic.Uint64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		replicas[turn.Add(1)%2].ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	audience := srv.URL + "/mcp"
	p.AddRedirect(srv.URL + "/approvals/callback")
	for i := range replicas {
		mux, _, err := newServer(t.Context(), options{issuer: p.Issuer(), audience: audience, tenantClaim: "org_id",
			scopes: []string{"mcp:tools"}, defaultRole: "editor", httpClient: p.Client(),
			approvals: true, approvalID: p.ClientID, approvalSecret: p.ClientSecret, approvalTTL: 30 * time.Second,
			approvalWebhook: webhook.URL,
			redis:           rdb, redisPrefix: prefix, stateKey: []byte("a state key of the test, 32 bytes or more")})
		if err != nil {
			t.Fatal(err)
		}
		replicas[i] = mux
	}
	token := p.Sign(map[string]any{"iss": p.Issuer(), "aud": audience, "sub": "ed", "org_id": "acme",
		"scope": "mcp:tools notes:write", "exp": time.Now().Add(time.Hour).Unix()})
	c := mcptest.Dial(audience, mcptest.WithToken(token)) // no URL mode: told the page, calls again
	t.Cleanup(c.Close)
	ctx := t.Context()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	call := func() {
		t.Helper()
		if res, err := c.CallTool(ctx, "delete_note", map[string]any{"id": "1"}); err != nil || !res.IsError || !strings.Contains(res.Text(), srv.URL+"/approvals/") {
			t.Fatalf("delete_note while pending: %+v %v", res, err)
		}
	}
	call()
	call() // the same call, on the other replica
	n := <-hooks
	if n.URL != srv.URL+"/approvals/"+n.ID || n.Tenant != "acme" || n.Asker != "ed" {
		t.Fatalf("notice %+v", n)
	}
	if page := p.Decide(t, map[string]any{"sub": "ada", "org_id": "acme", "role": "admin"}, n.URL, "decline"); !strings.Contains(page, "Declined") {
		t.Fatalf("admin's page:\n%s", page)
	}
	call() // declined: a new approval
	call()
	n2 := <-hooks
	if n2.ID == n.ID {
		t.Fatalf("the notice of the new approval names the declined one: %+v", n2)
	}
	// Every notice is posted by a worker of the replica that made the
	// approval, at once; a second one would arrive within this.
	select {
	case again := <-hooks:
		t.Fatalf("a second notice: %+v (first %+v, then %+v)", again, n, n2)
	case <-time.After(500 * time.Millisecond):
	}
}
