package auth

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/mcptest"
)

// server is an OIDC-protected MCP endpoint at /mcp with its PRM mounted.
type server struct {
	p    *fakeProvider
	srv  *httptest.Server
	prm  *ProtectedResource
	runs atomic.Int64
}

func newServer(t *testing.T) *server {
	t.Helper()
	s := &server{p: newFakeProvider(t)}
	mux := http.NewServeMux()
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	s.prm = &ProtectedResource{
		Resource:             s.srv.URL + "/mcp",
		AuthorizationServers: []string{s.p.issuer()},
		ScopesSupported:      []string{"mcp:tools"},
		Scopes:               []string{"mcp:tools"},
	}
	o, err := NewOIDC(t.Context(), OIDCConfig{Issuer: s.p.issuer(), Audience: s.prm.Resource, HTTPClient: s.p.client()})
	if err != nil {
		t.Fatal(err)
	}
	tool := mcphandler.Tool{
		Name:        "whoami",
		Description: "Returns the caller's tenant and subject.",
		Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			s.runs.Add(1)
			return mcphandler.TextResult(call.Identity.Tenant + "/" + call.Identity.Subject), nil
		},
	}
	write := mcphandler.Tool{
		Name:        "write_file",
		Description: "Needs the files:write scope.",
		Scopes:      []string{"files:write"},
		Handler: func(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
			s.runs.Add(1)
			return mcphandler.TextResult("written"), nil
		},
	}
	s.prm.Mount(mux)
	mux.Handle("/mcp", mcphandler.New(mcphandler.Config{
		Authenticate: o.Authenticate,
		Challenge:    s.prm.Challenge,
		Scopes:       mcphandler.ScopeOptions{Challenge: s.prm.ScopeChallenge},
		ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{tool, write}, nil
		},
	}))
	return s
}

func (s *server) token(t *testing.T, subject, tenant string, mod func(map[string]any)) string {
	c := s.p.claims(s.prm.Resource, subject, tenant)
	if mod != nil {
		mod(c)
	}
	return sign(t, s.p.key(), c)
}

func (s *server) client(t *testing.T, token string) *mcptest.Client {
	var opts []mcptest.Option
	if token != "" {
		opts = append(opts, mcptest.WithToken(token))
	}
	c := mcptest.Dial(s.srv.URL+"/mcp", append(opts, mcptest.WithHTTPClient(s.srv.Client()))...)
	t.Cleanup(c.Close)
	return c
}

func httpError(t *testing.T, err error, status int) *mcptest.HTTPError {
	t.Helper()
	var he *mcptest.HTTPError
	if !errors.As(err, &he) || he.Status != status {
		t.Fatalf("err = %v, want HTTP %d", err, status)
	}
	return he
}

