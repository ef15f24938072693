package ratelimit_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/ratelimit"
	msession "github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Flush()                      {}

// BenchmarkToolsCall measures a tools/call of a small tool in a live 2025
// session without a limiter and with one limit per tenant (never
// reached), in memory and in Redis, on the memory and the Redis session
// store; run them side by side and compare ns/op.
func BenchmarkToolsCall(b *testing.B) {
	limit := ratelimit.Limit{Name: "tenant", By: ratelimit.ByTenant, Rate: 1e9, Burst: 1e9}
	for _, bc := range []struct{ store, limiter string }{
		{"memory", "off"}, {"memory", "memory"}, {"memory", "redis"},
		{"redis", "off"}, {"redis", "redis"},
	} {
		b.Run("store="+bc.store+"/limiter="+bc.limiter, func(b *testing.B) {
			var runs atomic.Int64
			echo := mcphandler.Tool{Name: "echo", Description: "echo", Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				runs.Add(1)
				return mcphandler.TextResult("hello"), nil
			}}
			cfg := mcphandler.Config{
				Authenticate: authenticate,
				ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{echo}, nil },
			}
			var st *redisstore.Store
			var prefix string
			if bc.store == "redis" || bc.limiter == "redis" {
				c := redistest.Client(b)
				prefix = rateKeys(b, c)
				st = redisstore.New(c, redisstore.Options{Prefix: prefix})
				b.Cleanup(func() { st.Close() })
			}
			if bc.store == "redis" {
				cfg.Store, cfg.StateKeys = st, [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
			} else {
				cfg.Store = msession.NewMemory()
			}
			switch bc.limiter {
			case "memory":
				cfg.BeforeCall = newLimiter(b, ratelimit.Options{}, limit).Policy(nil)
			case "redis":
				cfg.BeforeCall = newLimiter(b, ratelimit.Options{Redis: st, Prefix: prefix}, limit).Policy(nil)
			}
			h := mcphandler.New(cfg)
			b.Cleanup(func() { h.Close() })
			serveLoop(b, h, `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
			if n := runs.Load(); n != int64(b.N) {
				b.Fatalf("%d of %d calls ran", n, b.N)
			}
		})
	}
}

// serveLoop serves body b.N times in one live session, reusing the request.
func serveLoop(b *testing.B, h http.Handler, body string) {
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+token("acme", "alice"))
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Accept", "application/json, text/event-stream")
	w := &discardWriter{h: http.Header{}}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`
	req, _ := http.NewRequest("POST", "/", strings.NewReader(init))
	req.Header = hdr.Clone()
	h.ServeHTTP(w, req)
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
		clear(w.h)
		w.code = 0
		h.ServeHTTP(w, req)
		if w.code != 200 {
			b.Fatalf("status %d", w.code)
		}
	}
}
