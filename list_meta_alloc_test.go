package mcphandler_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/mcphandler/mcphandler"
)

// TestToolsListAllocs holds a tools/list of one tool, answered as JSON,
// to the allocations it makes, on the 2025 session path and the
// 2026-07-28 path: AddListMeta, unused, costs a plain list nothing.
func TestToolsListAllocs(t *testing.T) {
	if mcphandler.RaceEnabled {
		t.Skip("the race detector allocates")
	}
	const sessionList = `{"jsonrpc":"2.0","id":42,"method":"tools/list"}`
	const modernList = `{"jsonrpc":"2.0","id":42,"method":"tools/list","params":{` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	for _, tc := range []struct {
		name   string
		modern bool
		max    float64
	}{
		{"2025 session", false, 15},
		{"2026-07-28", true, 23},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := mcphandler.New(mcphandler.Config{
				Authenticate: bearer,
				ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{echoTool}, nil },
			})
			defer h.Close()
			body, hdr := sessionList, http.Header(nil)
			if tc.modern {
				body, hdr = modernList, modernHeader("tools/list", "")
			} else {
				hdr = benchSession(t, h)
			}
			n := postAllocs(t, h, body, hdr)
			if n > tc.max {
				t.Errorf("a tools/list allocates %v times, at most %v before", n, tc.max)
			}
		})
	}
}
