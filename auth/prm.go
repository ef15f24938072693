package auth

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/mcphandler/mcphandler"
)

// WellKnownPath is the RFC 9728 well-known path prefix of protected
// resource metadata.
const WellKnownPath = "/.well-known/oauth-protected-resource"

// prmCacheControl lets clients and proxies keep the metadata for an hour.
const prmCacheControl = "public, max-age=3600"

// ProtectedResource describes this MCP server as an OAuth 2.0 protected
// resource (RFC 9728), as MCP clients need to find its authorization
// server. It serves the metadata document ([ProtectedResource.ServeHTTP],
// [ProtectedResource.Mount]) and builds the WWW-Authenticate challenges that
// point clients to it ([ProtectedResource.Challenge],
// [ProtectedResource.ScopeChallenge]).
//
//	prm := &auth.ProtectedResource{
//		Resource:             "https://api.example.com/mcp",
//		AuthorizationServers: []string{"https://login.example.com"},
//		ScopesSupported:      []string{"mcp:tools"},
//		Scopes:               []string{"mcp:tools"},
//	}
//	prm.Mount(mux)
//	h := mcphandler.New(mcphandler.Config{
//		Authenticate: oidc.Authenticate,
//		Challenge:    prm.Challenge,
//		...
//	})
//	mux.Handle("/mcp", h)
//
// With one endpoint per tenant, use one ProtectedResource per endpoint,
// each with its own Resource.
//
// A ProtectedResource must not be changed once in use; its methods are
// then safe for concurrent use.
type ProtectedResource struct {
	// Resource is the canonical URL of the MCP endpoint, e.g.
	// "https://api.example.com/mcp": lowercase scheme and host, no
	// fragment, preferably no trailing slash. Clients send it as the RFC
	// 8707 resource parameter, so tokens carry it as their audience: it
	// must equal [OIDCConfig.Audience]. Required.
	Resource string
	// AuthorizationServers are the issuer URLs of the authorization
	// servers that issue tokens for Resource. At least one is required.
	AuthorizationServers []string
	// ScopesSupported, if set, is published as scopes_supported. Keep it
	// minimal, and without offline_access.
	ScopesSupported []string
	// BearerMethods is published as bearer_methods_supported. If empty,
	// {"header"}, the only method this package accepts.
	BearerMethods []string
	// ResourceName, if set, is a human-readable name of the server.
	ResourceName string
	// Scopes are named in the scope parameter of 401 challenges: what a
	// client should ask for to use the server at all. If empty, the
	// parameter is omitted and clients fall back to ScopesSupported.
	Scopes []string
}

// prmDocument is the JSON of RFC 9728 §2.
type prmDocument struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// resourceURL parses Resource, or returns nil if it is not an absolute
// http(s) URL without fragment.
func (p *ProtectedResource) resourceURL() *url.URL {
	u, err := url.Parse(p.Resource)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" || u.User != nil {
		return nil
	}
	return u
}

// MetadataPath returns the path of the metadata document, the well-known
// prefix inserted before Resource's path (RFC 9728 §3.1):
// "/.well-known/oauth-protected-resource/mcp" for "https://host/mcp", and
// "/.well-known/oauth-protected-resource" for "https://host" or
// "https://host/". It returns "" if Resource is not an absolute http(s)
// URL. Use it to register the document with routers other than
// [http.ServeMux].
func (p *ProtectedResource) MetadataPath() string {
	u := p.resourceURL()
	if u == nil {
		return ""
	}
	return WellKnownPath + strings.TrimSuffix(u.EscapedPath(), "/")
}

// MetadataURL returns the absolute URL of the metadata document, e.g.
// "https://host/.well-known/oauth-protected-resource/mcp" for Resource
// "https://host/mcp", as named in challenges. It returns "" if Resource is
// not an absolute http(s) URL.
func (p *ProtectedResource) MetadataURL() string {
	u := p.resourceURL()
	if u == nil {
		return ""
	}
	return u.Scheme + "://" + strings.ToLower(u.Host) + p.MetadataPath()
}

// validate reports what makes p unusable.
func (p *ProtectedResource) validate() error {
	if p.resourceURL() == nil {
		return errors.New("auth: ProtectedResource.Resource must be an absolute http(s) URL without fragment")
	}
	if len(p.AuthorizationServers) == 0 {
		return errors.New("auth: ProtectedResource.AuthorizationServers must name at least one authorization server")
	}
	return nil
}

// Mount registers p on mux at its path-inserted well-known path
// ([ProtectedResource.MetadataPath]) and at the root well-known path
// "/.well-known/oauth-protected-resource", which clients try in that order
// after the challenge's resource_metadata. It panics if Resource is not an
// absolute http(s) URL, if AuthorizationServers is empty, or if mux
// already has a handler for one of the paths (as [http.ServeMux.Handle]
// does): with several endpoints on one mux, Mount the main one and
// register the others with mux.Handle(p.MetadataPath(), p).
func (p *ProtectedResource) Mount(mux *http.ServeMux) {
	if err := p.validate(); err != nil {
		panic(err.Error())
	}
	path := p.MetadataPath()
	mux.Handle(path, p)
	if path != WellKnownPath {
		mux.Handle(WellKnownPath, p)
	}
}

