package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcphandler/mcphandler"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// DefaultCacheTTL is how long [Introspection] trusts an active answer when
// IntrospectionConfig.CacheTTL is zero.
const DefaultCacheTTL = 30 * time.Second

// maxResponseBytes bounds the responses read from authorization servers.
const maxResponseBytes = 1 << 20

// IntrospectionConfig configures [NewIntrospection].
type IntrospectionConfig struct {
	// Endpoint is the authorization server's RFC 7662 introspection
	// endpoint URL. Required.
	Endpoint string
	// ClientID and ClientSecret are this resource server's credentials
	// at the authorization server. ClientID is required.
	ClientID, ClientSecret string
	// TokenURL, if set, is the token endpoint from which a client
	// credentials token is obtained (golang.org/x/oauth2/clientcredentials,
	// cached until it expires) and sent as a bearer token to Endpoint. If
	// empty, Endpoint is called with HTTP Basic authentication of ClientID
	// and ClientSecret (form-encoded first, per RFC 6749 §2.3.1).
	TokenURL string
	// Scopes are requested with the client credentials token (TokenURL
	// only).
	Scopes []string
	// Audience, if set, must be among the response's "aud" values; an
	// answer without "aud" is then refused. Set it to this server's
	// resource URL unless the authorization server binds tokens to
	// resource servers itself (answering active=false for tokens issued
	// for others), as MCP requires tokens to be audience-bound.
	Audience string
	// Issuer, if set, must equal the response's "iss" when present.
	Issuer string
	// TenantClaim names the member of the response the default mapping
	// reads the tenant from. If "", "tenant". Ignored when Claims is set.
	TenantClaim string
	// Claims maps the active response to the caller's identity. Set it to
	// the Map of the [ClaimsMapping] the approval page uses too. If nil,
	// [DefaultClaims](TenantClaim).
	Claims ClaimsMapper
	// CacheTTL is how long an active answer is reused for the same token,
	// never beyond the token's "exp". If zero, [DefaultCacheTTL] (30s);
	// if negative, answers are not cached. A revoked token is thus refused
	// at most CacheTTL after its revocation. Inactive answers are never
	// cached.
	CacheTTL time.Duration
	// HTTPClient calls Endpoint and TokenURL. If nil, a client with a 10
	// second timeout.
	HTTPClient *http.Client
	// KeepSubjectToken stores the caller's raw token in the identity for
	// a token exchange ([SubjectTokenFrom]). It is added per request and
	// never cached.
	KeepSubjectToken bool
}

// Introspection authenticates opaque (or any) access tokens by asking the
// authorization server about them (RFC 7662 Token Introspection). Its
// Authenticate method is a [mcphandler.AuthenticateFunc].
//
// Active answers are cached in memory for CacheTTL, keyed by the SHA-256 of
// the token (the raw token is never stored), at most 10,000 of them. An
// Introspection is safe for concurrent use.
type Introspection struct {
	endpoint string
	id       string
	secret   string
	basic    bool
	client   *http.Client
	audience string
	issuer   string
	mapper   ClaimsMapper
	ttl      time.Duration
	keep     bool
	cache    ttlCache[mcphandler.Identity]
	now      func() time.Time
}

// NewIntrospection returns an authenticator that introspects tokens at
// cfg.Endpoint. It fails if Endpoint or ClientID is empty or Endpoint is
// not an absolute http(s) URL. It makes no request.
func NewIntrospection(cfg IntrospectionConfig) (*Introspection, error) {
	if cfg.Endpoint == "" {
		return nil, errors.New("auth: IntrospectionConfig.Endpoint is required")
	}
	if u, err := url.Parse(cfg.Endpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, errors.New("auth: IntrospectionConfig.Endpoint must be an absolute http(s) URL")
	}
	if cfg.ClientID == "" {
		return nil, errors.New("auth: IntrospectionConfig.ClientID is required")
	}
	hc := defaultHTTPClient(cfg.HTTPClient)
	in := &Introspection{
		endpoint: cfg.Endpoint,
		id:       cfg.ClientID,
		secret:   cfg.ClientSecret,
		client:   hc,
		audience: cfg.Audience,
		issuer:   cfg.Issuer,
		mapper:   cfg.Claims,
		ttl:      cfg.CacheTTL,
		keep:     cfg.KeepSubjectToken,
		now:      time.Now,
	}
	if in.mapper == nil {
		in.mapper = DefaultClaims(cfg.TenantClaim)
	}
	if in.ttl == 0 {
		in.ttl = DefaultCacheTTL
	}
	if cfg.TokenURL == "" {
		in.basic = true
	} else {
		cc := &clientcredentials.Config{
			ClientID:     cfg.ClientID,
			ClientSecret: cfg.ClientSecret,
			TokenURL:     cfg.TokenURL,
			Scopes:       slices.Clone(cfg.Scopes),
		}
		ts := cc.TokenSource(context.WithValue(context.Background(), oauth2.HTTPClient, hc))
		in.client = &http.Client{
			Transport:     &oauth2.Transport{Source: ts, Base: hc.Transport},
			CheckRedirect: hc.CheckRedirect,
			Timeout:       hc.Timeout,
		}
	}
	return in, nil
}

