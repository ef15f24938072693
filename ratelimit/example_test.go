package ratelimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/ratelimit"
)

// Each tenant may call tools twice a minute; limits come before any
// confirm, so a refused call never asks a human.
func Example() {
	limits, err := ratelimit.New(ratelimit.Options{}, // Options{Redis: store}: shared by every replica
		ratelimit.Limit{Name: "tenant", By: ratelimit.ByTenant, Rate: 2, Period: time.Minute})
	if err != nil {
		panic(err)
	}
	greet := mcphandler.Tool{Name: "greet", Description: "Greets.",
		Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			return mcphandler.TextResult("hello"), nil
		}}
	h := mcphandler.New(mcphandler.Config{
		Authenticate: func(*http.Request) (mcphandler.Identity, error) {
			return mcphandler.Identity{Tenant: "acme", Subject: "alice"}, nil
		},
		ListTools:  func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{greet}, nil },
		BeforeCall: mcphandler.ConfirmDestructive(limits.Policy(nil)),
	})
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := mcptest.Dial(srv.URL)
	defer c.Close()

	ctx := context.Background()
	c.Initialize(ctx)
	for range 3 {
		_, err := c.CallTool(ctx, "greet", nil)
		var re *mcptest.RPCError
		if !errors.As(err, &re) {
			fmt.Println("ran")
			continue
		}
		var data struct{ Limit json.RawMessage }
		json.Unmarshal(re.Data, &data)
		fmt.Println(re.Code, re.Message, string(data.Limit))
	}
	// Output:
	// ran
	// ran
	// -32000 Rate limited {"name":"tenant","rate":2,"periodMs":60000,"burst":2}
}
