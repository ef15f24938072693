package mcphandler_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// BenchmarkToolsCall measures one tools/call of a small tool in a live
// session, answered as JSON.
func BenchmarkToolsCall(b *testing.B) {
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{echoTool}, nil },
	})
	serveLoop(b, h, `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
}

// BenchmarkToolsCallIntercepted is BenchmarkToolsCall through an
// interceptor that only calls next: the handler's own cost of
// interception, what every interceptor (otelmcp's included) pays.
func BenchmarkToolsCallIntercepted(b *testing.B) {
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{echoTool}, nil },
		Interceptors: []mcphandler.Interceptor{func(ctx context.Context, _ *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
			return next(ctx)
		}},
	})
	serveLoop(b, h, `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
}

// BenchmarkToolsCallModern measures one 2026-07-28 tools/call of a small
// tool (no session: version, routing headers and _meta on the request),
// answered as JSON.
func BenchmarkToolsCallModern(b *testing.B) {
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{echoTool}, nil },
	})
	serveModernLoop(b, h, modernCall)
}

// serveModernLoop serves the 2026-07-28 tools/call of echo in body b.N
// times, reusing the request.
func serveModernLoop(b *testing.B, h http.Handler, body string) {
	rd := strings.NewReader(body)
	req, _ := http.NewRequest("POST", "/", rd)
	req.Header.Set("Authorization", "Bearer acme-viewer")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "echo")
	req.ContentLength = int64(len(body))
	w := &discardWriter{h: http.Header{}}
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
	b.SetBytes(int64(len(body)))
}