// Authenticate introspects the bearer token of r (or reuses a cached
// active answer) and maps the answer to the caller's identity, whose
// Expires is the answer's "exp" (zero without one). It is a
// [mcphandler.AuthenticateFunc].
//
// It returns [ErrNoToken] without a token; a [*TokenError] "inactive" when
// the server says the token is not active, "expired" or "not_yet_valid"
// when its exp or nbf say so, "audience" or "issuer" when they do not
// match the configuration; an error wrapping [ErrUnavailable] when the
// endpoint cannot be reached or answers anything but 200 with a JSON
// object; and the mapper's error when the mapping fails. No error contains
// the token.
func (in *Introspection) Authenticate(r *http.Request) (mcphandler.Identity, error) {
	tok, err := BearerToken(r)
	if err != nil {
		return mcphandler.Identity{}, err
	}
	key := tokenKey(tok)
	if in.ttl > 0 {
		if id, ok := in.cache.get(key, in.now()); ok {
			return in.finish(id, tok), nil
		}
	}
	claims, err := in.introspect(r.Context(), tok)
	if err != nil {
		return mcphandler.Identity{}, err
	}
	id, err := in.mapper(r.Context(), claims)
	if err != nil {
		return mcphandler.Identity{}, err
	}
	id = withExpiry(id, claims)
	if in.ttl > 0 {
		now := in.now()
		exp := now.Add(in.ttl)
		if !claims.Expiry.IsZero() && claims.Expiry.Before(exp) {
			exp = claims.Expiry
		}
		in.cache.put(key, id, exp, now)
	}
	return in.finish(id, tok), nil
}

// finish returns a copy of a (maybe cached) identity that the caller may
// not corrupt the cache through, with the subject token if configured.
func (in *Introspection) finish(id mcphandler.Identity, tok string) mcphandler.Identity {
	id.Scopes = slices.Clone(id.Scopes)
	id.Attributes = maps.Clone(id.Attributes)
	if in.keep {
		id = withSubjectToken(id, tok)
	}
	return id
}

// introspect asks the endpoint about tok and checks the answer.
func (in *Introspection) introspect(ctx context.Context, tok string) (Claims, error) {
	form := url.Values{"token": {tok}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return Claims{}, unavailable("building the introspection request")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if in.basic {
		req.SetBasicAuth(url.QueryEscape(in.id), url.QueryEscape(in.secret))
	}
	resp, err := in.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is the endpoint's, but keep messages short
		}
		return Claims{}, errorWrap(fmt.Sprintf("auth: authorization server unavailable: introspection request failed: %v", err), ErrUnavailable)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil || len(body) > maxResponseBytes {
		return Claims{}, unavailable("reading the introspection response")
	}
	if resp.StatusCode != http.StatusOK {
		return Claims{}, unavailable("introspection endpoint answered " + strconv.Itoa(resp.StatusCode))
	}
	var head struct {
		Active *bool `json:"active"`
	}
	if err := json.Unmarshal(body, &head); err != nil || head.Active == nil {
		return Claims{}, unavailable("introspection response is not an RFC 7662 JSON object")
	}
	if !*head.Active {
		return Claims{}, invalid("inactive")
	}
	c, err := ParseClaims(body)
	if err != nil {
		return Claims{}, err
	}
	now := in.now()
	if !c.Expiry.IsZero() && !now.Before(c.Expiry) {
		return Claims{}, invalid("expired")
	}
	if v, ok := c.Raw["nbf"]; ok {
		if nbf, ok := numericDate(v); ok && now.Add(nbfLeeway).Before(nbf) {
			return Claims{}, invalid("not_yet_valid")
		}
	}
	if in.issuer != "" && c.Issuer != "" && c.Issuer != in.issuer {
		return Claims{}, invalid("issuer")
	}
	if in.audience != "" && !slices.Contains(c.Audience, in.audience) {
		return Claims{}, invalid("audience")
	}
	return c, nil
}
