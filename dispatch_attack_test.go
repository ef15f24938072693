package mcphandler_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
)

// unknownCall sends one request of method with params and returns the
// JSON-RPC error it got (nil for a result).
type unknownCall func(t *testing.T, method string, params map[string]any) *mcptest.RPCError

// rpcErrorOf is the JSON-RPC error of a CallOnce, whether it came in a 200
// (2025) or with another status (2026-07-28 answers -32601 with 404).
func rpcErrorOf(t *testing.T, m *mcptest.Message, err error) *mcptest.RPCError {
	t.Helper()
	var he *mcptest.HTTPError
	switch {
	case errors.As(err, &he):
		if e := he.RPCError(); e != nil {
			return e
		}
		t.Fatalf("HTTP error without a JSON-RPC error: %v", err)
	case err != nil:
		t.Fatal(err)
	}
	return m.Error
}

// unknownMethodEras are the paths that dispatch a client's request: a
// 2025 session, a batch member of 2025-03-26, 2026-07-28, the legacy
// HTTP+SSE transport and Config.Stateless. Each returns the sender and
// the methods the handler does not serve on that path (beyond a name it
// knows nowhere), and takes the handler's interceptors.
var unknownMethodEras = []struct {
	name    string
	unknown []string // methods of a table the path does not serve
	dial    func(t *testing.T, cfg mcphandler.Config) unknownCall
}{
	{"2025-11-25 session", []string{"prompts/list"}, func(t *testing.T, cfg mcphandler.Config) unknownCall {
		return onceCaller(dialSessions(t, cfg))
	}},
	{"2025-06-18 session", []string{"prompts/list", "tasks/get", "tasks/result"}, func(t *testing.T, cfg mcphandler.Config) unknownCall {
		return onceCaller(dialSessions(t, cfg, mcptest.WithProtocolVersion(mcphandler.Version20250618)))
	}},
	{"2025-03-26 batch member", []string{"prompts/list", "tasks/list"}, func(t *testing.T, cfg mcphandler.Config) unknownCall {
		c := dialSessions(t, cfg, mcptest.WithProtocolVersion(mcphandler.Version20250326))
		return func(t *testing.T, method string, params map[string]any) *mcptest.RPCError {
			t.Helper()
			ms, err := c.Batch(context.Background(), mcptest.BatchRequest{Method: "ping"}, mcptest.BatchRequest{Method: method, Params: params})
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) != 2 || ms[0].Error != nil {
				t.Fatalf("batch answered %+v", ms)
			}
			return ms[1].Error
		}
	}},
	{"2026-07-28", []string{"prompts/list", "tasks/list", "tasks/result"}, func(t *testing.T, cfg mcphandler.Config) unknownCall {
		srv := httptest.NewServer(mcphandler.New(cfg))
		t.Cleanup(srv.Close)
		c := mcptest.DialModern(srv.URL, mcptest.WithToken("acme-viewer"))
		t.Cleanup(c.Close)
		return onceCaller(c)
	}},
	{"2024-11-05 legacy", []string{"prompts/list", "tasks/get"}, func(t *testing.T, cfg mcphandler.Config) unknownCall {
		c := mcptest.NewLegacy(t, legacyMux(mcphandler.New(cfg)), "/sse", mcptest.WithToken("acme-viewer"))
		if _, err := c.Initialize(context.Background()); err != nil {
			t.Fatal(err)
		}
		return onceCaller(c)
	}},
	{"Config.Stateless", []string{"prompts/list", "tasks/get"}, func(t *testing.T, cfg mcphandler.Config) unknownCall {
		cfg.Stateless = true
		return onceCaller(dialSessions(t, cfg, mcptest.WithProtocolVersion(mcphandler.Version20250618)))
	}},
}

func dialSessions(t *testing.T, cfg mcphandler.Config, opts ...mcptest.Option) *mcptest.Client {
	t.Helper()
	srv := httptest.NewServer(mcphandler.New(cfg))
	t.Cleanup(srv.Close)
	return dialSessionsOn(t, srv, opts...)
}

