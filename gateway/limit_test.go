package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway"
)

// held is an upstream whose tool "wait" runs until released, counting the
// runs that started.
type held struct {
	srv     *httptest.Server
	started atomic.Int64
	release chan struct{}
}

func newHeld(t *testing.T) *held {
	u := &held{release: make(chan struct{})}
	h := mcphandler.New(mcphandler.Config{
		Name: "held", Version: "1", CacheTTL: time.Hour,
		Authenticate: mcphandler.InsecureAnonymous,
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{{Name: "wait", InputSchema: json.RawMessage(`{"type":"object"}`),
				Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
				Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					u.started.Add(1)
					select {
					case <-u.release:
					case <-ctx.Done():
					case <-time.After(10 * time.Second): // a test that fails must not hang
					}
					return mcphandler.TextResult("done"), nil
				}}}, nil
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	u.srv = httptest.NewServer(h)
	t.Cleanup(func() { u.srv.Close(); h.Close() })
	return u
}

// At most MaxConcurrent calls of one upstream are in flight from a
// replica: the next waits a second for one to end, then fails at once,
// retryable, without reaching the upstream or counting against its
// breaker; a slot given back serves the next call, and nothing is kept
// for an upstream with nothing in flight.
func TestMaxConcurrentCalls(t *testing.T) {
	u := newHeld(t)
	gh := newGateway(t, gateway.Config{MaxConcurrent: 2, FailureThreshold: 1,
		Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
			return []gateway.Upstream{{ID: "up", URL: u.srv.URL, Era: gateway.EraStateless}}, nil
		}})
	c := connect(t, gh.h, "acme-admin")
	names(t, c)
	var wg sync.WaitGroup
	texts := make([]string, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.CallTool(context.Background(), "up_wait", nil)
			if err == nil {
				texts[i] = resultText(res)
			}
		}()
	}
	eventually(t, "two calls running upstream", func() bool { return u.started.Load() == 2 })
	res, err := c.CallTool(context.Background(), "up_wait", nil)
	if err != nil || !res.IsError || !strings.Contains(resultText(res), "backend_unavailable") || !strings.Contains(resultText(res), "busy") {
		t.Fatalf("a third call: %+v %v", res, err)
	}
	if n := u.started.Load(); n != 2 {
		t.Fatalf("%d calls reached the upstream", n)
	}
	close(u.release)
	wg.Wait()
	if texts[0] != "done" || texts[1] != "done" {
		t.Fatalf("the calls in flight: %q", texts)
	}
	if res, err := c.CallTool(context.Background(), "up_wait", nil); err != nil || res.IsError || gateway.Breakers(gh.gw) != 0 {
		t.Fatalf("after: %+v %v, %d breakers remembered", res, err, gateway.Breakers(gh.gw))
	}
	if n := gateway.InflightURLs(gh.gw); n != 0 {
		t.Fatalf("%d upstream URLs still held", n)
	}
}

// A list that finds the upstream busy serves the list kept, stale, with
// error "busy", or leaves it out, "failed"; its breaker does not count it.
func TestMaxConcurrentList(t *testing.T) {
	u := newHeld(t)
	gh := newGateway(t, gateway.Config{MaxConcurrent: 1, FailureThreshold: 1,
		Upstreams: func(ctx context.Context, id mcphandler.Identity) ([]gateway.Upstream, error) {
			return []gateway.Upstream{{ID: "up", URL: u.srv.URL, Era: gateway.EraStateless,
				Header: http.Header{"X-Tenant": {id.Tenant}}}}, nil
		}})
	clk := newClock(gh)
	acme := connect(t, gh.h, "acme-admin")
	expect(t, acme, []string{"up_wait"}, "up", "ok//-")
	done := make(chan struct{})
	go func() {
		defer close(done)
		acme.CallTool(context.Background(), "up_wait", nil)
	}()
	eventually(t, "a call running upstream", func() bool { return u.started.Load() == 1 })
	clk.add(time.Hour) // acme's list is fresh no more
	expect(t, acme, []string{"up_wait"}, "up", "stale/busy/-")
	globex := connect(t, gh.h, "globex-editor") // its initialize finds the upstream busy too
	expect(t, globex, []string{}, "up", "failed/busy/-")
	close(u.release)
	<-done
	expect(t, globex, []string{"up_wait"}, "up", "ok//-")
	if n := gateway.Breakers(gh.gw); n != 0 {
		t.Fatalf("%d breakers remember a busy upstream", n)
	}
}
