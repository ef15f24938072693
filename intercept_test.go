package mcphandler_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

type ctxMark struct{}

// recorder is an interceptor that notes what it saw and marks the context
// it passes on.
type recorder struct {
	name string
	mu   *sync.Mutex // shared by the recorders of one test
	seen []string    // "method target id session version: code isError outcome"
	log  *[]string
}

// wait returns what rc saw once it saw n requests: an interceptor returns
// after the response was written.
func (rc *recorder) wait(t *testing.T, n int) []string {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		rc.mu.Lock()
		seen := append([]string(nil), rc.seen...)
		rc.mu.Unlock()
		if len(seen) >= n || time.Now().After(deadline) {
			return seen
		}
	}
}

func (rc *recorder) intercept(ctx context.Context, req *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
	rc.mu.Lock()
	*rc.log = append(*rc.log, rc.name+">")
	rc.mu.Unlock()
	res := next(context.WithValue(ctx, ctxMark{}, rc.name))
	rc.mu.Lock()
	defer rc.mu.Unlock()
	*rc.log = append(*rc.log, "<"+rc.name)
	rc.seen = append(rc.seen, strings.Join([]string{req.Method, req.Target, string(req.ID), req.SessionID, req.ProtocolVersion}, " ")+
		": "+strconv.Itoa(int(res.ErrorCode))+" "+map[bool]string{true: "isError", false: "ok"}[res.IsError]+" "+string(res.Outcome))
	return res
}

// Interceptors run outermost first around every request, see its method,
// target, id, session and version and how it ended, and the context the
// innermost passes on is the one the tool gets (with the caller still in
// it).
func TestInterceptorsWrapRequests(t *testing.T) {
	var order []string
	var mu sync.Mutex
	outer, inner := &recorder{name: "outer", mu: &mu, log: &order}, &recorder{name: "inner", mu: &mu, log: &order}
	var toolSaw []any
	tools := []mcphandler.Tool{
		{Name: "echo", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true}, Handler: func(ctx context.Context, _ *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			id, _ := mcphandler.IdentityFrom(ctx)
			mu.Lock()
			toolSaw = append(toolSaw, ctx.Value(ctxMark{}), id.Subject)
			mu.Unlock()
			return mcphandler.TextResult("ok"), nil
		}},
	}
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return tools, nil },
		Interceptors: []mcphandler.Interceptor{outer.intercept, inner.intercept},
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := mcptest.Dial(srv.URL, mcptest.WithToken("acme-viewer"))
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallTool(ctx, "echo", nil); err != nil {
		t.Fatal(err)
	}
	c.CallTool(ctx, "nosuch", nil)
	outerSaw, innerSaw := outer.wait(t, 3), inner.wait(t, 3)
	mu.Lock()
	defer mu.Unlock()
	if len(toolSaw) != 2 || toolSaw[0] != "inner" || toolSaw[1] == "" {
		t.Fatalf("the tool saw %v, want the inner interceptor's context with the caller", toolSaw)
	}
	want := []string{"outer>", "inner>", "<inner", "<outer"}
	if strings.Join(order[:4], ",") != strings.Join(want, ",") {
		t.Fatalf("order %v, want %v first", order, want)
	}
	sid, v := c.SessionID(), c.ProtocolVersion()
	got := strings.Join(innerSaw, "\n")
	for _, w := range []string{
		"initialize  1 " + sid + " " + v + ": 0 ok ",
		"tools/call echo 2 " + sid + " " + v + ": 0 ok allowed",
		"tools/call nosuch 3 " + sid + " " + v + ": -32602 ok not_found",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("inner saw\n%s\nwant a line %q", got, w)
		}
	}
	if strings.Join(outerSaw, "\n") != got {
		t.Errorf("outer and inner saw different requests:\n%s\n--\n%s", strings.Join(outerSaw, "\n"), got)
	}
}

