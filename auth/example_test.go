package auth_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/auth"
	"golang.org/x/oauth2/clientcredentials"
)

// An MCP endpoint that accepts OIDC access tokens issued for it, and API
// keys of service accounts, with discovery metadata and challenges.
func Example() {
	ctx := context.Background()
	const resource = "https://api.example.com/mcp"

	oidc, err := auth.NewOIDC(ctx, auth.OIDCConfig{
		Issuer:      "https://login.example.com",
		Audience:    resource, // the token's "aud" must name this server
		TenantClaim: "org_id",
	})
	if err != nil {
		log.Fatal(err)
	}
	keys := auth.NewAPIKeys(map[string]mcphandler.Identity{
		os.Getenv("CI_API_KEY"): {Subject: "svc:ci", Tenant: "acme", Role: "editor"},
	})
	prm := &auth.ProtectedResource{
		Resource:             resource,
		AuthorizationServers: []string{"https://login.example.com"},
		ScopesSupported:      []string{"mcp:tools"},
		Scopes:               []string{"mcp:tools"},
	}

	mux := http.NewServeMux()
	prm.Mount(mux)
	mux.Handle("/mcp", mcphandler.New(mcphandler.Config{
		Authenticate: auth.First(keys.Authenticate, oidc.Authenticate),
		Challenge:    prm.Challenge,
		Scopes:       mcphandler.ScopeOptions{Challenge: prm.ScopeChallenge},
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			return nil, nil
		},
	}))
	log.Fatal(http.ListenAndServe(":8080", mux))
}

// A tool calls an upstream API as the server itself (service to service)
// with a token of its own from the client credentials grant: the caller's
// token is never forwarded.
func Example_clientCredentials() {
	cc := &clientcredentials.Config{
		ClientID:     "mcp-server",
		ClientSecret: os.Getenv("MCP_CLIENT_SECRET"),
		TokenURL:     "https://login.example.com/oauth/token",
		Scopes:       []string{"billing.read"},
		EndpointParams: map[string][]string{
			"resource": {"https://billing.example.com"}, // RFC 8707 audience of the upstream
		},
	}
	// Build once: the client caches its token until it expires.
	upstream := cc.Client(context.Background())
	upstream.Timeout = 10 * time.Second

	tool := mcphandler.Tool{
		Name:        "invoice_total",
		Description: "Returns the total of the workspace's open invoices.",
		Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet,
				"https://billing.example.com/v1/totals?tenant="+call.Identity.Tenant, nil)
			if err != nil {
				return nil, err
			}
			resp, err := upstream.Do(req)
			if err != nil {
				return nil, mcphandler.Unavailable(err)
			}
			defer resp.Body.Close()
			return mcphandler.TextResult(resp.Status), nil
		},
	}
	_ = tool
}

// A tool calls an upstream API on the user's behalf: it exchanges the
// caller's token (kept by the authenticator for that purpose only) for a
// token whose audience is the upstream API (RFC 8693).
func ExampleTokenExchange() {
	ctx := context.Background()
	oidc, err := auth.NewOIDC(ctx, auth.OIDCConfig{
		Issuer:           "https://login.example.com",
		Audience:         "https://api.example.com/mcp",
		KeepSubjectToken: true, // so that tools can exchange it
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = oidc

	exchange := auth.TokenExchange(auth.TokenExchangeConfig{
		TokenURL:     "https://login.example.com/oauth/token",
		ClientID:     "mcp-server",
		ClientSecret: os.Getenv("MCP_CLIENT_SECRET"),
		Audience:     "https://calendar.example.com",
		Scopes:       []string{"calendar.read"},
	})

	tool := mcphandler.Tool{
		Name:        "next_meeting",
		Description: "Returns the caller's next meeting.",
		Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			subject, ok := auth.SubjectTokenFrom(call.Identity)
			if !ok {
				return nil, fmt.Errorf("no subject token")
			}
			tok, err := exchange.Token(ctx, subject)
			if err != nil {
				return nil, mcphandler.Unavailable(err)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://calendar.example.com/v1/next", nil)
			if err != nil {
				return nil, err
			}
			req.Header.Set("Authorization", "Bearer "+tok.AccessToken) // never the subject token
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return nil, mcphandler.Unavailable(err)
			}
			defer resp.Body.Close()
			return mcphandler.TextResult(resp.Status), nil
		},
	}
	_ = tool
}

// One mapping from claims to identity, for the access tokens and the
// approval page's ID tokens alike: the highest of the handler's roles the
// token names wins, whatever the order; other names are ignored.
func ExampleClaimsMapping() {
	roles := []string{"viewer", "editor", "admin"} // the handler's Config.Roles
	claims := auth.ClaimsMapping{TenantClaim: "tid", Roles: roles, DefaultRole: "viewer"}
	// auth.OIDCConfig{…, Claims: claims.Map}
	// page.Config{…, Identity: page.MapClaims(claims.Map)}

	for _, token := range []string{
		`{"sub":"ada","tid":"acme","roles":["admin","Task.Read","viewer"]}`, // Entra ID app roles
		`{"sub":"bob","tid":"acme","role":"editor"}`,
		`{"sub":"eve","tid":"acme","roles":["Reader"]}`,
	} {
		c, _ := auth.ParseClaims([]byte(token)) // verified by the authenticator
		id, err := claims.Map(context.Background(), c)
		fmt.Println(id.Tenant, id.Subject, id.Role, err)
	}
	// Output:
	// acme ada admin <nil>
	// acme bob editor <nil>
	// acme eve viewer <nil>
}
