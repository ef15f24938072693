package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
)

// watcher is one WatchTools running on a goroutine of its own.
type watcher struct {
	calls   atomic.Int32
	changes chan struct{} // one per call of changed
	errc    chan error
	cancel  context.CancelFunc
	// overlap: changed was called while a call of it was still running.
	running, overlap atomic.Bool
	slow             time.Duration // how long each call of changed takes
}

// startWatch runs WatchTools on ep until the test ends (or stop).
func startWatch(t *testing.T, ep upstream.Endpoint, slow time.Duration) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{changes: make(chan struct{}, 1000), errc: make(chan error, 1), cancel: cancel, slow: slow}
	go func() {
		w.errc <- upstream.WatchTools(ctx, ep, nil, func() {
			if w.running.Swap(true) {
				w.overlap.Store(true)
			}
			time.Sleep(w.slow)
			w.calls.Add(1)
			w.running.Store(false)
			w.changes <- struct{}{}
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-w.errc:
		case <-time.After(10 * time.Second):
			t.Error("WatchTools did not return after its ctx ended")
		}
	})
	return w
}

// result waits for WatchTools to return, at most d.
func (w *watcher) result(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case err := <-w.errc:
		w.errc <- err // for the cleanup
		return err
	case <-time.After(d):
		t.Fatalf("WatchTools did not return within %v", d)
		return nil
	}
}

// alive fails t if WatchTools returned.
func (w *watcher) alive(t *testing.T) {
	t.Helper()
	select {
	case err := <-w.errc:
		w.errc <- err
		t.Fatalf("WatchTools returned: %v", err)
	default:
	}
}

// stop ends the watch's ctx and returns what WatchTools returned, failing
// t unless it returns within d.
func (w *watcher) stop(t *testing.T, d time.Duration) error {
	t.Helper()
	w.cancel()
	return w.result(t, d)
}

// The library, as an upstream in every era (forced and detected), has its
// NotifyToolsChanged reach changed, once per notification, on a watch that
// outlives its Timeout; ending ctx ends the watch at once, and ends its
// 2025 session.
func TestWatchToolsEachEra(t *testing.T) {
	l := newLib(t, mcphandler.Config{ListTools: tools()})
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			ep := l.at(e.era, e.path)
			ep.Timeout = 500 * time.Millisecond
			deletes := l.count(http.MethodDelete, "/mcp")
			w := startWatch(t, ep, 0)
			time.Sleep(800 * time.Millisecond) // past the Timeout
			w.alive(t)

			// Until the watch's stream is open, a notification is lost.
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			deadline := time.After(5 * time.Second)
		first:
			for {
				if err := l.h.NotifyToolsChanged(context.Background(), mcphandler.Everyone()); err != nil {
					t.Fatal(err)
				}
				select {
				case <-w.changes:
					break first
				case err := <-w.errc:
					w.errc <- err
					t.Fatalf("WatchTools returned: %v", err)
				case <-deadline:
					t.Fatal("changed was not called")
				case <-tick.C:
				}
			}
			time.Sleep(300 * time.Millisecond) // what was still on its way
			n := w.calls.Load()
			for i := range 2 {
				if err := l.h.NotifyToolsChanged(context.Background(), mcphandler.Everyone()); err != nil {
					t.Fatal(err)
				}
				for w.calls.Load() < n+int32(i)+1 {
					select {
					case <-w.changes:
					case <-time.After(5 * time.Second):
						t.Fatalf("notification %d: changed was not called", i)
					}
				}
			}
			time.Sleep(200 * time.Millisecond)
			if got := w.calls.Load(); got != n+2 {
				t.Errorf("%d calls for 2 notifications", got-n)
			}

			start := time.Now()
			if err := w.stop(t, 3*time.Second); !errors.Is(err, context.Canceled) {
				t.Errorf("err %v, want context.Canceled", err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("returned %v after its ctx ended", d)
			}
			if e.era == upstream.Sessions && l.count(http.MethodDelete, "/mcp") != deletes+1 {
				t.Error("the session was not deleted")
			}
		})
	}
}