// BenchmarkToolsCallTyped and BenchmarkToolsCallTypedModern measure a
// tools/call of a NewTool tool (arguments validated, then decoded into a
// struct) in a session and on the 2026-07-28 path.
func BenchmarkToolsCallTyped(b *testing.B) {
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{typedEcho}, nil },
	})
	serveLoop(b, h, `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
}

func BenchmarkToolsCallTypedModern(b *testing.B) {
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{typedEcho}, nil },
	})
	serveModernLoop(b, h, modernCall)
}

// BenchmarkToolsList1000 measures a tools/list of 1000 tools in one page.
func BenchmarkToolsList1000(b *testing.B) {
	tools := make([]mcphandler.Tool, 1000)
	for i := range tools {
		tools[i] = mcphandler.Tool{
			Name:        fmt.Sprintf("tool_%04d", i),
			Description: "A dummy tool for the listing benchmark.",
			InputSchema: []byte(`{"type":"object","properties":{"x":{"type":"string"}}}`),
			Handler:     echoTool.Handler,
		}
	}
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		Limits:       mcphandler.Limits{PageSize: 1000},
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return tools, nil },
	})
	serveLoop(b, h, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
}

// BenchmarkIdleSession reports the heap held per idle session (initialize
// then notifications/initialized) in the memory store.
func BenchmarkIdleSession(b *testing.B) {
	const n = 5000
	for b.Loop() {
		store := session.NewMemory()
		// One identity holds every session here.
		h := mcphandler.New(mcphandler.Config{Authenticate: bearer, Store: store, Limits: mcphandler.Limits{MaxSessionsPerIdentity: n}})
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		w := &discardWriter{h: http.Header{}}
		for range n {
			w.reset()
			req, _ := http.NewRequest("POST", "/", strings.NewReader(initBody))
			req.Header.Set("Authorization", "Bearer acme-viewer")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			h.ServeHTTP(w, req)
			sid := w.h.Get("Mcp-Session-Id")
			w.reset()
			req, _ = http.NewRequest("POST", "/", bytes.NewReader([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)))
			req.Header.Set("Authorization", "Bearer acme-viewer")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", sid)
			h.ServeHTTP(w, req)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if store.Len() != n {
			b.Fatalf("%d sessions stored, want %d", store.Len(), n)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/session")
		runtime.KeepAlive(h)
	}
}

// BenchmarkToolsCallStore compares the memory store with Redis for one
// tools/call in a live session, and reports the Redis commands and round
// trips per call (counted with a go-redis hook).
func BenchmarkToolsCallStore(b *testing.B) {
	body := `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`
	cfg := mcphandler.Config{
		Authenticate: bearer,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{echoTool}, nil },
	}
	b.Run("memory", func(b *testing.B) {
		serveLoop(b, mcphandler.New(cfg), body)
	})
	b.Run("redis", func(b *testing.B) {
		c := redistest.Client(b)
		hook := &redistest.CountingHook{}
		c.AddHook(hook)
		st := redisstore.New(c, redisstore.Options{Prefix: redistest.Prefix(b, c)})
		defer st.Close()
		cfg := cfg
		cfg.Store = st
		cfg.StateKeys = testStateKeys
		h := mcphandler.New(cfg)
		defer h.Close()
		hook.Reset()
		serveLoop(b, h, body)
		n := hook.Counts()
		b.ReportMetric(float64(n.Commands)/float64(b.N), "redis-cmds/op")
		b.ReportMetric(float64(n.RoundTrips)/float64(b.N), "round-trips/op")
	})
}

// BenchmarkToolsCallParallel measures throughput with 32 concurrent callers
// (one live session each), where Redis round trips overlap: ns/op is the
// inverse of throughput.
func BenchmarkToolsCallParallel(b *testing.B) {
	body := `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`
	cfg := mcphandler.Config{
		Authenticate: bearer,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{echoTool}, nil },
	}
	run := func(b *testing.B, h http.Handler) {
		b.ReportAllocs()
		b.SetParallelism(16) // 32 callers on 2 cores
		b.RunParallel(func(pb *testing.PB) {
			hdr := benchSession(b, h)
			rd := strings.NewReader(body)
			req, _ := http.NewRequest("POST", "/", rd)
			req.Header = hdr
			req.ContentLength = int64(len(body))
			w := &discardWriter{h: http.Header{}}
			for pb.Next() {
				rd.Reset(body)
				req.Body = io.NopCloser(rd)
				w.reset()
				h.ServeHTTP(w, req)
				if w.code != 200 {
					b.Errorf("status %d", w.code)
					return
				}
			}
		})
	}
	b.Run("memory", func(b *testing.B) { run(b, mcphandler.New(cfg)) })
	b.Run("redis", func(b *testing.B) {
		c := redistest.Client(b)
		st := redisstore.New(c, redisstore.Options{Prefix: redistest.Prefix(b, c)})
		defer st.Close()
		cfg := cfg
		cfg.Store = st
		cfg.StateKeys = testStateKeys
		h := mcphandler.New(cfg)
		defer h.Close()
		run(b, h)
	})
}

// BenchmarkConfirmedCall measures one 2025 confirmed tools/call end to end
// over HTTP: the question on the call's stream, the client's accept posted
// back, the run and the result; with Redis, the commands each costs. A
// confirm record counts against its identity's bound for minutes
// (Limits.MaxConfirmsPerIdentity, 100), so every 100 calls a client of
// the next identity takes over: its initialize is amortized over them.
func BenchmarkConfirmedCall(b *testing.B) {
	const perIdentity = 100
	run := func(b *testing.B, cfg mcphandler.Config) {
		f := &fixture{}
		base := f.config()
		base.OnCall = nil
		base.Store, base.StateKeys = cfg.Store, cfg.StateKeys
		base.Authenticate = func(r *http.Request) (mcphandler.Identity, error) {
			sub := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			return mcphandler.Identity{Tenant: "acme", Subject: sub, Role: "admin"}, nil
		}
		h := mcphandler.New(base)
		defer h.Close()
		ctx := context.Background()
		var c *mcptest.Client
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			if i%perIdentity == 0 {
				c = mcptest.New(b, h, mcptest.WithToken("bench-"+strconv.Itoa(i/perIdentity)),
					mcptest.WithElicitationHandler(answer("accept", map[string]any{"confirm": true})))
				if _, err := c.Initialize(ctx); err != nil {
					b.Fatal(err)
				}
			}
			if res, err := c.CallTool(ctx, "delete_thing", nil); err != nil || res.IsError {
				b.Fatalf("%+v %v", res, err)
			}
		}
	}
	b.Run("memory", func(b *testing.B) { run(b, mcphandler.Config{}) })
	b.Run("redis", func(b *testing.B) {
		c := redistest.Client(b)
		hook := &redistest.CountingHook{}
		c.AddHook(hook)
		st := redisstore.New(c, redisstore.Options{Prefix: redistest.Prefix(b, c)})
		defer st.Close()
		hook.Reset()
		run(b, mcphandler.Config{Store: st, StateKeys: testStateKeys})
		n := hook.Counts()
		b.ReportMetric(float64(n.Commands)/float64(b.N), "redis-cmds/op")
	})
}
