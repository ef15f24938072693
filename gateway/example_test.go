package gateway_test

import (
	"context"
	"log"
	"os"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/auth"
	"github.com/mcphandler/mcphandler/gateway"
)

// Each person reaches the wiki with a token of their own, exchanged for
// the token they signed in with (an authenticator of package auth with
// KeepSubjectToken, or the bearer token of their request). One source
// for the upstream, built once: the tokens it keeps live in it.
func ExampleNewTokenExchange() {
	wiki, err := gateway.NewTokenExchange(gateway.ExchangeConfig{Exchange: auth.TokenExchangeConfig{
		TokenURL:     "https://login.example.com/oauth/token",
		ClientID:     "mcp-gateway",
		ClientSecret: os.Getenv("GATEWAY_CLIENT_SECRET"),
		Scopes:       []string{"wiki.read"}, // the resource: the upstream's URL
	}})
	if err != nil {
		log.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{
		Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
			return []gateway.Upstream{{ID: "wiki", URL: "https://wiki.example.com/mcp", Credentials: wiki}}, nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer gw.Close()
	_ = gw // gw.Tools in the Handler's ListTools
}