// The HTTP client's own Timeout ends a watch (as its doc says); its
// session is still ended.
func TestWatchHTTPClientTimeout(t *testing.T) {
	l := newLib(t, mcphandler.Config{ListTools: tools()})
	ep := l.at(upstream.Sessions, "/mcp")
	ep.HTTP = &http.Client{Timeout: 400 * time.Millisecond}
	deletes := l.count(http.MethodDelete, "/mcp")
	w := startWatch(t, ep, 0)
	err := w.result(t, 5*time.Second)
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, upstream.ErrWatchEnded) {
		t.Errorf("err %v", err)
	}
	if l.count(http.MethodDelete, "/mcp") != deletes+1 {
		t.Error("the session was not deleted")
	}
}

// ack is the acknowledgement of a listen request of id, agreeing to
// filter.
func ack(id json.RawMessage, filter string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":%s,"_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}`, filter, id)
}

// toolsChanged is a list_changed notification with params.
func toolsChanged(params string) string {
	return `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":` + params + `}`
}

// tagged is the params of a notification of subscription id.
func tagged(id string) string {
	return `{"_meta":{"io.modelcontextprotocol/subscriptionId":` + id + `}}`
}

// listenFake is a 2026-07-28 upstream whose answer to subscriptions/listen
// is script, which then holds the stream open until the client leaves.
func listenFake(t *testing.T, script func(w http.ResponseWriter, r *http.Request, id json.RawMessage)) *fake {
	return newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
		if !m.is("subscriptions/listen") {
			return false
		}
		script(w, r, m.ID)
		<-r.Context().Done()
		return true
	})
}

// A listen request carries the filter, the _meta and the headers of the
// revision; only the notifications of its own subscription count, one call
// each, one at a time; the upstream's requests are ignored (the era has no
// answer); its final result ends the watch with ErrWatchEnded.
func TestWatchStatelessSubscription(t *testing.T) {
	f := listenFake(t, func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
		startSSE(w)
		event(w, ack(id, `{"toolsListChanged":true,"promptsListChanged":true}`))
		event(w, toolsChanged(tagged(`"`+string(id)+`"`))) // a string, not the number
		event(w, toolsChanged(tagged(string(id)+"0")))
		event(w, toolsChanged(`{}`))
		event(w, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
		event(w, `{"jsonrpc":"2.0","method":"notifications/prompts/list_changed","params":`+tagged(string(id))+`}`)
		event(w, `{"jsonrpc":"2.0","id":"p","method":"ping"}`)
		fmt.Fprintf(w, "event: other\ndata: %s\n\n", toolsChanged(tagged(string(id))))
		for range 5 {
			event(w, toolsChanged(tagged(string(id))))
		}
		event(w, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, id))
	})
	ep := f.endpoint(upstream.Stateless)
	ep.Meta = map[string]string{"traceparent": "00-1-2-01"}
	w := startWatch(t, ep, 5*time.Millisecond)
	if err := w.result(t, 5*time.Second); !errors.Is(err, upstream.ErrWatchEnded) {
		t.Fatalf("err %v", err)
	}
	if got := w.calls.Load(); got != 5 {
		t.Errorf("%d calls, want 5", got)
	}
	if w.overlap.Load() {
		t.Error("changed was called while it ran")
	}
	posted := f.posted()
	if len(posted) != 1 {
		t.Fatalf("posted %v, want the listen request alone", f.methods())
	}
	m := posted[0]
	if m.header.Get("Mcp-Method") != "subscriptions/listen" || m.header.Get("MCP-Protocol-Version") != "2026-07-28" ||
		!strings.Contains(m.header.Get("Accept"), "text/event-stream") {
		t.Errorf("headers %v", m.header)
	}
	var p struct {
		Notifications map[string]bool
		Meta          map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Notifications) != 1 || !p.Notifications["toolsListChanged"] {
		t.Errorf("filter %v", p.Notifications)
	}
	for _, k := range []string{"protocolVersion", "clientCapabilities", "clientInfo"} {
		if _, ok := p.Meta["io.modelcontextprotocol/"+k]; !ok {
			t.Errorf("_meta without %s: %s", k, m.Params)
		}
	}
	if string(p.Meta["traceparent"]) != `"00-1-2-01"` {
		t.Errorf("_meta %s", m.Params)
	}
}

