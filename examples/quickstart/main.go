// Command quickstart serves a small multi-tenant MCP demo on
// http://127.0.0.1:8080/mcp, with everything in memory.
//
// Three bearer tokens stand for three users of two tenants:
//
//	acme-viewer    tenant acme,   subject alice, role viewer
//	acme-admin     tenant acme,   subject bob,   role admin
//	globex-editor  tenant globex, subject carol, role editor
//
// Each caller sees only its tenant's documents and the tools its tenant and
// role allow; delete_doc asks a human to confirm before it deletes.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/elicitation"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	flag.Parse()

	mux := http.NewServeMux()
	h := newDemo().handler()
	mux.Handle("/mcp", h)
	// Clients of the 2024-11-05 HTTP+SSE transport: GET /sse, POST /messages.
	sse, messages := h.LegacySSE("/messages")
	mux.Handle("/sse", sse)
	mux.Handle("/messages", messages)
	fmt.Printf("MCP endpoint: http://%s/mcp (legacy HTTP+SSE: http://%s/sse)\n", *addr, *addr)
	fmt.Println("Bearer tokens:")
	for _, t := range tokenList {
		u := tokens[t]
		fmt.Printf("  %-14s tenant %-6s subject %-5s role %s\n", t, u.Tenant, u.Subject, u.Role)
	}
	srv := &http.Server{Addr: *addr, Handler: mux}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// tokens maps the demo's bearer tokens to identities.
var tokens = map[string]mcphandler.Identity{
	"acme-viewer":   {Tenant: "acme", Subject: "alice", Role: "viewer"},
	"acme-admin":    {Tenant: "acme", Subject: "bob", Role: "admin"},
	"globex-editor": {Tenant: "globex", Subject: "carol", Role: "editor"},
}

var tokenList = []string{"acme-viewer", "acme-admin", "globex-editor"}

var errBadToken = errors.New("unknown or missing bearer token")

func authenticate(r *http.Request) (mcphandler.Identity, error) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if id, found := tokens[tok]; ok && found {
		return id, nil
	}
	return mcphandler.Identity{}, errBadToken
}

// doc is one document of a tenant.
type doc struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

// demo holds the tenants' documents and invoices, and its tools, built once.
type demo struct {
	mu       sync.Mutex // guards docs and bodies
	docs     map[string][]doc
	bodies   map[string]string // by tenant + "/" + id
	invoices atomic.Int64

	whoami, searchDocs, deleteDoc, createInvoice mcphandler.Tool
}

func newDemo() *demo {
	d := &demo{docs: map[string][]doc{
		"acme":   {{"a1", "Q3 roadmap"}, {"a2", "Incident 42 postmortem"}, {"a3", "Onboarding guide"}},
		"globex": {{"g1", "Price list"}, {"g2", "Supplier contracts"}},
	}, bodies: map[string]string{
		"acme/a1":   "Q3 roadmap: ship the billing revamp, retire the v1 API, open the Berlin office.",
		"acme/a2":   "Incident 42 postmortem: a config push disabled TLS renewal; certificates expired for 47 minutes.",
		"acme/a3":   "Onboarding guide: get a laptop, read the handbook, pair with your buddy in week one.",
		"globex/g1": "Price list: widgets 4 EUR, gizmos 11 EUR, volume discounts above 1000 units.",
		"globex/g2": "Supplier contracts: three suppliers, renewals due in March, penalties for late delivery.",
	}}
	d.whoami = d.whoamiTool()
	d.searchDocs = d.searchDocsTool()
	d.deleteDoc = d.deleteDocTool()
	d.createInvoice = d.createInvoiceTool()
	return d
}

