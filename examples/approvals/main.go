// Command approvals is an MCP server whose destructive tool runs only
// once an admin of the caller's workspace, other than the caller, approved
// the call on the approval page (package approval/page), signed in with
// OpenID Connect: the client only carries the link, so it cannot approve
// by itself.
//
// The page needs an OpenID provider. Register a web client there with the
// redirect URI http://127.0.0.1:8080/approvals/callback, whose ID tokens
// carry the approver's workspace (claim "tenant", or -tenant-claim) and
// role ("role" or "roles"), then:
//
//	go run ./examples/approvals -issuer https://login.example.com -client-id ID -client-secret SECRET
//
// Call delete_project with the token "alice" (an editor of acme) and open
// the link the call answers with, signing in as an admin of acme. To try
// it on one machine, run a provider for tests such as navikt's
// mock-oauth2-server, whose login form takes any user name and claims:
//
//	docker run -p 8090:8090 -e SERVER_PORT=8090 -e JSON_CONFIG='{"interactiveLogin":true}' ghcr.io/navikt/mock-oauth2-server:2.1.10
//	go run ./examples/approvals -issuer http://localhost:8090/default -client-id any -client-secret any
//	# sign in with the claims {"tenant":"acme","role":"admin"}
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/approval/page"
	"github.com/mcphandler/mcphandler/auth"
	"github.com/mcphandler/mcphandler/session"
)

// provider is the OpenID client of the approval page.
type provider struct{ issuer, clientID, clientSecret, tenantClaim string }

var roles = []string{"viewer", "editor", "admin"}

// newServer mounts the endpoint at base+"/mcp" and the page at
// base+"/approvals/".
func newServer(ctx context.Context, base string, op provider) (*http.ServeMux, *mcphandler.Handler, error) {
	keys := [][]byte{[]byte(rand.Text() + rand.Text())} // one process; replicas share theirs
	store := session.NewMemory()                        // Redis for replicas (see examples/replicas)
	approvals, err := approval.New(approval.Config{Store: store, Keys: keys, URL: base + "/approvals/", Roles: roles})
	if err != nil {
		return nil, nil, err
	}
	claims := auth.ClaimsMapping{TenantClaim: op.tenantClaim, Roles: roles} // bearer tokens would use it too
	pg, err := page.New(ctx, page.Config{Approvals: approvals, Store: store, Keys: keys,
		Issuer: op.issuer, ClientID: op.clientID, ClientSecret: op.clientSecret, RedirectURL: base + "/approvals/callback",
		Identity: page.MapClaims(claims.Map), InsecureCookies: true}) // plain HTTP: localhost only
	if err != nil {
		return nil, nil, err
	}
	del := mcphandler.NewTool(mcphandler.Tool{Name: "delete_project"}, // destructive, by the spec's defaults
		func(ctx context.Context, call *mcphandler.ToolCall, in struct{ Project string }) (string, error) {
			return "deleted " + in.Project + " of " + call.Identity.Tenant, nil
		})
	h := mcphandler.New(mcphandler.Config{
		Authenticate: auth.NewAPIKeys(map[string]mcphandler.Identity{"alice": {Tenant: "acme", Subject: "alice", Role: "editor"}}).Authenticate,
		Roles:        roles,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{del}, nil },
		Store:        store, StateKeys: keys, Approvals: approvals,
		BeforeCall: func(ctx context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
			if call.Tool.Destructive() { // an admin of the caller's tenant, not the caller
				return mcphandler.Approve("", approval.Policy{MinRole: "admin"}), nil
			}
			return mcphandler.Allow(), nil
		},
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/approvals/", pg)
	return mux, h, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	var op provider
	flag.StringVar(&op.issuer, "issuer", "", "the OpenID provider's issuer `URL` (required)")
	flag.StringVar(&op.clientID, "client-id", "", "the page's client id at the provider")
	flag.StringVar(&op.clientSecret, "client-secret", os.Getenv("OIDC_CLIENT_SECRET"), "its secret (default $OIDC_CLIENT_SECRET)")
	flag.StringVar(&op.tenantClaim, "tenant-claim", "tenant", "the ID token's claim naming the approver's workspace")
	flag.Parse()
	if op.issuer == "" || op.clientID == "" {
		log.Fatal("the approval page needs an OpenID provider: give -issuer and -client-id (see go doc ./examples/approvals)")
	}
	mux, h, err := newServer(context.Background(), "http://"+*addr, op)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	log.Printf("MCP endpoint http://%s/mcp (Authorization: Bearer alice), approval page http://%s/approvals/", *addr, *addr)
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Print(srv.ListenAndServe())
}
