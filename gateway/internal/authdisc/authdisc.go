package authdisc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Resource is what the MCP server's protected resource metadata (RFC 9728)
// says.
type Resource struct {
	// Resource is the resource identifier, as the document gives it; it
	// names Config.URL (see Discover).
	Resource string
	// AuthorizationServers are the issuer URLs of the authorization
	// servers, in the document's order: at least one, at most 32.
	AuthorizationServers []string
	// ScopesSupported are the scopes the document lists (at most 64), or
	// nil.
	ScopesSupported []string
}

// Server is an authorization server's metadata (RFC 8414 or OpenID
// Connect Discovery).
type Server struct {
	// Issuer is the server's issuer URL, equal to the authorization server
	// Resource named.
	Issuer string
	// AuthorizationEndpoint and TokenEndpoint are the endpoints of the
	// authorization code flow.
	AuthorizationEndpoint, TokenEndpoint string
	// RevocationEndpoint is the RFC 7009 endpoint, or "" when none.
	RevocationEndpoint string
	// CodeChallengeMethods are the PKCE methods the server supports; they
	// include S256.
	CodeChallengeMethods []string
	// ScopesSupported are the scopes the document lists (at most 64), or
	// nil.
	ScopesSupported []string
}

// Result is what Discover found.
type Result struct {
	Resource Resource
	// Server is the metadata of Resource.AuthorizationServers[0].
	Server Server
	// Scope is the scope parameter of the 401's Bearer challenge, its
	// scopes separated by single spaces, or "" when it had none. The MCP
	// specification has a client ask for this scope, or else for
	// Resource.ScopesSupported.
	Scope string
}

// Config says which upstream Discover asks, and how.
type Config struct {
	// URL is the MCP endpoint (Streamable HTTP), or the SSE URL of a
	// 2024-11-05 server (Legacy). It must be https, or http to a loopback
	// host, without userinfo or fragment. Required.
	URL string
	// Legacy probes URL with GET, as the SSE URL of a 2024-11-05 server,
	// instead of POSTing an initialize request.
	Legacy bool
	// HTTPClient sends the requests. If nil, a client with a 10 second
	// Timeout and http.DefaultTransport. Discover uses a copy of it whose
	// CheckRedirect refuses every redirect (a 3xx is an error) and that
	// has no cookie Jar; the client itself is not changed.
	HTTPClient *http.Client
	// MaxBytes bounds each metadata document and the part of the probe's
	// 401 body that is read (and dropped). If zero (or negative), 64 KiB.
	MaxBytes int64
}

var (
	// ErrNotProtected: the upstream answered the probe without asking for
	// authorization (with a status other than 401), so it needs no token
	// from this discovery. A 408, 429 or 5xx is not ErrNotProtected but a
	// plain error: it says nothing about authorization.
	ErrNotProtected = errors.New("authdisc: the upstream does not ask for authorization")
	// ErrMetadata: the upstream's authorization setup is unusable as
	// published, and asking again will not help: a challenge, protected
	// resource metadata or authorization server metadata that is missing
	// (every URL tried answered a 4xx), too large, not a JSON object, or
	// invalid (a wrong resource or issuer, a required member missing, a
	// URL that is not https, no S256, a bound passed), or a redirect.
	ErrMetadata = errors.New("authdisc: invalid authorization metadata")
)

// Bounds on what a discovery reads. They are not configurable: each is
// far above what a working server needs.
const (
	defaultMaxBytes = 64 << 10
	defaultTimeout  = 10 * time.Second
	maxServers      = 32
	maxList         = 64
	maxString       = 2 << 10
	maxDepth        = 32
	maxNumberBytes  = 128
	maxErrorText    = 256
)

// probeBody is the initialize request of the probe.
const probeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
	`"capabilities":{},"clientInfo":{"name":"mcphandler-gateway","version":"0.1.0"}}}`

// Well-known path prefixes (RFC 9728 §3, RFC 8414 §3, OpenID Connect
// Discovery §4).
const (
	wellKnownResource = "/.well-known/oauth-protected-resource"
	wellKnownServer   = "/.well-known/oauth-authorization-server"
	wellKnownOpenID   = "/.well-known/openid-configuration"
)

