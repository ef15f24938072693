// Package page serves the approval page: an [http.Handler] the host mounts
// (e.g. at /approvals/), where a person signs in with OpenID Connect and
// approves or declines one call kept in an [approval.Store], and their
// inbox: every call waiting for them.
//
// # Flow
//
//	GET  <mount>/           the inbox: no inbox session: 303 to the
//	                        provider as below; with one: the calls waiting
//	                        for the person (approval.Store.Inbox: those
//	                        of their tenant whose policy lets them decide,
//	                        newest first, at most MaxInboxRows, saying
//	                        when more wait), each with its asker, tool,
//	                        hints, arguments (cut after MaxSummaryBytes
//	                        with a visible marker), expiry, time left,
//	                        a decision form and a link to its page; else
//	                        "Nothing waits for you"
//	POST <mount>/           a decision from a row: cross-origin check, an
//	                        inbox session, its CSRF token, one id, one
//	                        decision; its outcome is a line on top of the
//	                        inbox (decided, or decided, expired or
//	                        withdrawn meanwhile, not allowed, not found)
//	GET  <mount>/<id>       no session for <id>: 303 to the provider's
//	                        authorization endpoint (code flow, PKCE S256,
//	                        state and nonce); with one: the approval and
//	                        its form, or why it cannot be decided
//	GET  <mount>/callback   the provider's redirect: checks state (signed
//	                        cookie of this browser, single use in the
//	                        store), redeems the code with the PKCE
//	                        verifier, verifies the ID token (go-oidc) and
//	                        its nonce, maps its claims to the approver,
//	                        sets the session cookie, 303 to <mount>/<id>
//	                        (or to the inbox)
//	POST <mount>/<id>       the decision: cross-origin check, session
//	                        cookie bound to <id> (or an inbox session),
//	                        CSRF token bound to the session and <id>, one
//	                        decision field
//
// The session is a cookie signed with HMAC-SHA256 (keys from
// [Config.Keys]), bound to the approver and to one approval — or to the
// inbox, which decides any approval its person may decide, there or on
// the approval's page — lasting [Config.SessionTTL]; nothing about it is
// kept on the server. A session made for one approval decides that one
// only, and does not open the inbox (that signs in again). A sign-in to
// one approval uses up its state before the code is redeemed, counted
// against the approval ([Config.MaxSignInsPerApproval]); one to the
// inbox, which anyone can start, redeems the code first and counts the
// used state against the person signed in (the same bound per person),
// so that only a person the provider signs in makes the store keep a
// mark. Every page states in plain words what matters: the tool's hints
// (destructive, open world, read-only, idempotent: the MCP annotations,
// with their defaults when the tool gives none), the state ("Waiting for
// a decision", "Approved — the call may run once", …), the time left,
// computed when the page is made; the approval's own page shows the
// arguments in full, canonical and indented, never cut. The pages read
// on a phone (no horizontal scrolling; long values wrap). The
// cookies are HttpOnly, SameSite=Lax and named with the __Host- prefix
// (Secure, Path=/, no Domain), unless [Config.InsecureCookies]. The pages
// are [html/template] templates the host may replace ([Config.Templates]),
// need no JavaScript and are served with a Content-Security-Policy that
// allows none.
//
// Whatever the input — a forged or replayed state or code, a cookie of
// another approval or another purpose, a replayed or cross-site POST — the
// answer is an error page (or, for a well-formed decision from the inbox
// that the policy or the state refuses, a line on top of the inbox) and
// nothing is decided: a decision is only ever
// made by [approval.Store.Decide] for the signed-in approver, which checks
// the approval's policy and state atomically.
//
// # Mounting
//
// The handler routes on the last segment of the path, so it works under
// any prefix; [Config.RedirectURL] names where it is mounted:
//
//	approvals, _ := approval.New(approval.Config{Store: store, Keys: keys,
//		URL: "https://app.example.com/approvals/", Roles: roles})
//	defer approvals.Close()
//	pg, err := page.New(ctx, page.Config{Approvals: approvals, Store: store,
//		Issuer: "https://login.example.com", ClientID: id, ClientSecret: secret,
//		RedirectURL: "https://app.example.com/approvals/callback", Keys: keys})
//	mux.Handle("/approvals/", pg)
//
// Behind a reverse proxy, RedirectURL is the public address: decision
// POSTs are accepted from its origin (and from the request's own Host).
//
// # Registering the client
//
// Register a confidential web client for the authorization code flow at
// the provider, with the redirect URI <mount>/callback exactly as in
// RedirectURL, and give the handler its issuer, client id and secret. The
// approver's tenant and role must come from the ID token, read exactly as
// the handler's bearer tokens are: set [Config.Identity] to [MapClaims] of
// the one [auth.ClaimsMapping] given to the authenticator too (its rule
// for roles: the highest of the handler's Config.Roles that the role
// claims name, a string or an array in any order). An admin who calls
// tools as an admin then approves as one:
//
//	claims := auth.ClaimsMapping{TenantClaim: "tid", Roles: roles}
//	oidc, _ := auth.NewOIDC(ctx, auth.OIDCConfig{Issuer: issuer, Audience: resource, Claims: claims.Map})
//	pg, _ := page.New(ctx, page.Config{ /* … */ Identity: page.MapClaims(claims.Map)})
//
// The ID token needs the same claims as the access token; the default
// ([DefaultIdentity]) is the bearer tokens' default, [auth.DefaultClaims].
//
//   - Google: Google Cloud console, APIs & Services, Credentials, "OAuth
//     client ID" of type "Web application", under "Authorized redirect
//     URIs". Issuer https://accounts.google.com. A Workspace domain is in
//     the claim "hd"; roles are not in the token.
//   - Microsoft Entra ID: App registrations, New registration, platform
//     "Web" with the redirect URI; a secret under "Certificates &
//     secrets". Issuer https://login.microsoftonline.com/<tenant id>/v2.0.
//     The tenant is the claim "tid" (TenantClaim "tid"), app roles the
//     claim "roles" (read by default).
//   - Okta: Applications, Create App Integration, "OIDC" and "Web
//     Application", under "Sign-in redirect URIs". Issuer
//     https://<org>.okta.com (or an authorization server's, e.g.
//     .../oauth2/default). Groups come with a groups claim you configure.
//   - Auth0: Applications, "Regular Web Application", under "Allowed
//     Callback URLs". Issuer https://<tenant>.auth0.com/ (with the final
//     slash). Tenant and role claims are added by an Action, under a
//     namespaced name.
//   - Keycloak: Clients, Create client, "OpenID Connect" with "Client
//     authentication" and "Standard flow" on, under "Valid redirect URIs".
//     Issuer https://<host>/realms/<realm>. Realm roles are in the claim
//     realm_access.roles (RoleClaims {"/realm_access/roles"}), a client's
//     in resource_access.<client>.roles; the tenant needs a mapper.
package page
