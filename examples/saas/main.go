// Command saas serves an OAuth-protected, multi-workspace MCP server: the
// kind of endpoint a SaaS product exposes to its customers' AI agents.
//
// Every request must carry an access token from the configured OpenID
// Connect provider, issued for this server (its audience is the MCP
// endpoint's URL). The token's tenant claim picks the caller's workspace;
// each workspace has its own notes and its own tool list (workspaces on the
// "pro" plan get an extra tool). Clients discover the authorization server
// through the protected resource metadata served at
// /.well-known/oauth-protected-resource/mcp.
//
//	go run ./examples/saas -issuer https://login.example.com -tenant-claim org_id
//
// With -redis URL and -state-key KEY
// (or $MCP_STATE_KEY), replicas share sessions, confirms, approvals and
// decisions; without them, everything is in memory.
//
// See README.md for how to point an MCP client with OAuth support at it.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/auth"
	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	issuer := flag.String("issuer", "", "issuer URL of the OpenID Connect provider (required)")
	audience := flag.String("audience", "", "this server's canonical MCP URL, which tokens must name in \"aud\" (default http://<addr>/mcp)")
	tenantClaim := flag.String("tenant-claim", auth.DefaultTenantClaim, "token claim that names the caller's workspace, e.g. org_id")
	scopes := flag.String("scopes", "mcp:tools", "space-separated scopes clients should request (named in 401 challenges)")
	pro := flag.String("pro", "", "comma-separated workspaces on the pro plan")
	defaultRole := flag.String("default-role", "editor", "role of callers whose token names none of the roles viewer, editor or admin")
	roleClaims := flag.String("role-claims", "role,roles", "comma-separated claims naming the caller's roles (a string or an array; the highest of viewer < editor < admin wins); a name starting with / is a JSON pointer, e.g. /realm_access/roles for Keycloak's realm roles")
	origins := flag.String("allow-origin", "", "comma-separated browser origins allowed to call the endpoint directly, e.g. http://localhost:6274")
	approvals := flag.Bool("approvals", false, "serve the approval page at /approvals/ and the delete_note tool, which an admin of the caller's workspace other than the caller approves there")
	approvalID := flag.String("approval-client-id", "", "client ID of the approval page at the issuer (authorization code flow; redirect URI <origin of -audience>/approvals/callback)")
	approvalSecret := flag.String("approval-client-secret", "", "client secret of the approval page at the issuer")
	approvalTTL := flag.Duration("approval-ttl", approval.DefaultTTL, "how long an approval link lives (the handler's ConfirmTimeout follows it)")
	webhook := flag.String("approval-webhook", "", "with -approvals, post each new pending approval as JSON (id, url, tool, tenant, asker, expires) to this URL, once per approval")
	redisURL := flag.String("redis", os.Getenv("REDIS_URL"), "a Redis URL (redis://host:port/db) where sessions, confirms, approvals and decisions are kept, shared by every replica using it (default $REDIS_URL; none: in memory)")
	stateKey := flag.String("state-key", os.Getenv("MCP_STATE_KEY"), "with a Redis, the secret every process shares (at least 32 bytes), which signs approvals and confirms and seals 2026-07-28 request states (default $MCP_STATE_KEY)")
	auditPath := flag.String("audit", "", "append one JSON line per decided call (mcphandler.Audit: who asked, what was shown, who decided, the digest of what ran) to this file, created 0600 if missing")
	flag.Parse()

	if *issuer == "" {
		fmt.Fprintln(os.Stderr, "saas: -issuer is required")
		flag.Usage()
		os.Exit(2)
	}
	if *audience == "" {
		*audience = defaultAudience(*addr)
	}
	var rdb redis.UniversalClient
	if *redisURL != "" {
		var err error
		// Tuned as package redisstore asks: see "Client settings" there.
		if rdb, err = redisstore.NewClient(redisstore.Single, *redisURL); err != nil {
			fmt.Fprintln(os.Stderr, "saas: -redis:", err)
			os.Exit(2)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	mux, prm, err := newServer(ctx, options{
		issuer:      *issuer,
		audience:    *audience,
		tenantClaim: *tenantClaim,
		scopes:      strings.Fields(*scopes),
		defaultRole: *defaultRole,
		roleClaims:  splitList(*roleClaims),
		pro:         splitList(*pro),
		origins:     splitList(*origins),
		approvals:   *approvals,
		approvalID:  *approvalID, approvalSecret: *approvalSecret, approvalTTL: *approvalTTL,
		approvalWebhook: *webhook,
		redis:           rdb, redisPrefix: "mcph-saas:", stateKey: []byte(*stateKey),
		audit: *auditPath,
	})
	cancel()
	if err != nil {
		log.Fatalf("saas: %v", err)
	}

	log.Printf("MCP endpoint:       %s", *audience)
	log.Printf("resource metadata:  %s", prm.MetadataURL())
	log.Printf("authorization server: %s (tenant claim %q, role claims %q)", *issuer, *tenantClaim, *roleClaims)
	if rdb != nil {
		log.Printf("sessions, approvals and decisions live in Redis at %s", redactURL(*redisURL))
	}
	if *approvals {
		log.Printf("approval page:      %s", approvalBase(*audience)+"/approvals/")
	}
	// ReadHeaderTimeout and IdleTimeout bound slow or idle clients. No
	// ReadTimeout or WriteTimeout: they would cut SSE streams (GET,
	// subscriptions/listen, long tool calls); the handler bounds the time
	// it reads a POST body itself (Config.Limits.ReadBodyTimeout).
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	log.Fatal(srv.ListenAndServe())
}

// options are the server's settings, from the flags.
type options struct {
	issuer, audience, tenantClaim, defaultRole string
	scopes, pro, origins                       []string
	roleClaims                                 []string     // nil: role, roles
	httpClient                                 *http.Client // for the provider; nil for the default

	// approvals turns on the approval page and delete_note; the page signs
	// in at issuer as the client approvalID (secret approvalSecret).
	approvals                  bool
	approvalID, approvalSecret string
	approvalTTL                time.Duration
	// approvalWebhook, if set, is told of each new pending approval
	// (notifyWebhook).
	approvalWebhook string

	// redis, if set, keeps sessions, confirms, approvals and decisions
	// under redisPrefix, shared by every process using it with the same
	// stateKey; nil keeps them in this process's memory.
	redis       redis.UniversalClient
	redisPrefix string
	stateKey    []byte

	// audit, if set, is the file the audit record of each decided call
	// is appended to, one JSON line each (auditLog).
	audit string
}

// state returns where the handler, the approvals and the page keep what
// they share, and the keys that sign and seal it: the Redis of o with its
// state key (a demo key kept in Redis when none is given, as the
// quickstart does, with a warning), or this process's memory and a random
// key.
func (o options) state(ctx context.Context) (session.Store, [][]byte, error) {
	if o.redis == nil {
		key := make([]byte, 32)
		rand.Read(key)
		return session.NewMemory(), [][]byte{key}, nil
	}
	key := o.stateKey
	switch {
	case len(key) == 0:
		k := make([]byte, 32)
		rand.Read(k)
		name := o.redisPrefix + "state-key"
		if err := o.redis.SetNX(ctx, name, k, 0).Err(); err != nil {
			return nil, nil, err
		}
		got, err := o.redis.Get(ctx, name).Bytes()
		if err != nil {
			return nil, nil, err
		}
		key = got
		log.Printf("saas: no -state-key: using a demo key kept in Redis; anything with access to that Redis can forge approvals and confirms (set -state-key or $MCP_STATE_KEY to a secret of at least 32 bytes)")
	case len(key) < 32:
		return nil, nil, errors.New("-state-key must be at least 32 bytes")
	}
	return redisstore.New(o.redis, redisstore.Options{Prefix: o.redisPrefix}), [][]byte{key}, nil
}

// newServer returns the mux serving the MCP endpoint (at the audience URL's
// path) and the protected resource metadata.
func newServer(ctx context.Context, o options) (*http.ServeMux, *auth.ProtectedResource, error) {
	u, err := url.Parse(o.audience)
	if err != nil || u.Host == "" {
		return nil, nil, fmt.Errorf("-audience %q is not an absolute URL", o.audience)
	}
	mcpPath := u.Path
	if mcpPath == "" {
		mcpPath = "/"
	}
	roles := []string{"viewer", "editor", "admin"}
	// One mapping from claims to identity, for the access tokens here and
	// the approval page's ID tokens: a person is the same workspace,
	// subject and role on both.
	claims := auth.ClaimsMapping{TenantClaim: o.tenantClaim, RoleClaims: o.roleClaims, Roles: roles, DefaultRole: o.defaultRole}
	oidc, err := auth.NewOIDC(ctx, auth.OIDCConfig{
		Issuer:     o.issuer,
		Audience:   o.audience,
		HTTPClient: o.httpClient,
		Claims:     claims.Map,
	})
	if err != nil {
		return nil, nil, err
	}
	prm := &auth.ProtectedResource{
		Resource:             o.audience,
		AuthorizationServers: []string{o.issuer},
		ScopesSupported:      unionFields(o.scopes, noteWriteScope),
		Scopes:               o.scopes,
		ResourceName:         "mcphandler SaaS demo",
	}
	store, keys, err := o.state(ctx)
	if err != nil {
		return nil, nil, err
	}
	a := newApp(o.pro)
	var audit *auditLog
	if o.audit != "" {
		if audit, err = openAuditLog(o.audit); err != nil {
			return nil, nil, err
		}
	}
	cfg := mcphandler.Config{
		Store:          store,
		StateKeys:      keys,
		Version:        "0.1.0",
		ServerInfo:     a.serverInfo,
		Authenticate:   oidc.Authenticate,
		Challenge:      prm.Challenge,
		Scopes:         mcphandler.ScopeOptions{Challenge: prm.ScopeChallenge},
		Roles:          roles,
		ListTools:      a.listTools,
		AllowedOrigins: o.origins,
		OnCall: func(ev mcphandler.CallEvent) {
			log.Printf("call tool=%s workspace=%s subject=%s outcome=%s in %v",
				ev.Tool, ev.Identity.Tenant, ev.Identity.Subject, ev.Outcome, ev.Duration)
			if ev.Audit != nil && audit != nil {
				audit.write(ev.Audit)
			}
		},
	}
	mux := http.NewServeMux()
	if o.approvals {
		if err := a.withApprovals(ctx, &cfg, mux, o, claims.Map); err != nil {
			return nil, nil, err
		}
	}
	prm.Mount(mux)
	mux.Handle(mcpPath, mcphandler.New(cfg)) // AllowedOrigins also answers their CORS preflights
	return mux, prm, nil
}

// auditLog appends the audit record of each decided call to a file, one
// JSON line each, as mcphandler encodes it (its member names are stable).
// It is safe for concurrent use: each line is one write under mu, so the
// lines of concurrent calls never interleave. A write that fails is
// logged; the call it records has already been answered.
type auditLog struct {
	mu   sync.Mutex
	f    *os.File
	path string
}

// openAuditLog opens path for appending, creating it (0600: the records
// name people and arguments) if it does not exist.
func openAuditLog(path string) (*auditLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("-audit: %w", err)
	}
	return &auditLog{f: f, path: path}, nil
}

