package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
)

// A list longer than a page is gathered whole, in order, in every era.
func TestPagination(t *testing.T) {
	var many []mcphandler.Tool
	for i := range 23 {
		tl := greet
		tl.Name = fmt.Sprintf("t%02d", i)
		many = append(many, tl)
	}
	l := newLib(t, mcphandler.Config{
		ListTools: func(context.Context) ([]mcphandler.Tool, error) { return many, nil },
		Limits:    mcphandler.Limits{PageSize: 5},
	})
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			ts, err := upstream.ListTools(context.Background(), l.at(e.era, e.path), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(ts) != len(many) {
				t.Fatalf("%d tools, want %d", len(ts), len(many))
			}
			for i, tl := range ts {
				if tl.Name != many[i].Name {
					t.Errorf("tool %d is %s", i, tl.Name)
				}
			}
		})
	}
}

// Ending the caller's ctx mid-call reaches the upstream tool's ctx in
// every era, and leaves no session open: the 2025 session is deleted.
func TestCancelReachesTool(t *testing.T) {
	started := make(chan struct{}, 1)
	cancelled := make(chan struct{}, 1)
	block := mcphandler.Tool{
		Name: "block", Description: "waits for its end",
		Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			started <- struct{}{}
			select {
			case <-ctx.Done():
				cancelled <- struct{}{}
				return nil, ctx.Err()
			case <-time.After(20 * time.Second):
				return mcphandler.TextResult("not cancelled"), nil
			}
		},
	}
	l := newLib(t, mcphandler.Config{ListTools: tools(block)})
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			deletes := l.count(http.MethodDelete, "/mcp")
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				<-started
				cancel()
			}()
			var err error
			within(t, 8*time.Second, func() {
				_, err = upstream.CallTool(ctx, l.at(e.era, e.path), nil, "block", nil, &asker{})
			})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err %v, want context.Canceled", err)
			}
			select {
			case <-cancelled:
			case <-time.After(5 * time.Second):
				t.Fatal("the tool's ctx did not end")
			}
			if e.era == upstream.Sessions && l.count(http.MethodDelete, "/mcp") != deletes+1 {
				t.Error("the session was not deleted")
			}
		})
	}
}

// A call past the Timeout ends with context.DeadlineExceeded, and the
// upstream tool is cancelled as for any other end.
func TestTimeoutCancelsTool(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	block := mcphandler.Tool{
		Name: "block", Description: "waits for its end",
		Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			select {
			case <-ctx.Done():
				cancelled <- struct{}{}
				return nil, ctx.Err()
			case <-time.After(10 * time.Second):
				return mcphandler.TextResult("not cancelled"), nil
			}
		},
	}
	l := newLib(t, mcphandler.Config{ListTools: tools(block)})
	ep := l.at(upstream.Sessions, "/mcp")
	ep.Timeout = 300 * time.Millisecond
	_, err := upstream.CallTool(context.Background(), ep, nil, "block", nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v", err)
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the tool's ctx did not end")
	}
}

// A Sessions-era operation speaks the protocol's headers: both media types
// accepted, the agreed version and the session id after initialize, and
// it ends with DELETE.
func TestSessionsHeaders(t *testing.T) {
	l := newLib(t, mcphandler.Config{ListTools: tools()})
	if _, err := upstream.CallTool(context.Background(), l.at(upstream.Sessions, "/mcp"), nil, "greet", nil, nil); err != nil {
		t.Fatal(err)
	}
	reqs := l.requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want initialize, initialized, tools/call, DELETE", len(reqs))
	}
	sid := ""
	for i, r := range reqs {
		if i < 3 && (r.method != http.MethodPost || !strings.Contains(r.header.Get("Accept"), "application/json") ||
			!strings.Contains(r.header.Get("Accept"), "text/event-stream")) {
			t.Errorf("request %d: %s Accept %q", i, r.method, r.header.Get("Accept"))
		}
		if i == 0 {
			if r.header.Get("Mcp-Session-Id") != "" || r.header.Get("MCP-Protocol-Version") != "" {
				t.Error("initialize carries session headers")
			}
			continue
		}
		if v := r.header.Get("MCP-Protocol-Version"); v != "2025-11-25" {
			t.Errorf("request %d: version %q", i, v)
		}
		if sid == "" {
			sid = r.header.Get("Mcp-Session-Id")
		}
		if got := r.header.Get("Mcp-Session-Id"); got == "" || got != sid {
			t.Errorf("request %d: session %q", i, got)
		}
	}
	if reqs[3].method != http.MethodDelete {
		t.Errorf("last request %s", reqs[3].method)
	}
}