// What a 2026-07-28 upstream answers to subscriptions/listen decides the
// watch: no acknowledgement first is ErrMalformed, an acknowledgement
// without toolsListChanged or a -32601 is ErrNoListChanged.
func TestWatchStatelessAnswers(t *testing.T) {
	cases := []struct {
		name   string
		script func(w http.ResponseWriter, id json.RawMessage)
		want   error
	}{
		{"notification before the ack", func(w http.ResponseWriter, id json.RawMessage) {
			startSSE(w)
			event(w, toolsChanged(tagged(string(id))))
			event(w, ack(id, `{"toolsListChanged":true}`))
		}, upstream.ErrMalformed},
		{"request before the ack", func(w http.ResponseWriter, id json.RawMessage) {
			startSSE(w)
			event(w, `{"jsonrpc":"2.0","id":"p","method":"ping"}`)
			event(w, ack(id, `{"toolsListChanged":true}`))
		}, upstream.ErrMalformed},
		{"result without an ack", func(w http.ResponseWriter, id json.RawMessage) {
			writeJSON(w, id, `{}`)
		}, upstream.ErrMalformed},
		{"ack of another subscription", func(w http.ResponseWriter, id json.RawMessage) {
			startSSE(w)
			event(w, ack(json.RawMessage(`"other"`), `{"toolsListChanged":true}`))
		}, upstream.ErrMalformed},
		{"ack params not an object", func(w http.ResponseWriter, id json.RawMessage) {
			startSSE(w)
			event(w, `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":[]}`)
		}, upstream.ErrMalformed},
		{"no ack at all", func(w http.ResponseWriter, id json.RawMessage) {
			startSSE(w)
		}, nil}, // ends: see below
		{"ack without toolsListChanged", func(w http.ResponseWriter, id json.RawMessage) {
			startSSE(w)
			event(w, ack(id, `{"promptsListChanged":true}`))
		}, upstream.ErrNoListChanged},
		{"ack with toolsListChanged false", func(w http.ResponseWriter, id json.RawMessage) {
			startSSE(w)
			event(w, ack(id, `{"toolsListChanged":false}`))
		}, upstream.ErrNoListChanged},
		{"ack with toolsListChanged \"true\"", func(w http.ResponseWriter, id json.RawMessage) {
			startSSE(w)
			event(w, ack(id, `{"toolsListChanged":"true"}`))
		}, upstream.ErrNoListChanged},
		{"-32601", func(w http.ResponseWriter, id json.RawMessage) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, id)
		}, upstream.ErrNoListChanged},
		{"-32601 with HTTP 404", func(w http.ResponseWriter, id json.RawMessage) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, id)
		}, upstream.ErrNoListChanged},
		{"another error", func(w http.ResponseWriter, id json.RawMessage) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"no"}}`, id)
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
				if !m.is("subscriptions/listen") {
					return false
				}
				c.script(w, m.ID)
				return true // the answer ends here
			})
			w := startWatch(t, f.endpoint(upstream.Stateless), 0)
			err := w.result(t, 5*time.Second)
			switch {
			case c.want != nil && !errors.Is(err, c.want):
				t.Errorf("err %v, want %v", err, c.want)
			case c.name == "no ack at all" && !errors.Is(err, upstream.ErrMalformed):
				t.Errorf("err %v", err)
			case c.name == "another error":
				var re *upstream.RPCError
				if !errors.As(err, &re) || re.Code != -32602 || errors.Is(err, upstream.ErrNoListChanged) {
					t.Errorf("err %v", err)
				}
			}
			if w.calls.Load() != 0 {
				t.Errorf("changed was called %d times", w.calls.Load())
			}
		})
	}
}

// sessionsFake is a 2025 upstream that declares tools.listChanged, and
// answers GET with get.
func sessionsFake(t *testing.T, get func(w http.ResponseWriter, r *http.Request)) *fake {
	return newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
		switch {
		case m.is("initialize"):
			w.Header().Set("Mcp-Session-Id", "s1")
			writeJSON(w, m.ID, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"fake","version":"1"}}`)
			return true
		case r.Method == http.MethodGet && get != nil:
			get(w, r)
			return true
		}
		return false
	})
}

