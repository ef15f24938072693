package mcptest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/mcptest"
)

// A tool handler runs on a NewToolCall without HTTP: its progress and logs
// are recorded, its questions answered by the options' handlers, and a
// question without a handler fails as a client would answer it.
func TestNewToolCall(t *testing.T) {
	tool := mcphandler.Tool{Name: "ask", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		call.Progress(1, 2, "half")
		call.Log(mcphandler.LevelInfo, "tool", "working")
		res, err := call.Elicit(ctx, mcphandler.ElicitRequest{Message: "Name?", Schema: elicitation.NewSchema().String("name", elicitation.Required())})
		if err != nil {
			return nil, err
		}
		if _, err := call.ListRoots(ctx); !errors.Is(err, mcphandler.ErrCannotAsk) {
			return nil, errors.New("roots: want ErrCannotAsk, got " + errString(err))
		}
		return mcphandler.TextResult(call.Identity.Tenant + ":" + res.Content["name"].(string) + ":" + string(call.Arguments)), nil
	}}
	call, rec := mcptest.NewToolCall(tool, map[string]any{"x": 1}, mcphandler.Identity{Tenant: "acme"},
		mcptest.WithElicitationHandler(func(ctx context.Context, p mcptest.ElicitParams) (mcptest.ElicitResult, error) {
			if p.Message != "Name?" {
				t.Errorf("asked %q", p.Message)
			}
			return mcptest.ElicitResult{Action: mcptest.ActionAccept, Content: map[string]any{"name": "Ada"}}, nil
		}))
	res, err := tool.Handler(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].Text; got != `acme:Ada:{"x":1}` {
		t.Fatalf("result %q", got)
	}
	notes := rec.Notifications()
	if len(notes) != 2 || notes[0].Method != "notifications/progress" || !strings.Contains(string(notes[0].Params), `"progress":1,"total":2,"message":"half"`) ||
		notes[1].Method != "notifications/message" || !strings.Contains(string(notes[1].Params), `"data":"working"`) {
		t.Fatalf("notifications %+v", notes)
	}
	if q := rec.Questions(); len(q) != 1 || q[0].Method != mcptest.MethodElicit {
		t.Fatalf("questions %+v", q)
	}

	// Without a handler, the client lacks the capability: ErrCannotAsk.
	call, _ = mcptest.NewToolCall(tool, nil, mcphandler.Identity{})
	if string(call.Arguments) != "{}" {
		t.Fatalf("nil arguments are %s", call.Arguments)
	}
	if _, err := tool.Handler(context.Background(), call); !errors.Is(err, mcphandler.ErrCannotAsk) {
		t.Fatalf("Elicit without a handler: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