// The Endpoint's Header reaches the upstream's Authenticate on every
// request of every era; without it the upstream refuses, and the error
// says 401.
func TestHeaderReachesAuthenticate(t *testing.T) {
	var refused atomic.Int32
	l := newLib(t, mcphandler.Config{
		ListTools: tools(),
		Authenticate: func(r *http.Request) (mcphandler.Identity, error) {
			if r.Header.Get("Authorization") != "Bearer s3cret" {
				refused.Add(1)
				return mcphandler.Identity{}, errors.New("no")
			}
			return mcphandler.Identity{Subject: "gw", Tenant: "t"}, nil
		},
	})
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			ep := l.at(e.era, e.path)
			ep.Header = http.Header{"Authorization": {"Bearer s3cret"}}
			before := refused.Load()
			a := &asker{}
			res, err := upstream.CallTool(context.Background(), ep, allCaps, "ask_color", nil, a)
			if err != nil {
				t.Fatal(err)
			}
			if got := text(t, res); got != "color=teal" {
				t.Errorf("text %q", got)
			}
			if refused.Load() != before {
				t.Errorf("%d requests went without the header", refused.Load()-before)
			}

			ep.Header = nil
			_, err = upstream.CallTool(context.Background(), ep, nil, "greet", nil, nil)
			if !isStatus(err, http.StatusUnauthorized) {
				t.Errorf("without the header: %v", err)
			}
			var se *upstream.StatusError
			if errors.As(err, &se) && !se.Auth() {
				t.Error("Auth() is false for a 401")
			}
		})
	}
}

// A redirect is not followed: the call fails with its status, and the
// server it points at never sees the credentials.
func TestRedirectNotFollowed(t *testing.T) {
	var reached atomic.Int32
	var sawAuth atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		if r.Header.Get("Authorization") != "" {
			sawAuth.Store(true)
		}
		http.Error(w, "nothing here", http.StatusNotFound)
	}))
	defer target.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	for _, era := range []upstream.Era{upstream.Sessions, upstream.Stateless, upstream.Legacy} {
		t.Run(era.String(), func(t *testing.T) {
			ep := upstream.Endpoint{URL: redirect.URL + "/mcp", Era: era, Timeout: 5 * time.Second,
				Header: http.Header{"Authorization": {"Bearer s3cret"}},
				HTTP:   &http.Client{}} // a client that would follow redirects
			_, err := upstream.CallTool(context.Background(), ep, nil, "greet", nil, nil)
			if !isStatus(err, http.StatusTemporaryRedirect) {
				t.Errorf("err %v", err)
			}
		})
	}
	t.Run("detect", func(t *testing.T) {
		ep := upstream.Endpoint{URL: redirect.URL + "/mcp", Timeout: 5 * time.Second,
			Header: http.Header{"Authorization": {"Bearer s3cret"}}}
		if _, _, err := upstream.Detect(context.Background(), ep); err == nil {
			t.Error("Detect found an era behind a redirect")
		}
	})
	if reached.Load() != 0 || sawAuth.Load() {
		t.Errorf("the redirect's target was reached %d times (credentials: %v)", reached.Load(), sawAuth.Load())
	}
}

