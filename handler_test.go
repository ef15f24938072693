package mcphandler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

func TestIdentitiesSeeTheirOwnTools(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	for _, tc := range []struct {
		token string
		want  string
	}{
		{"acme-viewer", "read,delete_thing,acme_only"},
		{"acme-admin", "read,admin_op,delete_thing,acme_only"},
		{"globex-editor", "read,delete_thing"},
	} {
		t.Run(tc.token, func(t *testing.T) {
			c := connect(t, h, tc.token)
			if got := strings.Join(toolNames(t, c), ","); got != tc.want {
				t.Fatalf("tools = %s, want %s", got, tc.want)
			}
		})
	}
}

// A tool hidden by tenant or role is never run, and refusing it is
// byte-for-byte the answer for a tool that does not exist.
func TestHiddenToolNeverRuns(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	c := connect(t, h, "globex-editor")
	raw := func(name string) string {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":%q}}`, name)
		resp, err := c.Post(context.Background(), []byte(body), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, bytes.ReplaceAll(b, []byte(name), []byte("NAME")))
	}
	unknown := raw("no_such_tool")
	if !strings.Contains(unknown, `"code":-32602`) {
		t.Fatalf("unknown tool answer: %s", unknown)
	}
	for _, name := range []string{"acme_only", "admin_op"} {
		if got := raw(name); got != unknown {
			t.Errorf("hidden %s answered\n%s\nunknown tool answered\n%s", name, got, unknown)
		}
		if n := f.count(name); n != 0 {
			t.Errorf("hidden tool %s ran %d times", name, n)
		}
	}
	for range 3 {
		if ev := f.event(t); ev.Outcome != mcphandler.OutcomeNotFound {
			t.Errorf("outcome = %s, want not_found", ev.Outcome)
		}
	}
}

func TestSessionBoundToIdentity(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	alice := connect(t, h, "acme-viewer")
	for _, token := range []string{"acme-admin", "globex-editor"} {
		mallory := mcptest.New(t, h, mcptest.WithToken(token))
		mallory.SetSessionID(alice.SessionID())
		mallory.SetProtocolVersion("2025-11-25")
		_, err := mallory.Call(context.Background(), "tools/list", nil)
		var he *mcptest.HTTPError
		if !errors.As(err, &he) || he.Status != http.StatusNotFound {
			t.Fatalf("%s replaying alice's session: err = %v, want HTTP 404", token, err)
		}
	}
	if _, err := alice.ListTools(context.Background()); err != nil {
		t.Fatalf("alice's own session broke: %v", err)
	}
}

func TestAuthenticationChallenge(t *testing.T) {
	f := &fixture{}
	cfg := f.config()
	h := mcphandler.New(cfg)
	c := mcptest.New(t, h, mcptest.WithToken("wrong"))
	_, err := c.Initialize(context.Background())
	var he *mcptest.HTTPError
	if !errors.As(err, &he) || he.Status != 401 || he.Header.Get("WWW-Authenticate") != `Bearer realm="mcp"` {
		t.Fatalf("err = %v; want 401 with the default challenge", err)
	}
	cfg.Challenge = func(r *http.Request, err error) string {
		return `Bearer resource_metadata="https://example.com/.well-known/oauth-protected-resource"`
	}
	c = mcptest.New(t, mcphandler.New(cfg))
	_, err = c.Initialize(context.Background())
	if !errors.As(err, &he) || he.Status != 401 || !strings.Contains(he.Header.Get("WWW-Authenticate"), "resource_metadata") {
		t.Fatalf("err = %v; want 401 with the custom challenge", err)
	}
	cfg.Authenticate = func(*http.Request) (mcphandler.Identity, error) {
		return mcphandler.Identity{}, fmt.Errorf("suspended: %w", mcphandler.ErrForbidden)
	}
	c = mcptest.New(t, mcphandler.New(cfg))
	if _, err = c.Initialize(context.Background()); !errors.As(err, &he) || he.Status != 403 {
		t.Fatalf("err = %v; want 403", err)
	}
	cfg.Authenticate = func(*http.Request) (mcphandler.Identity, error) {
		return mcphandler.Identity{}, fmt.Errorf("issuer down: %w", mcphandler.ErrAuthUnavailable)
	}
	c = mcptest.New(t, mcphandler.New(cfg))
	if _, err = c.Initialize(context.Background()); !errors.As(err, &he) || he.Status != 503 || he.Header.Get("Retry-After") == "" {
		t.Fatalf("err = %v; want 503 with Retry-After", err)
	}
}

