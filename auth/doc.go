// Package auth makes an mcphandler server an OAuth 2.1 resource server as
// the MCP authorization specification (2025-06-18 and later) asks: it
// verifies access tokens, publishes the protected resource metadata that
// tells clients where to get tokens, and answers failures with the
// challenges clients act on.
//
//	ctx := context.Background()
//	const resource = "https://api.example.com/mcp"
//	oidc, err := auth.NewOIDC(ctx, auth.OIDCConfig{
//		Issuer:      "https://login.example.com",
//		Audience:    resource, // tokens for anything else are refused
//		TenantClaim: "org_id",
//	})
//	if err != nil { ... }
//	prm := &auth.ProtectedResource{
//		Resource:             resource,
//		AuthorizationServers: []string{"https://login.example.com"},
//		Scopes:               []string{"mcp:tools"},
//	}
//	mux := http.NewServeMux()
//	prm.Mount(mux) // /.well-known/oauth-protected-resource[/mcp]
//	mux.Handle("/mcp", mcphandler.New(mcphandler.Config{
//		Authenticate: oidc.Authenticate,
//		Challenge:    prm.Challenge,
//		Scopes:       mcphandler.ScopeOptions{Challenge: prm.ScopeChallenge}, // 403 insufficient_scope for Tool.Scopes
//		ListTools:    listTools,
//	}))
//
// # Verifying tokens
//
// Three authenticators produce a [mcphandler.Identity] from the bearer token
// of each request (POST, GET and DELETE alike; tokens are read only from
// the Authorization header, never from the query string):
//
//   - [OIDC] verifies JWT access tokens locally against the provider's
//     published keys (OIDC discovery, cached key set refreshed on rotation):
//     signature, issuer, audience, expiry and not-before, on every request.
//   - [Introspection] asks the authorization server about opaque tokens
//     (RFC 7662), caching active answers briefly.
//   - [APIKeys] accepts static keys of service accounts, stored hashed.
//
// [First] combines them, e.g. API keys first and OIDC for the rest.
//
// # Claims
//
// Claims become the identity through a [ClaimsMapper]. [ClaimsMapping] is
// the one mapping to configure — tenant claim, role claims, the handler's
// ordered Config.Roles, a default role — and give to every place claims
// become an identity, so that a person is the same tenant, subject and
// role everywhere: OIDC and Introspection here, and the approval page
// (package approval/page, page.MapClaims). Its rule for roles is the
// highest role of Roles that the role claims name, in any order; unknown
// names are ignored.
//
//	claims := auth.ClaimsMapping{TenantClaim: "org_id", Roles: cfg.Roles}
//	oidc, err := auth.NewOIDC(ctx, auth.OIDCConfig{Issuer: issuer, Audience: resource, Claims: claims.Map})
//	pg, err := page.New(ctx, page.Config{ /* … */ Identity: page.MapClaims(claims.Map)})
//
// Without a mapper, [DefaultClaims] maps with a ClaimsMapping that knows no
// Roles.
//
// # Errors
//
// Failures are [ErrNoToken] (no credentials: the challenge names no error),
// a [*TokenError] wrapping [ErrInvalidToken] (error="invalid_token"), an
// error wrapping [ErrUnavailable] (the authorization server could not be
// asked), or one wrapping [mcphandler.ErrForbidden] such as [ErrNoTenant]
// (403). Every error of this package starts with "auth: " and none contains
// the token; none should be shown to clients verbatim, and the handler does
// not.
//
// # Discovery and challenges
//
// [ProtectedResource] serves RFC 9728 metadata at the path-inserted and
// root well-known URLs, and builds the WWW-Authenticate values: a 401
// names resource_metadata and the scopes to request; a 403 for a tool whose
// scopes the token lacks says error="insufficient_scope" with the scopes
// needed, which makes MCP clients re-authorize with more scopes.
//
// # No token passthrough
//
// The caller's token is issued for this server (its audience is the MCP
// endpoint) and must never be forwarded to another API: the upstream would
// have to accept a token not meant for it, and the MCP server would become
// a confused deputy. A tool that calls an upstream API gets a token of its
// own instead:
//
//   - for the server's own access (service to service), with the client
//     credentials grant (golang.org/x/oauth2/clientcredentials; see the
//     example);
//   - on the user's behalf, with OAuth 2.0 Token Exchange (RFC 8693,
//     [TokenExchange]): the authorization server trades the caller's token
//     for one whose audience is the upstream API. The caller's raw token is
//     available to tools only if the authenticator was configured with
//     KeepSubjectToken, through [SubjectTokenFrom], for that purpose only.
//
// # Concurrency
//
// [OIDC], [Introspection], [APIKeys] and [TokenExchanger] are safe for
// concurrent use; their constructors copy the configuration. A
// [ProtectedResource] is safe for concurrent use as long as it is not
// changed once in use.
package auth
