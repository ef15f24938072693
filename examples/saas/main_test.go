package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/mcphandler/mcphandler/mcptest"
)

// provider is a minimal OpenID provider: discovery and a JWKS of one key.
type provider struct {
	srv *httptest.Server
	key *ecdsa.PrivateKey
}

func newProvider(t *testing.T) *provider {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p := &provider{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                p.srv.URL,
			"jwks_uri":                              p.srv.URL + "/jwks",
			"id_token_signing_alg_values_supported": []string{"ES256"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *provider) token(t *testing.T, aud, sub, org, scope string) string {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: p.key, KeyID: "k1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]any{
		"iss": p.srv.URL, "aud": aud, "sub": sub, "org_id": org, "scope": scope,
		"exp": time.Now().Add(time.Hour).Unix(),
	})
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := jws.CompactSerialize()
	return s
}

type setup struct {
	p        *provider
	srv      *httptest.Server
	audience string
}

func start(t *testing.T) *setup {
	p := newProvider(t)
	outer := http.NewServeMux()
	srv := httptest.NewServer(outer)
	t.Cleanup(srv.Close)
	s := &setup{p: p, srv: srv, audience: srv.URL + "/mcp"}
	mux, _, err := newServer(t.Context(), options{
		issuer: p.srv.URL, audience: s.audience, tenantClaim: "org_id",
		scopes: []string{"mcp:tools"}, defaultRole: "editor", pro: []string{"globex"},
		httpClient: p.srv.Client(),
	})
	if err != nil {
		t.Fatal(err)
	}
	outer.Handle("/", mux)
	return s
}

func (s *setup) connect(t *testing.T, sub, org, scope string) *mcptest.Client {
	c := mcptest.Dial(s.audience, mcptest.WithToken(s.p.token(t, s.audience, sub, org, scope)), mcptest.WithHTTPClient(s.srv.Client()))
	t.Cleanup(c.Close)
	if _, err := c.Initialize(t.Context()); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestChallengeAndMetadata(t *testing.T) {
	s := start(t)
	c := mcptest.Dial(s.audience, mcptest.WithHTTPClient(s.srv.Client()))
	t.Cleanup(c.Close)
	_, err := c.Initialize(t.Context())
	var he *mcptest.HTTPError
	want := `Bearer resource_metadata="` + s.srv.URL + `/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`
	if !errors.As(err, &he) || he.Status != http.StatusUnauthorized || he.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("err = %v, challenge %q", err, he.Header.Get("WWW-Authenticate"))
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		resp, err := s.srv.Client().Get(s.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Resource string   `json:"resource"`
			AS       []string `json:"authorization_servers"`
			Scopes   []string `json:"scopes_supported"`
		}
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil || doc.Resource != s.audience || doc.AS[0] != s.p.srv.URL || !slices.Equal(doc.Scopes, []string{"mcp:tools", "notes:write"}) {
			t.Fatalf("%s: %+v %v", path, doc, err)
		}
	}
}

func TestWorkspaces(t *testing.T) {
	s := start(t)
	ctx := t.Context()
	names := func(c *mcptest.Client) []string {
		tools, err := c.ListTools(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range tools {
			out = append(out, tl.Name)
		}
		return out
	}
	acme := s.connect(t, "alice", "acme", "mcp:tools notes:write")
	globex := s.connect(t, "carol", "globex", "mcp:tools")
	if got := names(acme); !slices.Equal(got, []string{"workspace_info", "list_notes", "add_note"}) {
		t.Fatalf("acme tools %v", got)
	}
	if got := names(globex); !slices.Equal(got, []string{"workspace_info", "list_notes", "add_note", "export_notes"}) {
		t.Fatalf("globex tools %v", got)
	}
	res, err := globex.CallTool(ctx, "workspace_info", nil)
	if err != nil || !strings.Contains(res.Text(), `"plan":"pro"`) || !strings.Contains(res.Text(), `"workspace":"globex"`) {
		t.Fatalf("workspace_info: %v %v", res, err)
	}

	if res, err := acme.CallTool(ctx, "add_note", map[string]any{"text": "acme only"}); err != nil || res.IsError {
		t.Fatalf("add_note: %v %v", res, err)
	}
	// globex's token lacks notes:write: step-up challenge.
	_, err = globex.CallTool(ctx, "add_note", map[string]any{"text": "x"})
	var he *mcptest.HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusForbidden ||
		!strings.HasPrefix(he.Header.Get("WWW-Authenticate"), `Bearer error="insufficient_scope", scope="mcp:tools notes:write"`) {
		t.Fatalf("step-up: %v", err)
	}
	// Notes stay in their workspace.
	res, err = globex.CallTool(ctx, "list_notes", nil)
	if err != nil || strings.Contains(res.Text(), "acme only") {
		t.Fatalf("globex sees %v %v", res, err)
	}
	res, err = acme.CallTool(ctx, "list_notes", nil)
	if err != nil || !strings.Contains(res.Text(), "acme only") {
		t.Fatalf("acme sees %v %v", res, err)
	}
}

func TestDefaultAudience(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080/mcp",
		":9000":          "http://localhost:9000/mcp",
		"[::1]:8080":     "http://[::1]:8080/mcp",
	} {
		if got := defaultAudience(addr); got != want {
			t.Errorf("defaultAudience(%q) = %q, want %q", addr, got, want)
		}
	}
}
