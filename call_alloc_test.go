package mcphandler_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler"
)

// TestToolsCallAllocs holds a tools/call of a small tool, answered as
// JSON, to the allocations it makes today, on the 2025 session path and
// the 2026-07-28 path, for a plain tool and a NewTool one: a change that
// allocates more per call fails here (CI counts them without -race).
func TestToolsCallAllocs(t *testing.T) {
	if mcphandler.RaceEnabled {
		t.Skip("the race detector allocates")
	}
	session := `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`
	for _, tc := range []struct {
		name   string
		tool   mcphandler.Tool
		modern bool
		max    float64
	}{
		{"2025 session", echoTool, false, 27},
		{"2026-07-28", echoTool, true, 34},
		{"2025 session, NewTool", typedEcho, false, 30},
		{"2026-07-28, NewTool", typedEcho, true, 37},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := mcphandler.New(mcphandler.Config{
				Authenticate: bearer,
				ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{tc.tool}, nil },
			})
			body, hdr := session, http.Header(nil)
			if tc.modern {
				body, hdr = modernCall, modernHeader("tools/call", "echo")
			} else {
				hdr = benchSession(t, h)
			}
			n := postAllocs(t, h, body, hdr)
			if n > tc.max {
				t.Errorf("a tools/call allocates %v times, at most %v before", n, tc.max)
			}
		})
	}
}

// modernHeader is the header of a 2026-07-28 POST of method (and name, for
// Mcp-Name, if not empty) by acme-viewer.
func modernHeader(method, name string) http.Header {
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer acme-viewer")
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Accept", "application/json, text/event-stream")
	hdr.Set("MCP-Protocol-Version", "2026-07-28")
	hdr.Set("Mcp-Method", method)
	if name != "" {
		hdr.Set("Mcp-Name", name)
	}
	return hdr
}

// postAllocs is how many times h allocates to answer a POST of body with
// hdr, which must succeed with a body.
func postAllocs(t *testing.T, h http.Handler, body string, hdr http.Header) float64 {
	t.Helper()
	rd := strings.NewReader(body)
	req, _ := http.NewRequest("POST", "/", rd)
	req.Header = hdr
	req.ContentLength = int64(len(body))
	w := &discardWriter{h: http.Header{}}
	return testing.AllocsPerRun(200, func() {
		rd.Reset(body)
		req.Body = io.NopCloser(rd)
		w.reset()
		h.ServeHTTP(w, req)
		if w.code != http.StatusOK || w.n == 0 {
			t.Fatalf("status %d, %d bytes", w.code, w.n)
		}
	})
}
