// Package realop starts a real, certified OpenID provider inside a test:
// the example OpenID provider of github.com/zitadel/oidc/v3 (its packages
// example/server/exampleop and example/server/storage, on pkg/op), with
// the users and clients of the test. Tests that run against it check this
// repository against a provider it did not write, where
// internal/oidctest is a fake that can also misbehave on purpose.
//
// What the provider does, as zitadel wrote it:
//
//   - The authorization code flow with PKCE (S256 and plain; a
//     code_verifier is required once a code_challenge was sent), for
//     confidential web clients authenticating with client_secret_basic
//     (client_secret_post too). The authorization endpoint is
//     Issuer()+"/auth", the login page Issuer()+"/login/username".
//   - ID tokens carrying the nonce of the authorization request, signed
//     RS256 by a key made at Start, valid for an hour. When an access
//     token is issued too, the claims of the scopes profile, email,
//     phone and address are left to the userinfo endpoint (OpenID
//     Connect Core 5.4).
//   - Access tokens that are opaque, or JWTs for a client with
//     JWTAccessTokens: "iss", "sub", "aud", "exp", "iat", "nbf",
//     "client_id" and "jti", but no "scope", and a header "typ" of "JWT"
//     (not RFC 9068's "at+jwt"). They live five minutes unless
//     Config.AccessTTL says otherwise.
//   - Refresh tokens, for a client with Refresh whose authorization asked
//     for the scope offline_access, valid five hours and rotated on every
//     use (a used one is refused with invalid_grant, without revoking the
//     new one), and the revocation endpoint (RFC 7009), which forgets a
//     refresh token (and the access token last issued with it) or an
//     access token. A JWT access token is still taken, until it expires,
//     by a resource server that verifies it with the key set alone.
//   - OpenID discovery at Issuer()+"/.well-known/openid-configuration".
//     It does not serve RFC 8414's /.well-known/oauth-authorization-server
//     (404): pkg/op has an experimental MetadataServer for it, which the
//     example does not implement.
//
// What this package adds to the example storage: users and their extra
// claims from [Config], put in the ID token, the access token and the
// userinfo answer; per-client JWT access tokens and refresh grant; the
// lifetime of access tokens; and the RFC 8707 resource parameter, which
// zitadel neither parses nor puts in "aud". The example puts the client
// ID alone in "aud", of the ID token and of the access token alike. Here
// the resources of the authorization request are added to it (the
// client ID first, then the resources in their order), for the tokens of
// the code exchange and of every refresh of the grant; a resource
// parameter of a token request is ignored. zitadel computes both tokens'
// "aud" from one value, so the ID token names the resources too ("azp"
// is the client ID): a resource server that checks "iss" and "aud" only
// would take this provider's ID token for an access token.
package realop

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
)

// User is a user who can sign in on the provider's login page.
type User struct {
	// ID is the user's "sub"; Username and Password are what the login
	// page asks for.
	ID, Username, Password string
	// Claims are extra claims put in both the ID token and the access
	// token (and the userinfo answer), e.g. "tenant": "acme", "role":
	// "admin". They cannot replace a claim the provider sets itself,
	// such as "sub", "aud" or "exp".
	Claims map[string]any
}

// Client is a confidential web client, authenticating with its secret
// (client_secret_basic). Plain http redirect URIs are allowed.
type Client struct {
	ID, Secret   string
	RedirectURIs []string
	// JWTAccessTokens makes its access tokens JWTs, signed by the
	// provider's key; otherwise they are opaque.
	JWTAccessTokens bool
	// Refresh allows the refresh_token grant: an authorization that asks
	// for the scope offline_access then also gets a refresh token.
	Refresh bool
}

// Config lists the users and clients of a provider.
type Config struct {
	Users   []User
	Clients []Client
	// AccessTTL is the lifetime of access tokens ("exp" of a JWT access
	// token, and expires_in), if not 0; otherwise five minutes. The
	// provider's userinfo and introspection endpoints keep five minutes.
	AccessTTL time.Duration
}

