package mcphandler_test

// Attacks on the promise "Redis access is not enough": something that can
// read and write the shared store (another application on a shared Redis,
// a leaked Redis password) but does not hold Config.StateKeys can deny
// service and read data, and nothing more. Each case says what it tries
// and what it must not get.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
)

// blockingTool runs until its context ends or it receives from release.
func blockingTool(started chan<- struct{}, release <-chan struct{}, stopped chan<- error) mcphandler.Tool {
	return mcphandler.Tool{Name: "slow", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
			stopped <- ctx.Err()
		case <-release:
			stopped <- nil
		}
		return mcphandler.TextResult("finished"), nil
	}}
}

// It publishes a cancellation of a running call on the cancel channel, in
// the format replicas used to relay them. It must not cancel the call.
func TestAttackForgedCancel(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		started, release, stopped := make(chan struct{}, 1), make(chan struct{}, 1), make(chan error, 1)
		tools := []mcphandler.Tool{blockingTool(started, release, stopped)}
		_, st0, srv0 := sharedHandler(t, stores(0), tools, nil)
		_, _, srv1 := sharedHandler(t, stores(1), tools, nil)
		ctx := context.Background()
		c := mcptest.Dial(srv0.URL, mcptest.WithToken("acme-viewer"))
		defer c.Close()
		if _, err := c.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		call := func(id string) {
			resp, err := c.Post(ctx, []byte(`{"jsonrpc":"2.0","id":"`+id+`","method":"tools/call","params":{"name":"slow"}}`), nil)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
		done := make(chan struct{})
		go func() { defer close(done); call("slow-1") }()
		<-started
		for range 3 {
			st0.Store.Publish(ctx, "cancel", []byte(c.SessionID()+`/"slow-1"`))
		}
		select {
		case err := <-stopped:
			t.Fatalf("a forged cancellation stopped the call: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		release <- struct{}{}
		<-stopped
		<-done
		// A real cancellation, received by the other replica, still works.
		go func() { call("slow-2") }()
		<-started
		other := mcptest.Dial(srv1.URL, mcptest.WithToken("acme-viewer"))
		defer other.Close()
		other.SetSessionID(c.SessionID())
		other.SetProtocolVersion(c.ProtocolVersion())
		if err := other.Notify(ctx, "notifications/cancelled", map[string]any{"requestId": "slow-2"}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-stopped:
			if err == nil {
				t.Fatal("the real cancellation did not stop the call")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the real cancellation did not arrive")
		}
	})
}

// It records a genuine cancellation and publishes it again later, hoping
// to cancel a later call with the same request id. Outside the freshness
// window it must not cancel anything.
func TestAttackReplayedCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started, release, stopped := make(chan struct{}, 1), make(chan struct{}, 1), make(chan error, 1)
		mem := session.NewMemory()
		tools := []mcphandler.Tool{blockingTool(started, release, stopped)}
		newH := func() (*mcphandler.Handler, *faultStore) {
			st := &faultStore{Store: mem}
			h := mcphandler.New(mcphandler.Config{Authenticate: bearer, StateKeys: testStateKeys, Store: st,
				Logger: slog.New(slog.DiscardHandler), ListTools: func(context.Context) ([]mcphandler.Tool, error) { return tools, nil }})
			return h, st
		}
		h0, st0 := newH()
		h1, st1 := newH()
		defer h0.Close()
		defer h1.Close()
		post := func(h http.Handler, body, sid string) *httptest.ResponseRecorder {
			req := httptest.NewRequest("POST", "/", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer acme-viewer")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if sid != "" {
				req.Header.Set("Mcp-Session-Id", sid)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec
		}
		sid := post(h0, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, "").Header().Get("Mcp-Session-Id")
		callBody := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow"}}`
		go post(h0, callBody, sid)
		<-started
		post(h1, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`, sid)
		if err := <-stopped; err == nil {
			t.Fatal("the genuine cancellation did not stop the call")
		}
		msgs := st1.messages("cancel")
		if len(msgs) != 1 {
			t.Fatalf("%d cancellations published", len(msgs))
		}
		synctest.Wait()
		go post(h0, callBody, sid) // the same id again
		<-started
		time.Sleep(31 * time.Second)
		st0.Store.Publish(context.Background(), "cancel", msgs[0].msg)
		synctest.Wait()
		select {
		case err := <-stopped:
			t.Fatalf("a cancellation replayed after 31s stopped a call: %v", err)
		default:
		}
		release <- struct{}{}
		<-stopped
		synctest.Wait()
	})
}

// It publishes change notifications, and the message that ends a
// session's stream, in the format replicas used. No session may receive
// them, and its stream must stay open; they are logged as dropped.
func TestAttackForgedNotification(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		var log syncBuffer
		h, st, srv := sharedHandler(t, stores(0), []mcphandler.Tool{{Name: "x"}}, &log)
		ctx := context.Background()
		c := mcptest.Dial(srv.URL, mcptest.WithToken("acme-viewer"))
		defer c.Close()
		if _, err := c.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		get, err := c.OpenStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer get.Close()
		nextMessage(t, get, 100*time.Millisecond) // the priming event
		mc := mcptest.NewModern(t, h, mcptest.WithToken("acme-viewer"))
		listen, err := mc.Listen(ctx, map[string]any{"toolsListChanged": true})
		if err != nil {
			t.Fatal(err)
		}
		defer listen.Close()
		if ack := nextMessage(t, listen, 5*time.Second); ack == nil {
			t.Fatal("no ack")
		}
		for _, m := range []string{`{"m":"notifications/tools/list_changed"}`, `{"m":"notifications/tools/list_changed","t":"acme"}`} {
			st.Store.Publish(ctx, "notify", []byte(m))
		}
		st.Store.Publish(ctx, "session/"+c.SessionID(), []byte("\x00ended"))
		st.Store.Publish(ctx, "session/"+c.SessionID(), []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","data":"forged"}}`))
		for name, s := range map[string]*mcptest.Stream{"GET": get, "listen": listen} {
			if m := nextMessage(t, s, 300*time.Millisecond); m != nil {
				t.Fatalf("%s stream got a forged message: %+v", name, m)
			}
		}
		// The streams are still open: a real notification arrives.
		if err := h.NotifyToolsChanged(ctx, mcphandler.Everyone()); err != nil {
			t.Fatal(err)
		}
		for name, s := range map[string]*mcptest.Stream{"GET": get, "listen": listen} {
			if m := nextMessage(t, s, 5*time.Second); m == nil || m.Method != "notifications/tools/list_changed" {
				t.Fatalf("%s stream after the forgeries: %+v", name, m)
			}
		}
		if !strings.Contains(log.String(), "dropped") {
			t.Fatalf("the forgeries were not logged:\n%s", log.String())
		}
	})
}

