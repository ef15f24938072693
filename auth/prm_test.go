package auth

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/mcphandler/mcphandler"
)

func TestMetadataURL(t *testing.T) {
	for resource, want := range map[string]string{
		"https://api.example.com/mcp":          "https://api.example.com/.well-known/oauth-protected-resource/mcp",
		"https://API.Example.com/mcp":          "https://api.example.com/.well-known/oauth-protected-resource/mcp",
		"https://api.example.com":              "https://api.example.com/.well-known/oauth-protected-resource",
		"https://api.example.com/":             "https://api.example.com/.well-known/oauth-protected-resource",
		"https://api.example.com:8443/t/a/mcp": "https://api.example.com:8443/.well-known/oauth-protected-resource/t/a/mcp",
		"http://127.0.0.1:8080/mcp/":           "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp",
		"/mcp":                                 "",
		"ftp://example.com/mcp":                "",
		"https://api.example.com/mcp#frag":     "",
	} {
		p := &ProtectedResource{Resource: resource}
		if got := p.MetadataURL(); got != want {
			t.Errorf("MetadataURL(%q) = %q, want %q", resource, got, want)
		}
	}
}

func TestProtectedResourceDocument(t *testing.T) {
	prm := &ProtectedResource{
		Resource:             "https://api.example.com/mcp",
		AuthorizationServers: []string{"https://login.example.com"},
		ScopesSupported:      []string{"mcp:tools", "files:write"},
		ResourceName:         "Example MCP",
	}
	mux := http.NewServeMux()
	prm.Mount(mux)

	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		res := rec.Result()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, res.StatusCode)
		}
		if res.Header.Get("Content-Type") != "application/json" || res.Header.Get("Access-Control-Allow-Origin") != "*" ||
			res.Header.Get("Cache-Control") == "" {
			t.Fatalf("GET %s: headers %v", path, res.Header)
		}
		var doc map[string]any
		body, _ := io.ReadAll(res.Body)
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"resource":                 "https://api.example.com/mcp",
			"authorization_servers":    []any{"https://login.example.com"},
			"scopes_supported":         []any{"mcp:tools", "files:write"},
			"bearer_methods_supported": []any{"header"},
			"resource_name":            "Example MCP",
		}
		if b1, b2 := mustJSON(doc), mustJSON(want); b1 != b2 {
			t.Fatalf("GET %s: document %s, want %s", path, b1, b2)
		}
	}

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/.well-known/oauth-protected-resource/mcp", nil))
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Fatalf("HEAD: %d, %d bytes", rec.Code, rec.Body.Len())
	}
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodOptions, "/.well-known/oauth-protected-resource/mcp", nil))
	if rec.Code != http.StatusNoContent || rec.Header().Get("Access-Control-Allow-Methods") == "" {
		t.Fatalf("OPTIONS: %d %v", rec.Code, rec.Header())
	}
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/.well-known/oauth-protected-resource", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", rec.Code)
	}

	// A resource at the root registers the root path once.
	root := &ProtectedResource{Resource: "https://api.example.com", AuthorizationServers: []string{"https://as"}}
	root.Mount(http.NewServeMux())
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestMountPanicsOnBadConfig(t *testing.T) {
	for name, p := range map[string]*ProtectedResource{
		"no resource":              {AuthorizationServers: []string{"https://as"}},
		"no authorization servers": {Resource: "https://api.example.com/mcp"},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			p.Mount(http.NewServeMux())
		}()
	}
}

