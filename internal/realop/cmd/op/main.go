// Command op runs a real OpenID provider on this machine for the README's
// walkthroughs: zitadel's certified example provider
// (github.com/zitadel/oidc/v3), with three people and the clients of
// examples/saas and examples/gateway registered. Not for production: its
// keys live in memory and its passwords are printed below.
//
//	go run ./internal/realop/cmd/op -addr 127.0.0.1:9998 -gateway http://127.0.0.1:8090
//
// People (username / password demo-password), as the demo tokens of the
// examples name them:
//
//	alice  tenant acme,   role viewer
//	bob    tenant acme,   role admin
//	carol  tenant globex, role editor
//
// Clients (secret: the client id followed by "-secret"):
//
//	gateway-login     the gateway's own sign-in (redirect GATEWAY/upstream-auth/login/callback)
//	gateway-at-notes  the gateway at examples/saas's authorization server: JWT access
//	                  tokens (the RFC 8707 resource in "aud"), refresh tokens for the
//	                  scope offline_access (redirect GATEWAY/upstream-auth/callback)
//
// It serves plain HTTP: an issuer of http://ADDR is accepted by this
// repository's examples for loopback addresses only.
package main

import (
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/mcphandler/mcphandler/internal/realop"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9998", "address to listen on; the issuer is http://ADDR")
	gateway := flag.String("gateway", "http://127.0.0.1:8090", "the public URL of examples/gateway, for its clients' redirect URIs")
	flag.Parse()
	gw := strings.TrimSuffix(*gateway, "/")
	people := func(sub, tenant, role string) realop.User {
		return realop.User{ID: sub, Username: sub, Password: "demo-password", Claims: map[string]any{"tenant": tenant, "role": role}}
	}
	cfg := realop.Config{
		Users: []realop.User{people("alice", "acme", "viewer"), people("bob", "acme", "admin"), people("carol", "globex", "editor")},
		Clients: []realop.Client{
			{ID: "gateway-login", Secret: "gateway-login-secret", RedirectURIs: []string{gw + "/upstream-auth/login/callback"}},
			{ID: "gateway-at-notes", Secret: "gateway-at-notes-secret", RedirectURIs: []string{gw + "/upstream-auth/callback"},
				JWTAccessTokens: true, Refresh: true},
		},
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	issuer := "http://" + *addr
	srv := &http.Server{Addr: *addr, Handler: realop.NewHandler(issuer, cfg), ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("OpenID provider: %s (alice, bob, carol; password demo-password)\n", issuer)
	log.Fatal(srv.ListenAndServe())
}
