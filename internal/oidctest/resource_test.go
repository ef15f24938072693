package oidctest_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcphandler/mcphandler/auth"
	"github.com/mcphandler/mcphandler/internal/oidctest"
)

// TestAccessTokenForResource: a resource server verifying tokens the way
// this repository's do (auth.NewOIDC, from the provider's discovery and
// JWKS) accepts the access token issued for its resource, and refuses it
// for another audience, and once expired.
func TestAccessTokenForResource(t *testing.T) {
	const redirect = "https://gw.example/callback"
	const res, other = "https://upstream.example/mcp", "https://other.example/mcp"
	p := oidctest.New(t, redirect)
	p.SignInAs(map[string]any{"sub": "ada", "tenant": "acme", "role": "editor"})
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, p.Client())
	cfg := oauth2.Config{ClientID: p.ClientID, ClientSecret: p.ClientSecret, RedirectURL: redirect,
		Endpoint: oauth2.Endpoint{AuthURL: p.Issuer() + "/authorize", TokenURL: p.Issuer() + "/token"}}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	token := func() *oauth2.Token {
		t.Helper()
		verifier := oauth2.GenerateVerifier()
		resp, err := noFollow.Get(cfg.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", res)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, err := url.Parse(resp.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := cfg.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", res))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	check := func(audience, access string) error {
		t.Helper()
		o, err := auth.NewOIDC(ctx, auth.OIDCConfig{Issuer: p.Issuer(), Audience: audience})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := http.NewRequest(http.MethodGet, res, nil)
		r.Header.Set("Authorization", "Bearer "+access)
		id, err := o.Authenticate(r)
		if err == nil && (id.Subject != "ada" || id.Tenant != "acme") {
			t.Errorf("identity %+v", id)
		}
		return err
	}
	tok := token()
	if err := check(res, tok.AccessToken); err != nil {
		t.Errorf("for its resource: %v", err)
	}
	var te *auth.TokenError
	if err := check(other, tok.AccessToken); !errors.As(err, &te) || te.Reason != "audience" {
		t.Errorf("for another audience: %v", err)
	}
	p.AccessTTL = time.Second
	tok = token()
	time.Sleep(2 * time.Second)
	if err := check(res, tok.AccessToken); !errors.As(err, &te) || te.Reason != "expired" {
		t.Errorf("expired: %v", err)
	}
}
