package mcphandler_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/auth"
	"github.com/mcphandler/mcphandler/mcptest"
)

type greetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

// greet only reads. Without annotations a tool counts as destructive (the
// spec's defaults), and ConfirmDestructive would ask before every call.
var greet = mcphandler.NewTool(mcphandler.Tool{Name: "greet", Description: "Greets someone.",
	Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true}},
	func(ctx context.Context, call *mcphandler.ToolCall, in greetIn) (string, error) {
		return "Hello " + in.Name + " from " + call.Identity.Tenant, nil
	})

var keys = auth.NewAPIKeys(map[string]mcphandler.Identity{ // bearer token → tenant, subject, role
	"k1": {Tenant: "acme", Subject: "alice", Role: "viewer"},
})

// Example is the program of the README's "Mounting it" section
// (examples/hello), with the same tool and Config, byte for byte (a test
// holds them together): it mounts the handler on a test server and calls
// greet with the mcptest client. greet runs without a confirm; a confirm
// would print "asked".
func Example() {
	h := mcphandler.New(mcphandler.Config{
		Authenticate: keys.Authenticate,
		Roles:        []string{"viewer", "editor", "admin"},
		ListTools:    func(ctx context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{greet}, nil },
		BeforeCall:   mcphandler.ConfirmDestructive(nil), // a human confirms each destructive call
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	c := mcptest.Dial(srv.URL+"/mcp", mcptest.WithToken("k1"),
		mcptest.WithElicitationHandler(func(ctx context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			fmt.Println("asked:", p.Message)
			return mcptest.ElicitResult{Action: mcptest.ActionDecline}, nil
		}))
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