// Discover finds the authorization server of the MCP server at cfg.URL, as
// the package documentation describes, and returns what the protected
// resource metadata, the authorization server metadata and the 401's
// challenge say.
//
// The probe's answer decides whether there is anything to find: a 401 goes
// on, a 408, 429 or 5xx is an error, any other status is
// [ErrNotProtected]. Without a usable Bearer challenge, or without
// resource_metadata in it, the protected resource metadata is looked up at
// the well-known URIs: "/.well-known/oauth-protected-resource" inserted
// before URL's path and query (a trailing slash of the path dropped), then
// at the root. The authorization server metadata of an issuer with a path
// ("https://as/tenant1") is looked up at
// "https://as/.well-known/oauth-authorization-server/tenant1",
// "https://as/.well-known/openid-configuration/tenant1", then
// "https://as/tenant1/.well-known/openid-configuration"; of an issuer
// without one at "https://as/.well-known/oauth-authorization-server", then
// "https://as/.well-known/openid-configuration". Along a list of
// well-known URIs, the first to answer 200 is used (whatever its body), a
// 4xx other than 408 and 429 leads to the next, and anything else ends the
// discovery with an error; the URL of resource_metadata is the only one
// tried.
//
// The metadata's resource must name URL (RFC 9728 §3.3): they are
// compared with scheme and host lower-cased and a default port removed,
// an empty path being "/"; any other difference, a trailing slash
// included, is a mismatch. The server metadata's issuer must equal the
// issuer URL byte for byte (RFC 8414 §3.3).
//
// Errors wrap [ErrNotProtected] or [ErrMetadata] (test with errors.Is);
// otherwise they are the ctx's error (wrapped, with the URL being
// fetched), the HTTP client's, or a status that says to try again later.
// ctx bounds the whole discovery; so does the client's Timeout, each
// request.
func Discover(ctx context.Context, cfg Config) (Result, error) {
	d, err := newDiscovery(cfg)
	if err != nil {
		return Result{}, err
	}
	var res Result
	h, err := d.probe(ctx)
	if err != nil {
		return Result{}, err
	}
	var candidates []string
	single := false
	if params, ok := ParseChallenge(h.Values("WWW-Authenticate")); ok {
		if s, ok := params["scope"]; ok {
			if res.Scope, err = challengeScope(s); err != nil {
				return Result{}, fmt.Errorf("%w: the challenge of %s: scope: %v", ErrMetadata, cut(cfg.URL), err)
			}
		}
		if rm, ok := params["resource_metadata"]; ok {
			if _, err := checkURL(rm, d.local); err != nil {
				return Result{}, fmt.Errorf("%w: the challenge of %s: resource_metadata: %v", ErrMetadata, cut(cfg.URL), err)
			}
			candidates, single = []string{rm}, true
		}
	}
	if candidates == nil {
		candidates = resourceCandidates(d.url)
	}
	at, body, err := d.first(ctx, "protected resource metadata", candidates, single)
	if err != nil {
		return Result{}, err
	}
	if res.Resource, err = decodeResource(body, d.local); err != nil {
		return Result{}, fmt.Errorf("%w: protected resource metadata at %s: %v", ErrMetadata, cut(at), err)
	}
	ru, _ := url.Parse(res.Resource.Resource) // checked by decodeResource
	if canonical(ru) != canonical(d.url) {
		return Result{}, fmt.Errorf("%w: protected resource metadata at %s: resource %q is not %q",
			ErrMetadata, cut(at), cut(res.Resource.Resource), cut(cfg.URL))
	}

	issuer := res.Resource.AuthorizationServers[0]
	iu, _ := url.Parse(issuer) // checked by decodeResource
	at, body, err = d.first(ctx, "authorization server metadata", serverCandidates(iu), false)
	if err != nil {
		return Result{}, err
	}
	if res.Server, err = decodeServer(body, d.local); err != nil {
		return Result{}, fmt.Errorf("%w: authorization server metadata at %s: %v", ErrMetadata, cut(at), err)
	}
	if res.Server.Issuer != issuer {
		return Result{}, fmt.Errorf("%w: authorization server metadata at %s: issuer %q is not %q",
			ErrMetadata, cut(at), cut(res.Server.Issuer), cut(issuer))
	}
	return res, nil
}

// discovery is a Config checked, with its defaults applied.
type discovery struct {
	url    *url.URL
	raw    string
	legacy bool
	client *http.Client
	max    int64
	// local: URL is on a loopback host, so http URLs to loopback hosts are
	// accepted.
	local bool
}

// refuseRedirect makes the client return a 3xx answer as it is.
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func newDiscovery(cfg Config) (*discovery, error) {
	u, err := checkURL(cfg.URL, true)
	if err != nil {
		return nil, fmt.Errorf("authdisc: Config.URL: %v", err)
	}
	d := &discovery{url: u, raw: cfg.URL, legacy: cfg.Legacy, max: cfg.MaxBytes, local: isLoopback(u.Hostname())}
	c := http.Client{Timeout: defaultTimeout}
	if cfg.HTTPClient != nil {
		c = *cfg.HTTPClient
	}
	c.CheckRedirect = refuseRedirect
	c.Jar = nil
	d.client = &c
	if d.max <= 0 {
		d.max = defaultMaxBytes
	}
	return d, nil
}