// TestTransportErrors checks the spec answer of each malformed request.
func TestTransportErrors(t *testing.T) {
	f := &fixture{}
	cfg := f.config()
	cfg.Limits.MaxBodyBytes = 1 << 10
	h := mcphandler.New(cfg)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := connect(t, h, "acme-viewer")
	sid := c.SessionID()

	std := func() http.Header {
		return http.Header{
			"Authorization":        {"Bearer acme-viewer"},
			"Content-Type":         {"application/json"},
			"Accept":               {"application/json, text/event-stream"},
			"Mcp-Session-Id":       {sid},
			"Mcp-Protocol-Version": {"2025-11-25"},
		}
	}
	with := func(mod func(http.Header)) http.Header { h := std(); mod(h); return h }
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for _, tc := range []struct {
		name   string
		method string
		header http.Header
		body   string
		status int
		code   int // JSON-RPC error code in the body, 0 for none
	}{
		{"bad JSON", "POST", std(), `{"jsonrpc":`, 400, -32700},
		{"not an object", "POST", std(), `"hello"`, 400, -32600},
		{"wrong jsonrpc", "POST", std(), `{"jsonrpc":"1.0","id":1,"method":"ping"}`, 400, -32600},
		{"null id", "POST", std(), `{"jsonrpc":"2.0","id":null,"method":"ping"}`, 400, -32600},
		{"params not object", "POST", std(), `{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}`, 400, -32600},
		{"unknown method", "POST", std(), `{"jsonrpc":"2.0","id":1,"method":"nope/nope"}`, 200, -32601},
		{"missing session", "POST", with(func(h http.Header) { h.Del("Mcp-Session-Id") }), ping, 400, -32600},
		{"unknown session", "POST", with(func(h http.Header) { h.Set("Mcp-Session-Id", "nope") }), ping, 404, -32600},
		{"bad protocol version", "POST", with(func(h http.Header) { h.Set("Mcp-Protocol-Version", "1999-01-01") }), ping, 400, -32600},
		{"bad Accept", "POST", with(func(h http.Header) { h.Set("Accept", "text/html") }), ping, 406, -32600},
		{"JSON-only Accept", "POST", with(func(h http.Header) { h.Set("Accept", "application/json") }), ping, 406, -32600},
		{"bad Content-Type", "POST", with(func(h http.Header) { h.Set("Content-Type", "text/plain") }), ping, 415, -32600},
		{"foreign Origin", "POST", with(func(h http.Header) { h.Set("Origin", "https://evil.example") }), ping, 403, -32600},
		{"oversized body", "POST", std(), `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 2048) + `"}}`, 413, -32600},
		{"batch outside 2025-03-26", "POST", std(), `[` + ping + `]`, 400, -32600},
		{"stray response", "POST", std(), `{"jsonrpc":"2.0","id":"mcph-nope","result":{}}`, 400, -32600},
		{"no token", "POST", with(func(h http.Header) { h.Del("Authorization") }), ping, 401, -32600},
		{"PUT", "PUT", std(), ping, 405, -32600},
		{"GET without SSE Accept", "GET", with(func(h http.Header) { h.Set("Accept", "application/json") }), "", 406, -32600},
		{"GET without session", "GET", with(func(h http.Header) { h.Del("Mcp-Session-Id"); h.Set("Accept", "text/event-stream") }), "", 400, -32600},
		{"DELETE unknown session", "DELETE", with(func(h http.Header) { h.Set("Mcp-Session-Id", "nope") }), "", 404, -32600},
		{"ping ok", "POST", std(), ping, 200, 0},
		{"same-host Origin", "POST", with(func(h http.Header) { h.Set("Origin", srv.URL) }), ping, 200, 0},
		{"notification", "POST", std(), `{"jsonrpc":"2.0","method":"notifications/whatever"}`, 202, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, srv.URL, strings.NewReader(tc.body))
			req.Header = tc.header
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, tc.status, b)
			}
			if tc.status == 202 && len(b) != 0 {
				t.Fatalf("202 with a body: %s", b)
			}
			var m struct {
				JSONRPC string `json:"jsonrpc"`
				Error   *struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			if len(b) > 0 {
				if err := json.Unmarshal(b, &m); err != nil || m.JSONRPC != "2.0" {
					t.Fatalf("body is not a JSON-RPC message: %s", b)
				}
			}
			switch {
			case tc.code == 0 && m.Error != nil:
				t.Fatalf("unexpected error %s", b)
			case tc.code != 0 && (m.Error == nil || m.Error.Code != tc.code):
				t.Fatalf("body %s, want error code %d", b, tc.code)
			}
		})
	}
}

