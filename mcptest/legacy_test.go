package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestLegacyClient(t *testing.T) {
	f := newLegacyFake(t)
	f.token = "tok"
	t.Cleanup(f.wg.Wait) // runs after the client and the server are closed
	var elicited atomic.Int32
	c := NewLegacy(t, f, "/sse", WithToken("tok"), WithClientInfo("old", "1"),
		WithElicitationHandler(func(ctx context.Context, p ElicitParams) (ElicitResult, error) {
			elicited.Add(1)
			if p.Message != "Really?" {
				t.Errorf("elicitation params %s", p.Raw)
			}
			return ElicitResult{Action: ActionAccept, Content: map[string]any{"ok": true}}, nil
		}))
	if c.MessageURL() != "" {
		t.Errorf("MessageURL before Connect: %q", c.MessageURL())
	}
	if _, err := c.Call(t.Context(), "tools/list", nil); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Call before Connect: %v", err)
	}
	init, err := c.Initialize(t.Context())
	if err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	if init.ProtocolVersion != LegacyProtocolVersion || init.ServerInfo.Name != "legacy-fake" || c.ProtocolVersion() != LegacyProtocolVersion {
		t.Errorf("initialize result %s", init.Raw)
	}
	if want := strings.TrimSuffix(c.SSEURL(), "/sse") + "/messages?sessionId=s1"; c.MessageURL() != want {
		t.Errorf("MessageURL %q, want %q", c.MessageURL(), want)
	}
	if err := c.Connect(t.Context()); err == nil {
		t.Error("second Connect succeeded")
	}
	tools, err := c.ListTools(t.Context())
	if err != nil || len(tools) != 1 || tools[0].Name != "confirm" {
		t.Fatalf("ListTools: %v, %v", tools, err)
	}
	res, err := c.CallTool(t.Context(), "confirm", map[string]any{})
	if err != nil || res.Text() != "accept true" {
		t.Fatalf("CallTool: %v, %v", res, err)
	}
	if elicited.Load() != 1 {
		t.Errorf("%d elicitations", elicited.Load())
	}
	if n := c.Notifications(); len(n) != 1 || n[0].Method != "notifications/message" {
		t.Errorf("notifications %v", n)
	}
	if r := c.ServerRequests(); len(r) != 1 || r[0].Method != MethodElicit || string(r[0].ID) != `"srv-1"` {
		t.Errorf("server requests %v", r)
	}
	var re *RPCError
	if _, err := c.CallTool(t.Context(), "nope", nil); !errors.As(err, &re) || re.Code != CodeInvalidParams {
		t.Errorf("unknown tool: %v", err)
	}

	// What went over the wire.
	f.mu.Lock()
	posts := slices.Clone(f.posts)
	f.mu.Unlock()
	var kinds []string
	for _, p := range posts {
		if p.Header.Get("Authorization") != "Bearer tok" || p.Header.Get("Content-Type") != "application/json" ||
			p.Header.Get("Mcp-Protocol-Version") != "" || p.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("POST headers %v", p.Header)
		}
		switch {
		case p.Msg.IsResponse():
			kinds = append(kinds, "response "+string(p.Msg.ID))
		default:
			kinds = append(kinds, p.Msg.Method)
		}
	}
	want := []string{"initialize", "notifications/initialized", "tools/list", "tools/call", `response "srv-1"`, "tools/call"}
	if !slices.Equal(kinds, want) {
		t.Errorf("POSTs %q, want %q", kinds, want)
	}
	if errs := c.Errors(); len(errs) != 0 {
		t.Errorf("reader errors %v", errs)
	}

	c.Close()
	if _, err := c.Call(t.Context(), "tools/list", nil); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Call after Close: %v", err)
	}
	// A closed client can connect again; the server gives a new session.
	if err := c.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(c.MessageURL(), "sessionId=s2") {
		t.Errorf("MessageURL after reconnect %q", c.MessageURL())
	}
}

func TestDialLegacy(t *testing.T) {
	f := newLegacyFake(t)
	f.absolute = true
	srv := httptest.NewServer(f)
	defer srv.Close()
	defer f.wg.Wait()
	c := DialLegacy(srv.URL+"/sse", WithClientInfo("old", "1"), WithCapabilities(json.RawMessage(`{"elicitation":{}}`)))
	defer c.Close()
	if err := c.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c.MessageURL() != srv.URL+"/messages?sessionId=s1" {
		t.Errorf("MessageURL %q", c.MessageURL())
	}
	if _, err := c.Initialize(t.Context()); err != nil {
		t.Fatal(err)
	}

	// A call whose context ends sends notifications/cancelled.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.CallTool(ctx, "slow", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow call: %v", err)
	}
	cancels := f.postsOf("notifications/cancelled")
	if len(cancels) != 1 || !strings.Contains(string(cancels[0].Msg.Params), `"requestId":2`) {
		t.Errorf("cancellations %v", cancels)
	}

	// Raw POST to the message URL.
	resp, err := c.Post(t.Context(), []byte(`{"jsonrpc":"2.0","method":"notifications/whatever"}`), http.Header{"Content-Type": {"text/plain"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("raw POST status %d", resp.StatusCode)
	}
}

func TestLegacyConnectErrors(t *testing.T) {
	f := newLegacyFake(t)
	f.token = "tok"
	c := NewLegacy(t, f, "sse")
	var he *HTTPError
	if err := c.Connect(t.Context()); !errors.As(err, &he) || he.Status != http.StatusUnauthorized {
		t.Errorf("Connect without token: %v", err)
	}

	noEndpoint := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n")
	})
	c2 := NewLegacy(t, noEndpoint, "/sse")
	if err := c2.Connect(t.Context()); err == nil || !strings.Contains(err.Error(), "endpoint") {
		t.Errorf("Connect without endpoint event: %v", err)
	}

	silent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	c3 := NewLegacy(t, silent, "/sse")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := c3.Connect(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Connect to a silent server: %v", err)
	}

	// The server ends the stream: pending and later calls fail.
	ended := make(chan struct{})
	short := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusAccepted)
			close(ended)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: endpoint\ndata: /messages\n\n")
		w.(http.Flusher).Flush()
		<-ended
	})
	c4 := NewLegacy(t, short, "/sse")
	if err := c4.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := c4.Call(t.Context(), "tools/list", nil); !errors.Is(err, ErrNoResponse) {
		t.Errorf("call on an ended stream: %v", err)
	}
}