// probe makes the request without credentials and returns the header of
// its 401 answer.
func (d *discovery) probe(ctx context.Context) (http.Header, error) {
	method, body, accept := http.MethodPost, io.Reader(strings.NewReader(probeBody)), "application/json, text/event-stream"
	if d.legacy {
		method, body, accept = http.MethodGet, nil, "text/event-stream"
	}
	req, err := http.NewRequestWithContext(ctx, method, d.raw, body)
	if err != nil {
		return nil, fmt.Errorf("authdisc: probe %s %s: %v", method, cut(d.raw), err)
	}
	if !d.legacy {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, d.clientErr(ctx, "probe "+method, d.raw, err)
	}
	// A 2xx answer may be a stream that never ends: only a 401's body is
	// read, so that its connection can be used again.
	if resp.StatusCode == http.StatusUnauthorized {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, d.max))
	}
	_ = resp.Body.Close()
	switch code := resp.StatusCode; {
	case code == http.StatusUnauthorized:
		return resp.Header, nil
	case transient(code):
		return nil, fmt.Errorf("authdisc: probe %s %s: %s", method, cut(d.raw), status(code))
	default:
		return nil, fmt.Errorf("%w: probe %s %s: %s", ErrNotProtected, method, cut(d.raw), status(code))
	}
}

// first GETs the candidates in order and returns the first that answers
// 200, with its body. A 4xx other than 408 and 429 leads to the next
// candidate, unless single (the only URL to try); any other answer is an
// error.
func (d *discovery) first(ctx context.Context, what string, candidates []string, single bool) (string, []byte, error) {
	var tried []string
	for _, c := range candidates {
		code, body, err := d.get(ctx, what, c)
		switch {
		case err != nil:
			return "", nil, err
		case code == http.StatusOK:
			return c, body, nil
		case code >= 300 && code < 400:
			return "", nil, fmt.Errorf("%w: %s at %s: %s (redirects are not followed)", ErrMetadata, what, cut(c), status(code))
		case code < 300:
			return "", nil, fmt.Errorf("%w: %s at %s: %s, not 200", ErrMetadata, what, cut(c), status(code))
		case transient(code):
			return "", nil, fmt.Errorf("authdisc: %s at %s: %s", what, cut(c), status(code))
		case single:
			return "", nil, fmt.Errorf("%w: %s at %s: %s", ErrMetadata, what, cut(c), status(code))
		}
		tried = append(tried, cut(c)+" ("+strconv.Itoa(code)+")")
	}
	return "", nil, fmt.Errorf("%w: no %s: %s", ErrMetadata, what, strings.Join(tried, ", "))
}

// get GETs target and returns the status and, for a 200, the body.
func (d *discovery) get(ctx context.Context, what, target string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("authdisc: %s at %s: %v", what, cut(target), err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, nil, d.clientErr(ctx, what+" at", target, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil, nil
	}
	if resp.ContentLength > d.max {
		return 0, nil, fmt.Errorf("%w: %s at %s: larger than %d bytes", ErrMetadata, what, cut(target), d.max)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, d.max+1))
	switch {
	case err != nil:
		return 0, nil, d.clientErr(ctx, what+" at", target, err)
	case int64(len(body)) > d.max:
		return 0, nil, fmt.Errorf("%w: %s at %s: larger than %d bytes", ErrMetadata, what, cut(target), d.max)
	}
	return resp.StatusCode, body, nil
}

// clientErr is the error of a request to target that failed: the ctx's
// when it ended (the client reports its own words for that), else the
// client's, without the URL it repeats uncut.
func (d *discovery) clientErr(ctx context.Context, op, target string, err error) error {
	if ctx.Err() != nil {
		if c := context.Cause(ctx); c != nil {
			err = c
		} else {
			err = ctx.Err()
		}
	} else if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return fmt.Errorf("authdisc: %s %s: %w", op, cut(target), err)
}

// transient reports whether a status says to try again later: 408, 429 or
// a 5xx.
func transient(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}

// status names an HTTP status: "HTTP 404 Not Found".
func status(code int) string {
	s := "HTTP " + strconv.Itoa(code)
	if t := http.StatusText(code); t != "" {
		s += " " + t
	}
	return s
}

// resourceCandidates are the well-known URIs of u's protected resource
// metadata (RFC 9728 §3.1): path-inserted, then at the root; only the
// root when u has neither path nor query.
func resourceCandidates(u *url.URL) []string {
	root := u.Scheme + "://" + u.Host + wellKnownResource
	rest := strings.TrimSuffix(u.EscapedPath(), "/")
	if u.RawQuery != "" {
		rest += "?" + u.RawQuery
	}
	if rest == "" {
		return []string{root}
	}
	return []string{root + rest, root}
}

// serverCandidates are the well-known URIs of the metadata of the issuer
// u, in the order of the MCP specification: RFC 8414 path-inserted, OpenID
// Connect path-inserted, OpenID Connect path-appended; without a path,
// RFC 8414 then OpenID Connect. A trailing slash of the path is dropped
// (RFC 8414 §3.1, OpenID Connect Discovery §4).
func serverCandidates(u *url.URL) []string {
	origin := u.Scheme + "://" + u.Host
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	if p == "" {
		return []string{origin + wellKnownServer, origin + wellKnownOpenID}
	}
	return []string{origin + wellKnownServer + p, origin + wellKnownOpenID + p, origin + p + wellKnownOpenID}
}
