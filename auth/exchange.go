package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// Token exchange (RFC 8693) grant and token type identifiers.
const (
	GrantTypeTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	TokenTypeAccessToken   = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeJWT           = "urn:ietf:params:oauth:token-type:jwt"
	TokenTypeIDToken       = "urn:ietf:params:oauth:token-type:id_token"
)

// exchangeLeeway is how long before its expiry a cached exchanged token is
// no longer handed out.
const exchangeLeeway = 30 * time.Second

// TokenExchangeConfig configures [TokenExchange].
type TokenExchangeConfig struct {
	// TokenURL is the authorization server's token endpoint. Required.
	TokenURL string
	// ClientID and ClientSecret authenticate this server as an OAuth
	// client of the authorization server. If ClientID is empty, no client
	// authentication is sent.
	ClientID, ClientSecret string
	// AuthStyle chooses how the client authenticates:
	// [oauth2.AuthStyleInParams] sends client_id and client_secret in the
	// form; anything else (the default) sends HTTP Basic authentication
	// (client_secret_basic, form-encoded per RFC 6749 §2.3.1).
	AuthStyle oauth2.AuthStyle
	// Audience, if set, is sent as "audience": the logical name of the
	// upstream service the token is for.
	Audience string
	// Resource, if set, is sent as one "resource" parameter each: the
	// absolute URIs of the upstream APIs the token is for (RFC 8707).
	Resource []string
	// Scopes, if set, are sent space-separated as "scope": ask for no
	// more than the upstream call needs.
	Scopes []string
	// SubjectTokenType is the type of the token given to Token. If "",
	// [TokenTypeAccessToken].
	SubjectTokenType string
	// RequestedTokenType, if set, is sent as "requested_token_type".
	RequestedTokenType string
	// HTTPClient calls TokenURL. If nil, a client with a 10 second
	// timeout.
	HTTPClient *http.Client
	// NoCache turns off reusing exchanged tokens. By default a token is
	// reused for the same subject token until 30 seconds before it
	// expires (tokens without expires_in are not reused).
	NoCache bool
}

// TokenExchanger obtains, for a caller's token, a token of this server's
// own for an upstream API, with OAuth 2.0 Token Exchange (RFC 8693). This
// is how a tool acts for the user upstream without token passthrough: the
// caller's token (audience: this MCP server) is never sent to the
// upstream API, only to the authorization server, which issues a new token
// for the upstream audience.
//
//	ex := auth.TokenExchange(auth.TokenExchangeConfig{
//		TokenURL:     "https://login.example.com/oauth/token",
//		ClientID:     "mcp-server",
//		ClientSecret: os.Getenv("MCP_CLIENT_SECRET"),
//		Audience:     "https://calendar.example.com",
//		Scopes:       []string{"calendar.read"},
//	})
//	// in a tool handler, with OIDCConfig.KeepSubjectToken set:
//	subject, ok := auth.SubjectTokenFrom(call.Identity)
//	if !ok { ... }
//	tok, err := ex.Token(ctx, subject)
//	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
//
// Exchanged tokens are cached per subject token (by its SHA-256) until
// shortly before they expire. A TokenExchanger is safe for concurrent use.
type TokenExchanger struct {
	cfg    TokenExchangeConfig
	client *http.Client
	cache  ttlCache[*oauth2.Token]
	now    func() time.Time
}

// TokenExchange returns a [TokenExchanger] for cfg. It makes no request;
// configuration errors (an empty TokenURL) are reported by Token.
func TokenExchange(cfg TokenExchangeConfig) *TokenExchanger {
	cfg.Resource = slices.Clone(cfg.Resource)
	cfg.Scopes = slices.Clone(cfg.Scopes)
	if cfg.SubjectTokenType == "" {
		cfg.SubjectTokenType = TokenTypeAccessToken
	}
	return &TokenExchanger{cfg: cfg, client: defaultHTTPClient(cfg.HTTPClient), now: time.Now}
}

// Token exchanges subjectToken (the caller's token, see
// [SubjectTokenFrom]) for a token for the configured upstream audience. It
// posts grant_type=urn:ietf:params:oauth:grant-type:token-exchange with
// subject_token, subject_token_type, audience, resource, scope and
// requested_token_type (those set) to TokenURL.
//
// The returned token is a copy the caller may keep; its Extra holds the
// response's other members (e.g. "issued_token_type"). An error response
// is returned as an error wrapping [*oauth2.RetrieveError] (inspect its
// ErrorCode, e.g. "invalid_grant" when the subject token was refused); no
// error text contains the subject token.
func (e *TokenExchanger) Token(ctx context.Context, subjectToken string) (*oauth2.Token, error) {
	if e.cfg.TokenURL == "" {
		return nil, errors.New("auth: TokenExchangeConfig.TokenURL is required")
	}
	if subjectToken == "" {
		return nil, errors.New("auth: token exchange needs a subject token")
	}
	key := tokenKey(subjectToken)
	if !e.cfg.NoCache {
		if t, ok := e.cache.get(key, e.now()); ok {
			cp := *t
			return &cp, nil
		}
	}
	t, err := e.exchange(ctx, subjectToken)
	if err != nil {
		return nil, err
	}
	if !e.cfg.NoCache && !t.Expiry.IsZero() {
		cp := *t
		e.cache.put(key, &cp, t.Expiry.Add(-exchangeLeeway), e.now())
	}
	return t, nil
}