func TestLoopbackHostCheck(t *testing.T) {
	f := &fixture{}
	srv := httptest.NewServer(mcphandler.New(f.config()))
	t.Cleanup(srv.Close)
	post := func(host, origin string) int {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(initBody))
		req.Host = host
		req.Header.Set("Authorization", "Bearer acme-viewer")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	own := strings.TrimPrefix(srv.URL, "http://")
	if got := post("evil.example.com", "http://evil.example.com"); got != 403 {
		t.Errorf("rebinding attempt: %d, want 403", got)
	}
	if got := post(own, "http://"+own); got != 200 {
		t.Errorf("own origin: %d, want 200", got)
	}
	if got := post("localhost:1234", ""); got != 200 {
		t.Errorf("localhost host: %d, want 200", got)
	}
}

func TestAllowedOrigins(t *testing.T) {
	f := &fixture{}
	cfg := f.config()
	cfg.AllowedOrigins = []string{"https://app.example.com"}
	srv := httptest.NewServer(mcphandler.New(cfg))
	t.Cleanup(srv.Close)
	for origin, want := range map[string]int{"https://app.example.com": 200, "https://APP.example.com": 200, srv.URL: 403, "https://other.example.com": 403} {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(initBody))
		req.Header.Set("Authorization", "Bearer acme-viewer")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "*/*")
		req.Header.Set("Origin", origin)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Origin %s: %d, want %d", origin, resp.StatusCode, want)
		}
	}
}

