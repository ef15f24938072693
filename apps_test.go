package mcphandler_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
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

// The server declares MCP Apps in capabilities.extensions (initialize on
// every 2025 revision and on 2024-11-05 HTTP+SSE, server/discover on
// 2026-07-28) to a caller whose
// tools include one with a UI, whatever the client declared, beside the
// other extensions; a caller without such a tool, and a server without
// tools, do not see it; a failing ListTools leaves it out and fails
// nothing.
func TestAppsDeclaredInCapabilities(t *testing.T) {
	ctx := context.Background()
	const want = `"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}`
	uiTool := mcphandler.Tool{Name: "chart", MinRole: "admin", UI: &mcphandler.ToolUI{ResourceURI: "ui://c.html"},
		Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			return mcphandler.TextResult("c"), nil
		}}
	plain := mcphandler.Tool{Name: "plain", Handler: uiTool.Handler}
	skills := func(context.Context) ([]mcphandler.Skill, error) {
		return []mcphandler.Skill{{Name: "s", Description: "d", Body: "b"}}, nil
	}
	for _, tc := range []struct {
		name   string
		cfg    mcphandler.Config
		token  string
		exts   []string // other extensions that must be declared too (2026-07-28)
		inInit bool     // the 2025 initialize declares it
	}{
		{"admin sees the UI tool", mcphandler.Config{ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{plain, uiTool}, nil
		}}, "acme-admin", []string{`"io.modelcontextprotocol/tasks":{}`}, true},
		{"viewer does not", mcphandler.Config{ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{plain, uiTool}, nil
		}}, "acme-viewer", nil, false},
		{"with skills", mcphandler.Config{ListSkills: skills, ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{uiTool}, nil
		}}, "acme-admin", []string{`"io.modelcontextprotocol/tasks":{}`, `"io.modelcontextprotocol/skills":{"directoryRead":true}`}, true},
		{"no tools", mcphandler.Config{ListSkills: skills}, "acme-admin", nil, false},
	} {
		tc.cfg.Authenticate, tc.cfg.Roles = bearer, []string{"viewer", "editor", "admin"}
		h := mcphandler.New(tc.cfg)
		t.Cleanup(func() { h.Close() })
		for _, caps := range []string{appsCaps, `{}`} {
			for _, v := range []string{"2025-03-26", "2025-06-18", "2025-11-25"} {
				c := mcptest.New(t, h, mcptest.WithToken(tc.token), mcptest.WithProtocolVersion(v), mcptest.WithCapabilities(json.RawMessage(caps)))
				res, err := c.Initialize(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if got := strings.Contains(string(res.Capabilities), want); got != tc.inInit || !json.Valid(res.Capabilities) {
					t.Errorf("%s, %s, caps %s: initialize capabilities %s", tc.name, v, caps, res.Capabilities)
				}
			}
			legacy := mcptest.NewLegacy(t, legacyMux(h), "/sse", mcptest.WithToken(tc.token), mcptest.WithCapabilities(json.RawMessage(caps)))
			res, err := legacy.Initialize(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(res.Capabilities), want); got != tc.inInit || !json.Valid(res.Capabilities) {
				t.Errorf("%s, 2024-11-05, caps %s: initialize capabilities %s", tc.name, caps, res.Capabilities)
			}
			c := mcptest.New(t, h, mcptest.WithEra(mcptest.Stateless), mcptest.WithToken(tc.token), mcptest.WithCapabilities(json.RawMessage(caps)))
			d, err := c.Discover(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Capabilities struct {
					Extensions map[string]json.RawMessage `json:"extensions"`
				} `json:"capabilities"`
			}
			if err := json.Unmarshal(d, &got); err != nil {
				t.Fatalf("%s: server/discover %s: %v", tc.name, d, err)
			}
			if declared := strings.Contains(string(d), want); declared != tc.inInit {
				t.Errorf("%s, caps %s: server/discover %s", tc.name, caps, d)
			}
			for _, e := range tc.exts {
				if !strings.Contains(string(d), e) {
					t.Errorf("%s: server/discover lost %s: %s", tc.name, e, d)
				}
			}
		}
	}
	// ListTools failing: initialize and server/discover still answer, without it.
	h := mcphandler.New(mcphandler.Config{Authenticate: bearer, Roles: []string{"viewer", "editor", "admin"}, Logger: slog.New(slog.DiscardHandler),
		ListTools: func(context.Context) ([]mcphandler.Tool, error) { return nil, errors.New("down") }})
	t.Cleanup(func() { h.Close() })
	res, err := mcptest.New(t, h, mcptest.WithToken("acme-admin")).Initialize(ctx)
	if err != nil || strings.Contains(string(res.Capabilities), "io.modelcontextprotocol/ui") {
		t.Fatalf("initialize with ListTools failing: %v %v", res, err)
	}
	d, err := mcptest.New(t, h, mcptest.WithEra(mcptest.Stateless), mcptest.WithToken("acme-admin")).Discover(ctx)
	if err != nil || strings.Contains(string(d), "io.modelcontextprotocol/ui") {
		t.Fatalf("server/discover with ListTools failing: %s %v", d, err)
	}
}