// It appends events to a resumable stream's log and publishes their live
// copies — unsigned, garbage, or a genuine entry copied from another
// stream — hoping that the resumed client takes one for the call's
// result. The client must get only what the server sent.
func TestAttackForgedStreamEvents(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		proceed := make(chan struct{})
		tool := mcphandler.Tool{Name: "slow", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			call.CloseStream()
			<-proceed
			return mcphandler.TextResult("the real result"), nil
		}}
		_, st, srv := sharedHandler(t, stores(0), []mcphandler.Tool{tool}, nil)
		ctx := context.Background()
		c := mcptest.Dial(srv.URL, mcptest.WithToken("acme-viewer"), mcptest.WithAutoResume(false))
		defer c.Close()
		if _, err := c.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		stream := func(id int) (string, string) {
			// CloseStream closes its connection, and says so: the
			// client does not reuse it (TestAttackConnectionFateOtherAnswers).
			resp, err := c.Post(ctx, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"slow"}}`, id)), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			rd := mcptest.NewSSEReader(resp.Body)
			for {
				if _, err := rd.Next(); err != nil {
					break
				}
			}
			last := rd.LastEventID()
			name, _, _ := strings.Cut(last, "-")
			if name == "" {
				t.Fatalf("no event id on the stream of call %d", id)
			}
			return name, last
		}
		other, _ := stream(1)
		name, last := stream(2)
		sid := c.SessionID()
		genuine, err := st.Store.EventsAfter(ctx, "events/"+sid+"/"+other, 0)
		if err != nil || len(genuine) == 0 {
			t.Fatalf("the other stream's log: %v %v", genuine, err)
		}
		forged := []byte(`F{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"forged"}]}}`)
		for _, entry := range [][]byte{forged, []byte("\x00garbage"), {}, genuine[0].Data} {
			seq, err := st.Store.AppendEvent(ctx, "events/"+sid+"/"+name, entry, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			st.Store.Publish(ctx, "live/"+sid+"/"+name, append([]byte(fmt.Sprintf("%d ", seq)), entry...))
		}
		resumed, err := c.Resume(ctx, last)
		if err != nil {
			t.Fatal(err)
		}
		defer resumed.Close()
		go func() {
			time.Sleep(200 * time.Millisecond)
			close(proceed)
		}()
		var got *mcptest.Message
		for got == nil {
			m := nextMessage(t, resumed, 5*time.Second)
			if m == nil {
				t.Fatal("the resumed stream ended without the result")
			}
			if m.IsResponse() {
				got = m
			}
		}
		if !bytes.Contains(got.Result, []byte("the real result")) || !bytes.Equal(bytes.TrimSpace(got.ID), []byte("2")) {
			t.Fatalf("the resumed client got %s for call %s", got.Result, got.ID)
		}
	})
}

// A handler over a shared store without StateKeys could not authenticate
// what its replicas exchange: New refuses it, with a message that says
// what to do. The in-memory store needs none.
func TestNewRequiresStateKeysForSharedStore(t *testing.T) {
	defer func() {
		v := recover()
		if s, _ := v.(string); !strings.Contains(s, "StateKeys") || !strings.Contains(s, "same") {
			t.Fatalf("New panicked with %v, want a message about StateKeys", v)
		}
	}()
	mcphandler.New(mcphandler.Config{Store: session.NewMemory()}).Close()
	mcphandler.New(mcphandler.Config{Store: &faultStore{Store: session.NewMemory()}})
	t.Fatal("New accepted a shared store without StateKeys")
}
