package mcphandler_test

// Attacks on what a session keeps and decides: its negotiated version,
// the bounds on what a client may store in it, and how many sessions one
// identity may hold, in memory and in Redis shared by replicas.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
	"github.com/mcphandler/mcphandler/session"
	"github.com/mcphandler/mcphandler/session/redisstore"
	"github.com/mcphandler/mcphandler/session/redisstore/redistest"
)

// The attacker negotiated 2025-11-25 and then sends another revision's
// MCP-Protocol-Version header, hoping to get what that revision allows: a
// JSON-RPC batch (2025-03-26 only, where confirms cannot be asked), or the
// older elicitation format. The session's negotiated version decides; a
// header that contradicts it is 400 -32600 on POST, GET and DELETE, and
// changes nothing in the session.
func TestAttackVersionHeaderContradictsSession(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	ctx := context.Background()
	c := connect(t, h, "acme-admin")
	if c.ProtocolVersion() != "2025-11-25" {
		t.Fatalf("negotiated %s", c.ProtocolVersion())
	}
	ping := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	batch := []byte(`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_thing"}}]`)
	for _, tc := range []struct {
		name, method, version string
		body                  []byte
	}{
		{"batch under 2025-03-26", "POST", "2025-03-26", batch},
		{"request under 2025-03-26", "POST", "2025-03-26", ping},
		{"request under 2025-06-18", "POST", "2025-06-18", ping},
		{"GET under 2025-03-26", "GET", "2025-03-26", nil},
		{"DELETE under 2025-06-18", "DELETE", "2025-06-18", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second) // a GET that is served streams
			defer cancel()
			resp, err := c.Do(ctx, tc.method, tc.body, http.Header{mcptest.HeaderProtocolVersion: {tc.version}})
			if err != nil {
				t.Fatal(err)
			}
			he := newHTTPErrorFrom(resp)
			if he.Status != http.StatusBadRequest || !strings.Contains(string(he.Body), `"code":-32600`) {
				t.Fatalf("%s with MCP-Protocol-Version %s: %d %s, want 400 -32600", tc.method, tc.version, he.Status, he.Body)
			}
		})
	}
	if n := f.count("delete_thing"); n != 0 {
		t.Fatalf("the batched destructive call ran %d times", n)
	}
	// The session is intact, and without the header its version applies.
	c.SetProtocolVersion("")
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("ping without the header: %v", err)
	}
	c.SetProtocolVersion("2025-11-25")
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("ping with the negotiated version: %v", err)
	}

	// A 2025-03-26 session cannot claim a newer revision either.
	old := connect(t, h, "acme-viewer", mcptest.WithProtocolVersion("2025-03-26"))
	old.SetProtocolVersion("2025-11-25")
	var he *mcptest.HTTPError
	if err := old.Ping(ctx); !errors.As(err, &he) || he.Status != http.StatusBadRequest {
		t.Fatalf("2025-03-26 session claiming 2025-11-25: %v, want 400", err)
	}
}

// boundsHost serves a template every caller may subscribe through.
func boundsConfig(store session.Store) mcphandler.Config {
	f := &fixture{}
	cfg := f.config()
	cfg.OnCall = nil
	cfg.Store, cfg.StateKeys = store, testStateKeys
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.ListResourceTemplates = func(context.Context) ([]mcphandler.ResourceTemplate, error) {
		return []mcphandler.ResourceTemplate{{URITemplate: "docs://{id}", Name: "doc"}}, nil
	}
	cfg.ReadResource = func(_ context.Context, req *mcphandler.ResourceRequest) ([]mcphandler.ResourceContents, error) {
		return []mcphandler.ResourceContents{{URI: req.URI, Text: "x"}}, nil
	}
	return cfg
}

// recordSize is the size of a stored session as the store keeps it.
type recordSize func(t *testing.T, sid string) int

func memoryRecordSize(st *session.Memory) recordSize {
	return func(t *testing.T, sid string) int {
		s, err := st.Get(context.Background(), sid)
		if err != nil {
			t.Fatal(err)
		}
		n := len(s.ID) + len(s.Owner) + len(s.ProtocolVersion) + len(s.ClientName) + len(s.ClientVersion) + len(s.LogLevel)
		for _, u := range s.Subscriptions {
			n += len(u)
		}
		return n
	}
}

