package mcphandler_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/mcptest"
)

// greeter asks the human for a name (and the model for a greeting) through
// the one handler API, whatever revision the client speaks.
var greeter = mcphandler.Tool{Name: "greet", Description: "asks and greets", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
	answers, err := call.Ask(ctx,
		mcphandler.Input{Elicit: &mcphandler.ElicitRequest{Message: "Your name?", Schema: elicitation.NewSchema().String("name", elicitation.Required())}},
		mcphandler.Input{CreateMessage: map[string]any{"messages": []any{}, "maxTokens": 5}},
	)
	if err != nil {
		return nil, err
	}
	var msg struct {
		Content struct{ Text string } `json:"content"`
	}
	json.Unmarshal(answers[1].CreateMessage, &msg)
	return mcphandler.TextResult(msg.Content.Text + ", " + answers[0].Elicit.Content["name"].(string)), nil
}}

func greeterOptions() []mcptest.Option {
	return []mcptest.Option{
		mcptest.WithToken("acme-viewer"),
		mcptest.WithElicitationHandler(answer("accept", map[string]any{"name": "Ada"})),
		mcptest.WithSamplingHandler(func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"Hello"},"model":"m"}`), nil
		}),
	}
}

// TestOneHandlerEveryRevision: the same tool handler that asks the client
// works for a 2025 session (requests on the call's stream), a 2026-07-28
// client (one input_required round, then the retry) and a 2024-11-05
// HTTP+SSE client.
func TestOneHandlerEveryRevision(t *testing.T) {
	cfg := (&fixture{}).config()
	cfg.BeforeCall = nil
	cfg.ListTools = func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{greeter}, nil }
	h := mcphandler.New(cfg)
	ctx := context.Background()

	c25 := connect(t, h, "acme-viewer", greeterOptions()...)
	res, err := c25.CallTool(ctx, "greet", nil)
	if err != nil || res.Text() != "Hello, Ada" {
		t.Fatalf("2025: %+v, %v", res, err)
	}

	c26 := mcptest.NewModern(t, h, greeterOptions()...)
	res, err = c26.CallTool(ctx, "greet", nil)
	if err != nil || res.Text() != "Hello, Ada" {
		t.Fatalf("2026: %+v, %v", res, err)
	}
	if c26.Rounds() != 2 {
		t.Fatalf("2026 took %d rounds, want 2 (both questions in one input_required)", c26.Rounds())
	}

	sse, msgs := h.LegacySSE("/messages")
	mux := http.NewServeMux()
	mux.Handle("/sse", sse)
	mux.Handle("/messages", msgs)
	legacy := mcptest.NewLegacy(t, mux, "/sse", greeterOptions()...)
	if _, err := legacy.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = legacy.CallTool(ctx, "greet", nil)
	if err != nil || res.Text() != "Hello, Ada" {
		t.Fatalf("2024-11-05: %+v, %v", res, err)
	}
}

// Legacy HTTP+SSE clients get the same visibility, gates and confirms.
func TestLegacySSE(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	ctx := context.Background()
	mux := legacyMux(h)
	globex := mcptest.NewLegacy(t, mux, "/sse", mcptest.WithToken("globex-editor"))
	if _, err := globex.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	tools, err := globex.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "read,delete_thing" {
		t.Fatalf("globex sees %v", names)
	}
	if _, err := globex.CallTool(ctx, "acme_only", nil); !isRPC(err, -32602) {
		t.Fatalf("hidden tool: %v", err)
	}
	admin := mcptest.NewLegacy(t, mux, "/sse", mcptest.WithToken("acme-admin"),
		mcptest.WithElicitationHandler(answer("accept", map[string]any{"confirm": true})))
	if _, err := admin.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := admin.CallTool(ctx, "delete_thing", nil)
	if err != nil || res.IsError || f.count("delete_thing") != 1 {
		t.Fatalf("confirmed delete: %+v, %v (ran %d)", res, err, f.count("delete_thing"))
	}
	// A message for someone else's session is unknown.
	req, _ := http.NewRequest("POST", admin.MessageURL(), strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer globex-editor")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("posting into another user's session: %d", resp.StatusCode)
	}
	if f.count("acme_only") != 0 {
		t.Fatal("hidden tool ran")
	}
}

func TestListen(t *testing.T) {
	cfg := (&fixture{}).config()
	h := mcphandler.New(cfg)
	ctx := context.Background()
	acme := mcptest.NewModern(t, h, mcptest.WithToken("acme-viewer"))
	s, err := acme.Listen(ctx, map[string]any{"toolsListChanged": true, "promptsListChanged": true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ack := nextMessage(t, s, 5*time.Second)
	if ack == nil || ack.Method != "notifications/subscriptions/acknowledged" ||
		!strings.Contains(string(ack.Params), `"notifications":{"toolsListChanged":true}`) ||
		!strings.Contains(string(ack.Params), `"io.modelcontextprotocol/subscriptionId":`) {
		t.Fatalf("ack %+v (prompts are not served, so they are not agreed)", ack)
	}
	h.NotifyToolsChanged(ctx, mcphandler.TenantOf("globex"))
	h.NotifyToolsChanged(ctx, mcphandler.TenantOf("acme"))
	m := nextMessage(t, s, 5*time.Second)
	if m == nil || m.Method != "notifications/tools/list_changed" || !strings.Contains(string(m.Params), "subscriptionId") {
		t.Fatalf("notification %+v", m)
	}
	if m := nextMessage(t, s, 200*time.Millisecond); m != nil {
		t.Fatalf("unexpected %+v (globex's change must not reach acme)", m)
	}
}

func TestModernClientErrors(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	c := mcptest.NewModern(t, h, mcptest.WithToken("acme-admin"))
	ctx := context.Background()
	// No elicitation capability: the confirm falls back, closed.
	res, err := c.CallTool(ctx, "delete_thing", nil)
	if err != nil || !res.IsError || f.count("delete_thing") != 0 {
		t.Fatalf("confirm without the capability: %+v, %v", res, err)
	}
	_, err = c.Call(ctx, "ping", nil)
	var he *mcptest.HTTPError
	if !errors.As(err, &he) && !isRPC(err, -32601) {
		t.Fatalf("ping on 2026: %v", err)
	}
}
