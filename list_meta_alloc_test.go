package mcphandler_test

import (
	"context"
	"io"
	"net/http"
	"strings"
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
			body := sessionList
			var hdr http.Header
			if tc.modern {
				body = modernList
				hdr = http.Header{}
				hdr.Set("Authorization", "Bearer acme-viewer")
				hdr.Set("Content-Type", "application/json")
				hdr.Set("Accept", "application/json, text/event-stream")
				hdr.Set("MCP-Protocol-Version", "2026-07-28")
				hdr.Set("Mcp-Method", "tools/list")
			} else {
				hdr = benchSession(t, h)
			}
			rd := strings.NewReader(body)
			req, _ := http.NewRequest("POST", "/", rd)
			req.Header = hdr
			req.ContentLength = int64(len(body))
			w := &discardWriter{h: http.Header{}}
			n := testing.AllocsPerRun(200, func() {
				rd.Reset(body)
				req.Body = io.NopCloser(rd)
				w.reset()
				h.ServeHTTP(w, req)
				if w.code != http.StatusOK || w.n == 0 {
					t.Fatalf("status %d, %d bytes", w.code, w.n)
				}
			})
			if n > tc.max {
				t.Errorf("a tools/list allocates %v times, at most %v before", n, tc.max)
			}
		})
	}
}