// ServeHTTP serves the metadata document as JSON to GET and HEAD, with
// Cache-Control "public, max-age=3600" and Access-Control-Allow-Origin "*"
// so that browser-based clients can read it. It answers CORS preflight
// (OPTIONS) with 204 and any other method with 405. It does not look at the
// request's path, so it may be registered anywhere.
func (p *ProtectedResource) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodOptions:
		h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, MCP-Protocol-Version")
		h.Set("Access-Control-Max-Age", "86400")
		w.WriteHeader(http.StatusNoContent)
		return
	default:
		h.Set("Allow", "GET, HEAD, OPTIONS")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	doc := prmDocument{
		Resource:               p.Resource,
		AuthorizationServers:   p.AuthorizationServers,
		ScopesSupported:        p.ScopesSupported,
		BearerMethodsSupported: p.BearerMethods,
		ResourceName:           p.ResourceName,
	}
	if len(doc.BearerMethodsSupported) == 0 {
		doc.BearerMethodsSupported = []string{"header"}
	}
	body, err := json.Marshal(doc)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	body = append(body, '\n')
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", prmCacheControl)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// Challenge returns the WWW-Authenticate value for a request whose
// authentication failed with err. It is a [mcphandler.ChallengeFunc]:
//
//	Bearer resource_metadata="https://host/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"
//
// scope lists Scopes and is omitted when Scopes is empty. When a token was
// presented and refused — err wraps [ErrInvalidToken], or is any error
// other than [ErrNoToken], [ErrUnavailable] and [mcphandler.ErrForbidden]
// while the request has an Authorization header — it adds
// error="invalid_token" and, for this package's [TokenError] reasons, a
// fixed error_description (e.g. "The access token expired"). The token and
// err's text are never included. Values are quoted-strings with '"' and
// '\' escaped and control characters dropped.
func (p *ProtectedResource) Challenge(r *http.Request, err error) string {
	var c challenge
	c.add("resource_metadata", p.MetadataURL())
	c.add("scope", strings.Join(unionScopes(p.Scopes), " "))
	if code, desc := errorCode(r, err); code != "" {
		c.add("error", code)
		c.add("error_description", desc)
	}
	return c.String()
}

// ScopeChallenge returns the WWW-Authenticate value of a 403 for a call
// that needs scopes the caller's token lacks, which makes MCP clients ask
// the user for them (step-up authorization):
//
//	Bearer error="insufficient_scope", scope="mcp:tools files:write", resource_metadata="https://…"
//
// Its signature is that of the handler's Config.Scopes.Challenge hook. scope
// names, without duplicates and in this order, Scopes, the scopes the
// caller already holds (when r's context carries the handler's identity,
// see [mcphandler.IdentityFrom]) and scopes, so that clients that replace
// rather than add to their scope set (2025-11-25) keep what they had.
func (p *ProtectedResource) ScopeChallenge(r *http.Request, scopes []string) string {
	var granted []string
	if r != nil {
		if id, ok := mcphandler.IdentityFrom(r.Context()); ok {
			granted = id.Scopes
		}
	}
	var c challenge
	c.add("error", "insufficient_scope")
	c.add("scope", strings.Join(unionScopes(p.Scopes, granted, scopes), " "))
	c.add("resource_metadata", p.MetadataURL())
	return c.String()
}

// errorCode returns the RFC 6750 error code and description for err.
func errorCode(r *http.Request, err error) (code, desc string) {
	switch {
	case err == nil, errors.Is(err, ErrNoToken), errors.Is(err, ErrUnavailable), errors.Is(err, mcphandler.ErrForbidden):
		return "", ""
	case errors.Is(err, ErrInvalidToken):
		var te *TokenError
		if errors.As(err, &te) {
			desc = reasonDescriptions[te.Reason]
		}
		return "invalid_token", desc
	case r != nil && hasCredentials(r):
		return "invalid_token", ""
	}
	return "", ""
}

// unionScopes returns the scopes of the lists, split on spaces, without
// empties and duplicates, in order of first appearance.
func unionScopes(lists ...[]string) []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range lists {
		for _, s := range l {
			for _, f := range strings.Fields(s) {
				if !seen[f] {
					seen[f] = true
					out = append(out, f)
				}
			}
		}
	}
	return out
}

// challenge builds a Bearer challenge's auth-params.
type challenge struct {
	b strings.Builder
}

// add appends name="value", unless value is "".
func (c *challenge) add(name, value string) {
	if value == "" {
		return
	}
	if c.b.Len() > 0 {
		c.b.WriteString(", ")
	}
	c.b.WriteString(name)
	c.b.WriteByte('=')
	c.b.WriteString(quote(value))
}

func (c *challenge) String() string {
	if c.b.Len() == 0 {
		return "Bearer"
	}
	return "Bearer " + c.b.String()
}

// quote returns s as an HTTP quoted-string: '"' and '\' escaped, control
// characters dropped.
func quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r < 0x20 || r == 0x7f:
			continue
		case r == '"' || r == '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}