// On a 2025 GET stream the upstream's ping is answered, its other
// questions refused with -32601 (by POSTs in the session), its
// notifications counted; the stream's end ends the watch with
// ErrWatchEnded, and the session.
func TestWatchSessionsStream(t *testing.T) {
	var getHeader atomic.Pointer[http.Header]
	var f *fake
	f = sessionsFake(t, func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		getHeader.Store(&h)
		startSSE(w)
		fmt.Fprint(w, "id: e1\nretry: 10\ndata: \n\n") // a priming event
		event(w, `{"jsonrpc":"2.0","id":"p1","method":"ping"}`)
		event(w, `{"jsonrpc":"2.0","id":"q1","method":"elicitation/create","params":{"message":"?","requestedSchema":{"type":"object"}}}`)
		event(w, toolsChanged(`{}`))
		event(w, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`)
		event(w, `[`+toolsChanged(`{}`)+`,`+toolsChanged(`{"_meta":{"io.modelcontextprotocol/subscriptionId":9}}`)+`]`)
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && len(f.posted()) < 4; {
			time.Sleep(10 * time.Millisecond) // the two answers
		}
	})
	w := startWatch(t, f.endpoint(upstream.Sessions), 0)
	if err := w.result(t, 5*time.Second); !errors.Is(err, upstream.ErrWatchEnded) {
		t.Fatalf("err %v", err)
	}
	if got := w.calls.Load(); got != 3 {
		t.Errorf("%d calls, want 3", got)
	}
	h := getHeader.Load()
	if h == nil || h.Get("Accept") != "text/event-stream" || h.Get("Mcp-Session-Id") != "s1" || h.Get("MCP-Protocol-Version") != "2025-11-25" {
		t.Errorf("GET headers %v", h)
	}
	answers := map[string]rpc{}
	for _, m := range f.posted() {
		if m.Method == "" {
			answers[strings.Trim(string(m.ID), `"`)] = m
		}
	}
	if p := answers["p1"]; string(p.Result) != "{}" {
		t.Errorf("ping answered %s %s", p.Result, p.Error)
	}
	if q := answers["q1"]; !strings.Contains(string(q.Error), "-32601") {
		t.Errorf("elicitation answered %s %s", q.Result, q.Error)
	}
	if f.deletes() != 1 {
		t.Errorf("%d deletes", f.deletes())
	}
}

