package mcphandler_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

// A result another server sent is relayed byte for byte, but for what
// only this handler may write.
func TestResultJSONRelays(t *testing.T) {
	cases := []struct {
		name, in, want string
		isError        bool
	}{
		{"plain", `{"content":[{"type":"text","text":"hi","annotations":{"priority":1}}]}`,
			`{"content":[{"type":"text","text":"hi","annotations":{"priority":1}}]}`, false},
		{"unknown members and blocks kept", `{"content":[{"type":"future","x":[1,2.50e3]}],"structuredContent":{"a":1},"isError":true,"extra":"kept"}`,
			`{"content":[{"type":"future","x":[1,2.50e3]}],"structuredContent":{"a":1},"isError":true,"extra":"kept"}`, true},
		{"resultType dropped", `{"resultType":"complete","content":[]}`, `{"content":[]}`, false},
		{"reserved _meta keys dropped", `{"content":[],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"x"},"vendor/k":1}}`,
			`{"content":[],"_meta":{"vendor/k":1}}`, false},
		{"reserved key written with escapes", `{"content":[],"_meta":{"io.modelcontextprotocol\u002fx":1,"\u0069o.modelcontextprotocol/y":2}}`,
			`{"content":[],"_meta":{}}`, false},
		{"whitespace between members dropped, inside values kept", " \n{ \"content\" : [ ] }\t", `{"content":[ ]}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := mcphandler.ResultJSON([]byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if r.IsError != c.isError {
				t.Fatalf("IsError %v", r.IsError)
			}
			if got := relayed(t, r); got != c.want {
				t.Fatalf("relayed\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

// What is not a result is refused, in time linear in its size.
func TestResultJSONRefuses(t *testing.T) {
	for name, in := range map[string]string{
		"empty":                     ``,
		"null":                      `null`,
		"array":                     `[{"content":[]}]`,
		"string":                    `"content"`,
		"no content":                `{"isError":true}`,
		"content not an array":      `{"content":{}}`,
		"content null":              `{"content":null}`,
		"structuredContent array":   `{"content":[],"structuredContent":[1]}`,
		"isError string":            `{"content":[],"isError":"true"}`,
		"_meta array":               `{"content":[],"_meta":[]}`,
		"repeated key":              `{"content":[],"content":[]}`,
		"keys equal but for case":   `{"content":[],"Content":[{"type":"text","text":"shadow"}]}`,
		"two values":                `{"content":[]}{"content":[]}`,
		"trailing garbage":          `{"content":[]}x`,
		"too deep":                  `{"content":[` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `]}`,
		"invalid UTF-8 in a string": "{\"content\":[],\"x\":\"\xff\"}",
	} {
		if r, err := mcphandler.ResultJSON([]byte(in)); err == nil {
			t.Errorf("%s: accepted as %+v", name, r)
		}
	}
	// A huge number is data, not a reason to refuse: its cost is its bytes.
	big := `{"content":[{"type":"text","text":"n"}],"structuredContent":{"n":1` + strings.Repeat("0", 1<<20) + `}}`
	if _, err := mcphandler.ResultJSON([]byte(big)); err != nil {
		t.Fatalf("a 1 MB number: %v", err)
	}
}

// relayed is what a 2025 client receives when a tool answers r.
func relayed(t *testing.T, r *mcphandler.ToolResult) string {
	t.Helper()
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{{Name: "relay", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
				Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) { return r, nil }}}, nil
		},
	})
	defer h.Close()
	c := mcptest.New(t, h, mcptest.WithToken("acme-admin"))
	ctx := context.Background()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	raw, err := c.Call(ctx, "tools/call", map[string]any{"name": "relay"})
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// On 2026-07-28 the handler writes its own resultType next to the relayed
// members, once.
func TestResultJSONStateless(t *testing.T) {
	r, err := mcphandler.ResultJSON([]byte(`{"resultType":"input_required","content":[{"type":"text","text":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{{Name: "relay", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
				Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) { return r, nil }}}, nil
		},
	})
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	_, _, body := modernPost(t, srv, "acme-admin", modernBody(1, "tools/call", `"name":"relay"`, `{}`), nil)
	var m struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if n := strings.Count(string(m.Result), `"resultType"`); n != 1 || !strings.Contains(string(m.Result), `"resultType":"complete"`) {
		t.Fatalf("result %s: want exactly one resultType, complete", m.Result)
	}
	if !strings.Contains(string(m.Result), `"content":[{"type":"text","text":"x"}]`) {
		t.Fatalf("result %s lost the relayed content", m.Result)
	}
}
