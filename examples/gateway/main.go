// Command gateway serves, on one MCP endpoint, the tools of upstream MCP
// servers to several tenants, under the same hooks as a local tool.
//
//	go run ./examples/gateway -addr 127.0.0.1:8090 -upstreams upstreams.json
//
// FILE (-upstreams) lists the upstreams and the tenants that may reach
// them, with each tenant's static credentials there:
//
//	{"upstreams":[{"id":"docs","url":"http://127.0.0.1:8080/mcp",
//	  "tenants":["acme","globex"],
//	  "headers":{"acme":{"Authorization":"Bearer acme-admin"},
//	             "globex":{"Authorization":"Bearer globex-editor"}}}]}
//
// Or, instead of a tenant's headers, each person's own token there, which
// an authorization server issues in exchange for the caller's bearer
// token (RFC 8693), its client secret read from the environment:
//
//	{"id":"wiki","url":"https://wiki.example.com/mcp","tenants":["acme"],
//	 "exchange":{"tokenURL":"https://login.example.com/oauth/token",
//	   "clientID":"mcp-gateway","clientSecretEnv":"WIKI_CLIENT_SECRET",
//	   "scopes":["wiki.read"]}}
//
// Three bearer tokens stand for three users of two tenants, as in the
// quickstart:
//
//	acme-viewer    tenant acme,   subject alice, role viewer
//	acme-admin     tenant acme,   subject bob,   role admin
//	globex-editor  tenant globex, subject carol, role editor
//
// An upstream entry with "pin": true serves each of its tools only in the
// definition first seen for a tenant: a changed one (a new description,
// schema or annotation) is left out and logged, until an admin approves
// it with the tool approve_definition.
//
// "confirms" says who answers an upstream's own "are you sure?" during a
// call: the client ("relay", the default), nobody ("decline": the
// gateway declines it), or the person who approved the call on an
// approval page ("approval"; this demo asks for no approvals, so it
// declines every one).
//
// An upstream entry with "oauth" makes each person act there as
// themselves, with a token of their own from the upstream's authorization
// server, where the gateway is registered as a client with the redirect
// URI PUBLIC/upstream-auth/callback:
//
//	{"id":"jira","url":"https://jira.example.com/mcp","tenants":["acme"],
//	 "oauth":{"client_id":"mcp-gateway","client_secret":"…"}}
//
// It needs the gateway's own sign-in: -issuer (an OpenID provider), with
// -login-client-id and -login-client-secret (a client registered there
// with the redirect URI PUBLIC/upstream-auth/login/callback). A person
// authorizes such an upstream at PUBLIC/upstream-auth/, signed in as
// themselves: the link comes in their tools/list's _meta, and in the
// answer to a call of one of its tools (a URL elicitation on 2025-11-25,
// an input request on 2026-07-28, an error naming it otherwise); the page
// also lists what they authorized, with a button to revoke each. With
// -issuer, MCP callers may present that issuer's access tokens too
// (audience PUBLIC/mcp or -audience; tenant from -tenant-claim; role from
// "role" or "roles"), besides the demo tokens below. PUBLIC is
// -public-url, by default http://ADDR.
//
// Upstream tools appear as <id>_<name>, next to the local tool whoami. A
// viewer sees only the upstream tools annotated readOnlyHint: true (a
// hidden one answers like an unknown tool), and the gateway asks a human
// to confirm any other before a byte of it goes upstream. MCP is served at
// /mcp, and the 2024-11-05 HTTP+SSE transport at /sse.
//
// With -redis URL (or $REDIS_URL), replicas share sessions, confirms and
// decisions through Redis, with the secret -state-key (or $MCP_STATE_KEY,
// at least 32 bytes); without it, everything is in memory.
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
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/auth"
	"github.com/mcphandler/mcphandler/gateway"
	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "address to listen on")
	public := flag.String("public-url", "", "the gateway's public URL, as people and clients reach it behind a proxy (default http://ADDR)")
	issuer := flag.String("issuer", "", "issuer URL of the OpenID provider people sign in with to authorize upstreams with \"oauth\", and whose access tokens MCP callers may present")
	loginID := flag.String("login-client-id", "", "with -issuer, the gateway's client there (redirect URI PUBLIC/upstream-auth/login/callback)")
	loginSecret := flag.String("login-client-secret", "", "with -issuer, that client's secret")
	audience := flag.String("audience", "", "with -issuer, the audience MCP callers' access tokens must name (default PUBLIC/mcp)")
	tenantClaim := flag.String("tenant-claim", auth.DefaultTenantClaim, "with -issuer, the token claim naming the caller's tenant")
	file := flag.String("upstreams", "", "JSON file listing the upstream MCP servers, the tenants that may reach them and each tenant's headers there, or a token exchange (required)")
	redisURL := flag.String("redis", os.Getenv("REDIS_URL"), "URL of a Redis the replicas share (redis://host:port/db); without it, everything is in memory (default $REDIS_URL)")
	stateKey := flag.String("state-key", os.Getenv("MCP_STATE_KEY"), "with a Redis, the secret every replica shares, at least 32 bytes (default $MCP_STATE_KEY)")
	flag.Parse()
	if *file == "" {
		flag.Usage()
		os.Exit(2)
	}
	ups, err := loadUpstreams(*file)
	if err != nil {
		log.Fatal(err)
	}
	var store session.Store
	var keys [][]byte
	if *redisURL != "" {
		if len(*stateKey) < 32 {
			log.Fatal("gateway: with a Redis, -state-key (or $MCP_STATE_KEY) must be a secret of at least 32 bytes")
		}
		c, err := redisstore.NewClient(redisstore.Single, *redisURL)
		if err != nil {
			log.Fatal(err)
		}
		rs := redisstore.New(c, redisstore.Options{Prefix: "gateway:"})
		defer rs.Close()
		store, keys = rs, [][]byte{[]byte(*stateKey)}
	}
	if *public == "" {
		*public = "http://" + *addr
	}
	*public = strings.TrimSuffix(*public, "/")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := build(ctx, options{ups: ups, store: store, keys: keys, public: *public, issuer: *issuer,
		loginID: *loginID, loginSecret: *loginSecret, audience: *audience, tenantClaim: *tenantClaim})
	if err != nil {
		log.Fatal(err)
	}
	defer a.close()
	srv := &http.Server{Addr: *addr, Handler: a.mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	fmt.Printf("MCP gateway: %s/mcp (legacy HTTP+SSE: %s/sse), %d upstreams\n", *public, *public, len(ups))
	if *issuer != "" {
		fmt.Printf("upstream authorizations: %s/upstream-auth/ (sign-in at %s)\n", *public, *issuer)
	}
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// users are the demo's callers, by bearer token.
var users = map[string]mcphandler.Identity{
	"acme-viewer":   {Tenant: "acme", Subject: "alice", Role: "viewer"},
	"acme-admin":    {Tenant: "acme", Subject: "bob", Role: "admin"},
	"globex-editor": {Tenant: "globex", Subject: "carol", Role: "editor"},
}

func authenticate(r *http.Request) (mcphandler.Identity, error) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if id, known := users[tok]; ok && known {
		return id, nil
	}
	return mcphandler.Identity{}, errors.New("unknown bearer token")
}

