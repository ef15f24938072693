package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/auth"
	"github.com/mcphandler/mcphandler/internal/oidctest"
	"github.com/mcphandler/mcphandler/mcptest"
)

// An "oauth" upstream, with -issuer: alice (a demo token) is sent to
// PUBLIC/upstream-auth/ by her list and her call, authorizes there signed
// in as herself, and her calls then reach the upstream with her own
// token; a caller with the issuer's access token for PUBLIC/mcp is
// served too, as the token's tenant and subject.
func TestGatewayOAuth(t *testing.T) {
	p := oidctest.New(t)
	ctx := context.Background()
	// The upstream: takes the provider's tokens for its own URL only.
	mux := http.NewServeMux()
	up := httptest.NewServer(mux)
	t.Cleanup(up.Close)
	resource := up.URL + "/mcp"
	oidc, err := auth.NewOIDC(ctx, auth.OIDCConfig{Issuer: p.Issuer(), Audience: resource})
	if err != nil {
		t.Fatal(err)
	}
	prm := &auth.ProtectedResource{Resource: resource, AuthorizationServers: []string{p.Issuer()}}
	prm.Mount(mux)
	uh := mcphandler.New(mcphandler.Config{Authenticate: oidc.Authenticate, Challenge: prm.Challenge,
		ListTools: func(context.Context) ([]mcphandler.Tool, error) {
			return []mcphandler.Tool{{Name: "whoami", Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true},
				Handler: func(_ context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
					return mcphandler.TextResult("upstream sees " + call.Identity.Tenant + "/" + call.Identity.Subject), nil
				}}}, nil
		}})
	t.Cleanup(func() { uh.Close() })
	mux.Handle("/mcp", uh)

	// The gateway, behind its public address.
	var a *app
	gwSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }))
	t.Cleanup(gwSrv.Close)
	public := gwSrv.URL
	p.AddRedirect(public + "/upstream-auth/login/callback")
	p.AddRedirect(public + "/upstream-auth/callback")
	file := filepath.Join(t.TempDir(), "upstreams.json")
	os.WriteFile(file, []byte(`{"upstreams":[{"id":"notes","url":"`+resource+`","tenants":["acme"],
		"oauth":{"client_id":`+jsonString(p.ClientID)+`,"client_secret":`+jsonString(p.ClientSecret)+`}}]}`), 0o600)
	ups, err := loadUpstreams(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := build(ctx, options{ups: ups, public: public}); err == nil || !strings.Contains(err.Error(), "-issuer") {
		t.Fatalf("an oauth upstream without -issuer: %v", err)
	}
	a, err = build(ctx, options{ups: ups, public: public, issuer: p.Issuer(), loginID: p.ClientID, loginSecret: p.ClientSecret,
		tenantClaim: "tenant"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.close)

	alice := mcptest.Dial(public+"/mcp", mcptest.WithToken("acme-viewer"))
	t.Cleanup(func() { alice.Close() })
	if _, err := alice.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := alice.CallTool(ctx, "notes_whoami", nil)
	if err != nil || !res.IsError || !strings.Contains(res.Text(), public+"/upstream-auth/start?l=") {
		t.Fatalf("alice's call before authorizing: %+v, %v", res, err)
	}
	raw, err := alice.Call(ctx, "tools/list", nil)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Meta map[string]map[string]struct{ AuthorizeURL string } `json:"_meta"`
	}
	json.Unmarshal(raw, &list)
	link := list.Meta["dev.mcphandler/upstreams"]["notes"].AuthorizeURL
	if link == "" {
		t.Fatalf("no link in alice's list: %s", raw)
	}
	alicePerson := map[string]any{"sub": "alice", "tenant": "acme", "role": "viewer"}
	p.SignInNext(alicePerson, alicePerson) // the gateway's sign-in, then the upstream's authorization
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := browser.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "notes authorized") {
		t.Fatalf("authorizing: %d %s", resp.StatusCode, page)
	}
	if res, err := alice.CallTool(ctx, "notes_whoami", nil); err != nil || res.Text() != "upstream sees acme/alice" {
		t.Fatalf("alice's call once authorized: %+v, %v", res, err)
	}
	if got := p.Resources(); len(got) == 0 || got[len(got)-1] != resource {
		t.Fatalf("the authorization named the resources %v, want the upstream's URL last", got)
	}

	// The issuer's own access token for the gateway.
	tok := p.Sign(map[string]any{"iss": p.Issuer(), "sub": "dave", "tenant": "acme", "aud": public + "/mcp",
		"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()})
	dave := mcptest.Dial(public+"/mcp", mcptest.WithToken(tok))
	t.Cleanup(func() { dave.Close() })
	if _, err := dave.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := dave.CallTool(ctx, "whoami", nil); err != nil || !strings.Contains(res.Text(), "subject dave") {
		t.Fatalf("dave's whoami: %+v, %v", res, err)
	}
	if res, err := dave.CallTool(ctx, "notes_whoami", nil); err != nil || !res.IsError || strings.Contains(res.Text(), "alice") {
		t.Fatalf("dave's call of the upstream: %+v, %v", res, err)
	}
	// Without a token, the gateway says where to get one (RFC 9728).
	resp, err = http.Post(public+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "resource_metadata=") {
		t.Fatalf("no token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
