package mcphandler_test

// Attacks on long-lived streams: a GET stream of a 2025 session, a
// 2026-07-28 subscriptions/listen stream and a legacy HTTP+SSE stream are
// authenticated when they open, and must not keep serving a caller whose
// token was revoked, reissued or expired since. Also: slow request bodies,
// and challenges built from scope names.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
)

// streamKind opens one kind of long-lived stream for token and returns a
// channel closed when the server ends it.
type streamKind struct {
	name string
	open func(t *testing.T, h *mcphandler.Handler, token string) <-chan struct{}
}

// drain reads a stream until it ends and closes the returned channel then.
func drain(next func() error) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for next() == nil {
		}
	}()
	return done
}

// streamHost is the fixture with tokens from tt and a tool "hold" that ends
// its POST's connection at once (as SSE polling does) and then runs until
// the test ends, so that its stream can only be resumed.
func streamHost(t *testing.T, tt *tokenTable, keepAlive time.Duration) *mcphandler.Handler {
	cfg := (&fixture{}).config()
	cfg.Authenticate = tt.authenticate
	cfg.Sessions.KeepAlive = keepAlive
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	tools := cfg.ListTools
	hold := mcphandler.Tool{Name: "hold", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
		Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			call.CloseStream()
			select {
			case <-release:
			case <-ctx.Done():
			}
			return mcphandler.TextResult("released"), nil
		}}
	cfg.ListTools = func(ctx context.Context) ([]mcphandler.Tool, error) {
		ts, err := tools(ctx)
		return append(ts, hold), err
	}
	return mcphandler.New(cfg)
}

