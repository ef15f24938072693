package mcphandler_test

// Attacks by something that can write the shared store but holds no
// StateKeys, with genuine values copied to another position: an event log
// entry written twice or the entries put in another order, a signed
// message published again while its signature is fresh. The reader must
// deliver each genuine value once, in its writer's order.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
)

// progressStream posts tools/call "count" with a progress token through c
// and reads its SSE stream to the end: the ids of its events and the
// progress values and responses it delivered.
func progressStream(t *testing.T, c *mcptest.Client, id int) (ids []string, progress []float64, responses int) {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"count","_meta":{"progressToken":"t"}}}`, id)
	resp, err := c.Post(context.Background(), []byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := mcptest.NewSSEReader(resp.Body)
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		if ev.HasID {
			ids = append(ids, ev.ID)
		}
		p, r := tally(ev.Message)
		progress, responses = append(progress, p...), responses+r
	}
	return ids, progress, responses
}

// countedStream opens a session on srv as acme-viewer and runs the count
// tool on a POST stream read to its end; it returns the client, the
// stream's event ids (priming, three notifications, the response) and the
// store key of its event log.
func countedStream(t *testing.T, srv *httptest.Server) (c *mcptest.Client, ids []string, key string) {
	t.Helper()
	c = mcptest.Dial(srv.URL, mcptest.WithToken("acme-viewer"), mcptest.WithAutoResume(false))
	t.Cleanup(c.Close)
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	ids, progress, responses := progressStream(t, c, 1)
	if len(ids) != 5 || len(progress) != 3 || responses != 1 {
		t.Fatalf("the call's stream: ids %v, progress %v, %d responses", ids, progress, responses)
	}
	stream, _, _ := strings.Cut(ids[0], "-")
	return c, ids, "events/" + c.SessionID() + "/" + stream
}

// tally returns the progress value of m, or counts it as a response.
func tally(m *mcptest.Message) ([]float64, int) {
	switch {
	case m == nil:
		return nil, 0
	case m.IsResponse():
		return nil, 1
	case m.Method == "notifications/progress":
		var p struct{ Progress float64 }
		json.Unmarshal(m.Params, &p)
		return []float64{p.Progress}, 0
	}
	return nil, 0
}

// resumeAll resumes a stream after last through c and reads what it
// delivers within wait.
func resumeAll(c *mcptest.Client, last string, wait time.Duration) (progress []float64, responses int) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := c.Resume(ctx, last)
	if err != nil {
		return nil, 0
	}
	defer s.Close()
	for {
		ev, err := s.Next(ctx)
		if err != nil {
			return progress, responses
		}
		p, r := tally(ev.Message)
		progress, responses = append(progress, p...), responses+r
	}
}

// countTool reports progress 1, 2, 3 and returns.
var countTool = mcphandler.Tool{Name: "count", Handler: func(_ context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
	for i := 1; i <= 3; i++ {
		call.Exchange.Progress(float64(i), 3, "")
	}
	return mcphandler.TextResult("counted"), nil
}}

// increasing reports whether vs strictly increase: nothing twice, nothing
// out of order.
func increasing(vs []float64) bool {
	for i := 1; i < len(vs); i++ {
		if vs[i] <= vs[i-1] {
			return false
		}
	}
	return true
}

// A POST stream's event log holds genuine entries, each signed for the
// log. The attacker puts them in another order and copies one to a second
// position (LRANGE, then the list written back); the client resumes. On
// main, the resumed stream delivered the notifications in the attacker's
// order, one of them twice. Now it delivers a subset of the genuine
// events in their order, each once, and the response once.
func TestAttackEventLogReordered(t *testing.T) {
	stores, atk := redisLabStores(t)
	_, _, srv := sharedHandler(t, stores(0), []mcphandler.Tool{countTool}, nil)
	c, ids, logKey := countedStream(t, srv)
	key := atk.log(logKey)
	e := atk.entries(key) // priming, progress 1, 2, 3, response
	if len(e) != 5 {
		t.Fatalf("the log holds %d entries", len(e))
	}
	for name, order := range map[string][]string{
		"reordered":  {e[0], e[3], e[1], e[2], e[4]},
		"duplicated": {e[0], e[1], e[2], e[1], e[3], e[4]},
		"both":       {e[0], e[2], e[2], e[1], e[3], e[2], e[4], e[4]},
	} {
		t.Run(name, func(t *testing.T) {
			atk.rewrite(key, order)
			progress, responses := resumeAll(c, ids[0], 500*time.Millisecond)
			if !increasing(progress) || responses != 1 {
				t.Fatalf("the resumed stream delivered progress %v and %d responses", progress, responses)
			}
		})
	}
}

// The attacker appends a genuine copy of a stream's response (and of an
// earlier notification) after the response, through the store's own
// AppendEvent; the client resumes after the response, as a client that
// reconnects once more would. On main, the resumed stream delivered the
// response a second time. A stream is over at its response.
func TestAttackEventLogAfterResponse(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		_, st, srv := sharedHandler(t, stores(0), []mcphandler.Tool{countTool}, nil)
		ctx := context.Background()
		c, ids, key := countedStream(t, srv)
		genuine, err := st.Store.EventsAfter(ctx, key, 0)
		if err != nil || len(genuine) != 5 {
			t.Fatalf("the log: %d entries, %v", len(genuine), err)
		}
		for _, ev := range []session.Event{genuine[1], genuine[4]} {
			if _, err := st.Store.AppendEvent(ctx, key, ev.Data, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		if progress, responses := resumeAll(c, ids[4], 500*time.Millisecond); len(progress) != 0 || responses != 0 {
			t.Fatalf("resumed after the response: progress %v and %d responses", progress, responses)
		}
		if progress, responses := resumeAll(c, ids[0], 500*time.Millisecond); !increasing(progress) || len(progress) != 3 || responses != 1 {
			t.Fatalf("resumed from the start: progress %v and %d responses", progress, responses)
		}
	})
}

// A legacy (2024-11-05) client's messages travel to its stream as signed
// messages on the session's channel. The attacker, subscribed to it,
// publishes a genuine one again within the 30 s the signature is fresh.
// On main, the client received the call's response twice (and a
// notification twice). Each message reaches the stream once.
func TestAttackLegacyMessageReplayed(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		st := &faultStore{Store: stores(0)}
		h := mcphandler.New(mcphandler.Config{
			Authenticate: bearer,
			StateKeys:    testStateKeys,
			Store:        st,
			Logger:       slog.New(slog.DiscardHandler),
			ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{countTool}, nil },
		})
		t.Cleanup(func() { h.Close() })
		lc := mcptest.NewLegacy(t, legacyMux(h), "/sse", mcptest.WithToken("acme-viewer"))
		ctx := context.Background()
		if _, err := lc.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := lc.Call(ctx, "tools/call", map[string]any{"name": "count", "_meta": map[string]any{"progressToken": "t"}}); err != nil {
			t.Fatal(err)
		}
		msgs := st.messages("session/")
		if len(msgs) == 0 {
			t.Fatal("nothing was published on the session's channel")
		}
		before := len(lc.Notifications())
		for _, m := range msgs {
			st.Store.Publish(ctx, m.channel, m.msg)
		}
		time.Sleep(300 * time.Millisecond)
		if errs := lc.Errors(); len(errs) != 0 {
			t.Fatalf("the replayed messages reached the client: %v", errs)
		}
		if n := len(lc.Notifications()); n != before {
			t.Fatalf("%d notifications delivered again", n-before)
		}
	})
}

// A stream's event log lives ResumeWindow after its last event. The
// attacker keeps it longer (here by appending a genuine copy of one of its
// entries, which any write of the store can do, as can rewriting its TTL)
// and the client resumes after the window. On main, the stream was
// resumed and its events delivered past their window. A log is over
// ResumeWindow after its newest genuine entry.
func TestAttackEventLogKeptPastWindow(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		st := &faultStore{Store: stores(0)}
		const window = time.Second
		h := mcphandler.New(mcphandler.Config{
			Authenticate: bearer,
			StateKeys:    testStateKeys,
			Store:        st,
			Sessions:     mcphandler.SessionOptions{ResumeWindow: window, KeepAlive: time.Hour},
			Logger:       slog.New(slog.DiscardHandler),
			ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{countTool}, nil },
		})
		srv := httptest.NewServer(h)
		t.Cleanup(func() { srv.Close(); h.Close() })
		ctx := context.Background()
		written := time.Now()
		c, ids, key := countedStream(t, srv)
		genuine, err := st.Store.EventsAfter(ctx, key, 0)
		if err != nil || len(genuine) != 5 {
			t.Fatalf("the log: %d entries, %v", len(genuine), err)
		}
		if progress, responses := resumeAll(c, ids[0], 300*time.Millisecond); len(progress) != 3 || responses != 1 {
			t.Fatalf("resumed within the window: progress %v and %d responses", progress, responses)
		}
		// Before the log expires, a copy appended keeps it an hour.
		time.Sleep(time.Until(written.Add(window / 2)))
		if _, err := st.Store.AppendEvent(ctx, key, genuine[1].Data, time.Hour); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(written.Add(window + 200*time.Millisecond)))
		if progress, responses := resumeAll(c, ids[0], 300*time.Millisecond); len(progress) != 0 || responses != 0 {
			t.Fatalf("resumed past the window: progress %v and %d responses", progress, responses)
		}
	})
}

// A stream resumed on another replica whose writer died (it will never
// write the response: its replica stopped while the call ran) ends once
// its log had no entry for ResumeWindow, when the store would drop the
// log anyway, rather than being kept open with keep-alives for ever.
func TestResumedStreamOfDeadWriterEnds(t *testing.T) {
	eachStore(t, func(t *testing.T, stores func(int) session.Store) {
		const window = time.Second
		stalled := make(chan struct{})
		stall := mcphandler.Tool{Name: "stall", Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			call.Exchange.Progress(1, 2, "")
			<-stalled // its replica is gone: nothing more is written
			return mcphandler.TextResult("never read"), nil
		}}
		replica := func(i int) *httptest.Server {
			h := mcphandler.New(mcphandler.Config{
				Authenticate: bearer,
				StateKeys:    testStateKeys,
				Store:        stores(i),
				Sessions:     mcphandler.SessionOptions{ResumeWindow: window, KeepAlive: 200 * time.Millisecond},
				Logger:       slog.New(slog.DiscardHandler),
				ListTools:    func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{stall}, nil },
			})
			srv := httptest.NewServer(h)
			t.Cleanup(func() { srv.Close(); h.Close() })
			return srv
		}
		a, b := replica(0), replica(1)
		t.Cleanup(func() { close(stalled) }) // before the servers close: a waits for its call
		c := mcptest.Dial(a.URL, mcptest.WithToken("acme-viewer"), mcptest.WithAutoResume(false))
		t.Cleanup(c.Close)
		if _, err := c.Initialize(context.Background()); err != nil {
			t.Fatal(err)
		}
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"stall","_meta":{"progressToken":"t"}}}`
		resp, err := c.Post(context.Background(), []byte(body), nil)
		if err != nil {
			t.Fatal(err)
		}
		rd := mcptest.NewSSEReader(resp.Body)
		last := ""
		for last == "" || !strings.HasSuffix(last, "-1") {
			ev, err := rd.Next()
			if err != nil {
				t.Fatalf("the call's stream: %v", err)
			}
			if ev.HasID {
				last = ev.ID
			}
		}
		resp.Body.Close()
		a.CloseClientConnections() // the client loses a: it resumes on b

		rb := mcptest.Dial(b.URL, mcptest.WithToken("acme-viewer"), mcptest.WithAutoResume(false))
		t.Cleanup(rb.Close)
		rb.SetSessionID(c.SessionID())
		rb.SetProtocolVersion(c.ProtocolVersion())
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		s, err := rb.Resume(ctx, last)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for {
			ev, err := s.Next(ctx)
			if ctx.Err() != nil {
				t.Fatal("the resumed stream of a dead writer was kept open")
			}
			if err != nil {
				break // ended
			}
			if ev.Message != nil && ev.Message.IsResponse() {
				t.Fatalf("a response no replica wrote: %+v", ev.Message)
			}
		}
	})
}