// TokenSource returns an [oauth2.TokenSource] that exchanges subjectToken
// with ctx, reusing the token until it expires; use it with
// [oauth2.NewClient] for an HTTP client of the upstream API. It is valid
// as long as subjectToken is: build one per call, not per server.
func (e *TokenExchanger) TokenSource(ctx context.Context, subjectToken string) oauth2.TokenSource {
	return oauth2.ReuseTokenSource(nil, exchangeSource{ctx: ctx, e: e, subject: subjectToken})
}

type exchangeSource struct {
	ctx     context.Context
	e       *TokenExchanger
	subject string
}

func (s exchangeSource) Token() (*oauth2.Token, error) { return s.e.Token(s.ctx, s.subject) }

// exchange makes the token exchange request.
func (e *TokenExchanger) exchange(ctx context.Context, subjectToken string) (*oauth2.Token, error) {
	params := e.cfg.AuthStyle == oauth2.AuthStyleInParams
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.TokenURL, strings.NewReader(e.form(subjectToken, params).Encode()))
	if err != nil {
		return nil, errors.New("auth: token exchange: bad TokenURL")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if !params && e.cfg.ClientID != "" {
		req.SetBasicAuth(url.QueryEscape(e.cfg.ClientID), url.QueryEscape(e.cfg.ClientSecret))
	}
	resp, err := e.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("auth: token exchange request failed: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil || len(body) > maxResponseBytes {
		return nil, errors.New("auth: token exchange: reading the response failed")
	}
	if resp.StatusCode != http.StatusOK {
		return nil, refusal(resp, body)
	}
	return e.parseToken(body)
}

// form returns the token exchange request's form for subjectToken, with
// the client's credentials if they go in the form (inParams).
func (e *TokenExchanger) form(subjectToken string, inParams bool) url.Values {
	form := url.Values{
		"grant_type":         {GrantTypeTokenExchange},
		"subject_token":      {subjectToken},
		"subject_token_type": {e.cfg.SubjectTokenType},
	}
	if e.cfg.Audience != "" {
		form.Set("audience", e.cfg.Audience)
	}
	for _, r := range e.cfg.Resource {
		form.Add("resource", r)
	}
	if len(e.cfg.Scopes) > 0 {
		form.Set("scope", strings.Join(e.cfg.Scopes, " "))
	}
	if e.cfg.RequestedTokenType != "" {
		form.Set("requested_token_type", e.cfg.RequestedTokenType)
	}
	if inParams && e.cfg.ClientID != "" {
		form.Set("client_id", e.cfg.ClientID)
		if e.cfg.ClientSecret != "" {
			form.Set("client_secret", e.cfg.ClientSecret)
		}
	}
	return form
}

// refusal returns the error for a response other than 200: it wraps an
// *oauth2.RetrieveError carrying the OAuth error members of body.
func refusal(resp *http.Response, body []byte) error {
	re := &oauth2.RetrieveError{Response: resp, Body: body}
	var eb struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
		URI         string `json:"error_uri"`
	}
	if json.Unmarshal(body, &eb) == nil {
		re.ErrorCode, re.ErrorDescription, re.ErrorURI = eb.Error, eb.Description, eb.URI
	}
	msg := "auth: token exchange refused: HTTP " + strconv.Itoa(resp.StatusCode)
	if re.ErrorCode != "" {
		msg += ": " + re.ErrorCode
	}
	return errorWrap(msg, re)
}

// parseToken decodes a successful token response.
func (e *TokenExchanger) parseToken(body []byte) (*oauth2.Token, error) {
	var tr struct {
		AccessToken  string      `json:"access_token"`
		TokenType    string      `json:"token_type"`
		RefreshToken string      `json:"refresh_token"`
		ExpiresIn    json.Number `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &tr); err != nil || tr.AccessToken == "" {
		return nil, errors.New("auth: token exchange: the response has no access_token")
	}
	var extra map[string]any
	_ = json.Unmarshal(body, &extra)
	t := &oauth2.Token{AccessToken: tr.AccessToken, TokenType: tr.TokenType, RefreshToken: tr.RefreshToken}
	if n, err := tr.ExpiresIn.Int64(); err == nil && n > 0 {
		t.ExpiresIn = n
		t.Expiry = e.now().Add(time.Duration(n) * time.Second)
	}
	return t.WithExtra(extra), nil
}