func TestInitializeNegotiation(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	for requested, want := range map[string]string{
		"2025-11-25": "2025-11-25", "2025-06-18": "2025-06-18", "2025-03-26": "2025-03-26",
		"2024-11-05": "2025-11-25", "2099-01-01": "2025-11-25",
	} {
		c := mcptest.New(t, h, mcptest.WithToken("acme-viewer"), mcptest.WithProtocolVersion(requested))
		res, err := c.Initialize(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.ProtocolVersion != want {
			t.Errorf("requested %s: negotiated %s, want %s", requested, res.ProtocolVersion, want)
		}
		if len(c.SessionID()) < 22 {
			t.Errorf("session id %q is shorter than 128 bits of base32", c.SessionID())
		}
		for _, b := range []byte(c.SessionID()) {
			if b < 0x21 || b > 0x7e {
				t.Errorf("session id %q has a non-visible byte", c.SessionID())
			}
		}
		var caps map[string]json.RawMessage
		json.Unmarshal(res.Capabilities, &caps)
		if _, ok := caps["tools"]; !ok || res.ServerInfo.Name != "test" {
			t.Errorf("initialize result %s", res.Raw)
		}
	}
	// Without ListTools the server declares no tools and tools/list is unknown.
	c := connect(t, mcphandler.New(mcphandler.Config{}), "")
	if _, err := c.Call(context.Background(), "tools/list", nil); !isRPC(err, -32601) {
		t.Fatalf("tools/list without tools: %v", err)
	}
}

func TestPerTenantServerInfo(t *testing.T) {
	f := &fixture{}
	cfg := f.config()
	cfg.ServerInfo = func(ctx context.Context) mcphandler.ServerInfo {
		id, _ := mcphandler.IdentityFrom(ctx)
		return mcphandler.ServerInfo{Name: id.Tenant + "-mcp", Version: "2", Instructions: "Hello " + id.Tenant}
	}
	h := mcphandler.New(cfg)
	c := mcptest.New(t, h, mcptest.WithToken("globex-editor"))
	res, err := c.Initialize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.ServerInfo.Name != "globex-mcp" || res.Instructions != "Hello globex" {
		t.Fatalf("initialize result %s", res.Raw)
	}
}

func TestDeleteEndsSession(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	c := connect(t, h, "acme-viewer")
	if err := c.Delete(context.Background()); err != nil {
		t.Fatalf("DELETE: %v", err)
	}
	err := c.Ping(context.Background())
	var he *mcptest.HTTPError
	if !errors.As(err, &he) || he.Status != 404 {
		t.Fatalf("after DELETE: %v, want 404", err)
	}
}

func TestSessionExpires(t *testing.T) {
	f := &fixture{}
	cfg := f.config()
	cfg.Sessions.TTL = 100 * time.Millisecond
	h := mcphandler.New(cfg)
	c := connect(t, h, "acme-viewer")
	time.Sleep(250 * time.Millisecond)
	var he *mcptest.HTTPError
	if err := c.Ping(context.Background()); !errors.As(err, &he) || he.Status != 404 {
		t.Fatalf("idle session: %v, want 404", err)
	}
}

func TestGETStream(t *testing.T) {
	f := &fixture{}
	h := mcphandler.New(f.config())
	c := connect(t, h, "acme-viewer")
	ctx := context.Background()
	s, err := c.OpenStream(ctx)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	ev, err := s.Next(ctx)
	if err != nil || ev.ID == "" || ev.Retry <= 0 {
		t.Fatalf("priming event = %+v, %v; want an id and a retry", ev, err)
	}
	_, err = c.OpenStream(ctx)
	var he *mcptest.HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusConflict {
		t.Fatalf("second GET: %v, want 409", err)
	}
	if err := c.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(ctx); err == nil {
		t.Fatal("the GET stream outlived its session")
	}
	s.Close()
}

func TestStateless(t *testing.T) {
	f := &fixture{}
	cfg := f.config()
	cfg.Stateless = true
	h := mcphandler.New(cfg)
	c := connect(t, h, "acme-admin", mcptest.WithElicitationHandler(func(context.Context, mcptest.ElicitParams) (mcptest.ElicitResult, error) {
		t.Error("a stateless server asked the client")
		return mcptest.ElicitResult{Action: "accept"}, nil
	}))
	if c.SessionID() != "" {
		t.Fatalf("stateless server issued session %q", c.SessionID())
	}
	if names := toolNames(t, c); len(names) != 4 {
		t.Fatalf("tools = %v", names)
	}
	res, err := c.CallTool(context.Background(), "delete_thing", nil)
	if err != nil || !res.IsError || !strings.Contains(res.Text(), "confirmation") {
		t.Fatalf("confirm without a session = %+v, %v; want a fail-closed tool error", res, err)
	}
	if n := f.count("delete_thing"); n != 0 {
		t.Fatalf("unconfirmed tool ran %d times", n)
	}
	if _, err := c.OpenStream(context.Background()); err == nil {
		t.Fatal("GET on a stateless server succeeded")
	}
}

// An allowed browser origin gets CORS headers, and its preflight succeeds;
// a foreign one is refused before any of it.
func TestCORS(t *testing.T) {
	f := &fixture{}
	cfg := f.config()
	cfg.AllowedOrigins = []string{"https://app.example.com"}
	srv := httptest.NewServer(mcphandler.New(cfg))
	t.Cleanup(srv.Close)
	do := func(method, origin string) *http.Response {
		req, _ := http.NewRequest(method, srv.URL, strings.NewReader(initBody))
		req.Header.Set("Origin", origin)
		req.Header.Set("Authorization", "Bearer acme-viewer")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Access-Control-Request-Headers", "authorization, mcp-session-id")
		if method == "OPTIONS" {
			req.Header.Set("Access-Control-Request-Method", "POST")
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	pre := do("OPTIONS", "https://app.example.com")
	if pre.StatusCode != 204 || pre.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		pre.Header.Get("Access-Control-Allow-Headers") != "authorization, mcp-session-id" {
		t.Fatalf("preflight: %d %v", pre.StatusCode, pre.Header)
	}
	post := do("POST", "https://app.example.com")
	if post.StatusCode != 200 || !strings.Contains(post.Header.Get("Access-Control-Expose-Headers"), "Mcp-Session-Id") {
		t.Fatalf("POST: %d %v", post.StatusCode, post.Header)
	}
	if evil := do("OPTIONS", "https://evil.example.com"); evil.StatusCode != 403 || evil.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("foreign preflight: %d %v", evil.StatusCode, evil.Header)
	}
}
