package mcphandler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

func TestResources(t *testing.T) {
	var reads atomic.Int64
	h := mcphandler.New(surfaceConfig(&reads))
	ctx := context.Background()
	viewer := connect(t, h, "acme-viewer")
	admin := connect(t, h, "acme-admin")

	list := func(c *mcptest.Client) string {
		raw, err := c.Call(ctx, "resources/list", nil)
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	if got := list(viewer); strings.Contains(got, "audit") || !strings.Contains(got, `"uri":"info://acme"`) {
		t.Fatalf("viewer's resources: %s", got)
	}
	if got := list(admin); !strings.Contains(got, "audit://acme") {
		t.Fatalf("admin's resources: %s", got)
	}
	raw, err := viewer.Call(ctx, "resources/templates/list", nil)
	if err != nil || !strings.Contains(string(raw), `"uriTemplate":"docs://{id}"`) {
		t.Fatalf("templates: %s %v", raw, err)
	}
	read := func(c *mcptest.Client, uri string) (string, error) {
		raw, err := c.Call(ctx, "resources/read", map[string]any{"uri": uri})
		return string(raw), err
	}
	if got, err := read(viewer, "docs://a1"); err != nil || !strings.Contains(got, "Q3 roadmap text") {
		t.Fatalf("template read: %s %v", got, err)
	}
	if got, err := read(admin, "audit://acme"); err != nil || !strings.Contains(got, `"blob":"AAEC"`) {
		t.Fatalf("blob read: %s %v", got, err)
	}
	// Hidden (role), another tenant's, and nonexistent all answer -32002 alike.
	before := reads.Load()
	var answers []string
	for _, uri := range []string{"audit://acme", "info://globex", "nope://x"} {
		_, err := read(viewer, uri)
		var re *mcptest.RPCError
		if !errors.As(err, &re) || re.Code != mcphandler.CodeResourceNotFound {
			t.Fatalf("%s: %v, want -32002", uri, err)
		}
		answers = append(answers, strings.ReplaceAll(re.Message+string(re.Data), uri, "URI"))
	}
	if answers[0] != answers[1] || answers[1] != answers[2] {
		t.Fatalf("refusals differ: %q", answers)
	}
	if reads.Load() != before {
		t.Fatal("ReadResource ran for a resource the caller cannot see")
	}
	// Another tenant's doc through the template: the host reports not found.
	if _, err := read(connect(t, h, "globex-editor"), "docs://a1"); !isRPC(err, mcphandler.CodeResourceNotFound) {
		t.Fatalf("globex reading acme's doc: %v", err)
	}
}

func TestMatchTemplate(t *testing.T) {
	for _, tc := range []struct {
		tmpl, uri string
		want      string
	}{
		{"docs://{id}", "docs://a1", "map[id:a1]"},
		{"test://template/{id}/data", "test://template/123/data", "map[id:123]"},
		{"repo://{owner}/{name}", "repo://acme/site", "map[name:site owner:acme]"},
		{"docs://{id}", "docs://", "no"},
		{"test://template/{id}/data", "test://template/1/2/data", "no"},
		{"docs://{id}", "other://a1", "no"},
		{"static://x", "static://x", "map[]"},
	} {
		vars, ok := mcphandler.MatchTemplate(tc.tmpl, tc.uri)
		got := "no"
		if ok {
			got = fmt.Sprint(vars)
		}
		if got != tc.want {
			t.Errorf("MatchTemplate(%q, %q) = %s, want %s", tc.tmpl, tc.uri, got, tc.want)
		}
	}
}

func TestPrompts(t *testing.T) {
	var reads atomic.Int64
	h := mcphandler.New(surfaceConfig(&reads))
	ctx := context.Background()
	viewer := connect(t, h, "acme-viewer")
	raw, err := viewer.Call(ctx, "prompts/list", nil)
	if err != nil || strings.Contains(string(raw), "purge_plan") || !strings.Contains(string(raw), `"required":true`) {
		t.Fatalf("prompts/list: %s %v", raw, err)
	}
	raw, err = viewer.Call(ctx, "prompts/get", map[string]any{"name": "summarize", "arguments": map[string]string{"id": "a1"}})
	if err != nil || !strings.Contains(string(raw), `"text":"Summarize a1"`) || !strings.Contains(string(raw), `"type":"resource"`) {
		t.Fatalf("prompts/get: %s %v", raw, err)
	}
	_, err = viewer.Call(ctx, "prompts/get", map[string]any{"name": "summarize"})
	var re *mcptest.RPCError
	if !errors.As(err, &re) || re.Code != -32602 || !strings.Contains(re.Message, `"id"`) {
		t.Fatalf("missing argument: %v", err)
	}
	before := reads.Load()
	var hidden, unknown *mcptest.RPCError
	_, err = viewer.Call(ctx, "prompts/get", map[string]any{"name": "purge_plan"})
	errors.As(err, &hidden)
	_, err = viewer.Call(ctx, "prompts/get", map[string]any{"name": "nope_nope_"})
	errors.As(err, &unknown)
	if hidden == nil || unknown == nil || hidden.Code != -32602 ||
		strings.ReplaceAll(hidden.Message, "purge_plan", "X") != strings.ReplaceAll(unknown.Message, "nope_nope_", "X") {
		t.Fatalf("hidden prompt %v vs unknown %v", hidden, unknown)
	}
	if reads.Load() != before {
		t.Fatal("GetPrompt ran for a hidden prompt")
	}
	if _, err := connect(t, h, "acme-admin").Call(ctx, "prompts/get", map[string]any{"name": "purge_plan"}); err != nil {
		t.Fatalf("admin: %v", err)
	}
}

func TestCompletion(t *testing.T) {
	var reads atomic.Int64
	h := mcphandler.New(surfaceConfig(&reads))
	c := connect(t, h, "acme-viewer")
	ctx := context.Background()
	raw, err := c.Call(ctx, "completion/complete", map[string]any{
		"ref": map[string]any{"type": "ref/prompt", "name": "summarize"}, "argument": map[string]any{"name": "id", "value": "a"},
	})
	if err != nil || string(raw) != `{"completion":{"values":["a1","a2"]}}` {
		t.Fatalf("complete: %s %v", raw, err)
	}
	raw, err = c.Call(ctx, "completion/complete", map[string]any{
		"ref": map[string]any{"type": "ref/resource", "uri": "docs://{id}"}, "argument": map[string]any{"name": "id", "value": "zz"},
	})
	if err != nil || string(raw) != `{"completion":{"values":[]}}` {
		t.Fatalf("complete template: %s %v", raw, err)
	}
	_, err = c.Call(ctx, "completion/complete", map[string]any{
		"ref": map[string]any{"type": "ref/prompt", "name": "purge_plan"}, "argument": map[string]any{"name": "x", "value": ""},
	})
	if !isRPC(err, -32602) {
		t.Fatalf("completing a hidden prompt: %v", err)
	}
}

func TestCapabilitiesFollowHooks(t *testing.T) {
	var reads atomic.Int64
	c := mcptest.New(t, mcphandler.New(surfaceConfig(&reads)), mcptest.WithToken("acme-viewer"))
	res, err := c.Initialize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var caps map[string]json.RawMessage
	json.Unmarshal(res.Capabilities, &caps)
	want := map[string]string{
		"resources":   `{"subscribe":true,"listChanged":true}`,
		"prompts":     `{"listChanged":true}`,
		"completions": `{}`,
		"logging":     `{}`,
	}
	for k, v := range want {
		if string(caps[k]) != v {
			t.Errorf("capability %s = %s, want %s", k, caps[k], v)
		}
	}
	if _, ok := caps["tools"]; ok {
		t.Errorf("tools declared without ListTools: %s", res.Capabilities)
	}
	if _, err := c.Call(context.Background(), "tools/list", nil); !isRPC(err, -32601) {
		t.Errorf("tools/list without tools: %v", err)
	}
}

func TestNotificationsReachOnlyTheirTarget(t *testing.T) {
	var reads atomic.Int64
	f := &fixture{}
	cfg := surfaceConfig(&reads)
	cfg.ListTools = f.config().ListTools
	h := mcphandler.New(cfg)
	ctx := context.Background()
	acme := connect(t, h, "acme-viewer")
	globex := connect(t, h, "globex-editor")
	as, err := acme.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer as.Close()
	gs, err := globex.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer gs.Close()
	if _, err := acme.Call(ctx, "resources/subscribe", map[string]any{"uri": "docs://a1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := globex.Call(ctx, "resources/subscribe", map[string]any{"uri": "audit://globex"}); !isRPC(err, mcphandler.CodeResourceNotFound) {
		t.Fatalf("subscribing to a hidden resource: %v", err)
	}

	h.NotifyToolsChanged(ctx, mcphandler.TenantOf("acme"))
	if m := nextMessage(t, as, 5*time.Second); m == nil || m.Method != "notifications/tools/list_changed" {
		t.Fatalf("acme got %+v", m)
	}
	h.NotifyResourceUpdated(ctx, "docs://a1", mcphandler.Everyone())
	if m := nextMessage(t, as, 5*time.Second); m == nil || m.Method != "notifications/resources/updated" || !strings.Contains(string(m.Params), "docs://a1") {
		t.Fatalf("acme got %+v", m)
	}
	h.NotifyPromptsChanged(ctx, mcphandler.Target{Tenant: "globex", Subject: "carol"})
	if m := nextMessage(t, gs, 5*time.Second); m == nil || m.Method != "notifications/prompts/list_changed" {
		t.Fatalf("globex got %+v", m)
	}
	// Globex saw neither acme's tool change nor the update it did not
	// subscribe to; acme did not see globex's prompt change.
	if m := nextMessage(t, gs, 200*time.Millisecond); m != nil {
		t.Fatalf("globex got someone else's notification %+v", m)
	}
	if m := nextMessage(t, as, 200*time.Millisecond); m != nil {
		t.Fatalf("acme got someone else's notification %+v", m)
	}
	if _, err := acme.Call(ctx, "resources/unsubscribe", map[string]any{"uri": "docs://a1"}); err != nil {
		t.Fatal(err)
	}
	h.NotifyResourceUpdated(ctx, "docs://a1", mcphandler.Everyone())
	if m := nextMessage(t, as, 200*time.Millisecond); m != nil {
		t.Fatalf("update after unsubscribe: %+v", m)
	}
}

func TestCancelStopsHandler(t *testing.T) {
	started := make(chan struct{})
	stopped := make(chan error, 1)
	tool := mcphandler.Tool{Name: "slow", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		close(started)
		select {
		case <-ctx.Done():
			stopped <- ctx.Err()
			return mcphandler.TextResult("too late"), nil
		case <-time.After(10 * time.Second):
			stopped <- nil
			return mcphandler.TextResult("finished"), nil
		}
	}}
	h := mcphandler.New(mcphandler.Config{Authenticate: mcphandler.InsecureAnonymous, ListTools: func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{tool}, nil }})
	c := connect(t, h, "")
	ctx := context.Background()
	done := make(chan string, 1)
	go func() {
		resp, err := c.Post(ctx, []byte(`{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"slow"}}`), nil)
		if err != nil {
			done <- err.Error()
			return
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 512)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		done <- b.String()
	}()
	<-started
	if err := c.Notify(ctx, "notifications/cancelled", map[string]any{"requestId": "call-1", "reason": "user stopped it"}); err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		t.Fatalf("handler context: %v, want canceled", err)
	}
	if body := <-done; strings.Contains(body, "too late") || strings.Contains(body, `"result"`) {
		t.Fatalf("a cancelled request was answered: %q", body)
	}
}

