package mcphandler_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

const appsCaps = `{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}}}`

// appsHandler serves a tool with a UI (visible to model and app), an
// app-only tool, a ui:// page with its CSP and permissions, and a plain
// resource.
func appsHandler(t *testing.T) *mcphandler.Handler {
	ui := &mcphandler.ToolUI{ResourceURI: "ui://charts/sales.html"}
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{
				{Name: "sales_chart", UI: ui, Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					return &mcphandler.ToolResult{StructuredContent: map[string]int{"q1": 3}}, nil
				}},
				{Name: "refresh_chart", UI: &mcphandler.ToolUI{ResourceURI: ui.ResourceURI, Visibility: []string{"app"}},
					Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
						return &mcphandler.ToolResult{}, nil // neither text nor structuredContent
					}},
				{Name: "plain", Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					return &mcphandler.ToolResult{}, nil
				}},
			}, nil
		},
		ListResources: func(context.Context) ([]mcphandler.Resource, error) {
			return []mcphandler.Resource{{URI: "ui://charts/sales.html", Name: "sales chart", MimeType: mcphandler.AppMimeType},
				{URI: "docs://readme", Name: "readme"}}, nil
		},
		ReadResource: func(_ context.Context, req *mcphandler.ResourceRequest) ([]mcphandler.ResourceContents, error) {
			if req.URI != "ui://charts/sales.html" {
				return []mcphandler.ResourceContents{{URI: req.URI, Text: "hello"}}, nil
			}
			return []mcphandler.ResourceContents{{URI: req.URI, Text: "<!doctype html><p>chart</p>", Meta: &mcphandler.ResourceMeta{
				UI: &mcphandler.ResourceUI{CSP: &mcphandler.ResourceCSP{ConnectDomains: []string{"https://api.example.com"}},
					Permissions: &mcphandler.ResourcePermissions{ClipboardWrite: &struct{}{}}}}}}, nil
		},
	})
	t.Cleanup(func() { h.Close() })
	return h
}

// Apps are offered only to a client that declares the app MIME type, in
// either era; every other client gets the same tools without _meta.ui,
// no app-only tool and no ui:// resource.
func TestAppsOfferedOnlyToDeclaringClients(t *testing.T) {
	ctx := context.Background()
	h := appsHandler(t)
	for _, era := range []mcptest.Era{mcptest.Sessions, mcptest.Stateless} {
		for _, caps := range []string{appsCaps, `{}`,
			`{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html"]}}}`,
			`{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":"text/html;profile=mcp-app"}}}`} {
			declared := caps == appsCaps
			c := mcptest.New(t, h, mcptest.WithEra(era), mcptest.WithToken("acme-viewer"), mcptest.WithCapabilities(json.RawMessage(caps)))
			if era == mcptest.Sessions {
				if _, err := c.Initialize(ctx); err != nil {
					t.Fatal(err)
				}
			}
			tl, err := c.Call(ctx, "tools/list", nil)
			if err != nil {
				t.Fatal(err)
			}
			s := string(tl)
			hasMeta := strings.Contains(s, `"name":"sales_chart","inputSchema":{"type":"object"},"_meta":{"ui":{"resourceUri":"ui://charts/sales.html"}}`)
			hasAppOnly := strings.Contains(s, `"refresh_chart"`)
			if hasMeta != declared || hasAppOnly != declared || !strings.Contains(s, `"sales_chart"`) || strings.Contains(s, `"plain","inputSchema":{"type":"object"},"_meta"`) {
				t.Errorf("%v caps %s: tools/list %s", era, caps, s)
			}
			rl, err := c.Call(ctx, "resources/list", nil)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(rl), "ui://") != declared || !strings.Contains(string(rl), "docs://readme") {
				t.Errorf("%v caps %s: resources/list %s", era, caps, rl)
			}
		}
	}
}

func TestAppsResourceAndTextFallback(t *testing.T) {
	ctx := context.Background()
	c := mcptest.NewModern(t, appsHandler(t), mcptest.WithToken("acme-viewer"), mcptest.WithCapabilities(json.RawMessage(appsCaps)))
	rr, err := c.Call(ctx, "resources/read", map[string]string{"uri": "ui://charts/sales.html"})
	if err != nil {
		t.Fatal(err)
	}
	want := `"contents":[{"uri":"ui://charts/sales.html","mimeType":"text/html;profile=mcp-app","text":"\u003c!doctype html\u003e\u003cp\u003echart\u003c/p\u003e",` +
		`"_meta":{"ui":{"csp":{"connectDomains":["https://api.example.com"]},"permissions":{"clipboardWrite":{}}}}}]`
	if !strings.Contains(string(rr), want) {
		t.Fatalf("resources/read %s\nwant %s", rr, want)
	}
	res, err := c.Call(ctx, "tools/call", map[string]any{"name": "sales_chart", "arguments": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res), `"content":[{"type":"text","text":"{\"q1\":3}"}],"structuredContent":{"q1":3}`) {
		t.Fatalf("a UI tool's result has no text fallback: %s", res)
	}
	res, err = c.Call(ctx, "tools/call", map[string]any{"name": "refresh_chart", "arguments": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res), `"isError":true`) {
		t.Fatalf("a UI tool with nothing to show as text must fail: %s", res)
	}
	res, err = c.Call(ctx, "tools/call", map[string]any{"name": "plain", "arguments": map[string]any{}})
	if err != nil || strings.Contains(string(res), "isError") {
		t.Fatalf("a tool without a UI keeps its empty result: %s %v", res, err)
	}
}