func (d *demo) handler() *mcphandler.Handler {
	return mcphandler.New(mcphandler.Config{
		Name:         "mcphandler-quickstart",
		Version:      "0.1.0",
		Instructions: "Documents of your workspace. Use search_docs to find a document before acting on it.",
		Authenticate: authenticate,
		Roles:        []string{"viewer", "editor", "admin"},
		ListTools:    d.listTools,
		BeforeCall:   beforeCall,
		ListResourceTemplates: func(context.Context) ([]mcphandler.ResourceTemplate, error) {
			return []mcphandler.ResourceTemplate{{
				URITemplate: "docs://{id}", Name: "doc", Title: "A document of your workspace",
				Description: "The text of one document; find ids with search_docs.", MimeType: "text/plain",
			}}, nil
		},
		ReadResource: d.readDoc,
		ListPrompts: func(context.Context) ([]mcphandler.Prompt, error) {
			return []mcphandler.Prompt{{
				Name: "summarize_doc", Title: "Summarize a document",
				Description: "Asks the model to summarize one document of your workspace, embedded in the prompt.",
				Arguments:   []mcphandler.PromptArgument{{Name: "id", Description: "The document id, e.g. a1.", Required: true}},
			}}, nil
		},
		GetPrompt: d.summarizePrompt,
		OnCall: func(ev mcphandler.CallEvent) {
			log.Printf("call tool=%s tenant=%s subject=%s outcome=%s error=%s in %v",
				ev.Tool, ev.Identity.Tenant, ev.Identity.Subject, ev.Outcome, ev.ErrorClass, ev.Duration)
		},
	})
}

// body returns the text of the caller's tenant's document id.
func (d *demo) body(tenant, id string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !slices.ContainsFunc(d.docs[tenant], func(dc doc) bool { return dc.ID == id }) {
		return "", false
	}
	return d.bodies[tenant+"/"+id], true
}

// readDoc serves docs://{id} from the caller's own tenant only.
func (d *demo) readDoc(_ context.Context, req *mcphandler.ResourceRequest) ([]mcphandler.ResourceContents, error) {
	text, ok := d.body(req.Identity.Tenant, req.Params["id"])
	if !ok {
		return nil, mcphandler.ErrResourceNotFound
	}
	return []mcphandler.ResourceContents{{URI: req.URI, MimeType: "text/plain", Text: text}}, nil
}

func (d *demo) summarizePrompt(_ context.Context, req *mcphandler.PromptRequest) (*mcphandler.PromptResult, error) {
	id := req.Arguments["id"]
	text, ok := d.body(req.Identity.Tenant, id)
	if !ok {
		return nil, mcphandler.NewError(mcphandler.CodeInvalidParams, "no document with that id")
	}
	return &mcphandler.PromptResult{
		Description: "Summarize document " + id,
		Messages: []mcphandler.PromptMessage{
			{Role: "user", Content: mcphandler.TextContent("Summarize this document in three bullet points.")},
			{Role: "user", Content: mcphandler.EmbeddedResourceContent(mcphandler.ResourceContents{URI: "docs://" + id, MimeType: "text/plain", Text: text})},
		},
	}, nil
}

// beforeCall asks a human before any destructive tool runs; to delete a
// document, the human types its id. The same confirm works for 2025
// clients (an elicitation) and 2026-07-28 clients (an input request).
func beforeCall(_ context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
	if call.Tool.Name == "delete_doc" {
		var in deleteIn
		json.Unmarshal(call.Arguments, &in)
		return mcphandler.Confirm("Delete document "+in.ID+" for good? Type its id to confirm.").
			WithForm(elicitation.TypeToConfirm("id", "Document id", in.ID), map[string]any{"id": in.ID}), nil
	}
	return mcphandler.ConfirmDestructive(nil)(context.Background(), call)
}

// listTools returns the tools of the caller's tenant; the handler hides
// those above the caller's role.
func (d *demo) listTools(ctx context.Context) ([]mcphandler.Tool, error) {
	id, _ := mcphandler.IdentityFrom(ctx)
	tools := []mcphandler.Tool{d.whoami, d.searchDocs}
	switch id.Tenant {
	case "acme":
		tools = append(tools, d.deleteDoc)
	case "globex":
		tools = append(tools, d.createInvoice)
	}
	return tools, nil
}

type whoamiOut struct {
	Tenant  string `json:"tenant"`
	Subject string `json:"subject"`
	Role    string `json:"role"`
}

var readOnly = &mcphandler.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}