// Provider is a running OpenID provider.
type Provider struct {
	issuer string
}

// authorizePath is where exampleop puts the authorization endpoint.
const authorizePath = "/auth"

// Start starts a provider on a free port of 127.0.0.1, over plain http
// (the issuer is "http://127.0.0.1:PORT"), closed when the test ends.
// It logs a line for each request it serves at level Info (exampleop
// does, through log/slog's default logger; this package's tests raise the
// default logger's level to Warn in TestMain).
func Start(t testing.TB, cfg Config) *Provider {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	p := &Provider{issuer: "http://" + srv.Listener.Addr().String()}
	srv.Config.Handler = NewHandler(p.issuer, cfg)
	srv.Start()
	t.Cleanup(srv.Close)
	return p
}

// NewHandler returns the provider of cfg for the issuer URL, to serve at
// its root: what Start serves, for a command that runs one.
func NewHandler(issuer string, cfg Config) http.Handler {
	// SetupServer passes op.WithAllowInsecure to op.NewProvider: the
	// issuer may be http.
	return withResources(exampleop.SetupServer(issuer, newStore(cfg), nil, false))
}

// Issuer returns the provider's issuer URL, as its discovery document
// states it.
func (p *Provider) Issuer() string { return p.issuer }

// Login fills the provider's login form, in the browser tab of ctx (a
// chromedp context) that shows it, with username and password, submits it
// and waits for the page the browser is sent to (through the provider's
// callback, the client's redirect URI with the code). That page may be
// the login form again, of another authorization request the client sent
// the browser on to (a client that signs the person in, then sends them
// to authorize another client): that is a success. It fails if the form
// is not there, if the provider refused the credentials (it shows the
// form again, for the same request, with its message), or after 10
// seconds.
func (p *Provider) Login(ctx context.Context, username, password string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SetValue(chromedp.ID("username"), username),
		chromedp.SetValue(chromedp.ID("password"), password),
	)
	if err != nil {
		return fmt.Errorf("realop: filling the login form: %w", err)
	}
	request, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`input[name="id"]`)))
	if err != nil {
		return fmt.Errorf("realop: reading the login form's auth request ID: %w", err)
	}
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`button[type="submit"]`))); err != nil {
		return fmt.Errorf("realop: submitting the login form: %w", err)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		return fmt.Errorf("realop: after the login form: %w", err)
	}
	if strings.HasPrefix(loc, p.issuer+"/login/") {
		if again, _ := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`input[name="id"]`))); again == request {
			msg, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("form p")))
			return fmt.Errorf("realop: login as %q refused: %s", username, strings.TrimSpace(msg))
		}
	}
	return nil
}

// withResources puts the RFC 8707 resource parameters of an
// authorization request on its context, for store.CreateAuthRequest:
// zitadel's request parser drops them.
func withResources(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == authorizePath && r.ParseForm() == nil && len(r.Form["resource"]) > 0 {
			r = r.WithContext(context.WithValue(r.Context(), resourcesKey{}, r.Form["resource"]))
		}
		next.ServeHTTP(w, r)
	})
}

type resourcesKey struct{}

// newStore returns the example storage with the users and clients of cfg.
func newStore(cfg Config) *store {
	users := userStore{byID: map[string]*storage.User{}, claims: map[string]map[string]any{}}
	for _, u := range cfg.Users {
		users.byID[u.ID] = &storage.User{ID: u.ID, Username: u.Username, Password: u.Password}
		users.claims[u.ID] = u.Claims
	}
	webClients := map[string]*storage.Client{}
	clients := map[string]Client{}
	for _, c := range cfg.Clients {
		webClients[c.ID] = storage.WebClient(c.ID, c.Secret, c.RedirectURIs...)
		clients[c.ID] = c
	}
	return &store{
		Storage:   storage.NewStorageWithClients(users, webClients),
		users:     users,
		clients:   clients,
		ttl:       cfg.AccessTTL,
		resources: map[string][]string{},
	}
}