// A DELETE that ended its session tells the interceptors, once next
// returned, whose session it was; one that ended nothing tells no one.
func TestInterceptorSessionEndNamesOwner(t *testing.T) {
	type end struct {
		sid  string
		id   mcphandler.Identity
		code mcphandler.Code
	}
	ends := make(chan end, 4)
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return nil, nil },
		Interceptors: []mcphandler.Interceptor{func(ctx context.Context, req *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
			if req.Kind != mcphandler.KindSessionEnd {
				return next(ctx)
			}
			before := req.Identity
			res := next(ctx)
			if before.Tenant != "" || before.Subject != "" {
				t.Errorf("the identity was set before next: %+v", before)
			}
			ends <- end{req.SessionID, req.Identity, res.ErrorCode}
			return res
		}},
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx := context.Background()
	c := mcptest.Dial(srv.URL, mcptest.WithToken("acme-viewer"))
	defer c.Close()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	sid := c.SessionID()
	del, _ := http.NewRequest(http.MethodDelete, srv.URL, nil)
	del.Header.Set("Authorization", "Bearer globex-editor")
	del.Header.Set("Mcp-Session-Id", sid)
	del.Header.Set("Mcp-Protocol-Version", c.ProtocolVersion())
	if resp, err := http.DefaultClient.Do(del); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a DELETE of someone else's session: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if e := <-ends; e.code == 0 || e.id.Tenant != "" || e.id.Subject != "" {
		t.Fatalf("a DELETE of someone else's session: %+v", e)
	}
	if err := c.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if e := <-ends; e.code != 0 || e.sid != sid || e.id.Tenant != "acme" || e.id.Subject != users["acme-viewer"].Subject {
		t.Fatalf("the session's DELETE: %+v", e)
	}
}

