package mcphandler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/elicitation"
)

func TestModernValidationOrder(t *testing.T) {
	f := &fixture{}
	srv := httptest.NewServer(mcphandler.New(f.config()))
	t.Cleanup(srv.Close)
	list := modernBody(1, "tools/list", "", "{}")
	for _, tc := range []struct {
		name   string
		body   string
		mod    func(http.Header)
		status int
		code   int
	}{
		{"no version header", list, func(h http.Header) { h.Del("MCP-Protocol-Version") }, 400, -32020},
		{"no _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, nil, 400, -32602},
		{"no capabilities", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, nil, 400, -32602},
		{"header and body disagree", strings.Replace(list, `"2026-07-28"`, `"v999.0.0"`, 1), nil, 400, -32020},
		{"unsupported version", strings.Replace(list, `"2026-07-28"`, `"2099-01-01"`, 1), func(h http.Header) { h.Set("MCP-Protocol-Version", "2099-01-01") }, 400, -32022},
		{"Mcp-Method missing", list, func(h http.Header) { h.Del("Mcp-Method") }, 400, -32020},
		{"Mcp-Method case", list, func(h http.Header) { h.Set("Mcp-Method", "TOOLS/LIST") }, 400, -32020},
		{"Mcp-Name mismatch", modernBody(1, "tools/call", `"name":"read"`, "{}"), func(h http.Header) { h.Set("Mcp-Name", "other") }, 400, -32020},
		{"Mcp-Name base64", modernBody(1, "tools/call", `"name":"read"`, "{}"), func(h http.Header) { h.Set("Mcp-Name", "=?base64?cmVhZA==?=") }, 200, 0},
		{"initialize removed", modernBody(1, "initialize", "", "{}"), nil, 404, -32601},
		{"ping removed", modernBody(1, "ping", "", "{}"), nil, 404, -32601},
		{"setLevel removed", modernBody(1, "logging/setLevel", `"level":"info"`, "{}"), nil, 404, -32601},
		{"subscribe removed", modernBody(1, "resources/subscribe", `"uri":"x://y"`, "{}"), func(h http.Header) { h.Del("Mcp-Name") }, 404, -32601},
		{"unknown method", modernBody(1, "nope/nope", "", "{}"), nil, 404, -32601},
		{"unknown tool", modernBody(1, "tools/call", `"name":"nope"`, "{}"), nil, 400, -32602},
		{"bad log level", strings.Replace(list, `clientCapabilities":{}`, `clientCapabilities":{},"io.modelcontextprotocol/logLevel":"loud"`, 1), nil, 400, -32602},
		{"session header ignored", list, func(h http.Header) { h.Set("Mcp-Session-Id", "whatever") }, 200, 0},
		{"ok", list, nil, 200, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, b := modernPost(t, srv, "acme-viewer", tc.body, tc.mod)
			code, _ := rpcError(t, b)
			if status != tc.status || code != tc.code {
				t.Fatalf("status %d code %d, want %d %d; body %s", status, code, tc.status, tc.code, b)
			}
			if hdr.Get("Mcp-Session-Id") != "" {
				t.Fatal("a 2026-07-28 response carries a session id")
			}
			if code != 0 && !bytes.Contains(b, []byte(`"id":1`)) {
				t.Fatalf("the error does not echo the request id: %s", b)
			}
		})
	}
	// GET and DELETE with a modern version header: 405.
	for _, method := range []string{"GET", "DELETE"} {
		req, _ := http.NewRequest(method, srv.URL, nil)
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Authorization", "Bearer acme-viewer")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 {
			t.Errorf("%s: %d, want 405", method, resp.StatusCode)
		}
	}
}

func TestModernResults(t *testing.T) {
	f := &fixture{}
	var reads atomic.Int64
	cfg := surfaceConfig(&reads)
	cfg.ListTools = f.config().ListTools
	cfg.Name, cfg.Version = "srv", "9"
	srv := httptest.NewServer(mcphandler.New(cfg))
	t.Cleanup(srv.Close)
	_, _, b := modernPost(t, srv, "acme-viewer", modernBody(1, "server/discover", "", "{}"), nil)
	var d struct {
		Result struct {
			ResultType        string          `json:"resultType"`
			SupportedVersions []string        `json:"supportedVersions"`
			Capabilities      json.RawMessage `json:"capabilities"`
			CacheScope        string          `json:"cacheScope"`
			TTL               *int            `json:"ttlMs"`
			Meta              map[string]struct {
				Name string `json:"name"`
			} `json:"_meta"`
		} `json:"result"`
	}
	json.Unmarshal(b, &d)
	r := d.Result
	if r.ResultType != "complete" || r.SupportedVersions[0] != "2026-07-28" || r.CacheScope != "private" || r.TTL == nil ||
		r.Meta["io.modelcontextprotocol/serverInfo"].Name != "srv" || !bytes.Contains(r.Capabilities, []byte(`"prompts"`)) {
		t.Fatalf("discover: %s", b)
	}
	for _, method := range []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list"} {
		_, _, b := modernPost(t, srv, "acme-viewer", modernBody(2, method, "", "{}"), nil)
		if !bytes.Contains(b, []byte(`"resultType":"complete","ttlMs":0,"cacheScope":"private"`)) {
			t.Errorf("%s: %s", method, b)
		}
	}
	_, _, b = modernPost(t, srv, "acme-viewer", modernBody(3, "resources/read", `"uri":"docs://a1"`, "{}"), nil)
	if !bytes.Contains(b, []byte(`"cacheScope":"private"`)) || !bytes.Contains(b, []byte("Q3 roadmap text")) {
		t.Fatalf("read: %s", b)
	}
	// Not found is -32602 in 2026-07-28 (it was -32002), and hidden reads alike.
	for _, uri := range []string{"docs://zz", "audit://acme"} {
		status, _, b := modernPost(t, srv, "acme-viewer", modernBody(4, "resources/read", `"uri":"`+uri+`"`, "{}"), nil)
		if code, _ := rpcError(t, b); status != 400 || code != -32602 {
			t.Errorf("%s: %d %s", uri, status, b)
		}
	}
	_, _, b = modernPost(t, srv, "acme-viewer", modernBody(5, "tools/call", `"name":"read"`, "{}"), nil)
	if !bytes.Contains(b, []byte(`"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"srv","version":"9"}},"content":[`)) {
		t.Fatalf("tools/call: %s", b)
	}
}

