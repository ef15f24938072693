// Command quickstart serves a small multi-tenant MCP demo on
// http://127.0.0.1:8080/mcp, with everything in memory — or in Redis, so
// that several processes on several ports behave as one service: a single
// server (-redis URL), a Redis Cluster (-redis-cluster ADDR[,ADDR...]) or a
// master watched by Sentinels (-redis-sentinel NAME@ADDR[,ADDR...]), or
// the same from $REDIS_URL, $REDIS_CLUSTER or $REDIS_SENTINEL. Those
// processes share a secret, -state-key (default $MCP_STATE_KEY, at least
// 32 bytes), that authenticates what they exchange through Redis; without
// one the demo keeps a key in Redis itself, which is fine for trying it
// and says so, but leaves confirms forgeable by anything with access to
// that Redis.
//
// Three bearer tokens stand for three users of two tenants:
//
//	acme-viewer    tenant acme,   subject alice, role viewer
//	acme-admin     tenant acme,   subject bob,   role admin
//	globex-editor  tenant globex, subject carol, role editor
//
// Each caller sees only its tenant's documents and the tools its tenant and
// role allow; delete_doc asks a human to confirm before it deletes.
//
// With -rate-limit N, each tenant may make N tools/call per second (and
// bursts of up to N), across every process sharing its -redis, or in this
// process's memory without -redis; a call over the limit is refused with
// JSON-RPC error -32000, whose data says how long to wait (retryAfterMs)
// and which limit applied. The limit is checked before any confirm, so a
// refused delete_doc asks nobody.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/examples/quickstart/internal/redisflag"
	"github.com/mcphandler/mcphandler/ratelimit"
	"github.com/mcphandler/mcphandler/session/redisstore"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	rf := redisflag.Register(flag.CommandLine, os.Getenv)
	stateKey := flag.String("state-key", os.Getenv("MCP_STATE_KEY"), "with a Redis, the secret every process shares (at least 32 bytes), which seals 2026-07-28 request states and authenticates what the processes exchange through Redis (default $MCP_STATE_KEY)")
	rateLimit := flag.Int("rate-limit", 0, "if positive, each tenant may make at most this many tools/call per second, across every process sharing its Redis (in memory without one); 0: no limit")
	otlp := flag.String("otlp", "", "if set, the base URL of an OpenTelemetry collector (e.g. http://127.0.0.1:4318) to which traces and metrics are exported over OTLP/HTTP: metrics every 5 s, both flushed on SIGTERM")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage of %s (everything in memory unless one of -redis, -redis-cluster, -redis-sentinel names a Redis, which every process using it shares):\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	topo, err := rf.Topology()
	if err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		flag.Usage()
		os.Exit(2)
	}

	var (
		d   *demo
		cfg mcphandler.Config
	)
	if topo.Kind == redisflag.None {
		d = newDemo(newMemDocs())
	} else {
		c, err := redisflag.NewClient(topo, 0) // tuned as package redisstore asks: see "Client settings" there
		if err == nil {
			d, cfg, err = withRedis(context.Background(), c, "mcph-quickstart:", []byte(*stateKey))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "quickstart: redis:", err)
			os.Exit(1)
		}
		fmt.Println("Sessions, confirms and documents live in", topo)
	}

	if *rateLimit > 0 {
		store, _ := cfg.Store.(*redisstore.Store) // nil without -redis: in memory
		var err error
		if d.limits, err = tenantLimit(*rateLimit, store, "mcph-quickstart:"); err != nil {
			fmt.Fprintln(os.Stderr, "quickstart: -rate-limit:", err)
			os.Exit(2)
		}
		fmt.Printf("Each tenant may make %d tools/call per second\n", *rateLimit)
	}

	flush := func(context.Context) error { return nil }
	if *otlp != "" {
		icp, shutdown, err := setupOTLP(context.Background(), *otlp)
		if err != nil {
			fmt.Fprintln(os.Stderr, "quickstart:", err)
			os.Exit(2)
		}
		cfg.Interceptors = append(cfg.Interceptors, icp)
		flush = shutdown
		fmt.Println("Traces and metrics go to", *otlp, "over OTLP/HTTP")
	}

	mux := http.NewServeMux()
	h := d.handler(cfg)
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
	// ReadHeaderTimeout and IdleTimeout bound slow or idle clients. No
	// ReadTimeout or WriteTimeout: they would cut SSE streams (GET,
	// subscriptions/listen, long tool calls); the handler bounds the time
	// it reads a POST body itself (Config.Limits.ReadBodyTimeout).
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	serve(srv, h, flush)
}

