package mcphandler_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

type greetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

var greet = mcphandler.NewTool(mcphandler.Tool{Name: "greet", Description: "Greets someone."},
	func(ctx context.Context, call *mcphandler.ToolCall, in greetIn) (string, error) {
		return "Hello " + in.Name + " from " + call.Identity.Tenant, nil
	})

var apiKeys = map[string]mcphandler.Identity{
	"Bearer k1": {Tenant: "acme", Subject: "alice", Role: "viewer"},
}

// Example mounts a handler whose caller comes from a bearer token and calls
// its tool with the mcptest client.
func Example() {
	h := mcphandler.New(mcphandler.Config{
		Authenticate: func(r *http.Request) (mcphandler.Identity, error) {
			if id, ok := apiKeys[r.Header.Get("Authorization")]; ok {
				return id, nil
			}
			return mcphandler.Identity{}, errors.New("unknown token")
		},
		Roles:     []string{"viewer", "editor", "admin"},
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{greet}, nil },
		BeforeCall: func(ctx context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
			if call.Tool.Destructive() && call.Tool.Name != "greet" {
				return mcphandler.Confirm("Run " + call.Tool.Name + "?"), nil
			}
			return mcphandler.Allow(), nil
		},
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	c := mcptest.Dial(srv.URL+"/mcp", mcptest.WithToken("k1"))
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Initialize(ctx); err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.CallTool(ctx, "greet", map[string]any{"name": "Ada"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Text())
	// Output: Hello Ada from acme
}
