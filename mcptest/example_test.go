package mcptest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/auth"
	"github.com/mcphandler/mcphandler/mcptest"
)

// A host tests its hooks through the wire, as each of its callers would
// meet them: who sees which tool, which call BeforeCall refuses, and with
// which code. In a test function, mcptest.New(t, h, ...) starts the server
// and closes everything when the test ends; an Example starts its own.
func Example() {
	purge := mcphandler.Tool{Name: "purge", MinRole: "admin", Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		return mcphandler.TextResult("purged"), nil
	}}
	report := mcphandler.Tool{Name: "report", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
		Handler: func(_ context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			return mcphandler.TextResult("report of " + call.Identity.Tenant), nil
		}}
	h := mcphandler.New(mcphandler.Config{ // the hooks under test
		Authenticate: auth.NewAPIKeys(map[string]mcphandler.Identity{
			"ann": {Tenant: "acme", Subject: "ann", Role: "viewer"},
			"bob": {Tenant: "acme", Subject: "bob", Role: "admin"},
			"tia": {Tenant: "trial", Subject: "tia", Role: "admin"},
		}).Authenticate,
		Roles:     []string{"viewer", "admin"},
		ListTools: func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{purge, report}, nil },
		BeforeCall: func(_ context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
			if call.Tool.Name == "purge" && call.Identity.Tenant == "trial" {
				return mcphandler.Deny("trial workspaces cannot purge"), nil
			}
			return mcphandler.Allow(), nil
		},
	})
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx := context.Background()
	for _, token := range []string{"ann", "bob", "tia"} {
		c := mcptest.Dial(srv.URL, mcptest.WithToken(token))
		if _, err := c.Initialize(ctx); err != nil {
			fmt.Println(err)
			return
		}
		tools, _ := c.ListTools(ctx)
		var names []string
		for _, tl := range tools {
			names = append(names, tl.Name)
		}
		slices.Sort(names)
		res, err := c.CallTool(ctx, "purge", nil)
		var rpc *mcptest.RPCError
		switch {
		case errors.As(err, &rpc):
			fmt.Printf("%s sees %v; purge: error %d %s\n", token, names, rpc.Code, rpc.Message)
		case err != nil:
			fmt.Println(err)
		default:
			fmt.Printf("%s sees %v; purge: %s\n", token, names, res.Text())
		}
		c.Close()
	}
	// Output:
	// ann sees [report]; purge: error -32602 Unknown tool: "purge"
	// bob sees [purge report]; purge: purged
	// tia sees [purge report]; purge: error -32001 trial workspaces cannot purge
}