// A 2025 upstream that cannot notify — initialize without
// tools.listChanged, or GET answered 405 — is ErrNoListChanged, and its
// session is ended; a GET answered with JSON, or a response on the stream,
// is ErrMalformed.
func TestWatchSessionsRefusals(t *testing.T) {
	t.Run("no listChanged", func(t *testing.T) {
		for _, caps := range []string{`{"tools":{}}`, `{"tools":{"listChanged":false}}`, `{}`, `{"tools":{"listChanged":"yes"}}`} {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
				switch {
				case m.is("initialize"):
					w.Header().Set("Mcp-Session-Id", "s1")
					writeJSON(w, m.ID, `{"protocolVersion":"2025-11-25","capabilities":`+caps+`}`)
					return true
				case r.Method == http.MethodGet: // a stream, were it asked for
					startSSE(w)
					<-r.Context().Done()
					return true
				}
				return false
			})
			w := startWatch(t, f.endpoint(upstream.Sessions), 0)
			if err := w.result(t, 5*time.Second); !errors.Is(err, upstream.ErrNoListChanged) {
				t.Errorf("%s: err %v", caps, err)
			}
			if f.deletes() != 1 {
				t.Errorf("%s: %d deletes", caps, f.deletes())
			}
		}
	})
	cases := []struct {
		name string
		get  func(w http.ResponseWriter, r *http.Request)
		want error
	}{
		{"405", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", "POST")
			w.WriteHeader(http.StatusMethodNotAllowed)
		}, upstream.ErrNoListChanged},
		{"JSON", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, json.RawMessage(`1`), `{}`)
		}, upstream.ErrMalformed},
		{"response on the stream", func(w http.ResponseWriter, r *http.Request) {
			startSSE(w)
			event(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
			<-r.Context().Done()
		}, upstream.ErrMalformed},
		{"invalid JSON on the stream", func(w http.ResponseWriter, r *http.Request) {
			startSSE(w)
			event(w, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"a":1,"a":2}}`)
			<-r.Context().Done()
		}, upstream.ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := sessionsFake(t, c.get)
			w := startWatch(t, f.endpoint(upstream.Sessions), 0)
			if err := w.result(t, 5*time.Second); !errors.Is(err, c.want) {
				t.Errorf("err %v, want %v", err, c.want)
			}
			if f.deletes() != 1 {
				t.Errorf("%d deletes", f.deletes())
			}
		})
	}
	t.Run("500", func(t *testing.T) {
		f := sessionsFake(t, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "down", http.StatusServiceUnavailable)
		})
		w := startWatch(t, f.endpoint(upstream.Sessions), 0)
		if err := w.result(t, 5*time.Second); !isStatus(err, http.StatusServiceUnavailable) {
			t.Errorf("err %v", err)
		}
	})
}

// A stream that never ends — one endless line, one endless event, or
// comments only — ends the watch with ErrTooLarge once it has sent
// MaxResponseBytes, in every era, without holding more; the 2025 session
// is ended.
func TestWatchEndlessStream(t *testing.T) {
	flood := func(w http.ResponseWriter, r *http.Request, kind string) {
		for r.Context().Err() == nil {
			switch kind {
			case "line":
				fmt.Fprint(w, big("d", 1000))
			case "event":
				fmt.Fprint(w, "data: "+big("x", 1000)+"\n")
			default:
				fmt.Fprint(w, ":"+big(" ", 1000)+"\n")
			}
		}
	}
	for _, kind := range []string{"line", "event", "comments"} {
		for _, era := range []upstream.Era{upstream.Stateless, upstream.Sessions, upstream.Legacy} {
			t.Run(kind+"/"+era.String(), func(t *testing.T) {
				var ep upstream.Endpoint
				var f *fake
				switch era {
				case upstream.Stateless:
					f = listenFake(t, func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
						startSSE(w)
						event(w, ack(id, `{"toolsListChanged":true}`))
						flood(w, r, kind)
					})
					ep = f.endpoint(era)
				case upstream.Sessions:
					f = sessionsFake(t, func(w http.ResponseWriter, r *http.Request) {
						startSSE(w)
						flood(w, r, kind)
					})
					ep = f.endpoint(era)
				default:
					ep = legacyFake(t, `{"tools":{"listChanged":true}}`, func(w http.ResponseWriter, r *http.Request) {
						flood(w, r, kind)
					}).endpoint()
				}
				ep.MaxResponseBytes = 64 << 10
				w := startWatch(t, ep, 0)
				if err := w.result(t, 5*time.Second); !errors.Is(err, upstream.ErrTooLarge) {
					t.Errorf("err %v", err)
				}
				if era == upstream.Sessions && f.deletes() != 1 {
					t.Errorf("%d deletes", f.deletes())
				}
			})
		}
	}
}

// An upstream that holds back the listen's acknowledgement, or the GET's
// answer, fails the watch at the Timeout.
func TestWatchHangsBeforeConnected(t *testing.T) {
	cases := []struct {
		name string
		era  upstream.Era
		hang func(w http.ResponseWriter, r *http.Request, m rpc) bool
	}{
		{"listen header", upstream.Stateless, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
			<-r.Context().Done()
			return true
		}},
		{"listen ack", upstream.Stateless, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
			startSSE(w)
			for r.Context().Err() == nil {
				fmt.Fprint(w, ":\n")
				w.(http.Flusher).Flush()
				time.Sleep(20 * time.Millisecond)
			}
			return true
		}},
		{"GET header", upstream.Sessions, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
			switch {
			case m.is("initialize"):
				w.Header().Set("Mcp-Session-Id", "s1")
				writeJSON(w, m.ID, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}}}`)
				return true
			case r.Method == http.MethodGet:
				<-r.Context().Done()
				return true
			}
			return false
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t, c.hang)
			ep := f.endpoint(c.era)
			ep.Timeout = 300 * time.Millisecond
			start := time.Now()
			w := startWatch(t, ep, 0)
			if err := w.result(t, 3*time.Second); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err %v", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
			if c.era == upstream.Sessions && f.deletes() != 1 {
				t.Errorf("%d deletes", f.deletes())
			}
		})
	}
}

