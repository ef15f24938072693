package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
)

// A kept session serves any number of calls after one initialize: every
// call carries its id and version, none ends it; EndSession does, and a
// call in it afterwards is refused whole (404), not run.
func TestKeptSession(t *testing.T) {
	ran := 0
	var mu sync.Mutex
	count := mcphandler.Tool{Name: "count", Description: "counts its runs",
		Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			mu.Lock()
			defer mu.Unlock()
			ran++
			return mcphandler.TextResult("ran"), nil
		}}
	l := newLib(t, mcphandler.Config{ListTools: tools(count)})
	ep := l.at(upstream.Sessions, "/mcp")
	ctx := context.Background()
	ks, err := upstream.OpenSession(ctx, ep, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ks.ID == "" || ks.Version != "2025-11-25" {
		t.Fatalf("session %+v", ks)
	}
	for i := range 5 {
		res, err := upstream.CallToolIn(ctx, ep, &ks, nil, "greet", json.RawMessage(`{"name":"kept"}`), &asker{})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if got := text(t, res); got != "Hello kept" {
			t.Fatalf("call %d: %q", i, got)
		}
	}
	if n := l.count(http.MethodDelete, "/mcp"); n != 0 {
		t.Fatalf("%d DELETEs while the session is kept", n)
	}
	posts := 0
	for _, r := range l.requests() {
		if r.method != http.MethodPost {
			continue
		}
		posts++
		if posts > 1 && (r.header.Get("Mcp-Session-Id") != ks.ID || r.header.Get("Mcp-Protocol-Version") != ks.Version) {
			t.Fatalf("request %d: session %q version %q", posts, r.header.Get("Mcp-Session-Id"), r.header.Get("Mcp-Protocol-Version"))
		}
	}
	if posts != 2+5 { // initialize, initialized, the calls
		t.Fatalf("%d POSTs, want 7", posts)
	}
	if err := upstream.EndSession(ctx, ep, ks); err != nil {
		t.Fatal(err)
	}
	if n := l.count(http.MethodDelete, "/mcp"); n != 1 {
		t.Fatalf("%d DELETEs after EndSession", n)
	}
	if err := upstream.EndSession(ctx, ep, ks); err != nil {
		t.Fatalf("ending a session the upstream no longer knows: %v", err)
	}
	_, err = upstream.CallToolIn(ctx, ep, &ks, nil, "count", nil, nil)
	var gone *upstream.SessionGoneError
	if !errors.As(err, &gone) || !gone.NotRun || !errors.Is(err, upstream.ErrSessionGone) {
		t.Fatalf("a call in an ended session: %v, want a *SessionGoneError that did not run", err)
	}
	if ran != 0 {
		t.Fatalf("the tool ran %d times in an ended session", ran)
	}
}

// A session the upstream let expire between calls ends the next call with
// a *SessionGoneError that did not run.
func TestKeptSessionExpires(t *testing.T) {
	l := newLib(t, mcphandler.Config{ListTools: tools(), Sessions: mcphandler.SessionOptions{TTL: 200 * time.Millisecond}})
	ep := l.at(upstream.Sessions, "/mcp")
	ctx := context.Background()
	ks, err := upstream.OpenSession(ctx, ep, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := upstream.CallToolIn(ctx, ep, &ks, nil, "greet", nil, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	_, err = upstream.CallToolIn(ctx, ep, &ks, nil, "greet", nil, nil)
	var gone *upstream.SessionGoneError
	if !errors.As(err, &gone) || !gone.NotRun || gone.Op != "POST tools/call" {
		t.Fatalf("err %v, want the call refused whole", err)
	}
}

// A 404 once the call is under way — its stream's resumption, or the
// answer to its question — says it may have run.
func TestKeptSessionGoneMidCall(t *testing.T) {
	t.Run("resume", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
			switch {
			case r.Method == http.MethodGet:
				http.Error(w, "no such session", http.StatusNotFound)
				return true
			case m.is("tools/call"):
				startSSE(w)
				w.Write([]byte("id: e1\nretry: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":1}}\n\n"))
				return true // the stream ends without the response
			}
			return false
		})
		ks := upstream.Session{ID: "s1", Version: "2025-11-25"}
		_, err := upstream.CallToolIn(context.Background(), f.endpoint(upstream.Sessions), &ks, nil, "x", nil, &asker{})
		var gone *upstream.SessionGoneError
		if !errors.As(err, &gone) || gone.NotRun || gone.Op != "GET (resume)" {
			t.Fatalf("err %v, want a *SessionGoneError that may have run", err)
		}
		if strings.Contains(strings.Join(f.methods(), ","), "notifications/cancelled") {
			t.Fatal("a cancellation was sent to a session that ended")
		}
	})
	t.Run("answer", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
			switch {
			case r.Method == http.MethodPost && m.Method == "" && len(m.Result) > 0:
				http.Error(w, "no such session", http.StatusNotFound)
				return true
			case m.is("tools/call"):
				startSSE(w)
				event(w, `{"jsonrpc":"2.0","id":"q1","method":"elicitation/create","params":{"message":"?","requestedSchema":{"type":"object","properties":{}}}}`)
				<-r.Context().Done()
				return true
			}
			return false
		})
		ks := upstream.Session{ID: "s1", Version: "2025-11-25"}
		_, err := upstream.CallToolIn(context.Background(), f.endpoint(upstream.Sessions), &ks, allCaps, "x", nil, &asker{})
		var gone *upstream.SessionGoneError
		if !errors.As(err, &gone) || gone.NotRun || gone.Op != "POST response" {
			t.Fatalf("err %v, want a *SessionGoneError that may have run", err)
		}
	})
}