// The attacker fills everything a client can make a session keep, each to
// its limit and beyond: a megabyte of client name and version, as many
// and as long subscription URIs as accepted and then more, a megabyte of
// progress token and of request id. What is past a limit is refused with
// an error naming it (client info is kept cut short), and the stored
// record stays under 10 KB in memory and in Redis, where a request of the
// session reads it every time.
func TestAttackSessionRecordStaysSmall(t *testing.T) {
	stores := map[string]func(t *testing.T) (session.Store, recordSize){
		"memory": func(t *testing.T) (session.Store, recordSize) {
			st := session.NewMemory()
			return st, memoryRecordSize(st)
		},
		"redis": func(t *testing.T) (session.Store, recordSize) {
			c := redistest.Client(t)
			prefix := redistest.Prefix(t, c)
			st := redisstore.New(c, redisstore.Options{Prefix: prefix})
			t.Cleanup(func() { st.Close() })
			return st, func(t *testing.T, sid string) int {
				n, err := c.StrLen(context.Background(), prefix+"{"+sid+"}:s").Result()
				if err != nil || n == 0 {
					t.Fatalf("STRLEN of the session record: %d, %v", n, err)
				}
				return int(n)
			}
		},
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			st, size := newStore(t)
			h := mcphandler.New(boundsConfig(st))
			ctx := context.Background()
			huge := strings.Repeat("é", 1<<19) // 1 MiB of UTF-8
			c := connect(t, h, "acme-viewer", mcptest.WithClientInfo(huge, huge))
			sid := c.SessionID()

			uri := func(i int, n int) string {
				u := "docs://" + strconv.Itoa(i) + "-"
				return u + strings.Repeat("a", n-len(u))
			}
			for i := range 16 {
				if _, err := c.Call(ctx, "resources/subscribe", map[string]any{"uri": uri(i, 512)}); err != nil {
					t.Fatalf("subscription %d of 512 bytes: %v", i, err)
				}
			}
			if _, err := c.Call(ctx, "resources/subscribe", map[string]any{"uri": uri(16, 100)}); !isRPC(err, -32602) || !strings.Contains(err.Error(), "16") {
				t.Fatalf("the 17th subscription: %v, want -32602 naming the limit", err)
			}
			if _, err := c.Call(ctx, "resources/unsubscribe", map[string]any{"uri": uri(0, 512)}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Call(ctx, "resources/subscribe", map[string]any{"uri": uri(17, 513)}); !isRPC(err, -32602) || !strings.Contains(err.Error(), "512") {
				t.Fatalf("a subscription of 513 bytes: %v, want -32602 naming the limit", err)
			}
			if _, err := c.Call(ctx, "resources/subscribe", map[string]any{"uri": uri(0, 512)}); err != nil {
				t.Fatalf("subscribing again after an unsubscribe: %v", err)
			}

			// A megabyte of progress token, and of request id.
			tok, _ := json.Marshal(strings.Repeat("t", 1<<20))
			body := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"read","_meta":{"progressToken":` + string(tok) + `}}}`
			he := postRaw(t, c, body)
			if !strings.Contains(string(he.Body), `"code":-32602`) || !strings.Contains(string(he.Body), "256") || len(he.Body) > 1024 {
				t.Fatalf("a 1 MiB progress token: %d %.300s, want -32602 naming the limit", he.Status, he.Body)
			}
			body = `{"jsonrpc":"2.0","id":` + string(tok) + `,"method":"ping"}`
			he = postRaw(t, c, body)
			if he.Status != http.StatusBadRequest || !strings.Contains(string(he.Body), `"code":-32600`) || len(he.Body) > 1024 {
				t.Fatalf("a 1 MiB request id: %d %.300s, want 400 -32600 without the id", he.Status, he.Body)
			}
			got := size(t, sid)
			if got > 10<<10 {
				t.Fatalf("the session record holds %d bytes, want at most 10 KiB", got)
			}
			s, err := st.Get(ctx, sid)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.ClientName) != 256 || !strings.HasPrefix(huge, s.ClientName) || len(s.Subscriptions) != 16 {
				t.Fatalf("kept client name of %d bytes and %d subscriptions, want 256 bytes (a prefix) and 16", len(s.ClientName), len(s.Subscriptions))
			}
			t.Logf("%s: the record of a session filled to every limit holds %d bytes", name, got)
		})
	}
}

// The attacker opens a listen stream whose filter names more URIs than a
// session may subscribe to, or a URI longer than the limit: refused with
// -32602 naming the limit, and no list hook runs for it.
func TestAttackListenFilterBounds(t *testing.T) {
	cfg := boundsConfig(session.NewMemory())
	var lists atomic.Int64
	cfg.ListResourceTemplates = func(context.Context) ([]mcphandler.ResourceTemplate, error) {
		lists.Add(1)
		return []mcphandler.ResourceTemplate{{URITemplate: "docs://{id}", Name: "doc"}}, nil
	}
	h := mcphandler.New(cfg)
	m := mcptest.NewModern(t, h, mcptest.WithToken("acme-viewer"))
	many := make([]string, 17)
	for i := range many {
		many[i] = "docs://" + strconv.Itoa(i)
	}
	for name, filter := range map[string][]string{
		"17 URIs":        many,
		"a 513-byte URI": {"docs://" + strings.Repeat("a", 506)},
	} {
		_, err := m.Listen(context.Background(), map[string]any{"resourceSubscriptions": filter})
		if err == nil || !strings.Contains(err.Error(), "-32602") {
			t.Fatalf("%s: %v, want -32602", name, err)
		}
	}
	if n := lists.Load(); n != 0 {
		t.Fatalf("the list hook ran %d times for refused filters", n)
	}
}

// The attacker, holding one valid token, opens session after session
// (initialize without DELETE) to fill the store. An identity keeps at most
// MaxSessionsPerIdentity sessions, across replicas sharing Redis: each
// initialize past it ends the identity's oldest session — requests with
// its id get 404 on every replica and its GET stream ends — and leaves
// every other identity's sessions alone.
func TestAttackSessionsPerIdentity(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func(t *testing.T, cfg mcphandler.Config) string
	}{
		{"memory", func(t *testing.T, cfg mcphandler.Config) string {
			srv := httptest.NewServer(mcphandler.New(cfg))
			t.Cleanup(srv.Close)
			return srv.URL
		}},
		{"redis, two replicas", func(t *testing.T, cfg mcphandler.Config) string {
			return newCluster(t, 2, cfg, redisClient(t)).proxy.URL
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := (&fixture{}).config()
			cfg.OnCall = nil
			cfg.Limits.MaxSessionsPerIdentity = 3
			url := tc.url(t, cfg)
			ctx := context.Background()
			dial := func(token string) *mcptest.Client {
				c := mcptest.Dial(url, mcptest.WithToken(token))
				t.Cleanup(c.Close)
				if _, err := c.Initialize(ctx); err != nil {
					t.Fatal(err)
				}
				return c
			}
			carol := dial("globex-editor")
			first := dial("acme-viewer")
			stream, err := first.OpenStream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			rest := []*mcptest.Client{dial("acme-viewer"), dial("acme-viewer")}
			if err := first.Ping(ctx); err != nil {
				t.Fatalf("the oldest of three sessions: %v", err)
			}
			rest = append(rest, dial("acme-viewer")) // the fourth
			for range 2 {                            // both replicas
				if err := first.Ping(ctx); !isHTTP(err, http.StatusNotFound) {
					t.Fatalf("the oldest session after a fourth initialize: %v, want 404", err)
				}
			}
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			for {
				if _, err := stream.Next(sctx); err != nil {
					if sctx.Err() != nil {
						t.Fatal("the ended session's GET stream is still open")
					}
					break
				}
			}
			for i, c := range append(rest, carol) {
				if err := c.Ping(ctx); err != nil {
					t.Fatalf("session %d after the limit was enforced: %v", i, err)
				}
			}
		})
	}
}

// Legacy HTTP+SSE sessions count toward the same limit: the attacker
// cannot hold more by mixing transports, and an ended legacy session's
// stream closes.
func TestAttackSessionsPerIdentityLegacy(t *testing.T) {
	cfg := (&fixture{}).config()
	cfg.OnCall = nil
	cfg.Limits.MaxSessionsPerIdentity = 1
	h := mcphandler.New(cfg)
	srv := httptest.NewServer(legacyMux(h))
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest("GET", srv.URL+"/sse", nil)
	req.Header.Set("Authorization", "Bearer acme-viewer")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ended := make(chan struct{})
	go func() { io.Copy(io.Discard, resp.Body); close(ended) }()
	connect(t, h, "acme-viewer") // a Streamable HTTP session of the same identity
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the legacy stream of the ended session is still open")
	}
}

// getCounter is a store whose session reads are counted.
type getCounter struct {
	session.Store
	gets atomic.Int64
}

func (g *getCounter) Get(ctx context.Context, id string) (*session.Session, error) {
	g.gets.Add(1)
	return g.Store.Get(ctx, id)
}

// The attacker sends session ids the handler never issued to it — huge,
// one character off, another alphabet, another identity's — on every path
// that names a session (POST, GET, DELETE, the legacy message endpoint),
// hoping to make the store look up (or, on Redis, send) whatever it chose.
// Only an id carrying the caller's tag is looked up; the others are
// unknown sessions, answered 404 exactly as an ended session of the
// caller, without a store read.
func TestAttackSessionIDNeverReachesStore(t *testing.T) {
	f := &fixture{}
	store := &getCounter{Store: session.NewMemory()}
	cfg := f.config()
	cfg.Store, cfg.StateKeys = store, testStateKeys
	h := mcphandler.New(cfg)
	defer h.Close()
	sse, messages := h.LegacySSE("/messages")
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/sse", sse)
	mux.Handle("/messages", messages)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	do := func(method, url, sid, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer acme-admin")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// An ended session of the caller: looked up, and unknown.
	ended := connect(t, h, "acme-admin").SessionID()
	if status, _ := do("DELETE", srv.URL+"/mcp", ended, ""); status != http.StatusNoContent {
		t.Fatalf("DELETE: %d", status)
	}
	store.gets.Store(0)
	_, unknown := do("POST", srv.URL+"/mcp", ended, ping)
	if n := store.gets.Swap(0); n != 1 {
		t.Fatalf("an ended session of the caller made %d store reads, want 1", n)
	}
	others := connect(t, h, "acme-viewer").SessionID()
	store.gets.Store(0)
	flip := func(s string, i int) string {
		b := []byte(s)
		b[i] = "AB"[b[i]&1] // another base32 character
		return string(b)
	}
	for _, sid := range []string{
		strings.Repeat("A", 64<<10),
		ended + "A",
		ended[:len(ended)-1],
		ended[:26], // the random part alone, as earlier releases issued
		strings.ToLower(ended),
		flip(ended, 0),             // another random part under this tag
		flip(ended, len(ended)-1),  // another tag
		ended[:len(ended)-1] + "1", // not base32
		ended[:len(ended)-1] + "=",
		others, // another identity's live session
	} {
		for _, tc := range []struct{ method, url, sid, body string }{
			{"POST", srv.URL + "/mcp", sid, ping},
			{"GET", srv.URL + "/mcp", sid, ""},
			{"DELETE", srv.URL + "/mcp", sid, ""},
			{"POST", srv.URL + "/messages?sessionId=" + url.QueryEscape(sid), "", ping},
		} {
			status, body := do(tc.method, tc.url, tc.sid, tc.body)
			if status != http.StatusNotFound {
				t.Errorf("%s %s with a %d-byte id: %d %.200s, want 404", tc.method, tc.url[len(srv.URL):min(len(tc.url), len(srv.URL)+20)], len(sid), status, body)
			}
			if tc.method == "POST" && tc.sid != "" && body != unknown {
				t.Errorf("a %d-byte id answers %.200s, an ended session %s", len(sid), body, unknown)
			}
		}
		if n := store.gets.Swap(0); n != 0 {
			t.Errorf("an id of %d bytes the handler never issued to this caller made %d store reads", len(sid), n)
		}
	}
}