// A watch's stream that the upstream closes, cleanly or by dropping the
// connection, ends the watch at once, in every era; ErrWatchEnded for a
// clean end.
func TestWatchStreamClosed(t *testing.T) {
	for _, how := range []string{"end", "drop"} {
		end := func(w http.ResponseWriter) {
			event(w, toolsChanged(`{}`)) // not counted on Stateless: no tag
			time.Sleep(100 * time.Millisecond)
			if how == "drop" {
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close()
				}
			}
		}
		for _, era := range []upstream.Era{upstream.Stateless, upstream.Sessions, upstream.Legacy} {
			t.Run(how+"/"+era.String(), func(t *testing.T) {
				var ep upstream.Endpoint
				switch era {
				case upstream.Stateless:
					ep = newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
						if !m.is("subscriptions/listen") {
							return false
						}
						startSSE(w)
						event(w, ack(m.ID, `{"toolsListChanged":true}`))
						end(w)
						return true
					}).endpoint(era)
				case upstream.Sessions:
					ep = sessionsFake(t, func(w http.ResponseWriter, r *http.Request) {
						startSSE(w)
						end(w)
					}).endpoint(era)
				default:
					ep = legacyFake(t, `{"tools":{"listChanged":true}}`, func(w http.ResponseWriter, r *http.Request) {
						end(w)
					}).endpoint()
				}
				w := startWatch(t, ep, 0)
				err := w.result(t, 3*time.Second)
				t.Log(err)
				if err == nil || errors.Is(err, context.Canceled) || how == "end" && !errors.Is(err, upstream.ErrWatchEnded) {
					t.Errorf("err %v", err)
				}
			})
		}
	}
}

// No era follows a redirect, be it of the first request or of the 2025
// GET: the watch fails with its status, and the target never sees the
// credentials.
func TestWatchRedirectNotFollowed(t *testing.T) {
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer target.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	for _, era := range []upstream.Era{upstream.Sessions, upstream.Stateless, upstream.Legacy} {
		t.Run(era.String(), func(t *testing.T) {
			ep := upstream.Endpoint{URL: redirect.URL + "/mcp", Era: era, Timeout: 5 * time.Second,
				Header: http.Header{"Authorization": {"Bearer s3cret"}}, HTTP: &http.Client{}}
			w := startWatch(t, ep, 0)
			if err := w.result(t, 5*time.Second); !isStatus(err, http.StatusTemporaryRedirect) {
				t.Errorf("err %v", err)
			}
		})
	}
	t.Run("GET", func(t *testing.T) {
		f := sessionsFake(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/mcp", http.StatusFound)
		})
		ep := f.endpoint(upstream.Sessions)
		ep.Header = http.Header{"Authorization": {"Bearer s3cret"}}
		ep.HTTP = &http.Client{}
		w := startWatch(t, ep, 0)
		if err := w.result(t, 5*time.Second); !isStatus(err, http.StatusFound) {
			t.Errorf("err %v", err)
		}
		if f.deletes() != 1 {
			t.Errorf("%d deletes", f.deletes())
		}
	})
	if reached.Load() != 0 {
		t.Errorf("the redirect's target was reached %d times", reached.Load())
	}
}

// WatchTools checks its arguments before it sends anything.
func TestWatchArguments(t *testing.T) {
	f := newFake(t, nil)
	if err := upstream.WatchTools(context.Background(), f.endpoint(upstream.Sessions), nil, nil); err == nil {
		t.Error("no error without changed")
	}
	if err := upstream.WatchTools(context.Background(), f.endpoint(upstream.Sessions), json.RawMessage(`[]`), func() {}); err == nil {
		t.Error("no error with capabilities that are not an object")
	}
	if len(f.posted()) != 0 {
		t.Errorf("posted %v", f.methods())
	}
}

// legacyServer is a 2024-11-05 upstream: initialize declares caps; once
// the client is initialized, after writes on the stream.
type legacyServer struct {
	srv *httptest.Server

	mu      sync.Mutex
	answers []rpc // the responses POSTed
}

func (l *legacyServer) responses() []rpc {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]rpc(nil), l.answers...)
}

func (l *legacyServer) endpoint() upstream.Endpoint {
	return upstream.Endpoint{URL: l.srv.URL + "/sse", Era: upstream.Legacy, Timeout: 5 * time.Second}
}

