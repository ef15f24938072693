package realop_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/mcphandler/mcphandler/internal/realop"
)

// resource is the MCP server the tokens are asked for (RFC 8707).
const resource = "https://mcp.example.test/mcp"

var alice = realop.User{
	ID: "u-alice", Username: "alice", Password: "alice-password",
	Claims: map[string]any{"tenant": "acme", "role": "admin"},
}

// webClient is a confidential client with JWT access tokens and refresh
// tokens, redirecting to redirect.
func webClient(redirect string) realop.Client {
	return realop.Client{
		ID: "web", Secret: "web-secret", RedirectURIs: []string{redirect},
		JWTAccessTokens: true, Refresh: true,
	}
}

// rp is a relying party of the provider: one client, its OAuth 2.0
// configuration from the provider's discovery document.
type rp struct {
	p        *realop.Provider
	oauth    oauth2.Config
	provider *oidc.Provider
	hc       *http.Client
}

func newRP(t *testing.T, p *realop.Provider, c realop.Client, scopes ...string) *rp {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	provider, err := oidc.NewProvider(oidc.ClientContext(t.Context(), hc), p.Issuer())
	if err != nil {
		t.Fatal(err)
	}
	ep := provider.Endpoint()
	ep.AuthStyle = oauth2.AuthStyleInHeader // client_secret_basic
	return &rp{
		p: p, provider: provider, hc: hc,
		oauth: oauth2.Config{
			ClientID: c.ID, ClientSecret: c.Secret, RedirectURL: c.RedirectURIs[0],
			Endpoint: ep, Scopes: scopes,
		},
	}
}

func (r *rp) ctx(t *testing.T) context.Context {
	return oidc.ClientContext(t.Context(), r.hc)
}

// grant is an authorization in progress: the URL the user agent is sent
// to, and what the client keeps to finish it.
type grant struct {
	url, state, nonce, verifier string
}

// start begins an authorization with PKCE (S256), a state and a nonce;
// opts add parameters, such as the resource.
func (r *rp) start(opts ...oauth2.AuthCodeOption) grant {
	g := grant{state: oauth2.GenerateVerifier(), nonce: oauth2.GenerateVerifier(), verifier: oauth2.GenerateVerifier()}
	opts = append(opts, oauth2.S256ChallengeOption(g.verifier), oidc.Nonce(g.nonce))
	g.url = r.oauth.AuthCodeURL(g.state, opts...)
	return g
}

// code signs in as username on the provider's login page with Go alone
// (an HTTP client with a cookie jar, posting the form the page serves)
// and returns the code the provider redirects to the client with.
func (r *rp) code(t *testing.T, g grant, username, password string) string {
	t.Helper()
	back, body := r.login(t, g.url, username, password)
	if back == nil {
		t.Fatalf("login as %s: no redirect to the client; the page says:\n%s", username, body)
	}
	q := back.Query()
	if q.Get("state") != g.state {
		t.Fatalf("redirect %s: state %q, want %q", back, q.Get("state"), g.state)
	}
	if q.Get("code") == "" {
		t.Fatalf("redirect %s: no code", back)
	}
	return q.Get("code")
}

// login follows authURL to the login page, posts the form with username
// and password, and returns where the provider then sends the user agent
// outside of itself (nil if it does not) and the last page's body.
func (r *rp) login(t *testing.T, authURL, username, password string) (*url.URL, string) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	issuer := r.p.Issuer() + "/"
	hc := &http.Client{Jar: jar, Timeout: 5 * time.Second,
		CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			if strings.HasPrefix(req.URL.String(), issuer) {
				return nil
			}
			return http.ErrUseLastResponse // the client's redirect URI
		},
	}
	resp, body := do(t, hc, http.MethodGet, authURL, nil)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Request.URL.String(), issuer+"login/") {
		t.Fatalf("GET %s: %s at %s, want the login page:\n%s", authURL, resp.Status, resp.Request.URL, body)
	}
	action, form := loginForm(t, body)
	form.Set("username", username)
	form.Set("password", password)
	target, err := resp.Request.URL.Parse(action)
	if err != nil {
		t.Fatal(err)
	}
	resp, body = do(t, hc, http.MethodPost, target.String(), form)
	if resp.StatusCode != http.StatusFound {
		return nil, body
	}
	back, err := resp.Location()
	if err != nil {
		t.Fatal(err)
	}
	return back, body
}

var (
	formTag  = regexp.MustCompile(`(?s)<form[^>]*\baction="([^"]*)"`)
	inputTag = regexp.MustCompile(`(?s)<input[^>]*>`)
	attrName = regexp.MustCompile(`\bname="([^"]*)"`)
	attrVal  = regexp.MustCompile(`\bvalue="([^"]*)"`)
)

// loginForm returns the action of the page's form and the values of its
// inputs that have one (the hidden auth request ID).
func loginForm(t *testing.T, page string) (string, url.Values) {
	t.Helper()
	m := formTag.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no form on the login page:\n%s", page)
	}
	form := url.Values{}
	for _, in := range inputTag.FindAllString(page, -1) {
		name, val := attrName.FindStringSubmatch(in), attrVal.FindStringSubmatch(in)
		if name != nil && val != nil {
			form.Set(html.UnescapeString(name[1]), html.UnescapeString(val[1]))
		}
	}
	if form.Get("id") == "" {
		t.Fatalf("no auth request ID in the login form:\n%s", page)
	}
	return html.UnescapeString(m[1]), form
}

func do(t *testing.T, hc *http.Client, method, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// exchange redeems a code with the grant's PKCE verifier.
func (r *rp) exchange(t *testing.T, g grant, code string) *oauth2.Token {
	t.Helper()
	tok, err := r.oauth.Exchange(r.ctx(t), code, oauth2.VerifierOption(g.verifier))
	if err != nil {
		t.Fatalf("code exchange: %v", err)
	}
	return tok
}

// post sends form to one of the provider's endpoints, authenticated as
// the client (client_secret_basic), and returns the status and the JSON
// answer.
func (r *rp) post(t *testing.T, endpoint string, form url.Values) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(r.oauth.ClientID), url.QueryEscape(r.oauth.ClientSecret))
	resp, err := r.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer map[string]any
	body, _ := io.ReadAll(resp.Body)
	if len(body) > 0 && string(body) != "null" {
		if err := json.Unmarshal(body, &answer); err != nil {
			t.Fatalf("POST %s: %s: %q: %v", endpoint, resp.Status, body, err)
		}
	}
	return resp.StatusCode, answer
}

// discovery returns a member of the provider's discovery document.
func (r *rp) discovery(t *testing.T, member string) any {
	t.Helper()
	var doc map[string]any
	if err := r.provider.Claims(&doc); err != nil {
		t.Fatal(err)
	}
	return doc[member]
}

// claims returns the payload of a JWT, unverified: for tests that
// verified it otherwise.
func claims(t *testing.T, jwt string) map[string]any {
	t.Helper()
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWS: %q", jwt)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// audience returns the "aud" of claims as a list.
func audience(c map[string]any) []string {
	switch a := c["aud"].(type) {
	case string:
		return []string{a}
	case []any:
		var out []string
		for _, v := range a {
			s, _ := v.(string)
			out = append(out, s)
		}
		return out
	}
	return nil
}
