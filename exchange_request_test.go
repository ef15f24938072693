package mcphandler_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

// Exchange.Request relays another server's question as it is, and only
// the questions a server may put, to a client that declared it can answer.
func TestExchangeRequest(t *testing.T) {
	type ask struct {
		method string
		params string
	}
	var got []string
	asks := make(chan ask, 1)
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{{Name: "relay", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
				Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					a := <-asks
					res, err := call.Request(ctx, a.method, json.RawMessage(a.params))
					if err != nil {
						var mc *mcphandler.MissingCapabilityError
						if errors.As(err, &mc) {
							return mcphandler.TextResult("missing " + string(mc.Capability)), nil
						}
						return mcphandler.TextResult("error " + err.Error()), nil
					}
					return mcphandler.TextResult("answer " + string(res)), nil
				}}}, nil
		},
	})
	defer h.Close()
	c := mcptest.New(t, h, mcptest.WithToken("acme-admin"),
		mcptest.WithElicitationHandler(func(ctx context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			got = append(got, p.Message+"|"+string(p.RequestedSchema))
			return mcptest.ElicitResult{Action: "decline"}, nil
		}))
	ctx := context.Background()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ask  ask
		want string
	}{
		{ask{"elicitation/create", `{"message":"From upstream","requestedSchema":{"type":"object","properties":{"x":{"type":"string","x-vendor":1}}}}`}, `answer {"action":"decline"}`},
		{ask{"elicitation/create", `{"mode":"url","message":"m","url":"https://u.example/","elicitationId":"e"}`}, `missing {"elicitation":{"url":{}}}`},
		{ask{"sampling/createMessage", `{"messages":[],"maxTokens":1}`}, `missing {"sampling":{}}`},
		{ask{"roots/list", ``}, `missing {"roots":{}}`},
		{ask{"tools/call", `{}`}, `error mcphandler: Request: not a request a server may make of a client: tools/call`},
		{ask{"elicitation/create", `[1]`}, `error mcphandler: Request: params must be one JSON object`},
		{ask{"elicitation/create", `{"message":"a","message":"b"}`}, `error mcphandler: Request: params must be one JSON object`},
		{ask{"elicitation/create", `{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`}, `error mcphandler: Request: params must be one JSON object`},
	} {
		asks <- tc.ask
		res, err := c.CallTool(ctx, "relay", nil)
		if err != nil || res.Text() != tc.want {
			t.Errorf("%s %s: %v %v, want %q", tc.ask.method, tc.ask.params, res.Text(), err, tc.want)
		}
	}
	// The question reached the client as the other server put it.
	if len(got) != 1 || got[0] != `From upstream|{"type":"object","properties":{"x":{"type":"string","x-vendor":1}}}` {
		t.Fatalf("the client was asked %q", got)
	}
}