func legacyFake(t *testing.T, caps string, after func(w http.ResponseWriter, r *http.Request)) *legacyServer {
	t.Helper()
	ls := &legacyServer{}
	var mu sync.Mutex
	var out chan string // to the open stream
	ls.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			c := make(chan string, 16)
			mu.Lock()
			out = c
			mu.Unlock()
			startSSE(w)
			fmt.Fprint(w, "event: endpoint\ndata: /messages\n\n")
			w.(http.Flusher).Flush()
			for {
				select {
				case msg := <-c:
					if msg == "initialized" {
						after(w, r)
						return
					}
					event(w, msg)
				case <-r.Context().Done():
					return
				}
			}
		}
		var m rpc
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		c := out
		mu.Unlock()
		switch {
		case m.is("initialize"):
			c <- fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2024-11-05","capabilities":%s,"serverInfo":{"name":"fake","version":"1"}}}`, m.ID, caps)
		case m.Method == "notifications/initialized":
			c <- "initialized"
		case m.Method == "" && len(m.ID) > 0:
			ls.mu.Lock()
			ls.answers = append(ls.answers, m)
			ls.mu.Unlock()
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(func() {
		ls.srv.CloseClientConnections()
		ls.srv.Close()
	})
	return ls
}

// A 2024-11-05 upstream's notifications on its stream are counted, its
// ping answered and its other questions refused; one that does not declare
// tools.listChanged is ErrNoListChanged.
func TestWatchLegacy(t *testing.T) {
	t.Run("notifications", func(t *testing.T) {
		ls := legacyFake(t, `{"tools":{"listChanged":true}}`, func(w http.ResponseWriter, r *http.Request) {
			event(w, `{"jsonrpc":"2.0","id":"p1","method":"ping"}`)
			event(w, `{"jsonrpc":"2.0","id":"q1","method":"roots/list"}`)
			event(w, toolsChanged(`{}`))
			event(w, `{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`)
			event(w, toolsChanged(`{}`))
			<-r.Context().Done()
		})
		w := startWatch(t, ls.endpoint(), 0)
		for i := range 2 {
			select {
			case <-w.changes:
			case <-time.After(5 * time.Second):
				t.Fatalf("call %d of changed did not come", i)
			}
		}
		time.Sleep(100 * time.Millisecond)
		if got := w.calls.Load(); got != 2 {
			t.Errorf("%d calls", got)
		}
		answers := ls.responses()
		if len(answers) != 2 || string(answers[0].ID) != `"p1"` || string(answers[0].Result) != "{}" ||
			string(answers[1].ID) != `"q1"` || !strings.Contains(string(answers[1].Error), "-32601") {
			t.Errorf("answers %+v", answers)
		}
		if err := w.stop(t, 3*time.Second); !errors.Is(err, context.Canceled) {
			t.Errorf("err %v", err)
		}
	})
	for _, caps := range []string{`{"tools":{}}`, `{}`} {
		t.Run(caps, func(t *testing.T) {
			ls := legacyFake(t, caps, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
			w := startWatch(t, ls.endpoint(), 0)
			if err := w.result(t, 5*time.Second); !errors.Is(err, upstream.ErrNoListChanged) {
				t.Errorf("err %v", err)
			}
		})
	}
}

// An answer to the upstream's ping that the upstream does not take is
// bounded by the Timeout, which ends the watch; its session is ended.
func TestWatchAnswerBounded(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, m rpc) bool {
		switch {
		case m.is("initialize"):
			w.Header().Set("Mcp-Session-Id", "s1")
			writeJSON(w, m.ID, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}}}`)
			return true
		case r.Method == http.MethodGet:
			startSSE(w)
			time.Sleep(400 * time.Millisecond) // past the Timeout: connected
			event(w, `{"jsonrpc":"2.0","id":"p1","method":"ping"}`)
			<-r.Context().Done()
			return true
		case r.Method == http.MethodPost && m.Method == "" && len(m.ID) > 0: // the answer
			<-r.Context().Done()
			return true
		}
		return false
	})
	ep := f.endpoint(upstream.Sessions)
	ep.Timeout = 300 * time.Millisecond
	w := startWatch(t, ep, 0)
	if err := w.result(t, 3*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v", err)
	}
	if f.deletes() != 1 {
		t.Errorf("%d deletes", f.deletes())
	}
}