// serve runs srv until it fails or the process gets SIGTERM or SIGINT; then
// it stops taking requests, gives those under way a few seconds, and
// flushes the telemetry.
func serve(srv *http.Server, h *mcphandler.Handler, flush func(context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	failed := make(chan error, 1)
	go func() { failed <- srv.ListenAndServe() }()
	select {
	case err := <-failed:
		fmt.Fprintln(os.Stderr, err)
		flush(context.Background())
		os.Exit(1)
	case <-ctx.Done():
	}
	// Shutdown ends the sessions' GET streams at once (the handler took
	// their connections over); subscriptions/listen streams are cut after
	// the grace.
	grace, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	srv.Shutdown(grace)
	h.Close()
	export, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := flush(export); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart: flushing telemetry:", err)
		os.Exit(1)
	}
}

// withRedis returns the demo and the handler configuration that keep
// everything in Redis under prefix. stateKey is the secret every process
// shares: it seals 2026-07-28 request states and authenticates the records
// and messages the processes exchange through Redis, so it must not be
// kept in Redis itself (anything with access to Redis could then forge
// them). A real deployment reads it from its secret store. When stateKey
// is empty, the demo makes one and keeps it in Redis, so that several
// processes started with only -redis still work together; that gives up
// the protection against Redis access, and the demo says so.
func withRedis(ctx context.Context, c redis.UniversalClient, prefix string, stateKey []byte) (*demo, mcphandler.Config, error) {
	var cfg mcphandler.Config
	docs, err := newRedisDocs(ctx, c, prefix)
	if err != nil {
		return nil, cfg, err
	}
	switch {
	case len(stateKey) == 0:
		if stateKey, err = demoStateKey(ctx, c, prefix+"state-key"); err != nil {
			return nil, cfg, err
		}
		fmt.Fprintln(os.Stderr, "quickstart: no -state-key: using a demo key kept in Redis; anything with access to that Redis can forge confirms (set -state-key or $MCP_STATE_KEY to a secret of at least 32 bytes)")
	case len(stateKey) < 32:
		return nil, cfg, errors.New("-state-key must be at least 32 bytes")
	}
	cfg.StateKeys = [][]byte{stateKey}
	cfg.Store = redisstore.New(c, redisstore.Options{Prefix: prefix})
	return newDemo(docs), cfg, nil
}

// tenantLimit returns the demo's rate limit: each tenant at most n
// tools/call per second, in bursts of up to n, kept in the Redis of store
// under prefix (shared by every process using it), or in this process's
// memory when store is nil.
func tenantLimit(n int, store *redisstore.Store, prefix string) (*ratelimit.Limiter, error) {
	return ratelimit.New(ratelimit.Options{Redis: store, Prefix: prefix + "rl:"},
		ratelimit.Limit{Name: "tenant", By: ratelimit.ByTenant, Rate: n})
}

