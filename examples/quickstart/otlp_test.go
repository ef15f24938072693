package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	colmetric "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mcphandler/mcphandler/mcptest"
)

// collector is an OTLP/HTTP receiver that keeps what it was sent.
type collector struct {
	mu      sync.Mutex
	spans   map[string]tracepb.Span_SpanKind // by name
	metrics map[string]time.Time             // the first export of each metric
}

func newCollector(t *testing.T) (*collector, string) {
	c := &collector{spans: map[string]tracepb.Span_SpanKind{}, metrics: map[string]time.Time{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		defer c.mu.Unlock()
		switch r.URL.Path {
		case "/v1/traces":
			var req coltrace.ExportTraceServiceRequest
			if err := proto.Unmarshal(body, &req); err != nil {
				t.Errorf("traces: %v", err)
			}
			for _, rs := range req.ResourceSpans {
				for _, ss := range rs.ScopeSpans {
					for _, s := range ss.Spans {
						c.spans[s.Name] = s.Kind
					}
				}
			}
			w.Write(mustMarshal(&coltrace.ExportTraceServiceResponse{}))
		case "/v1/metrics":
			var req colmetric.ExportMetricsServiceRequest
			if err := proto.Unmarshal(body, &req); err != nil {
				t.Errorf("metrics: %v", err)
			}
			for _, rm := range req.ResourceMetrics {
				for _, sm := range rm.ScopeMetrics {
					for _, m := range sm.Metrics {
						if _, ok := c.metrics[m.Name]; !ok {
							c.metrics[m.Name] = time.Now()
						}
					}
				}
			}
			w.Write(mustMarshal(&colmetric.ExportMetricsServiceResponse{}))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return c, srv.URL
}

func mustMarshal(m proto.Message) []byte {
	b, _ := proto.Marshal(m)
	return b
}

func (c *collector) metric(name string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.metrics[name]
	return at, ok
}

func (c *collector) span(name string) (tracepb.Span_SpanKind, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.spans[name]
	return k, ok
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestOTLPExport runs the command with -otlp: metrics reach the collector
// within the 5-second interval while it runs, and the spans of the calls
// are flushed on SIGTERM.
func TestOTLPExport(t *testing.T) {
	col, url := newCollector(t)
	addr := freeAddr(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "QUICKSTART_RUN_MAIN=1", "QUICKSTART_ARGS=-addr "+addr+" -otlp "+url,
		"REDIS_URL=", "REDIS_CLUSTER=", "REDIS_SENTINEL=")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the quickstart did not listen")
		}
	}
	ctx := context.Background()
	c := mcptest.Dial("http://"+addr+"/mcp", mcptest.WithToken("acme-viewer"))
	defer c.Close()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	called := time.Now()
	if res, err := c.CallTool(ctx, "search_docs", map[string]any{}); err != nil || res.IsError {
		t.Fatalf("search_docs: %+v %v", res, err)
	}
	for {
		if at, ok := col.metric("mcp.server.operation.duration"); ok {
			if at.Sub(called) > metricInterval+2*time.Second {
				t.Fatalf("metrics exported %v after the call, want within %v", at.Sub(called), metricInterval)
			}
			break
		}
		if time.Since(called) > metricInterval+2*time.Second {
			t.Fatalf("no metrics exported within %v", metricInterval)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A call just before SIGTERM: its span is in no batch yet.
	if _, err := c.Call(ctx, "prompts/get", map[string]any{"name": "summarize_doc", "arguments": map[string]any{"id": "a1"}}); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v", err)
	}
	for _, name := range []string{"initialize", "tools/call search_docs", "prompts/get summarize_doc"} {
		if k, ok := col.span(name); !ok || k != tracepb.Span_SPAN_KIND_SERVER {
			t.Errorf("span %q: exported %v, kind %v", name, ok, k)
		}
	}
	if _, ok := col.metric("mcp.server.session.duration"); ok {
		t.Errorf("a session duration without a DELETE")
	}
}
