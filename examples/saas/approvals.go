package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/approval/page"
	"github.com/mcphandler/mcphandler/auth"
)

// approvalBase is the origin of the audience URL: the page lives at
// <origin>/approvals/, whether the server is reached directly or through
// a proxy that the audience names.
func approvalBase(audience string) string {
	u, err := url.Parse(audience)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// withApprovals adds delete_note, which needs the approval of an admin of
// the caller's workspace other than the caller, and mounts the approval
// page on mux, which maps the approver's ID token with claims, the
// mapping of the access tokens. The handler, the approvals and the page
// share cfg's Store and StateKeys: with -redis, every replica's.
func (a *app) withApprovals(ctx context.Context, cfg *mcphandler.Config, mux *http.ServeMux, o options, claims auth.ClaimsMapper) error {
	if o.approvalID == "" || o.approvalSecret == "" {
		return fmt.Errorf("-approvals needs -approval-client-id and -approval-client-secret")
	}
	store, keys := cfg.Store, cfg.StateKeys
	base := approvalBase(o.audience)
	acfg := approval.Config{Store: store, Keys: keys, URL: base + "/approvals/", TTL: o.approvalTTL, Roles: cfg.Roles}
	if o.approvalWebhook != "" {
		acfg.OnPending = notifyWebhook(o.approvalWebhook)
	}
	approvals, err := approval.New(acfg)
	if err != nil {
		return err
	}
	h, err := page.New(ctx, page.Config{Approvals: approvals, Store: store, Issuer: o.issuer,
		ClientID: o.approvalID, ClientSecret: o.approvalSecret, RedirectURL: base + "/approvals/callback",
		Identity: page.MapClaims(claims), Keys: keys,
		HTTPClient: o.httpClient, InsecureCookies: strings.HasPrefix(base, "http://")})
	if err != nil {
		return fmt.Errorf("approval page: %w", err)
	}
	mux.Handle("/approvals/", h)
	cfg.Approvals = approvals
	cfg.ConfirmTimeout = max(approvals.TTL(), approval.DefaultTTL) // never shorter than an approval
	cfg.BeforeCall = func(_ context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
		if call.Tool.Name != "delete_note" {
			return mcphandler.Allow(), nil
		}
		// Four-eyes: of the caller's workspace, not the caller, an admin.
		return mcphandler.Approve("Delete a note of workspace "+call.Identity.Tenant+", asked by "+call.Identity.Subject+".",
			approval.Policy{MinRole: "admin"}), nil
	}
	del := a.deleteTool()
	a.del = &del
	return nil
}

type deleteIn struct {
	ID string `json:"id" jsonschema:"The id of the note to delete, as list_notes shows it."`
}

type deleteOut struct {
	Deleted note `json:"deleted"`
}

func (a *app) deleteTool() mcphandler.Tool {
	return mcphandler.NewTool(mcphandler.Tool{
		Name:        "delete_note",
		Title:       "Delete a note",
		Description: "Deletes a note of the caller's workspace once an admin of the workspace other than the caller approves it on the approval page (the call waits for the decision; the link expires after -approval-ttl).",
		Annotations: &mcphandler.ToolAnnotations{DestructiveHint: new(true), OpenWorldHint: new(false)},
		MinRole:     "editor",
	}, func(_ context.Context, call *mcphandler.ToolCall, in deleteIn) (deleteOut, error) {
		id, err := strconv.Atoi(in.ID)
		if err != nil {
			return deleteOut{}, mcphandler.BadArgs("id must be a note id, e.g. \"1\"")
		}
		ws := a.workspace(call.Identity.Tenant)
		ws.mu.Lock()
		defer ws.mu.Unlock()
		for i, n := range ws.notes {
			if n.ID == id {
				ws.notes = append(ws.notes[:i], ws.notes[i+1:]...)
				return deleteOut{Deleted: n}, nil
			}
		}
		return deleteOut{}, mcphandler.BadArgs("no note %s in workspace %s", in.ID, ws.id)
	})
}

// pendingNotice is what -approval-webhook receives for each new pending
// approval.
type pendingNotice struct {
	ID      string    `json:"id"`
	URL     string    `json:"url"`
	Tool    string    `json:"tool"`
	Tenant  string    `json:"tenant"`
	Asker   string    `json:"asker"`
	Expires time.Time `json:"expires"`
}

// notifyWebhook posts each new pending approval to endpoint as JSON, once per
// approval (approval.Config.OnPending): a chat's incoming webhook, say.
// A failure is logged; the call never waits for it.
func notifyWebhook(endpoint string) func(ctx context.Context, a *approval.Approval) {
	client := &http.Client{Timeout: 10 * time.Second}
	return func(ctx context.Context, a *approval.Approval) {
		body, _ := json.Marshal(pendingNotice{ID: a.ID, URL: a.URL, Tool: a.Tool, Tenant: a.Asker.Tenant, Asker: a.Asker.Subject, Expires: a.Expires.UTC()})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
		if err != nil {
			log.Printf("saas: approval webhook: %v", err)
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			log.Printf("saas: approval webhook: %v", err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			log.Printf("saas: approval webhook answered %s", resp.Status)
		}
	}
}
