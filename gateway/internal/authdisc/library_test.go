package authdisc

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/auth"
	"github.com/mcphandler/mcphandler/internal/oidctest"
)

// TestLibrary discovers this module's own server side: the handler's 401
// with auth.ProtectedResource's challenge and metadata, and an OpenID
// provider that publishes OpenID Connect Discovery only.
func TestLibrary(t *testing.T) {
	p := oidctest.New(t)
	p.SetMetadata8414(false)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	prms := map[string]*auth.ProtectedResource{}
	for _, path := range []string{"/mcp", "/sse"} {
		prm := &auth.ProtectedResource{
			Resource:             srv.URL + path,
			AuthorizationServers: []string{p.Issuer()},
			ScopesSupported:      []string{"mcp:tools", "files:read"},
			Scopes:               []string{"mcp:tools"},
		}
		mux.Handle(prm.MetadataPath(), prm)
		prms[path] = prm
	}
	keys := auth.NewAPIKeys(map[string]mcphandler.Identity{"key": {Subject: "s", Tenant: "t"}})
	h := mcphandler.New(mcphandler.Config{
		Authenticate: keys.Authenticate,
		Challenge: func(r *http.Request, err error) string {
			if strings.HasPrefix(r.URL.Path, "/sse") {
				return prms["/sse"].Challenge(r, err)
			}
			return prms["/mcp"].Challenge(r, err)
		},
		ListTools: func(context.Context) ([]mcphandler.Tool, error) { return nil, nil },
	})
	t.Cleanup(func() { _ = h.Close() })
	mux.Handle("/mcp", h)
	sse, msgs := h.LegacySSE("/messages")
	mux.Handle("/sse", sse)
	mux.Handle("/messages", msgs)

	for _, tt := range []struct {
		path   string
		legacy bool
	}{{"/mcp", false}, {"/sse", true}} {
		t.Run(tt.path, func(t *testing.T) {
			res, err := Discover(context.Background(), Config{URL: srv.URL + tt.path, Legacy: tt.legacy, HTTPClient: srv.Client()})
			if err != nil {
				t.Fatal(err)
			}
			iss := p.Issuer()
			want := Result{
				Resource: Resource{Resource: srv.URL + tt.path, AuthorizationServers: []string{iss},
					ScopesSupported: []string{"mcp:tools", "files:read"}},
				Server: Server{Issuer: iss, AuthorizationEndpoint: iss + "/authorize", TokenEndpoint: iss + "/token", RevocationEndpoint: iss + "/revoke",
					CodeChallengeMethods: []string{"S256"}},
				Scope: "mcp:tools",
			}
			if !reflect.DeepEqual(res, want) {
				t.Fatalf("got  %+v\nwant %+v", res, want)
			}
		})
	}
}