// The calls sharing a kept session, at once, send ids and progress tokens
// of their own, never the 1, 2, … of a session of one operation; none
// ends the session, and a cancelled one is cancelled upstream.
func TestKeptSessionCallsApart(t *testing.T) {
	f := newFake(t, nil)
	ep := f.endpoint(upstream.Sessions)
	ks := upstream.Session{ID: "s1", Version: "2025-11-25"}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := ks
			if _, err := upstream.CallToolIn(context.Background(), ep, &k, nil, "x", nil, &asker{}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	ids := map[string]bool{}
	tokens := map[string]bool{}
	for _, m := range f.posted() {
		if !m.is("tools/call") {
			continue
		}
		if m.header.Get("Mcp-Session-Id") != "s1" {
			t.Fatalf("a call without the session: %q", m.header.Get("Mcp-Session-Id"))
		}
		var p struct {
			Meta struct {
				ProgressToken json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		}
		json.Unmarshal(m.Params, &p)
		if ids[string(m.ID)] || tokens[string(p.Meta.ProgressToken)] || m.ID[0] != '"' {
			t.Fatalf("id %s, token %s: reused or numeric", m.ID, p.Meta.ProgressToken)
		}
		ids[string(m.ID)], tokens[string(p.Meta.ProgressToken)] = true, true
	}
	if len(ids) != 8 || f.deletes() != 0 {
		t.Fatalf("%d calls, %d DELETEs", len(ids), f.deletes())
	}

	started := make(chan struct{})
	f2 := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
		if m.is("tools/call") {
			startSSE(w)
			close(started)
			<-r.Context().Done()
			return true
		}
		return false
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	_, err := upstream.CallToolIn(ctx, f2.endpoint(upstream.Sessions), &ks, nil, "x", nil, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if got := f2.methods(); countOf(got, "notifications/cancelled") != 1 || f2.deletes() != 0 {
		t.Fatalf("after a cancelled call: %v, %d DELETEs; want one cancellation and the session kept", got, f2.deletes())
	}
}

// A kept session asks the upstream for logs at the level the call's client
// wants, only when it changed.
func TestKeptSessionLogLevel(t *testing.T) {
	l := newLib(t, mcphandler.Config{ListTools: tools()})
	ep := l.at(upstream.Sessions, "/mcp")
	ctx := context.Background()
	ks, err := upstream.OpenSession(ctx, ep, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !ks.Logging || ks.LogLevel != "" {
		t.Fatalf("session %+v", ks)
	}
	levels := []string{"", "info", "info", "debug"}
	for _, lv := range levels {
		ep.LogLevel = lv
		if _, err := upstream.CallToolIn(ctx, ep, &ks, nil, "greet", nil, &asker{}); err != nil {
			t.Fatal(err)
		}
	}
	if ks.LogLevel != "debug" {
		t.Fatalf("level %q", ks.LogLevel)
	}
	// initialize, initialized, then: call, setLevel, call, call, setLevel, call.
	if posts := l.count(http.MethodPost, "/mcp"); posts != 2+4+2 {
		t.Fatalf("%d POSTs, want 8", posts)
	}
}

// OpenSession and CallToolIn speak only the Sessions era.
func TestKeptSessionEra(t *testing.T) {
	ep := upstream.Endpoint{URL: "http://127.0.0.1:1/mcp", Era: upstream.Stateless}
	if _, err := upstream.OpenSession(context.Background(), ep, nil); err == nil {
		t.Fatal("OpenSession in the stateless era")
	}
	if _, err := upstream.CallToolIn(context.Background(), ep, &upstream.Session{}, nil, "x", nil, nil); err == nil {
		t.Fatal("CallToolIn in the stateless era")
	}
}
