package mcphandler_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway"
	"github.com/mcphandler/mcphandler/mcptest"
)

// A call of a gateway's upstream tool reports the upstream, its era, the
// kind of credentials and the time spent upstream (within the call's) in
// its CallEvent; a local tool's event has none of them.
func TestCallEventUpstream(t *testing.T) {
	upstream := mcphandler.New(mcphandler.Config{
		Authenticate: mcphandler.InsecureAnonymous,
		ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{{Name: "search", Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
				time.Sleep(2 * time.Millisecond)
				return mcphandler.TextResult("found"), nil
			}}}, nil
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	srv := httptest.NewServer(upstream)
	t.Cleanup(func() { srv.Close(); upstream.Close() })
	gw, err := gateway.New(gateway.Config{Upstreams: func(context.Context, mcphandler.Identity) ([]gateway.Upstream, error) {
		return []gateway.Upstream{{ID: "docs", URL: srv.URL, Era: gateway.EraStateless, CredentialKind: "token-exchange"}}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	events := make(chan mcphandler.CallEvent, 2)
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
			tools, err := gw.Tools(ctx)
			return append(tools, echoTool), err
		},
		OnCall: func(ev mcphandler.CallEvent) { events <- ev },
	})
	t.Cleanup(func() { h.Close() })
	c := mcptest.New(t, h, mcptest.WithToken("acme-admin"))
	ctx := context.Background()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"docs_search", "echo"} {
		if res, err := c.CallTool(ctx, name, map[string]any{"text": "x"}); err != nil || res.IsError {
			t.Fatalf("%s: %+v %v", name, res, err)
		}
	}
	remote, local := <-events, <-events
	if remote.Tool != "docs_search" || remote.Upstream != "docs" || remote.UpstreamEra != "2026-07-28" || remote.CredentialKind != "token-exchange" ||
		remote.UpstreamDuration < 2*time.Millisecond || remote.UpstreamDuration > remote.Duration {
		t.Fatalf("upstream call's event %+v", remote)
	}
	if local.Tool != "echo" || local.Upstream != "" || local.UpstreamEra != "" || local.CredentialKind != "" || local.UpstreamDuration != 0 {
		t.Fatalf("local call's event %+v", local)
	}
}

// Request.OnUpstream wraps ToolCall.CallUpstream, the first interceptor's
// outermost: each gets the tool's context and passes on its own, what one
// adds to u reaches the call, and the result comes back through each. An
// OnUpstream that does not call next leaves the call unrun.
func TestOnUpstreamWraps(t *testing.T) {
	type mark struct{}
	var mu sync.Mutex
	var log []string
	note := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
	refuse := false
	wrap := func(name string) mcphandler.Interceptor {
		return func(ctx context.Context, req *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
			found := req.OnUpstream
			mine := func(ctx context.Context, u *mcphandler.UpstreamCall, next func(context.Context) mcphandler.UpstreamResult) mcphandler.UpstreamResult {
				note(name + ">" + ctxMarkOf(ctx, mark{}))
				if refuse && name == "inner" {
					return mcphandler.UpstreamResult{}
				}
				if u.Header == nil {
					u.Header = http.Header{}
				}
				u.Header.Add("X-Seen", name)
				res := next(context.WithValue(ctx, mark{}, name))
				note("<" + name)
				return res
			}
			req.OnUpstream = mine
			if found != nil {
				req.OnUpstream = func(ctx context.Context, u *mcphandler.UpstreamCall, next func(context.Context) mcphandler.UpstreamResult) mcphandler.UpstreamResult {
					return found(ctx, u, func(ctx context.Context) mcphandler.UpstreamResult { return mine(ctx, u, next) })
				}
			}
			return next(ctx)
		}
	}
	var got mcphandler.UpstreamResult
	tool := mcphandler.Tool{Name: "remote", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		u := &mcphandler.UpstreamCall{Upstream: "up", Era: "2025", CredentialKind: "static", Method: "tools/call", Name: "remote"}
		got = call.CallUpstream(context.WithValue(ctx, mark{}, "tool"), u, func(ctx context.Context) mcphandler.UpstreamResult {
			note("fn " + ctxMarkOf(ctx, mark{}) + " " + strings.Join(u.Header.Values("X-Seen"), ","))
			return mcphandler.UpstreamResult{ErrorCode: -32602, ErrorMessage: "no", ErrorClass: mcphandler.ClassInternal}
		})
		return mcphandler.TextResult("ok"), nil
	}}
	events := make(chan mcphandler.CallEvent, 2)
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{tool}, nil },
		OnCall:       func(ev mcphandler.CallEvent) { events <- ev },
		Interceptors: []mcphandler.Interceptor{wrap("outer"), wrap("inner")},
	})
	t.Cleanup(func() { h.Close() })
	c := mcptest.New(t, h, mcptest.WithToken("acme-admin"))
	ctx := context.Background()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallTool(ctx, "remote", nil); err != nil {
		t.Fatal(err)
	}
	if want := []string{"outer>tool", "inner>outer", "fn inner outer,inner", "<inner", "<outer"}; !slices.Equal(log, want) {
		t.Fatalf("ran %q, want %q", log, want)
	}
	if got != (mcphandler.UpstreamResult{ErrorCode: -32602, ErrorMessage: "no", ErrorClass: mcphandler.ClassInternal}) {
		t.Fatalf("CallUpstream returned %+v", got)
	}
	if ev := <-events; ev.Upstream != "up" || ev.UpstreamEra != "2025" || ev.CredentialKind != "static" || ev.UpstreamDuration <= 0 {
		t.Fatalf("event %+v", ev)
	}

	log, refuse = nil, true
	if _, err := c.CallTool(ctx, "remote", nil); err != nil {
		t.Fatal(err)
	}
	if want := []string{"outer>tool", "inner>outer", "<outer"}; !slices.Equal(log, want) || got != (mcphandler.UpstreamResult{ErrorClass: mcphandler.ClassInternal}) {
		t.Fatalf("refused: ran %q, returned %+v", log, got)
	}
	if ev := <-events; ev.Upstream != "up" || ev.UpstreamDuration != 0 {
		t.Fatalf("refused: event %+v", ev)
	}
}

func ctxMarkOf(ctx context.Context, key any) string {
	s, _ := ctx.Value(key).(string)
	return s
}