// upstreamEntry is one upstream of the -upstreams file.
type upstreamEntry struct {
	ID       string                       `json:"id"`
	URL      string                       `json:"url"`
	Tenants  []string                     `json:"tenants"`
	Headers  map[string]map[string]string `json:"headers"`
	Exchange *exchangeEntry               `json:"exchange"`
	Pin      bool                         `json:"pin"`
	Confirms string                       `json:"confirms"` // "relay" (default), "decline" or "approval"
	OAuth    *oauthEntry                  `json:"oauth"`
}

// oauthEntry is the gateway's client at an upstream's authorization
// server, for each person's own authorization there.
type oauthEntry struct {
	ClientID     string   `json:"client_id"`
	ClientSecret string   `json:"client_secret"`
	Scopes       []string `json:"scopes"`
}

// confirmModes are the values of an entry's "confirms".
var confirmModes = map[string]gateway.ConfirmMode{"": gateway.ConfirmsRelay, "relay": gateway.ConfirmsRelay,
	"decline": gateway.ConfirmsDecline, "approval": gateway.ConfirmsApproval}

// exchangeEntry is where each caller's token is exchanged for their own
// token at an upstream.
type exchangeEntry struct {
	TokenURL        string   `json:"tokenURL"`
	ClientID        string   `json:"clientID"`
	ClientSecretEnv string   `json:"clientSecretEnv"`
	Audience        string   `json:"audience"`
	Scopes          []string `json:"scopes"`
}

// credentials is the source of each caller's credentials at u: a token
// exchange, built once, or none (the tenant's headers).
func credentials(u upstreamEntry) (gateway.CredentialSource, error) {
	if u.Exchange == nil {
		return nil, nil
	}
	x := u.Exchange
	return gateway.NewTokenExchange(gateway.ExchangeConfig{Exchange: auth.TokenExchangeConfig{TokenURL: x.TokenURL,
		ClientID: x.ClientID, ClientSecret: os.Getenv(x.ClientSecretEnv), Audience: x.Audience, Scopes: x.Scopes}})
}

