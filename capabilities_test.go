package mcphandler

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// capsBenchConfig serves one tool with a UI, so that the capabilities of
// initialize and server/discover carry every member that depends on the
// caller (MCP Apps) and the revision (tasks).
func capsBenchConfig() Config {
	tool := Tool{
		Name: "show", InputSchema: []byte(`{"type":"object"}`), UI: &ToolUI{ResourceURI: "ui://show"},
		Handler: func(context.Context, *ToolCall) (*ToolResult, error) { return TextResult("ok"), nil },
	}
	return Config{
		Authenticate: InsecureAnonymous,
		Stateless:    true,
		ListTools:    func(context.Context) ([]Tool, error) { return []Tool{tool}, nil },
		ListSkills:   func(context.Context) ([]Skill, error) { return nil, nil },
	}
}

// benchPOST serves body b.N times to h with the headers hdr, reusing the
// request, and fails unless each answer is 200.
func benchPOST(b *testing.B, h http.Handler, body string, hdr map[string]string) {
	rd := strings.NewReader(body)
	req, _ := http.NewRequest("POST", "/", rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	req.ContentLength = int64(len(body))
	w := &capsDiscard{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		req.Body = io.NopCloser(rd)
		clear(w.h)
		w.code = 0
		h.ServeHTTP(w, req)
		if w.code != 200 {
			b.Fatalf("status %d", w.code)
		}
	}
}

type capsDiscard struct {
	h    http.Header
	code int
}

func (w *capsDiscard) Header() http.Header         { return w.h }
func (w *capsDiscard) Write(p []byte) (int, error) { return len(p), nil }
func (w *capsDiscard) WriteHeader(code int)        { w.code = code }

// BenchmarkInitialize measures a stateless 2025-11-25 initialize, whose
// capabilities carry tasks and MCP Apps.
func BenchmarkInitialize(b *testing.B) {
	h := New(capsBenchConfig())
	benchPOST(b, h, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, nil)
}

// BenchmarkDiscover measures a server/discover, whose capabilities carry
// the tasks extension and MCP Apps.
func BenchmarkDiscover(b *testing.B) {
	h := New(capsBenchConfig())
	benchPOST(b, h, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"})
}

// TestCapabilitiesUnchanged holds the capabilities of every answer, for
// every combination of hooks, revision and MCP Apps, to the bytes the
// handler wrote before they were built from serverCaps: the code that
// wrote them is kept below as the reference.
func TestCapabilitiesUnchanged(t *testing.T) {
	hooks := []func(*Config){
		func(c *Config) { c.ListTools = func(context.Context) ([]Tool, error) { return nil, nil } },
		func(c *Config) { c.ListResources = func(context.Context) ([]Resource, error) { return nil, nil } },
		func(c *Config) {
			c.ListResourceTemplates = func(context.Context) ([]ResourceTemplate, error) { return nil, nil }
		},
		func(c *Config) {
			c.ReadResource = func(context.Context, *ResourceRequest) ([]ResourceContents, error) { return nil, nil }
		},
		func(c *Config) { c.ListPrompts = func(context.Context) ([]Prompt, error) { return nil, nil } },
		func(c *Config) {
			c.Complete = func(context.Context, *CompleteRequest) (*CompleteResult, error) { return nil, nil }
		},
		func(c *Config) { c.ListSkills = func(context.Context) ([]Skill, error) { return nil, nil } },
	}
	versions := []string{Version20241105, Version20250326, Version20250618, Version20251125, Version20260728}
	for set := range 1 << len(hooks) {
		cfg := Config{Authenticate: InsecureAnonymous}
		for i, hook := range hooks {
			if set&(1<<i) != 0 {
				hook(&cfg)
			}
		}
		h := New(cfg)
		base := refCapabilities(&h.cfg, h.catalog)
		for _, v := range versions {
			for _, apps := range []bool{false, true} {
				want := refInitCaps(base, &h.cfg, v, apps)
				if v == Version20260728 {
					want = refDiscoverCaps(base, &h.cfg, apps)
				}
				if got := h.caps.of(v, apps); string(got) != string(want) {
					t.Errorf("hooks %07b, %s, apps %v:\n got %s\nwant %s", set, v, apps, got, want)
				}
			}
		}
	}
}

// The code that built the capabilities before serverCaps, the reference
// of TestCapabilitiesUnchanged.

const (
	refAppsCapability    = `"` + appsExtensionID + `":{"mimeTypes":["` + AppMimeType + `"]}`
	refSkillsCapability  = `"` + skillsExtensionID + `":{"directoryRead":true}`
	refTasksCapsSessions = `"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`
	refTasksExtension    = `"io.modelcontextprotocol/tasks":{}`
)

func refCapabilities(cfg *Config, c *catalog) []byte {
	type listChanged struct {
		ListChanged bool `json:"listChanged"`
	}
	caps := map[string]any{"logging": struct{}{}}
	if cfg.ListTools != nil {
		caps["tools"] = listChanged{true}
	}
	if c.hasResources() {
		caps["resources"] = struct {
			Subscribe   bool `json:"subscribe"`
			ListChanged bool `json:"listChanged"`
		}{cfg.ReadResource != nil, true}
	}
	if cfg.ListPrompts != nil {
		caps["prompts"] = listChanged{true}
	}
	if cfg.Complete != nil {
		caps["completions"] = struct{}{}
	}
	if c.hasSkills() {
		caps["extensions"] = json.RawMessage("{" + refSkillsCapability + "}")
	}
	b, _ := json.Marshal(caps)
	return b
}

func refInitCaps(caps []byte, cfg *Config, version string, apps bool) []byte {
	if version == Version20251125 && cfg.ListTools != nil {
		caps = append(caps[:len(caps)-1:len(caps)-1], ","+refTasksCapsSessions+"}"...)
	}
	if apps {
		caps = refAddExtension(caps, refAppsCapability)
	}
	return caps
}

func refDiscoverCaps(caps []byte, cfg *Config, apps bool) []byte {
	if cfg.ListTools == nil {
		return caps
	}
	caps = refAddExtension(caps, refTasksExtension)
	if apps {
		caps = refAddExtension(caps, refAppsCapability)
	}
	return caps
}

func refAddExtension(caps []byte, member string) []byte {
	const key = `"extensions":{`
	out := make([]byte, 0, len(caps)+len(member)+len(key)+2)
	at := bytes.Index(caps, []byte(key))
	if at < 0 {
		out = append(out, caps[:len(caps)-1]...)
		out = append(out, ","+key...)
		out = append(out, member...)
		return append(out, "}}"...)
	}
	at += len(key)
	out = append(out, caps[:at]...)
	out = append(out, member...)
	if caps[at] != '}' {
		out = append(out, ',')
	}
	return append(out, caps[at:]...)
}