// demoStateKey returns a key made once and kept in Redis, for a demo
// started without -state-key.
func demoStateKey(ctx context.Context, c redis.UniversalClient, key string) ([]byte, error) {
	k := make([]byte, 32)
	rand.Read(k)
	if _, err := c.SetNX(ctx, key, k, 0).Result(); err != nil {
		return nil, err
	}
	return c.Get(ctx, key).Bytes()
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

// demo is the demo's tools and hooks over its documents.
type demo struct {
	docs   docStore
	limits *ratelimit.Limiter // nil: no rate limit

	whoami, searchDocs, deleteDoc, createInvoice, exportDocs mcphandler.Tool
}

func newDemo(docs docStore) *demo {
	d := &demo{docs: docs}
	d.whoami = d.whoamiTool()
	d.searchDocs = d.searchDocsTool()
	d.deleteDoc = d.deleteDocTool()
	d.createInvoice = d.createInvoiceTool()
	d.exportDocs = d.exportDocsTool()
	return d
}

// handler returns the demo's MCP handler; cfg brings the store and state
// keys (zero: in memory).
func (d *demo) handler(cfg mcphandler.Config) *mcphandler.Handler {
	cfg.Name = "mcphandler-quickstart"
	cfg.Version = "0.1.0"
	cfg.Instructions = "Documents of your workspace. Use search_docs to find a document before acting on it."
	cfg.Authenticate = authenticate
	cfg.Roles = []string{"viewer", "editor", "admin"}
	cfg.ListTools = d.listTools
	cfg.BeforeCall = beforeCall
	if d.limits != nil {
		cfg.BeforeCall = d.limits.Policy(beforeCall) // limits first: a refused call asks nobody
	}
	cfg.ListResourceTemplates = func(context.Context) ([]mcphandler.ResourceTemplate, error) {
		return []mcphandler.ResourceTemplate{{
			URITemplate: "docs://{id}", Name: "doc", Title: "A document of your workspace",
			Description: "The text of one document; find ids with search_docs.", MimeType: "text/plain",
		}}, nil
	}
	cfg.ReadResource = d.readDoc
	cfg.ListPrompts = func(context.Context) ([]mcphandler.Prompt, error) {
		return []mcphandler.Prompt{{
			Name: "summarize_doc", Title: "Summarize a document",
			Description: "Asks the model to summarize one document of your workspace, embedded in the prompt.",
			Arguments:   []mcphandler.PromptArgument{{Name: "id", Description: "The document id, e.g. a1.", Required: true}},
		}}, nil
	}
	cfg.GetPrompt = d.summarizePrompt
	cfg.OnCall = func(ev mcphandler.CallEvent) {
		log.Printf("call tool=%s tenant=%s subject=%s outcome=%s error=%s confirm=%s in %v",
			ev.Tool, ev.Identity.Tenant, ev.Identity.Subject, ev.Outcome, ev.ErrorClass, ev.ConfirmID, ev.Duration)
	}
	return mcphandler.New(cfg)
}

// readDoc serves docs://{id} from the caller's own tenant only.
func (d *demo) readDoc(ctx context.Context, req *mcphandler.ResourceRequest) ([]mcphandler.ResourceContents, error) {
	text, ok, err := d.docs.body(ctx, req.Identity.Tenant, req.Params["id"])
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, mcphandler.ErrResourceNotFound
	}
	return []mcphandler.ResourceContents{{URI: req.URI, MimeType: "text/plain", Text: text}}, nil
}

func (d *demo) summarizePrompt(ctx context.Context, req *mcphandler.PromptRequest) (*mcphandler.PromptResult, error) {
	id := req.Arguments["id"]
	text, ok, err := d.docs.body(ctx, req.Identity.Tenant, id)
	if err != nil {
		return nil, err
	}
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
	tools := []mcphandler.Tool{d.whoami, d.searchDocs, d.exportDocs}
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
	}, func(ctx context.Context, call *mcphandler.ToolCall, in searchIn) (searchOut, error) {
		docs, err := d.docs.list(ctx, call.Identity.Tenant)
		if err != nil {
			return searchOut{}, mcphandler.Unavailable(err)
		}
		limit := in.Limit
		if limit <= 0 {
			limit = 10
		}
		limit = min(limit, 50)
		q := strings.ToLower(in.Query)
		out := searchOut{Docs: []doc{}}
		for _, dc := range docs {
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
	}, func(ctx context.Context, call *mcphandler.ToolCall, in deleteIn) (deleteOut, error) {
		ok, err := d.docs.remove(ctx, call.Identity.Tenant, in.ID)
		if err != nil {
			return deleteOut{}, mcphandler.Unavailable(err)
		}
		if !ok {
			return deleteOut{}, mcphandler.NotFound("no document with id %q", in.ID)
		}
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
	}, func(ctx context.Context, call *mcphandler.ToolCall, in invoiceIn) (invoiceOut, error) {
		if in.Customer == "" {
			return invoiceOut{}, mcphandler.BadArgs("customer must not be empty")
		}
		if in.AmountCents <= 0 {
			return invoiceOut{}, mcphandler.BadArgs("amount_cents must be greater than zero")
		}
		n, err := d.docs.nextInvoice(ctx)
		if err != nil {
			return invoiceOut{}, mcphandler.Unavailable(err)
		}
		return invoiceOut{InvoiceID: fmt.Sprintf("inv-%s-%04d", call.Identity.Tenant, n)}, nil
	})
}