// A request carrying params.task is processed normally by a server without
// task support (2025-11-25).
func TestTaskParamIgnored(t *testing.T) {
	f := &fixture{}
	c := connect(t, mcphandler.New(f.config()), "acme-viewer")
	raw, err := c.Call(context.Background(), "tools/call", map[string]any{"name": "read", "task": map[string]any{"ttl": 1000}})
	if err != nil || !strings.Contains(string(raw), "read ran") {
		t.Fatalf("%s %v", raw, err)
	}
}

func TestContentTypes(t *testing.T) {
	tool := mcphandler.Tool{Name: "all", Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		return &mcphandler.ToolResult{Content: []mcphandler.Content{
			mcphandler.TextContent(""),
			mcphandler.ImageContent([]byte{1, 2}, "image/png"),
			mcphandler.AudioContent([]byte{3}, "audio/wav"),
			mcphandler.ResourceLinkContent("docs://a1", "a1", "text/plain"),
			mcphandler.EmbeddedResourceContent(mcphandler.ResourceContents{URI: "docs://a1", MimeType: "text/plain", Text: "hi"}),
		}, StructuredContent: map[string]int{"n": 5}}, nil
	}}
	h := mcphandler.New(mcphandler.Config{Authenticate: mcphandler.InsecureAnonymous, ListTools: func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{tool}, nil }})
	raw, err := connect(t, h, "").Call(context.Background(), "tools/call", map[string]any{"name": "all"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"content":[{"type":"text","text":""},{"type":"image","data":"AQI=","mimeType":"image/png"},{"type":"audio","data":"Aw==","mimeType":"audio/wav"},` +
		`{"type":"resource_link","uri":"docs://a1","name":"a1","mimeType":"text/plain"},{"type":"resource","resource":{"uri":"docs://a1","mimeType":"text/plain","text":"hi"}}],"structuredContent":{"n":5}}`
	if string(raw) != want {
		t.Fatalf("result\n%s\nwant\n%s", raw, want)
	}
}