func TestHandlerEndToEnd(t *testing.T) {
	s := newServer(t)
	ctx := t.Context()
	alice := s.client(t, s.token(t, "alice", "acme", nil))
	if _, err := alice.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := alice.CallTool(ctx, "whoami", nil)
	if err != nil || res.Text() != "acme/alice" {
		t.Fatalf("whoami: %v %v", res, err)
	}

	meta := `resource_metadata="` + s.srv.URL + `/.well-known/oauth-protected-resource/mcp"`

	// Without a token: 401 naming the metadata and the scope, no error code.
	_, err = s.client(t, "").Initialize(ctx)
	he := httpError(t, err, http.StatusUnauthorized)
	if got, want := he.Header.Get("WWW-Authenticate"), `Bearer `+meta+`, scope="mcp:tools"`; got != want {
		t.Fatalf("WWW-Authenticate = %s, want %s", got, want)
	}

	// The challenge's metadata URL serves the PRM, which names the resource.
	resp, err := s.srv.Client().Get(s.srv.URL + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil || doc.Resource != s.prm.Resource || doc.AuthorizationServers[0] != s.p.issuer() {
		t.Fatalf("PRM %+v %v", doc, err)
	}

	// Refused tokens, presented on alice's session: 401 invalid_token, and
	// the tool never runs.
	stranger := newSignKey(t, "key-unknown")
	good := s.p.claims(s.prm.Resource, "alice", "acme")
	bad := map[string]string{
		"expired":        s.token(t, "alice", "acme", func(c map[string]any) { c["exp"] = 1000 }),
		"not yet valid":  s.token(t, "alice", "acme", func(c map[string]any) { c["nbf"] = c["exp"] }),
		"wrong issuer":   s.token(t, "alice", "acme", func(c map[string]any) { c["iss"] = "https://evil.example.com" }),
		"wrong audience": s.token(t, "alice", "acme", func(c map[string]any) { c["aud"] = "https://api.example.com/mcp" }),
		"bad signature":  tamper(s.token(t, "alice", "acme", nil)),
		"alg none":       unsigned(t, "key-1", good),
		"unknown kid":    sign(t, stranger, good),
	}
	before := s.runs.Load()
	for name, tok := range bad {
		c := s.client(t, tok)
		c.SetSessionID(alice.SessionID())
		c.SetProtocolVersion(alice.ProtocolVersion())
		_, err := c.CallTool(ctx, "whoami", nil)
		he := httpError(t, err, http.StatusUnauthorized)
		ch := he.Header.Get("WWW-Authenticate")
		if !strings.HasPrefix(ch, `Bearer `+meta+`, scope="mcp:tools", error="invalid_token"`) || strings.Contains(ch, tok) ||
			strings.Contains(string(he.Body), tok) {
			t.Errorf("%s: WWW-Authenticate = %s", name, ch)
		}
		// GET and DELETE are authenticated too.
		for _, method := range []string{http.MethodGet, http.MethodDelete} {
			resp, err := c.Do(ctx, method, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s: %s answered %d", name, method, resp.StatusCode)
			}
		}
	}
	if n := s.runs.Load(); n != before {
		t.Fatalf("the tool ran %d times with refused tokens", n-before)
	}

	// A token in the query string is not a token.
	q := mcptest.Dial(s.srv.URL+"/mcp?access_token="+s.token(t, "alice", "acme", nil), mcptest.WithHTTPClient(s.srv.Client()))
	t.Cleanup(q.Close)
	_, err = q.Initialize(ctx)
	httpError(t, err, http.StatusUnauthorized)

	// A token without a tenant: 403.
	_, err = s.client(t, s.token(t, "dave", "", func(c map[string]any) { delete(c, "tenant") })).Initialize(ctx)
	httpError(t, err, http.StatusForbidden)

	// alice's session still works.
	if res, err := alice.CallTool(ctx, "whoami", nil); err != nil || res.Text() != "acme/alice" {
		t.Fatalf("whoami after: %v %v", res, err)
	}
}

// TestSessionBoundToIdentity proves end to end that a session created by
// one user is unknown (404) to another user's valid token, of the same
// tenant or of another, and stays usable by its owner.
func TestSessionBoundToIdentity(t *testing.T) {
	s := newServer(t)
	ctx := t.Context()
	alice := s.client(t, s.token(t, "alice", "acme", nil))
	if _, err := alice.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	before := s.runs.Load()
	for _, who := range [][2]string{{"bob", "acme"}, {"alice", "globex"}, {"mallory", "evil"}} {
		other := s.client(t, s.token(t, who[0], who[1], nil))
		other.SetSessionID(alice.SessionID())
		other.SetProtocolVersion(alice.ProtocolVersion())
		_, err := other.CallTool(ctx, "whoami", nil)
		httpError(t, err, http.StatusNotFound)
		_, err = other.ListTools(ctx)
		httpError(t, err, http.StatusNotFound)
	}
	if s.runs.Load() != before {
		t.Fatal("the tool ran in another user's session")
	}
	// A fresh token of alice herself (same subject and tenant) continues it.
	again := s.client(t, s.token(t, "alice", "acme", func(c map[string]any) { c["jti"] = "second" }))
	again.SetSessionID(alice.SessionID())
	again.SetProtocolVersion(alice.ProtocolVersion())
	if res, err := again.CallTool(ctx, "whoami", nil); err != nil || res.Text() != "acme/alice" {
		t.Fatalf("owner with a new token: %v %v", res, err)
	}
}

// TestStepUp: a tool whose scopes the token lacks answers 403 with an
// insufficient_scope challenge built by ScopeChallenge, and does not run;
// a token with the scope may call it.
func TestStepUp(t *testing.T) {
	s := newServer(t)
	ctx := t.Context()
	alice := s.client(t, s.token(t, "alice", "acme", nil)) // scope "mcp:tools files:read"
	if _, err := alice.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := alice.CallTool(ctx, "write_file", nil)
	he := httpError(t, err, http.StatusForbidden)
	// The challenge names every scope the call needs, those alice already
	// holds included (2025-11-25 clients replace their scope set).
	want := `Bearer error="insufficient_scope", scope="mcp:tools files:read files:write", resource_metadata="` +
		s.srv.URL + `/.well-known/oauth-protected-resource/mcp"`
	if got := he.Header.Get("WWW-Authenticate"); got != want {
		t.Fatalf("WWW-Authenticate = %s, want %s", got, want)
	}
	if s.runs.Load() != 0 {
		t.Fatal("the tool ran without its scope")
	}

	writer := s.client(t, s.token(t, "alice", "acme", func(c map[string]any) { c["scope"] = "mcp:tools files:write" }))
	writer.SetSessionID(alice.SessionID())
	writer.SetProtocolVersion(alice.ProtocolVersion())
	if res, err := writer.CallTool(ctx, "write_file", nil); err != nil || res.Text() != "written" {
		t.Fatalf("with the scope: %v %v", res, err)
	}
}