func (d *demo) whoamiTool() mcphandler.Tool {
	return mcphandler.NewTool(mcphandler.Tool{
		Name:        "whoami",
		Title:       "Who am I",
		Description: "Returns the caller's tenant, subject and role. Use it to check which workspace you act in.",
		Annotations: readOnly,
		MinRole:     "viewer",
	}, func(_ context.Context, call *mcphandler.ToolCall, _ struct{}) (whoamiOut, error) {
		return whoamiOut{call.Identity.Tenant, call.Identity.Subject, call.Identity.Role}, nil
	})
}

type searchIn struct {
	Query string `json:"query,omitempty" jsonschema:"Words to find in document titles, case-insensitive. Empty matches every document."`
	Limit int    `json:"limit,omitempty" jsonschema:"Most documents to return: default 10, at most 50."`
}

type searchOut struct {
	Docs  []doc `json:"docs"`
	Count int   `json:"count"`
}

func (d *demo) searchDocsTool() mcphandler.Tool {
	return mcphandler.NewTool(mcphandler.Tool{
		Name:        "search_docs",
		Title:       "Search documents",
		Description: "Lists the documents of your workspace whose title contains the query, as {docs:[{id,title}], count}. Use it to find a document's id.",
		Annotations: readOnly,
		MinRole:     "viewer",
	}, func(_ context.Context, call *mcphandler.ToolCall, in searchIn) (searchOut, error) {
		limit := in.Limit
		if limit <= 0 {
			limit = 10
		}
		limit = min(limit, 50)
		q := strings.ToLower(in.Query)
		out := searchOut{Docs: []doc{}}
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, dc := range d.docs[call.Identity.Tenant] {
			if strings.Contains(strings.ToLower(dc.Title), q) && len(out.Docs) < limit {
				out.Docs = append(out.Docs, dc)
			}
		}
		out.Count = len(out.Docs)
		return out, nil
	})
}

type deleteIn struct {
	ID string `json:"id" jsonschema:"The id of the document to delete, as returned by search_docs."`
}

type deleteOut struct {
	Deleted string `json:"deleted"`
}

func (d *demo) deleteDocTool() mcphandler.Tool {
	return mcphandler.NewTool(mcphandler.Tool{
		Name:        "delete_doc",
		Title:       "Delete a document",
		Description: "Deletes one document of your workspace for good, after a human confirms. Find the id with search_docs first.",
		Annotations: &mcphandler.ToolAnnotations{DestructiveHint: new(true), OpenWorldHint: new(false)},
		MinRole:     "admin",
	}, func(_ context.Context, call *mcphandler.ToolCall, in deleteIn) (deleteOut, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		docs := d.docs[call.Identity.Tenant]
		i := slices.IndexFunc(docs, func(dc doc) bool { return dc.ID == in.ID })
		if i < 0 {
			return deleteOut{}, mcphandler.NotFound("no document with id %q", in.ID)
		}
		d.docs[call.Identity.Tenant] = slices.Delete(slices.Clone(docs), i, i+1)
		return deleteOut{Deleted: in.ID}, nil
	})
}

type invoiceIn struct {
	Customer    string `json:"customer" jsonschema:"The customer to bill."`
	AmountCents int64  `json:"amount_cents" jsonschema:"The amount in cents, greater than zero."`
}

type invoiceOut struct {
	InvoiceID string `json:"invoice_id"`
}

func (d *demo) createInvoiceTool() mcphandler.Tool {
	return mcphandler.NewTool(mcphandler.Tool{
		Name:        "create_invoice",
		Title:       "Create an invoice",
		Description: "Creates an invoice for a customer and returns its id.",
		Annotations: &mcphandler.ToolAnnotations{DestructiveHint: new(false), OpenWorldHint: new(false)},
		MinRole:     "editor",
	}, func(_ context.Context, call *mcphandler.ToolCall, in invoiceIn) (invoiceOut, error) {
		if in.Customer == "" {
			return invoiceOut{}, mcphandler.BadArgs("customer must not be empty")
		}
		if in.AmountCents <= 0 {
			return invoiceOut{}, mcphandler.BadArgs("amount_cents must be greater than zero")
		}
		n := d.invoices.Add(1)
		return invoiceOut{InvoiceID: fmt.Sprintf("inv-%s-%04d", call.Identity.Tenant, n)}, nil
	})
}
