package mcphandler_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/mcptest"
)

// exampleHandler serves greet and a destructive drop_table to everyone,
// with policy deciding before each call.
func exampleHandler(policy mcphandler.BeforeCallFunc) *mcphandler.Handler {
	destructive := true
	drop := mcphandler.Tool{Name: "drop_table", Annotations: &mcphandler.ToolAnnotations{DestructiveHint: &destructive},
		Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			return mcphandler.TextResult("dropped"), nil
		}}
	return mcphandler.New(mcphandler.Config{
		Authenticate: mcphandler.InsecureAnonymous, // a demo: everyone is one anonymous caller
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{greet, drop}, nil },
		BeforeCall:   policy,
	})
}

// A typed tool derives its input schema from its argument type, and its
// handler can be run in a unit test on a ToolCall built by hand.
func ExampleNewTool() {
	fmt.Println(string(greet.InputSchema))
	res, err := greet.Handler(context.Background(), &mcphandler.ToolCall{
		Arguments: []byte(`{"name":"Ada"}`),
		Identity:  mcphandler.Identity{Tenant: "acme"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Content[0].Text)
	// Output:
	// {"type":"object","properties":{"name":{"type":"string","description":"who to greet"}},"required":["name"],"additionalProperties":false}
	// Hello Ada from acme
}

// ConfirmDestructive asks the human before every destructive tool runs;
// here the human declines, and the tool does not run.
func ExampleConfirmDestructive() {
	srv := httptest.NewServer(exampleHandler(mcphandler.ConfirmDestructive(nil)))
	defer srv.Close()
	c := mcptest.Dial(srv.URL, mcptest.WithElicitationHandler(func(ctx context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		fmt.Println("asked:", p.Message)
		return mcptest.ElicitResult{Action: mcptest.ActionDecline}, nil
	}))
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Initialize(ctx); err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.CallTool(ctx, "drop_table", map[string]any{"table": "users"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Text())
	// Output:
	// asked: Allow drop_table to run with {"table":"users"}?
	// Not run: the user declined drop_table.
}

// WithForm asks with a form of the host's own: the tool runs only if the
// human accepts with every expected value.
func ExampleDecision_WithForm() {
	form := elicitation.NewSchema().Enum("env", []string{"staging", "production"}, elicitation.Required())
	policy := func(ctx context.Context, call *mcphandler.ToolCall) (mcphandler.Decision, error) {
		if call.Tool.Name != "drop_table" {
			return mcphandler.Allow(), nil
		}
		return mcphandler.Confirm("Drop the table in which environment?").
			WithForm(form, map[string]any{"env": "staging"}), nil
	}
	srv := httptest.NewServer(exampleHandler(policy))
	defer srv.Close()
	c := mcptest.Dial(srv.URL, mcptest.WithElicitationHandler(func(ctx context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		fmt.Println("asked:", p.Message)
		return mcptest.ElicitResult{Action: mcptest.ActionAccept, Content: map[string]any{"env": "staging"}}, nil
	}))
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Initialize(ctx); err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.CallTool(ctx, "drop_table", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Text())
	// Output:
	// asked: Drop the table in which environment?
	// dropped
}

// The 2024-11-05 HTTP+SSE transport is two more handlers on the same
// Handler: a GET stream and the endpoint of its POSTed messages.
func ExampleHandler_LegacySSE() {
	h := exampleHandler(nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	sse, messages := h.LegacySSE("/messages")
	mux.Handle("/sse", sse)
	mux.Handle("/messages", messages)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	c := mcptest.Dial(srv.URL+"/sse", mcptest.WithEra(mcptest.SSE))
	defer c.Close()
	ctx := context.Background()
	init, err := c.Initialize(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(init.ProtocolVersion)
	res, err := c.CallTool(ctx, "greet", map[string]any{"name": "Ada"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Text())
	// Output:
	// 2024-11-05
	// Hello Ada from
}

// A 2026-07-28 client needs no initialize and no session: every request
// carries its version and capabilities. The same Handler serves it.
func Example_stateless() {
	srv := httptest.NewServer(exampleHandler(nil))
	defer srv.Close()
	c := mcptest.Dial(srv.URL, mcptest.WithEra(mcptest.Stateless))
	defer c.Close()
	res, err := c.CallTool(context.Background(), "greet", map[string]any{"name": "Ada"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Text(), "|", c.SessionID() == "")
	// Output: Hello Ada from  | true
}