func TestChallenge(t *testing.T) {
	prm := &ProtectedResource{
		Resource:             "https://api.example.com/mcp",
		AuthorizationServers: []string{"https://login.example.com"},
		Scopes:               []string{"mcp:tools"},
	}
	const meta = `resource_metadata="https://api.example.com/.well-known/oauth-protected-resource/mcp"`
	withToken := bearerRequest("Bearer tok-SECRET")
	for _, tc := range []struct {
		name string
		r    *http.Request
		err  error
		want string
	}{
		{"no token", bearerRequest(""), ErrNoToken, `Bearer ` + meta + `, scope="mcp:tools"`},
		{"expired", withToken, invalid("expired"),
			`Bearer ` + meta + `, scope="mcp:tools", error="invalid_token", error_description="The access token expired"`},
		{"audience", withToken, invalid("audience"),
			`Bearer ` + meta + `, scope="mcp:tools", error="invalid_token", error_description="The access token was not issued for this resource"`},
		{"host reason", withToken, &TokenError{Reason: "custom tok-SECRET"}, `Bearer ` + meta + `, scope="mcp:tools", error="invalid_token"`},
		{"unavailable", withToken, unavailable("x"), `Bearer ` + meta + `, scope="mcp:tools"`},
		{"forbidden", withToken, ErrNoTenant, `Bearer ` + meta + `, scope="mcp:tools"`},
		{"other error with token", withToken, errors.New("db said tok-SECRET is bad"), `Bearer ` + meta + `, scope="mcp:tools", error="invalid_token"`},
		{"other error without token", bearerRequest(""), errors.New("boom"), `Bearer ` + meta + `, scope="mcp:tools"`},
	} {
		if got := prm.Challenge(tc.r, tc.err); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}

	if got, want := prm.ScopeChallenge(withToken, []string{"files:write", "mcp:tools"}),
		`Bearer error="insufficient_scope", scope="mcp:tools files:write", `+meta; got != want {
		t.Errorf("ScopeChallenge:\n got %s\nwant %s", got, want)
	}

	// No scopes configured: no scope parameter.
	bare := &ProtectedResource{Resource: "https://api.example.com/mcp"}
	if got, want := bare.Challenge(bearerRequest(""), ErrNoToken), `Bearer `+meta; got != want {
		t.Errorf("bare: got %s", got)
	}

	// Values are quoted-strings: quotes and backslashes escaped, control
	// characters dropped.
	odd := &ProtectedResource{Resource: "https://api.example.com/mcp", Scopes: []string{`a"b\c` + "\r\nX-Injected:1"}}
	if got, want := odd.Challenge(bearerRequest(""), ErrNoToken), `Bearer `+meta+`, scope="a\"b\\c X-Injected:1"`; got != want {
		t.Errorf("escaping:\n got %s\nwant %s", got, want)
	}
	if got, want := quote("x\x00\r\n\x7fy\"z\\"), `"xy\"z\\"`; got != want {
		t.Errorf("quote = %s, want %s", got, want)
	}
	if got := unionScopes([]string{"a b", "a"}, nil, []string{"c", "b"}); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("unionScopes = %v", got)
	}
	var _ mcphandler.ChallengeFunc = prm.Challenge
	var _ func(*http.Request, []string) string = prm.ScopeChallenge
}

// A scope name holding a quote or a backslash cannot end the scope
// parameter of a challenge and add another: both are escaped.
func TestChallengeScopeEscaping(t *testing.T) {
	p := &ProtectedResource{Resource: "https://api.example.com/mcp", AuthorizationServers: []string{"https://login.example.com"},
		Scopes: []string{`base"`}}
	got := p.ScopeChallenge(nil, []string{`docs:"write"`, `a\b`, `x",error="invalid_token`})
	want := `Bearer error="insufficient_scope", scope="base\" docs:\"write\" a\\b x\",error=\"invalid_token", resource_metadata="https://api.example.com/.well-known/oauth-protected-resource/mcp"`
	if got != want {
		t.Fatalf("ScopeChallenge:\n got %s\nwant %s", got, want)
	}
	if got := p.Challenge(nil, nil); got != `Bearer resource_metadata="https://api.example.com/.well-known/oauth-protected-resource/mcp", scope="base\""` {
		t.Fatalf("Challenge: %s", got)
	}
}