// An interceptor that refuses a request by not calling next: nothing runs
// and the client gets an internal error, in every era.
func TestInterceptorNotCallingNext(t *testing.T) {
	for _, era := range []mcptest.Era{mcptest.Sessions, mcptest.Stateless} {
		t.Run(era.String(), func(t *testing.T) {
			ran := false
			h := mcphandler.New(mcphandler.Config{
				Authenticate: bearer,
				ListTools: func(context.Context) ([]mcphandler.Tool, error) {
					return []mcphandler.Tool{{Name: "echo", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
						Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
							ran = true
							return mcphandler.TextResult("ok"), nil
						}}}, nil
				},
				Interceptors: []mcphandler.Interceptor{func(ctx context.Context, req *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
					if req.Method == "tools/call" {
						return mcphandler.Result{}
					}
					return next(ctx)
				}},
			})
			c := mcptest.New(t, h, mcptest.WithEra(era), mcptest.WithToken("acme-viewer"))
			if era == mcptest.Sessions {
				if _, err := c.Initialize(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			_, err := c.CallTool(context.Background(), "echo", nil)
			var re *mcptest.RPCError
			if !errors.As(err, &re) || re.Code != mcphandler.CodeInternalError || ran {
				t.Fatalf("call: %v (ran %v), want -32603 and no run", err, ran)
			}
		})
	}
}

// The context the interceptor passes on is the one every hook and tool of
// the operation gets: its values are there, and on the 2026-07-28 path
// cancelling it cancels the tool. (A tool of a 2025 session runs detached
// from cancellation: only notifications/cancelled ends it.) The HTTP
// request of RequestFrom keeps its own context.
func TestInterceptorContextReachesHooks(t *testing.T) {
	for _, era := range []mcptest.Era{mcptest.Sessions, mcptest.Stateless} {
		t.Run(era.String(), func(t *testing.T) {
			var mu sync.Mutex
			saw := map[string]any{}
			note := func(ctx context.Context, where string) {
				mu.Lock()
				defer mu.Unlock()
				saw[where] = ctx.Value(ctxMark{})
				if r, ok := mcphandler.RequestFrom(ctx); ok && r.Context().Value(ctxMark{}) != nil {
					saw["request-context"] = r.Context().Value(ctxMark{})
				}
			}
			onCall := make(chan struct{}, 1)
			tools := []mcphandler.Tool{{Name: "wait", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
				Handler: func(ctx context.Context, _ *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					note(ctx, "tool")
					select {
					case <-ctx.Done():
						note(context.WithValue(ctx, ctxMark{}, ctx.Err()), "tool-ended")
						return mcphandler.TextResult("cancelled"), nil
					case <-time.After(200 * time.Millisecond):
						return mcphandler.TextResult("not cancelled"), nil
					}
				}}}
			h := mcphandler.New(mcphandler.Config{
				Authenticate: bearer,
				ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
					note(ctx, "list")
					return tools, nil
				},
				BeforeCall: func(ctx context.Context, _ *mcphandler.ToolCall) (mcphandler.Decision, error) {
					note(ctx, "before")
					return mcphandler.Allow(), nil
				},
				OnCall: func(mcphandler.CallEvent) { onCall <- struct{}{} },
				Interceptors: []mcphandler.Interceptor{func(ctx context.Context, req *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
					if req.Method != "tools/call" {
						return next(ctx)
					}
					ctx, cancel := context.WithTimeout(context.WithValue(ctx, ctxMark{}, "mark"), 50*time.Millisecond)
					defer cancel()
					return next(ctx)
				}},
			})
			c := mcptest.New(t, h, mcptest.WithEra(era), mcptest.WithToken("acme-viewer"))
			if era != mcptest.Stateless {
				if _, err := c.Initialize(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			res, err := c.CallTool(context.Background(), "wait", nil)
			if err != nil {
				t.Fatal(err)
			}
			<-onCall
			mu.Lock()
			defer mu.Unlock()
			for _, where := range []string{"list", "before", "tool"} {
				if saw[where] != "mark" {
					t.Errorf("%s saw %v, want the interceptor's mark", where, saw[where])
				}
			}
			if era == mcptest.Stateless && (saw["tool-ended"] != context.DeadlineExceeded || !strings.Contains(string(res.Raw), `"cancelled"`)) {
				t.Errorf("the tool ended with %v (%s), want the interceptor's deadline", saw["tool-ended"], res.Raw)
			}
			if v, ok := saw["request-context"]; ok {
				t.Errorf("RequestFrom's request context holds the interceptor's mark %v", v)
			}
		})
	}
}

// Each member of a 2025-03-26 batch is intercepted on its own; an unknown
// method's member is seen as mcphandler.Other, never by its name.
func TestInterceptorBatchMembers(t *testing.T) {
	var order []string
	rc := &recorder{name: "r", mu: &sync.Mutex{}, log: &order}
	h := mcphandler.New(mcphandler.Config{Authenticate: bearer, Interceptors: []mcphandler.Interceptor{rc.intercept}})
	c := mcptest.New(t, h, mcptest.WithToken("acme-viewer"), mcptest.WithProtocolVersion("2025-03-26"))
	ctx := context.Background()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Batch(ctx, mcptest.BatchRequest{Method: "ping"}, mcptest.BatchRequest{Method: "nosuch/method"}); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rc.wait(t, 3), "\n")
	if !strings.Contains(got, "ping  ") || !strings.Contains(got, mcphandler.Other+"  ") || strings.Contains(got, "nosuch/method") ||
		!strings.Contains(got, ": -32601 ") {
		t.Fatalf("saw\n%s", got)
	}
}

type ctxTag struct{}

// The LogAttrs of every interceptor reach the handler's log lines about
// the operation, more of them than the first room holds, and concurrent
// requests' attributes never mix: each line carries its own request's
// three attributes, from two interceptors, and no other's.
func TestInterceptorLogAttrsReachLogLines(t *testing.T) {
	for _, era := range []mcptest.Era{mcptest.Sessions, mcptest.Stateless} {
		t.Run(era.String(), func(t *testing.T) {
			var logs syncBuffer
			var n atomic.Int64
			tools := []mcphandler.Tool{{Name: "fail", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
				Handler: func(context.Context, *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					return nil, errors.New("boom")
				}}}
			h := mcphandler.New(mcphandler.Config{
				Authenticate: bearer,
				ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return tools, nil },
				Logger:       slog.New(slog.NewJSONHandler(&logs, nil)),
				Interceptors: []mcphandler.Interceptor{
					func(ctx context.Context, req *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
						tag := strconv.FormatInt(n.Add(1), 10)
						req.LogAttrs = append(req.LogAttrs, slog.String("outer", tag))
						return next(context.WithValue(ctx, ctxTag{}, tag))
					},
					func(ctx context.Context, req *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
						tag, _ := ctx.Value(ctxTag{}).(string)
						req.LogAttrs = append(req.LogAttrs, slog.String("inner1", tag), slog.String("inner2", tag))
						return next(ctx)
					},
				},
			})
			const clients, calls = 6, 5
			var wg sync.WaitGroup
			for range clients {
				wg.Go(func() {
					c := mcptest.New(t, h, mcptest.WithEra(era), mcptest.WithToken("acme-viewer"))
					if era != mcptest.Stateless {
						if _, err := c.Initialize(context.Background()); err != nil {
							t.Error(err)
							return
						}
					}
					for range calls {
						c.CallTool(context.Background(), "fail", nil)
					}
				})
			}
			wg.Wait()
			seen := map[string]bool{}
			for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				var line map[string]any
				if err := json.Unmarshal([]byte(l), &line); err != nil {
					t.Fatalf("log line %q: %v", l, err)
				}
				if line["msg"] != "mcphandler: tool failed" {
					continue
				}
				tag, _ := line["outer"].(string)
				if tag == "" || line["inner1"] != tag || line["inner2"] != tag || seen[tag] {
					t.Errorf("line %s: want one request's outer, inner1 and inner2, each once", l)
				}
				seen[tag] = true
				if era == mcptest.Sessions && line["session_id"] == nil {
					t.Errorf("line %s: no session_id", l)
				}
			}
			if len(seen) != clients*calls {
				t.Fatalf("%d tool failures logged with their attributes, want %d", len(seen), clients*calls)
			}
		})
	}
}