// Progress and log messages of the call reach Notify, in every era; the
// progress carries the token the call sent.
func TestNotificationsRelayed(t *testing.T) {
	report := mcphandler.Tool{
		Name: "report", Description: "reports",
		Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			if err := call.Progress(1, 2, "half"); err != nil {
				return nil, err
			}
			if err := call.Log(mcphandler.LevelWarning, "tool", "careful"); err != nil {
				return nil, err
			}
			if err := call.Log(mcphandler.LevelDebug, "tool", "noise"); err != nil {
				return nil, err
			}
			return mcphandler.TextResult("done"), nil
		},
	}
	l := newLib(t, mcphandler.Config{ListTools: tools(report)})
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			ep := l.at(e.era, e.path)
			ep.LogLevel = "info"
			a := &asker{}
			res, err := upstream.CallTool(context.Background(), ep, nil, "report", nil, a)
			if err != nil {
				t.Fatal(err)
			}
			if text(t, res) != "done" {
				t.Errorf("result %s", res)
			}
			got := a.notified()
			if strings.Join(got, " ") != "notifications/progress notifications/message" {
				t.Fatalf("notified %v", got)
			}
			var p struct {
				ProgressToken json.RawMessage
				Progress      float64
			}
			_ = json.Unmarshal(a.noteRaw[0], &p)
			if p.Progress != 1 || len(p.ProgressToken) == 0 {
				t.Errorf("progress %s", a.noteRaw[0])
			}
			if !strings.Contains(string(a.noteRaw[1]), "careful") {
				t.Errorf("log %s", a.noteRaw[1])
			}
		})
	}
}

// Detect names the era and version of each way the library is reached,
// and of an upstream that serves only 2025 sessions.
func TestDetect(t *testing.T) {
	l := newLib(t, mcphandler.Config{ListTools: tools()})
	for _, c := range []struct {
		path    string
		era     upstream.Era
		version string
	}{
		{"/mcp", upstream.Stateless, "2026-07-28"},
		{"/sse", upstream.Legacy, "2024-11-05"},
	} {
		era, v, err := upstream.Detect(context.Background(), l.at(upstream.Probe, c.path))
		if err != nil || era != c.era || v != c.version {
			t.Errorf("%s: %v %q %v, want %v %q", c.path, era, v, err, c.era, c.version)
		}
	}
	// Without 2026-07-28 (refused as a 2025-only server of the SDKs
	// refuses a request without a session), the library is Sessions.
	var deletes atomic.Int32
	only2025 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			deletes.Add(1)
		}
		if r.Header.Get("MCP-Protocol-Version") == "2026-07-28" {
			http.Error(w, "Bad Request: No valid session ID provided", http.StatusBadRequest)
			return
		}
		l.h.ServeHTTP(w, r)
	}))
	defer only2025.Close()
	era, v, err := upstream.Detect(context.Background(), upstream.Endpoint{URL: only2025.URL})
	if err != nil || era != upstream.Sessions || v != "2025-11-25" {
		t.Errorf("2025 only: %v %q %v", era, v, err)
	}
	if deletes.Load() != 1 {
		t.Errorf("Detect's session: %d DELETEs", deletes.Load())
	}
}

// Detect reports an upstream that refuses the credentials, or fails, as an
// error rather than an era.
func TestDetectInconclusive(t *testing.T) {
	for _, code := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
		}))
		era, _, err := upstream.Detect(context.Background(), upstream.Endpoint{URL: srv.URL})
		if era != upstream.Probe || !isStatus(err, code) {
			t.Errorf("%d: %v %v", code, era, err)
		}
		srv.Close()
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NotFound(w, r)
	}))
	defer srv.Close()
	if _, _, err := upstream.Detect(context.Background(), upstream.Endpoint{URL: srv.URL}); !errors.Is(err, upstream.ErrUnsupported) {
		t.Errorf("nothing MCP: %v", err)
	}
}