// loadUpstreams reads the -upstreams file.
func loadUpstreams(path string) ([]upstreamEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f struct {
		Upstreams []upstreamEntry `json:"upstreams"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, u := range f.Upstreams {
		if u.ID == "" || u.URL == "" {
			return nil, fmt.Errorf("%s: every upstream needs an id and a url", path)
		}
		if u.OAuth != nil && (u.OAuth.ClientID == "" || u.Exchange != nil || len(u.Headers) > 0) {
			return nil, fmt.Errorf("%s: upstream %s: oauth needs a client_id, and neither headers nor an exchange", path, u.ID)
		}
		if _, ok := confirmModes[u.Confirms]; !ok {
			return nil, fmt.Errorf("%s: upstream %s: confirms is %q, not relay, decline or approval", path, u.ID, u.Confirms)
		}
	}
	return f.Upstreams, nil
}

// options are what build needs besides the upstreams: a store and its
// keys shared by replicas (nil: memory), the public URL, and the
// gateway's own sign-in (issuer "": none, and no upstream with "oauth").
type options struct {
	ups                                                 []upstreamEntry
	store                                               session.Store
	keys                                                [][]byte
	public                                              string
	issuer, loginID, loginSecret, audience, tenantClaim string
}

// app is the gateway served: its Handler, and every route on mux.
type app struct {
	h     *mcphandler.Handler
	mux   *http.ServeMux
	close func()
}

// roles orders the demo's roles, least privileged first.
var roles = []string{"viewer", "editor", "admin"}

// build makes the gateway, its Handler and, with an issuer, its sign-in
// and authorization page, all routed on one mux.
func build(ctx context.Context, o options) (*app, error) {
	if o.public == "" {
		o.public = "http://127.0.0.1:8090"
	}
	sources := make([]gateway.CredentialSource, len(o.ups))
	for i, u := range o.ups {
		var err error
		if sources[i], err = credentials(u); err != nil {
			return nil, fmt.Errorf("upstream %s: %w", u.ID, err)
		}
		if u.OAuth != nil && o.issuer == "" {
			return nil, fmt.Errorf("upstream %s: oauth needs the gateway's own sign-in: -issuer, -login-client-id and -login-client-secret", u.ID)
		}
	}
	var h *mcphandler.Handler // made below: the gateway passes list changes on to it
	gcfg := gateway.Config{
		ToolsChanged: func(ctx context.Context, t mcphandler.Target) error { return h.NotifyToolsChanged(ctx, t) },
		Unapproved:   approveFirstSight,
		AuthURL:      o.public + "/upstream-auth/",
		Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
			var out []gateway.Upstream
			for i, u := range o.ups {
				if !slices.Contains(u.Tenants, id.Tenant) {
					continue
				}
				h := http.Header{}
				for k, v := range u.Headers[id.Tenant] {
					h.Set(k, v)
				}
				up := gateway.Upstream{ID: u.ID, URL: u.URL, Header: h, Credentials: sources[i], Pin: u.Pin,
					Confirms: confirmModes[u.Confirms]}
				if c := u.OAuth; c != nil {
					up.OAuth = &gateway.OAuthClient{ClientID: c.ClientID, ClientSecret: c.ClientSecret, Scopes: c.Scopes}
				}
				out = append(out, up)
			}
			return out, nil
		},
	}
	if o.store != nil {
		gcfg.Store, gcfg.StateKeys = o.store, o.keys // the Handler's own: replicas share lists, sessions and tokens
	}
	gw, err := gateway.New(gcfg)
	if err != nil {
		return nil, err
	}
	cfg := mcphandler.Config{
		Name:         "gateway",
		Version:      "1.0.0",
		Authenticate: authenticate,
		Roles:        roles,
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			tools, err := gw.Tools(ctx)
			for i := range tools {
				if !readOnly(&tools[i]) {
					tools[i].MinRole = "editor" // viewers see only read-only upstream tools
				}
			}
			return append(tools, whoami, approveDefinition(gw)), err
		},
		BeforeCall: func(ctx context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
			if call.Tool.Origin != nil && !readOnly(&call.Tool) {
				return mcphandler.Confirm(fmt.Sprintf("Run %s on %s?", call.Tool.Origin.Name, call.Tool.Origin.Upstream)), nil
			}
			return mcphandler.Allow(), nil
		},
		Interceptors: []mcphandler.Interceptor{gw.Interceptor()},
	}
	if o.store != nil {
		cfg.Store, cfg.StateKeys = o.store, o.keys
	}
	mux := http.NewServeMux()
	if o.issuer != "" {
		if err := signIn(ctx, o, gw, &cfg, mux); err != nil {
			gw.Close()
			return nil, err
		}
	}
	h = mcphandler.New(cfg)
	mux.Handle("/mcp", h)
	sse, msgs := h.LegacySSE("/messages")
	mux.Handle("/sse", sse)
	mux.Handle("/messages", msgs)
	return &app{h: h, mux: mux, close: func() { h.Close(); gw.Close() }}, nil
}

// signIn adds the gateway's own sign-in at o.issuer: the issuer's access
// tokens for the gateway (besides the demo tokens), the metadata that
// tells clients where to get them, and the page where people authorize
// the upstreams with "oauth", signed in as themselves (read with the same
// claims mapping as the tokens, so that the page's person is the MCP
// caller).
func signIn(ctx context.Context, o options, gw *gateway.Gateway, cfg *mcphandler.Config, mux *http.ServeMux) error {
	resource := o.audience
	if resource == "" {
		resource = o.public + "/mcp"
	}
	claims := auth.ClaimsMapping{TenantClaim: o.tenantClaim, Roles: roles}
	oidc, err := auth.NewOIDC(ctx, auth.OIDCConfig{Issuer: o.issuer, Audience: resource, Claims: claims.Map})
	if err != nil {
		return err
	}
	prm := &auth.ProtectedResource{Resource: resource, AuthorizationServers: []string{o.issuer}}
	prm.Mount(mux)
	cfg.Authenticate = auth.First(authenticate, oidc.Authenticate)
	cfg.Challenge = prm.Challenge
	page, err := gw.AuthPage(ctx, gateway.AuthPageConfig{Issuer: o.issuer, ClientID: o.loginID, ClientSecret: o.loginSecret,
		Claims: claims.Map, InsecureCookies: strings.HasPrefix(o.public, "http://")})
	if err != nil {
		return err
	}
	mux.Handle("/upstream-auth/", page)
	return nil
}

// readOnly reports whether the upstream annotated t readOnlyHint: this
// demo's policy takes the upstream's word for it.
func readOnly(t *mcphandler.Tool) bool { return t.Annotations != nil && t.Annotations.ReadOnlyHint }

// approveFirstSight is the demo's policy for a pinned upstream ("pin":
// true): a tool's first definition is approved for the tenant; a changed
// one is left out, and logged with what an admin gives approve_definition
// to serve it again.
func approveFirstSight(ctx context.Context, d gateway.Definition) bool {
	if d.Approved == "" {
		return true
	}
	log.Printf("gateway: %s changed tool %s for tenant %s; left out until an admin calls approve_definition with "+
		`{"upstream":%q,"tool":%q,"digest":%q}`, d.Tool.Origin.Upstream, d.Tool.Origin.Name, d.Tenant,
		d.Tool.Origin.Upstream, d.Tool.Origin.Name, d.Tool.Origin.Digest)
	return false
}

// approveDefinition is the gateway's tool for admins: it approves, for
// the admin's tenant, a changed definition of a pinned upstream's tool.
func approveDefinition(gw *gateway.Gateway) mcphandler.Tool {
	return mcphandler.Tool{
		Name:        "approve_definition",
		Description: "Serves a pinned upstream's changed tool again, in the definition of the digest given, for your tenant.",
		MinRole:     "admin",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"upstream":{"type":"string"},"tool":{"type":"string"},` +
			`"digest":{"type":"string","pattern":"^[0-9a-f]{64}$"}},"required":["upstream","tool","digest"]}`),
		Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			var a struct{ Upstream, Tool, Digest string }
			if err := json.Unmarshal(call.Arguments, &a); err != nil {
				return nil, err
			}
			if err := gw.ApproveDefinition(ctx, call.Identity.Tenant, a.Upstream, a.Tool, a.Digest); err != nil {
				return nil, err
			}
			return mcphandler.TextResult("approved"), nil
		},
	}
}

// whoami is the gateway's own tool.
var whoami = mcphandler.Tool{
	Name:        "whoami",
	Description: "Says who the caller is: tenant, subject and role.",
	Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
	Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		id := call.Identity
		return mcphandler.TextResult(fmt.Sprintf("tenant %s, subject %s, role %s", id.Tenant, id.Subject, id.Role)), nil
	},
}