// Interceptors wrap the legacy HTTP+SSE transport's requests too, its
// initialize included, and the tool runs with the context they pass on.
func TestInterceptorsWrapLegacy(t *testing.T) {
	var order []string
	var mu sync.Mutex
	rec := &recorder{name: "only", mu: &mu, log: &order}
	var toolSaw any
	tools := []mcphandler.Tool{{Name: "echo", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
		Handler: func(ctx context.Context, _ *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			mu.Lock()
			toolSaw = ctx.Value(ctxMark{})
			mu.Unlock()
			return mcphandler.TextResult("ok"), nil
		}}}
	h := mcphandler.New(mcphandler.Config{
		Authenticate: bearer,
		ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return tools, nil },
		Interceptors: []mcphandler.Interceptor{rec.intercept},
	})
	c := mcptest.NewLegacy(t, legacyMux(h), "/sse", mcptest.WithToken("acme-viewer"))
	ctx := context.Background()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := c.CallTool(ctx, "echo", nil); err != nil || res.Text() != "ok" {
		t.Fatalf("tools/call: %+v, %v", res, err)
	}
	got := strings.Join(rec.wait(t, 2), "\n")
	for _, w := range []string{"initialize  1 ", "tools/call echo 2 "} {
		if !strings.Contains(got, w) || !strings.Contains(got, mcptest.LegacyProtocolVersion) {
			t.Errorf("the interceptor saw\n%s\nwant a line starting %q, at version %s", got, w, mcptest.LegacyProtocolVersion)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if toolSaw != "only" {
		t.Fatalf("the tool saw %v, want the interceptor's context", toolSaw)
	}
}