// TestModernInputRequired drives a multi round-trip elicitation by hand:
// the first round asks, the retry with the answer and the state completes,
// and a tampered, moved or foreign state is refused.
func TestModernInputRequired(t *testing.T) {
	var runs atomic.Int64
	ask := mcphandler.Tool{Name: "ask", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		res, err := call.Elicit(ctx, mcphandler.ElicitRequest{Message: "Name?", Schema: elicitation.NewSchema().String("name", elicitation.Required())})
		if err != nil {
			return nil, err
		}
		runs.Add(1)
		return mcphandler.TextResult("hello " + res.Content["name"].(string)), nil
	}}
	cfg := (&fixture{}).config()
	cfg.ListTools = func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{ask}, nil }
	cfg.BeforeCall = nil
	srv := httptest.NewServer(mcphandler.New(cfg))
	t.Cleanup(srv.Close)
	caps := `{"elicitation":{}}`
	_, _, b := modernPost(t, srv, "acme-viewer", modernBody(1, "tools/call", `"name":"ask","arguments":{"x":1}`, caps), nil)
	var ir struct {
		Result struct {
			ResultType    string                     `json:"resultType"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  string                     `json:"requestState"`
		} `json:"result"`
	}
	json.Unmarshal(b, &ir)
	if ir.Result.ResultType != "input_required" || len(ir.Result.InputRequests) != 1 || ir.Result.RequestState == "" {
		t.Fatalf("round 1: %s", b)
	}
	var key string
	for k := range ir.Result.InputRequests {
		key = k
	}
	retry := func(token, args, state string) (int, []byte) {
		params := `"name":"ask","arguments":` + args + `,"inputResponses":{"` + key + `":{"action":"accept","content":{"name":"Ada"}}},"requestState":"` + state + `"`
		status, _, b := modernPost(t, srv, token, modernBody(2, "tools/call", params, caps), nil)
		return status, b
	}
	state := ir.Result.RequestState
	tampered := state[:len(state)-2] + "AA"
	for name, tc := range map[string]struct{ token, args, state string }{
		"tampered":      {"acme-viewer", `{"x":1}`, tampered},
		"other args":    {"acme-viewer", `{"x":2}`, state},
		"other user":    {"globex-editor", `{"x":1}`, state},
		"garbage state": {"acme-viewer", `{"x":1}`, "v1.nope"},
	} {
		status, b := retry(tc.token, tc.args, tc.state)
		if code, msg := rpcError(t, b); status != 400 || code != -32602 || !strings.Contains(msg, "requestState") {
			t.Errorf("%s: %d %s", name, status, b)
		}
	}
	if runs.Load() != 0 {
		t.Fatal("a refused state ran the tool")
	}
	// A malformed answer is a JSON-RPC error, not a run.
	bad := `"name":"ask","arguments":{"x":1},"inputResponses":{"` + key + `":5},"requestState":"` + state + `"`
	if status, _, b := modernPost(t, srv, "acme-viewer", modernBody(2, "tools/call", bad, caps), nil); status != 400 {
		t.Fatalf("malformed answer: %d %s", status, b)
	}
	_, b = retry("acme-viewer", `{ "x" : 1.0 }`, state) // same arguments, written differently
	if !bytes.Contains(b, []byte("hello Ada")) || !bytes.Contains(b, []byte(`"resultType":"complete"`)) {
		t.Fatalf("retry: %s", b)
	}
	// Without the capability the tool's question is -32021.
	status, _, b := modernPost(t, srv, "acme-viewer", modernBody(3, "tools/call", `"name":"ask"`, "{}"), nil)
	if code, _ := rpcError(t, b); status != 400 || code != -32021 || !bytes.Contains(b, []byte(`"requiredCapabilities":{"elicitation"`)) {
		t.Fatalf("missing capability: %d %s", status, b)
	}
}