// A 2025-11-25 answer whose stream the upstream closes before the result
// (SSE polling) is resumed with GET and Last-Event-ID, and the result
// arrives there.
func TestResumeClosedStream(t *testing.T) {
	poll := mcphandler.Tool{
		Name: "poll", Description: "closes its stream, then answers",
		Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			if err := call.Progress(1, 2, "closing"); err != nil {
				return nil, err
			}
			if err := call.CloseStream(); err != nil {
				return nil, err
			}
			time.Sleep(50 * time.Millisecond)
			return mcphandler.TextResult("after the break"), nil
		},
	}
	l := newLib(t, mcphandler.Config{ListTools: tools(poll), Sessions: mcphandler.SessionOptions{SSERetry: 10 * time.Millisecond}})
	a := &asker{}
	res, err := upstream.CallTool(context.Background(), l.at(upstream.Sessions, "/mcp"), nil, "poll", nil, a)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != "after the break" {
		t.Errorf("text %q", got)
	}
	var resumed bool
	for _, r := range l.requests() {
		if r.method == http.MethodGet && r.header.Get("Last-Event-ID") != "" && r.header.Get("Mcp-Session-Id") != "" {
			resumed = true
		}
	}
	if !resumed {
		t.Error("no GET with Last-Event-ID")
	}
	if got := a.notified(); len(got) != 1 {
		t.Errorf("notified %v", got)
	}
}

// A 2026-07-28 tool whose schema mirrors arguments into Mcp-Param-*
// headers is called as the revision says: refused once for the missing
// headers, tools/list fetched again, the call retried with them (a string
// that is not plain ASCII Base64-encoded).
func TestParamHeaders(t *testing.T) {
	regional := mcphandler.Tool{
		Name: "regional", Description: "mirrors its arguments",
		InputSchema: json.RawMessage(`{"type":"object","properties":{
			"region":{"type":"string","x-mcp-header":"Region"},
			"limit":{"type":"integer","x-mcp-header":"Limit"},
			"opts":{"type":"object","properties":{"dry":{"type":"boolean","x-mcp-header":"Dry"}}},
			"note":{"type":"string","x-mcp-header":"Note"}}}`),
		Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			return mcphandler.TextResult("ran with " + string(call.Arguments)), nil
		},
	}
	l := newLib(t, mcphandler.Config{ListTools: tools(regional)})
	args := json.RawMessage(`{"region":"Zürich","limit":42,"opts":{"dry":true}}`)
	res, err := upstream.CallTool(context.Background(), l.at(upstream.Stateless, "/mcp"), nil, "regional", args, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(text(t, res), "ran with") {
		t.Errorf("result %s", res)
	}
	var methods []string
	var last http.Header
	for _, r := range l.requests() {
		methods = append(methods, r.header.Get("Mcp-Method"))
		last = r.header
	}
	if strings.Join(methods, " ") != "tools/call tools/list tools/call" {
		t.Errorf("requests %v", methods)
	}
	if last.Get("Mcp-Param-Region") != "=?base64?WsO8cmljaA==?=" || last.Get("Mcp-Param-Limit") != "42" ||
		last.Get("Mcp-Param-Dry") != "true" || len(last.Values("Mcp-Param-Note")) != 0 {
		t.Errorf("headers %v", last)
	}

	// A -32020 that no annotation explains is the caller's error: no loop.
	greetCalls := 0
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
		switch {
		case m.is("tools/call"):
			greetCalls++
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32020,"message":"Header mismatch"}}`, m.ID)
		case m.is("tools/list"):
			writeJSON(w, m.ID, `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)
		default:
			return false
		}
		return true
	})
	_, err = upstream.CallTool(context.Background(), f.endpoint(upstream.Stateless), nil, "t", nil, nil)
	var re *upstream.RPCError
	if !errors.As(err, &re) || re.Code != -32020 || greetCalls != 1 {
		t.Errorf("err %v after %d calls", err, greetCalls)
	}
}