func (l *auditLog) write(a *mcphandler.Audit) {
	line, err := json.Marshal(a)
	if err != nil {
		log.Printf("saas: audit record of %s: %v", a.Tool, err)
		return
	}
	line = append(line, '\n')
	l.mu.Lock()
	_, err = l.f.Write(line)
	l.mu.Unlock()
	if err != nil {
		log.Printf("saas: audit log %s: %v", l.path, err)
	}
}

// defaultAudience is http://<addr>/mcp, with "localhost" for an address
// without a host.
func defaultAudience(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr + "/mcp"
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/mcp"
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func unionFields(list []string, more ...string) []string {
	out := slices.Clone(list)
	for _, m := range more {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// noteWriteScope is the scope add_note needs: a token without it sees the
// tool but calling it answers 403 with an insufficient_scope challenge,
// and the client asks the user to grant it (step-up authorization).
const noteWriteScope = "notes:write"

// note is one note of a workspace.
type note struct {
	ID      int       `json:"id"`
	Text    string    `json:"text"`
	Author  string    `json:"author"`
	Created time.Time `json:"created"`
}

// workspace is one customer's data.
type workspace struct {
	id   string
	plan string

	mu    sync.Mutex // guards notes and last
	notes []note
	last  int // the id of the last note added (ids are never reused)
}

// app holds the workspaces, created on first use, and the tools.
type app struct {
	pro []string

	mu         sync.Mutex // guards workspaces
	workspaces map[string]*workspace

	info, list, add, export mcphandler.Tool
	del                     *mcphandler.Tool // with -approvals only
}

func newApp(pro []string) *app {
	a := &app{pro: pro, workspaces: map[string]*workspace{}}
	a.info = a.infoTool()
	a.list = a.listTool()
	a.add = a.addTool()
	a.export = a.exportTool()
	return a
}

// workspace returns the caller's workspace, creating it on first use.
func (a *app) workspace(tenant string) *workspace {
	a.mu.Lock()
	defer a.mu.Unlock()
	ws, ok := a.workspaces[tenant]
	if !ok {
		plan := "free"
		if slices.Contains(a.pro, tenant) {
			plan = "pro"
		}
		ws = &workspace{id: tenant, plan: plan}
		a.workspaces[tenant] = ws
	}
	return ws
}

// tools returns the tools of a workspace's plan.
func (a *app) tools(ws *workspace) []mcphandler.Tool {
	tools := []mcphandler.Tool{a.info, a.list, a.add}
	if ws.plan == "pro" {
		tools = append(tools, a.export)
	}
	if a.del != nil {
		tools = append(tools, *a.del)
	}
	return tools
}

// listTools returns the caller's workspace's tools; the handler hides those
// above the caller's role.
func (a *app) listTools(ctx context.Context) ([]mcphandler.Tool, error) {
	id, _ := mcphandler.IdentityFrom(ctx)
	return a.tools(a.workspace(id.Tenant)), nil
}

func (a *app) serverInfo(ctx context.Context) mcphandler.ServerInfo {
	id, _ := mcphandler.IdentityFrom(ctx)
	return mcphandler.ServerInfo{
		Name:    "saas-" + id.Tenant,
		Title:   "Notes of workspace " + id.Tenant,
		Version: "0.1.0",
		Instructions: "You act in the workspace " + id.Tenant + " for " + id.Subject +
			". Use workspace_info to see the plan and the tools, list_notes before add_note.",
	}
}

var readOnly = &mcphandler.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}

type infoOut struct {
	Workspace string   `json:"workspace"`
	Plan      string   `json:"plan"`
	Subject   string   `json:"subject"`
	Role      string   `json:"role"`
	Scopes    []string `json:"scopes"`
	Tools     []string `json:"tools"`
	Notes     int      `json:"notes"`
}

func (a *app) infoTool() mcphandler.Tool {
	return mcphandler.NewTool(mcphandler.Tool{
		Name:        "workspace_info",
		Title:       "Workspace info",
		Description: "Returns the caller's workspace, its plan, the caller's subject, role and granted scopes, and the workspace's tools.",
		Annotations: readOnly,
	}, func(_ context.Context, call *mcphandler.ToolCall, _ struct{}) (infoOut, error) {
		ws := a.workspace(call.Identity.Tenant)
		out := infoOut{
			Workspace: ws.id,
			Plan:      ws.plan,
			Subject:   call.Identity.Subject,
			Role:      call.Identity.Role,
			Scopes:    append([]string{}, call.Identity.Scopes...),
		}
		for _, t := range a.tools(ws) {
			out.Tools = append(out.Tools, t.Name)
		}
		ws.mu.Lock()
		out.Notes = len(ws.notes)
		ws.mu.Unlock()
		return out, nil
	})
}

type listOut struct {
	Notes []note `json:"notes"`
}

func (a *app) listTool() mcphandler.Tool {
	return mcphandler.NewTool(mcphandler.Tool{
		Name:        "list_notes",
		Title:       "List notes",
		Description: "Lists the notes of the caller's workspace, oldest first, as {notes:[{id,text,author,created}]}.",
		Annotations: readOnly,
		MinRole:     "viewer",
	}, func(_ context.Context, call *mcphandler.ToolCall, _ struct{}) (listOut, error) {
		ws := a.workspace(call.Identity.Tenant)
		ws.mu.Lock()
		defer ws.mu.Unlock()
		return listOut{Notes: append([]note{}, ws.notes...)}, nil
	})
}

type addIn struct {
	Text string `json:"text" jsonschema:"The note's text, 1 to 2000 characters."`
}

func (a *app) addTool() mcphandler.Tool {
	return mcphandler.NewTool(mcphandler.Tool{
		Name:        "add_note",
		Title:       "Add a note",
		Description: "Adds a note to the caller's workspace and returns it. Needs the notes:write scope.",
		Annotations: &mcphandler.ToolAnnotations{DestructiveHint: new(false), OpenWorldHint: new(false)},
		MinRole:     "editor",
		Scopes:      []string{noteWriteScope},
	}, func(_ context.Context, call *mcphandler.ToolCall, in addIn) (note, error) {
		text := strings.TrimSpace(in.Text)
		if text == "" || len(text) > 2000 {
			return note{}, mcphandler.BadArgs("text must have 1 to 2000 characters")
		}
		ws := a.workspace(call.Identity.Tenant)
		ws.mu.Lock()
		defer ws.mu.Unlock()
		ws.last++
		n := note{ID: ws.last, Text: text, Author: call.Identity.Subject, Created: time.Now().UTC()}
		ws.notes = append(ws.notes, n)
		return n, nil
	})
}

type exportOut struct {
	Markdown string `json:"markdown"`
}

func (a *app) exportTool() mcphandler.Tool {
	return mcphandler.NewTool(mcphandler.Tool{
		Name:        "export_notes",
		Title:       "Export notes",
		Description: "Returns all notes of the caller's workspace as one Markdown document (pro plan).",
		Annotations: readOnly,
		MinRole:     "viewer",
	}, func(_ context.Context, call *mcphandler.ToolCall, _ struct{}) (exportOut, error) {
		ws := a.workspace(call.Identity.Tenant)
		ws.mu.Lock()
		defer ws.mu.Unlock()
		var b strings.Builder
		fmt.Fprintf(&b, "# Notes of %s\n\n", ws.id)
		for _, n := range ws.notes {
			fmt.Fprintf(&b, "- %s (%s, %s)\n", n.Text, n.Author, n.Created.Format(time.RFC3339))
		}
		return exportOut{Markdown: b.String()}, nil
	})
}

// redactURL is u without its password, for the log.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(a malformed URL)"
	}
	return p.Redacted()
}