// dialSessionsOn is an initialized 2025 client of srv for acme-viewer.
func dialSessionsOn(t *testing.T, srv *httptest.Server, opts ...mcptest.Option) *mcptest.Client {
	t.Helper()
	c := mcptest.Dial(srv.URL, append([]mcptest.Option{mcptest.WithToken("acme-viewer")}, opts...)...)
	t.Cleanup(c.Close)
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

func onceCaller(c *mcptest.Client) unknownCall {
	return func(t *testing.T, method string, params map[string]any) *mcptest.RPCError {
		t.Helper()
		m, _, err := c.CallOnce(context.Background(), method, params)
		return rpcErrorOf(t, m, err)
	}
}

// maxWireMessage bounds the message of an error that echoes a client's
// name: the name is cut to 256 bytes.
const maxWireMessage = 300

// The attacker sends a method the handler does not serve — a name no table
// has, a method of another revision, a method whose hook is not set — with
// a progressToken over MaxIDBytes and _meta naming a tool, and a name of
// 64 KiB. On every path that dispatches, the answer is -32601 whose
// message echoes at most 256 bytes of the name; interceptors still wrap
// the request, see it as mcphandler.Other with no target, and get the
// bounded message back from next.
func TestAttackUnknownMethodRecognisedFirst(t *testing.T) {
	token := strings.Repeat("t", 300) // over MaxIDBytes (256)
	long := "x/" + strings.Repeat("m", 64<<10)
	for _, era := range unknownMethodEras {
		for _, intercepted := range []bool{false, true} {
			name := era.name
			if intercepted {
				name += ", intercepted"
			}
			t.Run(name, func(t *testing.T) {
				type seen struct {
					method, target string
					res            mcphandler.Result
				}
				var mu sync.Mutex
				var saw []seen
				cfg := (&fixture{}).config()
				if intercepted {
					cfg.Interceptors = []mcphandler.Interceptor{func(ctx context.Context, req *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
						res := next(ctx)
						if req.Kind == mcphandler.KindRequest && req.Method != "initialize" && req.Method != "ping" {
							mu.Lock()
							saw = append(saw, seen{req.Method, req.Target, res})
							mu.Unlock()
						}
						return res
					}}
				}
				call := era.dial(t, cfg)
				methods := append([]string{"x/nosuch", long}, era.unknown...)
				sent := 0
				for _, method := range methods {
					for _, meta := range []map[string]any{{"progressToken": token}, {}} {
						params := map[string]any{"name": "read", "uri": "file:///a", "taskId": "t1", "_meta": meta}
						e := call(t, method, params)
						sent++
						short := method[:min(len(method), 20)]
						if e == nil || e.Code != mcphandler.CodeMethodNotFound {
							t.Errorf("%s, _meta %.20v: %+v, want -32601", short, meta, e)
							continue
						}
						if len(e.Message) > maxWireMessage {
							t.Errorf("%s: the error message has %d bytes, want at most %d", short, len(e.Message), maxWireMessage)
						}
					}
				}
				if !intercepted {
					return
				}
				// An interceptor returns after the answer was sent (on the
				// legacy stream, before it reached the client, or after).
				for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
					mu.Lock()
					n := len(saw)
					mu.Unlock()
					if n >= sent || time.Now().After(deadline) {
						break
					}
				}
				mu.Lock()
				defer mu.Unlock()
				if len(saw) != sent {
					t.Fatalf("the interceptor saw %d requests, want %d", len(saw), sent)
				}
				for _, s := range saw {
					if s.method != mcphandler.Other || s.target != "" || s.res.ErrorCode != mcphandler.CodeMethodNotFound ||
						len(s.res.ErrorMessage) > maxWireMessage {
						t.Errorf("the interceptor saw method %.40q target %.40q, result %d with a message of %d bytes; want %q, no target, -32601, at most %d bytes",
							s.method, s.target, s.res.ErrorCode, len(s.res.ErrorMessage), mcphandler.Other, maxWireMessage)
					}
				}
			})
		}
	}
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// The attacker opens sessions whose clientInfo name and version are 1 MiB
// each, on a 2025 session and on the legacy transport. The session keeps
// them cut to MaxClientInfoBytes — and nothing more: the memory store
// holds no other byte of the initialize request.
func TestAttackClientInfoRetainsNothing(t *testing.T) {
	huge := strings.Repeat("c", 1<<20) // one string for every client: the test holds 1 MiB
	const sessions = 16
	for _, era := range []string{"2025-11-25", "2024-11-05 legacy"} {
		t.Run(era, func(t *testing.T) {
			h := mcphandler.New((&fixture{}).config())
			var srv http.Handler = h
			if era != "2025-11-25" {
				srv = legacyMux(h)
			}
			before := heapInUse()
			for range sessions {
				opts := []mcptest.Option{mcptest.WithToken("acme-viewer"), mcptest.WithClientInfo(huge, huge)}
				var c *mcptest.Client
				if era == "2025-11-25" {
					c = mcptest.New(t, srv, opts...)
				} else {
					c = mcptest.NewLegacy(t, srv, "/sse", opts...)
				}
				if _, err := c.Initialize(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			grown := int64(heapInUse()) - int64(before)
			t.Logf("%s: %d sessions with 2 MiB of clientInfo each; the live heap grew by %.1f MiB", era, sessions, float64(grown)/(1<<20))
			if grown > 2*sessions<<20/8 {
				t.Errorf("the live heap grew by %d MiB for %d sessions: they keep the clientInfo they were sent", grown>>20, sessions)
			}
			runtime.KeepAlive(h)
		})
	}
}

// The attacker names a tool, a prompt and a log level of 64 KiB, on both
// eras. The error answers echo at most 256 bytes of each; interceptors get
// a Target and an ErrorMessage of at most 256 bytes, with Found false; the
// OnCall event's Tool is cut to 256 bytes too.
func TestAttackHugeNamesEchoBounded(t *testing.T) {
	long := strings.Repeat("é", 32<<10) // 64 KiB of two-byte runes: cut at a rune boundary
	for _, era := range []mcptest.Era{mcptest.Sessions, mcptest.Stateless} {
		t.Run(era.String(), func(t *testing.T) {
			f := &fixture{}
			cfg := f.config()
			cfg.ListPrompts = func(context.Context) ([]mcphandler.Prompt, error) { return []mcphandler.Prompt{{Name: "greet"}}, nil }
			type seen struct {
				method, target string
				res            mcphandler.Result
			}
			saw := make(chan seen, 16)
			cfg.Interceptors = []mcphandler.Interceptor{func(ctx context.Context, req *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
				res := next(ctx)
				if req.Kind == mcphandler.KindRequest && req.Method != "initialize" {
					saw <- seen{req.Method, req.Target, res}
				}
				return res
			}}
			srv := httptest.NewServer(mcphandler.New(cfg))
			defer srv.Close()
			c := mcptest.Dial(srv.URL, mcptest.WithEra(era), mcptest.WithToken("acme-viewer"))
			defer c.Close()
			ctx := context.Background()
			if era == mcptest.Sessions {
				if _, err := c.Initialize(ctx); err != nil {
					t.Fatal(err)
				}
			}
			calls := []struct {
				method string
				params map[string]any
			}{
				{"tools/call", map[string]any{"name": long, "arguments": map[string]any{}}},
				{"prompts/get", map[string]any{"name": long}},
			}
			if era == mcptest.Sessions {
				calls = append(calls, struct {
					method string
					params map[string]any
				}{"logging/setLevel", map[string]any{"level": long}})
			}
			for _, call := range calls {
				m, _, err := c.CallOnce(ctx, call.method, call.params)
				e := rpcErrorOf(t, m, err)
				if e == nil {
					t.Fatalf("%s of a 64 KiB name succeeded", call.method)
				}
				if e.Code != mcphandler.CodeInvalidParams || len(e.Message) > maxWireMessage {
					t.Errorf("%s of a 64 KiB name: %d, a message of %d bytes; want -32602, at most %d bytes", call.method, e.Code, len(e.Message), maxWireMessage)
				}
				select {
				case s := <-saw:
					if s.method != call.method || len(s.target) > 256 || len(s.res.ErrorMessage) > 256 || s.res.Found ||
						!utf8.ValidString(s.target) || !utf8.ValidString(s.res.ErrorMessage) {
						t.Errorf("%s: the interceptor saw %s, a target of %d bytes, a message of %d bytes, found %v",
							call.method, s.method, len(s.target), len(s.res.ErrorMessage), s.res.Found)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("%s: not intercepted", call.method)
				}
			}
			if ev := f.event(t); ev.Outcome != mcphandler.OutcomeNotFound || len(ev.Tool) > 256 || !utf8.ValidString(ev.Tool) {
				t.Errorf("OnCall: outcome %s, a tool of %d bytes", ev.Outcome, len(ev.Tool))
			}
			// A tool the caller may see is found, and named in full.
			if _, err := c.CallTool(ctx, "read", nil); err != nil {
				t.Fatal(err)
			}
			if s := <-saw; s.target != "read" || !s.res.Found {
				t.Errorf("a found tool: target %q, found %v", s.target, s.res.Found)
			}
		})
	}
}

// The attacker sends a protocol version of 64 KiB: in the
// MCP-Protocol-Version header of an initialize, a session's POST, a batch
// and a GET, and in a 2026-07-28 request's _meta (against its header, and
// with a header that repeats it). Every refusal quotes at most 256 bytes
// of it.
func TestAttackVersionEchoBounded(t *testing.T) {
	old := "2025-" + strings.Repeat("9", 64<<10) // sorts before 2026-07-28: a 2025 path refuses it
	long := strings.Repeat("9", 64<<10)          // sorts after: a 2026-07-28 request
	cfg := (&fixture{}).config()
	streams := make(chan mcphandler.Request, 1)
	cfg.Interceptors = []mcphandler.Interceptor{func(ctx context.Context, req *mcphandler.Request, next func(context.Context) mcphandler.Result) mcphandler.Result {
		if req.Kind == mcphandler.KindStream {
			streams <- *req
		}
		return next(ctx)
	}}
	srv := httptest.NewServer(mcphandler.New(cfg))
	defer srv.Close()
	c := dialSessionsOn(t, srv)
	ctx := context.Background()
	check := func(what string, status int, body []byte) {
		t.Helper()
		if status != http.StatusBadRequest || len(body) > 600 {
			t.Errorf("%s: %d with a body of %d bytes, want 400 and at most 600 bytes: %.120s", what, status, len(body), body)
		}
	}
	hdr := http.Header{"Mcp-Protocol-Version": {old}}
	for _, r := range []struct{ what, method, body string }{
		{"initialize", "POST", initBody},
		{"a session's ping", "POST", `{"jsonrpc":"2.0","id":7,"method":"ping"}`},
		{"a batch", "POST", `[{"jsonrpc":"2.0","id":8,"method":"ping"}]`},
		{"a GET stream", "GET", ""},
	} {
		resp, err := c.Do(ctx, r.method, []byte(r.body), hdr)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		check(r.what, resp.StatusCode, b)
	}
	// The GET's interceptor saw the header as Other, and a session id
	// header of 64 KiB cut to 256 bytes.
	if req := <-streams; req.ProtocolVersion != mcphandler.Other {
		t.Errorf("a GET's interceptor saw a version of %d bytes, want %s", len(req.ProtocolVersion), mcphandler.Other)
	}
	resp, err := c.Do(ctx, "GET", nil, http.Header{"Mcp-Session-Id": {old}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if req := <-streams; len(req.SessionID) != 256 || resp.StatusCode != http.StatusNotFound {
		t.Errorf("a GET with a session id of 64 KiB: %d; its interceptor saw %d bytes of it, want 404 and 256", resp.StatusCode, len(req.SessionID))
	}
	modern := `{"jsonrpc":"2.0","id":9,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` + long +
		`","io.modelcontextprotocol/clientCapabilities":{}}}}`
	status, _, b := modernPost(t, srv, "acme-viewer", modern, nil)
	check("2026-07-28, a header that differs from _meta", status, b)
	status, _, b = modernPost(t, srv, "acme-viewer", modern, func(h http.Header) { h.Set("MCP-Protocol-Version", long) })
	check("2026-07-28, an unsupported version", status, b)
}

// endsOnUpdate is a store in which every session ends just before it is
// updated (a DELETE on another replica, a 2024-11-05 stream closed right
// after its last answer), or whose Update fails with fail.
type endsOnUpdate struct {
	session.Store
	fail error
}

func (s *endsOnUpdate) Update(ctx context.Context, sess *session.Session) error {
	if s.fail != nil {
		return s.fail
	}
	s.Store.Delete(ctx, sess.ID)
	return s.Store.Update(ctx, sess)
}

// TestInitializedForEndedSession: notifications/initialized for a session
// that ended between its read and its update is no store failure: nothing
// is logged as an error (a real failure of the update still is).
func TestInitializedForEndedSession(t *testing.T) {
	for name, c := range map[string]struct {
		fail      error
		wantError bool
	}{
		"ended":       {nil, false},
		"unavailable": {session.ErrUnavailable, true},
	} {
		t.Run(name, func(t *testing.T) {
			var log syncBuffer
			h := mcphandler.New(mcphandler.Config{Authenticate: bearer, StateKeys: testStateKeys,
				Store:     &endsOnUpdate{Store: session.NewMemory(), fail: c.fail},
				Logger:    slog.New(slog.NewTextHandler(&log, nil)),
				ListTools: func(context.Context) ([]mcphandler.Tool, error) { return nil, nil }})
			t.Cleanup(func() { h.Close() })
			post := func(body, sid string) *httptest.ResponseRecorder {
				req := httptest.NewRequest("POST", "/", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer acme-admin")
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				if sid != "" {
					req.Header.Set("Mcp-Session-Id", sid)
					req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				return rec
			}
			sid := post(initBody, "").Header().Get("Mcp-Session-Id")
			if sid == "" {
				t.Fatal("no session")
			}
			if rec := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, sid); rec.Code != http.StatusAccepted {
				t.Fatalf("notifications/initialized: %d %s", rec.Code, rec.Body)
			}
			if got := strings.Contains(log.String(), "level=ERROR"); got != c.wantError {
				t.Fatalf("logged an error: %v, want %v\n%s", got, c.wantError, log.String())
			}
		})
	}
}