var streamKinds = []streamKind{
	{"2025 GET stream", func(t *testing.T, h *mcphandler.Handler, token string) <-chan struct{} {
		c := connect(t, h, token)
		s, err := c.OpenStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return drain(func() error { _, err := s.Next(context.Background()); return err })
	}},
	{"2025 resumed POST stream", func(t *testing.T, h *mcphandler.Handler, token string) <-chan struct{} {
		c := connect(t, h, token, mcptest.WithAutoResume(false))
		resp, err := c.Post(context.Background(), []byte(`{"jsonrpc":"2.0","id":"h1","method":"tools/call","params":{"name":"hold"}}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		r := mcptest.NewSSEReader(resp.Body)
		last := ""
		for {
			ev, err := r.Next()
			if err != nil {
				break
			}
			if ev.ID != "" {
				last = ev.ID
			}
		}
		resp.Body.Close()
		if last == "" {
			t.Fatal("the POST stream ended without an event id")
		}
		s, err := c.Resume(context.Background(), last)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return drain(func() error { _, err := s.Next(context.Background()); return err })
	}},
	{"2026-07-28 listen stream", func(t *testing.T, h *mcphandler.Handler, token string) <-chan struct{} {
		m := mcptest.NewModern(t, h, mcptest.WithToken(token))
		s, err := m.Listen(context.Background(), map[string]any{"toolsListChanged": true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return drain(func() error { _, err := s.Next(context.Background()); return err })
	}},
	{"2024-11-05 SSE stream", func(t *testing.T, h *mcphandler.Handler, token string) <-chan struct{} {
		srv := httptest.NewServer(legacyMux(h))
		t.Cleanup(srv.Close)
		req, _ := http.NewRequest("GET", srv.URL+"/sse", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("GET /sse: %d", resp.StatusCode)
		}
		t.Cleanup(func() { resp.Body.Close() })
		buf := make([]byte, 512)
		return drain(func() error { _, err := resp.Body.Read(buf); return err })
	}},
}

func open(done <-chan struct{}) bool {
	select {
	case <-done:
		return false
	default:
		return true
	}
}

func endsWithin(done <-chan struct{}, d time.Duration) bool {
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// The attacker's token is revoked (or reissued to someone else, or cannot
// be checked any more) while their stream is open. The stream must end
// within about one KeepAlive, on every kind of stream (a resumed POST
// stream is a GET too), and not before.
func TestAttackRevokedTokenKeepsStream(t *testing.T) {
	// Not shorter: a GET stream's claim lapses after two KeepAlives
	// without renewal, which a loaded machine may delay.
	const keepAlive = 200 * time.Millisecond
	for _, change := range []struct {
		name string
		do   func(tt *tokenTable)
	}{
		{"revoked", func(tt *tokenTable) { tt.set(func(ids map[string]mcphandler.Identity) { delete(ids, "acme-viewer") }) }},
		{"reissued to another user", func(tt *tokenTable) {
			tt.set(func(ids map[string]mcphandler.Identity) { ids["acme-viewer"] = users["globex-editor"] })
		}},
		{"authorization server down", func(tt *tokenTable) { tt.mu.Lock(); tt.down = true; tt.mu.Unlock() }},
	} {
		for _, kind := range streamKinds {
			t.Run(change.name+"/"+kind.name, func(t *testing.T) {
				tt := newTokenTable()
				h := streamHost(t, tt, keepAlive)
				done := kind.open(t, h, "acme-viewer")
				time.Sleep(3 * keepAlive)
				if !open(done) {
					t.Fatal("the stream of a valid token ended")
				}
				change.do(tt)
				start := time.Now()
				if !endsWithin(done, 2*time.Second) {
					t.Fatalf("the stream outlived the change of its token by 2s (KeepAlive %v)", keepAlive)
				}
				t.Logf("ended %v after the change", time.Since(start).Round(time.Millisecond))
			})
		}
	}
}

// The attacker's token makes Config.Authenticate panic when it is checked
// again on an open stream (the check runs on a goroutine of its own, off
// the stream's). The panic must reach the request's goroutine, where
// net/http recovers it: the stream ends and the process lives on to serve
// the next stream.
func TestAttackAuthenticatePanicsOnStream(t *testing.T) {
	const keepAlive = 200 * time.Millisecond
	for _, kind := range streamKinds {
		t.Run(kind.name, func(t *testing.T) {
			tt := newTokenTable()
			h := streamHost(t, tt, keepAlive)
			done := kind.open(t, h, "acme-viewer")
			tt.mu.Lock()
			tt.panics = true
			tt.mu.Unlock()
			if !endsWithin(done, 2*time.Second) {
				t.Fatalf("the stream outlived a panicking Authenticate by 2s (KeepAlive %v)", keepAlive)
			}
			tt.mu.Lock()
			tt.panics = false
			tt.mu.Unlock()
			again := kind.open(t, h, "acme-viewer")
			time.Sleep(2 * keepAlive)
			if !open(again) {
				t.Fatal("a stream opened after the panic ended")
			}
		})
	}
}

// The attacker's token carries an expiry (Identity.Expires) and the
// attacker keeps a stream open past it; KeepAlive is long, so only the
// expiry can end it. The stream must end at the expiry, not before.
func TestAttackExpiredTokenKeepsStream(t *testing.T) {
	for _, lifetime := range []time.Duration{150 * time.Millisecond, 400 * time.Millisecond} {
		for _, kind := range streamKinds {
			t.Run(fmt.Sprint(lifetime, "/", kind.name), func(t *testing.T) {
				tt := newTokenTable()
				h := streamHost(t, tt, time.Hour)
				expires := time.Now().Add(lifetime)
				tt.set(func(ids map[string]mcphandler.Identity) {
					id := ids["acme-viewer"]
					id.Expires = expires
					ids["acme-viewer"] = id
				})
				done := kind.open(t, h, "acme-viewer")
				if !endsWithin(done, lifetime+2*time.Second) {
					t.Fatalf("the stream outlived its token's expiry by 2s")
				}
				if early := time.Until(expires); early > 10*time.Millisecond {
					t.Fatalf("the stream ended %v before its token expired", early)
				}
			})
		}
	}
}

// The attacker sends a POST's headers and then trickles its body a byte at
// a time, to hold a connection and a goroutine. The handler must stop
// reading after ReadBodyTimeout, answer 408, and return, while the
// attacker is still sending.
func TestAttackSlowBody(t *testing.T) {
	for _, path := range []string{"/mcp", "/messages"} {
		t.Run(path, func(t *testing.T) {
			cfg := (&fixture{}).config()
			cfg.Limits.ReadBodyTimeout = 200 * time.Millisecond
			h := mcphandler.New(cfg)
			sse, msgs := h.LegacySSE("/messages")
			var inFlight atomic.Int64
			returned := make(chan struct{}, 1)
			mux := http.NewServeMux()
			mux.Handle("/mcp", h)
			mux.Handle("/sse", sse)
			mux.Handle("/messages", msgs)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == "POST" {
					inFlight.Add(1)
					defer func() { inFlight.Add(-1); returned <- struct{}{} }()
				}
				mux.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			target := "/mcp"
			if path == "/messages" {
				// Open a legacy session to post into.
				req, _ := http.NewRequest("GET", srv.URL+"/sse", nil)
				req.Header.Set("Authorization", "Bearer acme-viewer")
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { resp.Body.Close() })
				buf := make([]byte, 512)
				n, _ := resp.Body.Read(buf)
				ev := string(buf[:n])
				i := strings.Index(ev, "/messages?")
				if i < 0 {
					t.Fatalf("no endpoint event: %q", ev)
				}
				target = strings.TrimSpace(ev[i:])
			}
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer acme-viewer\r\nContent-Type: application/json\r\n"+
				"Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n", target, srv.Listener.Addr())
			stop := make(chan struct{})
			var wg sync.WaitGroup
			defer func() { close(stop); wg.Wait() }()
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
						if _, err := conn.Write([]byte(" ")); err != nil {
							return
						}
					}
				}
			})
			start := time.Now()
			select {
			case <-returned:
			case <-time.After(5 * time.Second):
				t.Fatal("the handler still reads a trickled body after 5s")
			}
			if el := time.Since(start); el < 150*time.Millisecond {
				t.Fatalf("the handler gave up after %v, before ReadBodyTimeout", el)
			}
			if n := inFlight.Load(); n != 0 {
				t.Fatalf("%d handlers still running", n)
			}
			conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			b, _ := io.ReadAll(conn)
			if !strings.HasPrefix(string(b), "HTTP/1.1 408") {
				t.Fatalf("answer %.200q, want 408", b)
			}
		})
	}
}

// The read deadline that bounds a body must not outlive the body: a call
// whose SSE response lasts several times ReadBodyTimeout, and a listen
// stream (itself a POST), keep going, and the call's context is not
// cancelled.
func TestReadBodyTimeoutSparesStreams(t *testing.T) {
	cfg := (&fixture{}).config()
	cfg.Limits.ReadBodyTimeout = 100 * time.Millisecond
	slow := mcphandler.Tool{Name: "slow", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
		Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			for i := range 5 {
				call.Progress(float64(i+1), 5, "")
				select {
				case <-time.After(100 * time.Millisecond):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return mcphandler.TextResult("done"), nil
		}}
	cfg.ListTools = func(context.Context) ([]mcphandler.Tool, error) { return []mcphandler.Tool{slow}, nil }
	h := mcphandler.New(cfg)
	c := connect(t, h, "acme-viewer")
	raw, err := c.Call(context.Background(), "tools/call", map[string]any{"name": "slow", "_meta": map[string]any{"progressToken": "p"}})
	if err != nil || !strings.Contains(string(raw), "done") {
		t.Fatalf("a 500ms SSE response with ReadBodyTimeout 100ms: %s %v", raw, err)
	}
	done := streamKinds[2].open(t, h, "acme-viewer")
	if endsWithin(done, 500*time.Millisecond) {
		t.Fatal("a listen stream ended after ReadBodyTimeout")
	}
}

// keyRecorder is a store that records the longest key or channel name the
// handler used.
type keyRecorder struct {
	session.Store
	longest atomic.Int64
}

func (k *keyRecorder) record(key string) {
	for {
		cur := k.longest.Load()
		if int64(len(key)) <= cur || k.longest.CompareAndSwap(cur, int64(len(key))) {
			return
		}
	}
}

func (k *keyRecorder) Subscribe(ctx context.Context, ch string) (session.Subscription, error) {
	k.record(ch)
	return k.Store.Subscribe(ctx, ch)
}

func (k *keyRecorder) EventsAfter(ctx context.Context, stream string, after uint64) ([]session.Event, error) {
	k.record(stream)
	return k.Store.EventsAfter(ctx, stream, after)
}

// The attacker resumes with a Last-Event-ID that looks like a POST
// stream's but is 64 KB long, so that every replica sends Redis keys and
// channel names of that size. Only the ids the handler makes are looked up:
// the GET opens the standalone stream without such a key reaching the
// store.
func TestAttackHugeLastEventID(t *testing.T) {
	cfg := (&fixture{}).config()
	st := &keyRecorder{Store: session.NewMemory()}
	cfg.Store, cfg.StateKeys = st, testStateKeys // a wrapped store counts as shared
	h := mcphandler.New(cfg)
	c := connect(t, h, "acme-viewer")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Do(ctx, "GET", nil, http.Header{mcptest.HeaderLastEventID: {"p" + strings.Repeat("a", 64<<10) + "-1"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	if n := st.longest.Load(); n > 256 {
		t.Fatalf("a %d-byte key reached the store", n)
	}
}
