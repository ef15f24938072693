package mcphandler_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// BenchmarkToolsCallAttackerSession measures a tools/call on the Redis
// store in a session whose client sent 1 MiB of clientInfo name and
// version at initialize, against one that sent a few bytes: every request
// reads the session record, so what the record keeps is paid per request.
func BenchmarkToolsCallAttackerSession(b *testing.B) {
	body := `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`
	huge := strings.Repeat("x", 1<<20)
	for name, info := range map[string]string{"plain": "client", "attacker": huge} {
		b.Run(name, func(b *testing.B) {
			c := redistest.Client(b)
			st := redisstore.New(c, redisstore.Options{Prefix: redistest.Prefix(b, c)})
			defer st.Close()
			h := mcphandler.New(mcphandler.Config{
				Authenticate: bearer,
				Store:        st,
				ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{echoTool}, nil },
			})
			defer h.Close()
			init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"` +
				info + `","version":"` + info + `"}}}`
			w := &discardWriter{h: http.Header{}}
			req, _ := http.NewRequest("POST", "/", strings.NewReader(init))
			req.Header.Set("Authorization", "Bearer acme-viewer")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			h.ServeHTTP(w, req)
			hdr := req.Header.Clone()
			hdr.Set("Mcp-Session-Id", w.h.Get("Mcp-Session-Id"))
			hdr.Set("Mcp-Protocol-Version", "2025-11-25")
			rd := strings.NewReader(body)
			req, _ = http.NewRequest("POST", "/", rd)
			req.Header = hdr
			req.ContentLength = int64(len(body))
			b.ReportAllocs()
			for b.Loop() {
				rd.Reset(body)
				req.Body = io.NopCloser(rd)
				w.reset()
				h.ServeHTTP(w, req)
				if w.code != 200 {
					b.Fatalf("status %d", w.code)
				}
			}
		})
	}
}
