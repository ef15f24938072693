package gateway

import (
	listpkg "container/list"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/auth"
)

// The token exchange's defaults and bounds (see ExchangeConfig).
const (
	defaultMaxTokens = 4096
	// exchangeLeeway is how long before its expiry an exchanged token is
	// no longer sent: a call's requests go upstream within moments of
	// the call's start, and the upstream checks the token then.
	exchangeLeeway = 30 * time.Second
	// exchangeTimeout bounds one exchange, whoever waits for it.
	exchangeTimeout = 30 * time.Second
	// maxTokenBytes bounds an exchanged token, so that what is kept is
	// bounded: MaxTokens of them.
	maxTokenBytes = 16 << 10
)

// ExchangeConfig configures [NewTokenExchange].
type ExchangeConfig struct {
	// Exchange is the authorization server's token endpoint, this
	// gateway's client there, and what the token asked for is for:
	// Audience (the upstream's logical name), Resource (its URIs, RFC
	// 8707), Scopes (no more than its tools need). When neither Audience
	// nor Resource is set, Resource is the upstream's URL: the MCP server
	// the token is for. TokenURL is required. NoCache is ignored: the
	// source keeps the tokens itself (MaxTokens). Its HTTPClient, if nil,
	// is one with a 10 s timeout.
	Exchange auth.TokenExchangeConfig
	// SubjectToken returns the caller's own token, as the host's
	// Authenticate saw it: sent to TokenURL as the subject_token, and
	// nowhere else. ctx is the request's, id the caller. If nil, the
	// token auth.SubjectTokenFrom(id) gives (an authenticator of package
	// auth with KeepSubjectToken), else the bearer token of the request
	// being served (mcphandler.RequestFrom), when that request is the
	// caller's (mcphandler.IdentityFrom names the same tenant and
	// subject). A caller without one has no credentials (ErrNoCredentials).
	SubjectToken func(ctx context.Context, id mcphandler.Identity) (string, bool)
	// MaxTokens bounds the exchanged tokens kept; 0 means 4096. Past it
	// the one used least recently is forgotten (its caller's next request
	// exchanges again). A token is at most 16 KiB: a longer one is
	// refused.
	MaxTokens int
}

// TokenExchange is a [CredentialSource] that sends each caller's own
// token to the upstream, "Authorization: Bearer <token>": a token the
// authorization server issued for the upstream in exchange for the
// caller's (OAuth 2.0 Token Exchange, RFC 8693, with auth.TokenExchanger).
// The caller's own token goes to the token endpoint only, never upstream.
// Its Kind is "token-exchange".
//
// Exchanged tokens are kept per tenant, subject, the caller's token (by
// its SHA-256), upstream (its ID and URL) and what this source asks for
// (its audience, resources and scopes: one source per upstream and scope
// keeps them apart), until 30 s before they expire (expires_in; a token
// without one is used once, never kept). So a person's lists and calls
// of an upstream are made with one token until then, one exchange per
// person, upstream and expiry, and their lists are cached for them (the
// list cache is keyed by the headers sent); a new token of the same
// person is exchanged anew, and no key of one person is another's.
// Concurrent requests of one key wait for one exchange (at most 30 s; a
// request that gives up does not end it for the others); requests of
// different keys never wait for each other. At most MaxTokens (4096)
// tokens are kept, the least recently used forgotten first; expired
// ones are dropped when met.
//
// A refused exchange (the token endpoint's 4xx answer, but 429), a caller
// without a token, or a token that cannot be sent as a bearer token is
// an error wrapping ErrNoCredentials: that caller's calls of the upstream
// fail, not retryable. A token endpoint that cannot be reached, times
// out, or answers 429 or 5xx is a plain error: retryable. Failures are
// not kept: the next request exchanges again. Either is that caller's
// only (see CredentialSource): never counted against the upstream's
// breaker, never another credential sent instead.
//
// A TokenExchange is safe for concurrent use.
type TokenExchange struct {
	cfg      ExchangeConfig
	subject  func(ctx context.Context, id mcphandler.Identity) (string, bool)
	fixed    *auth.TokenExchanger // when Audience or Resource is set
	max      int
	now      func() time.Time
	mu       sync.Mutex
	tokens   map[[32]byte]*exchanged
	lru      listpkg.List // of *exchanged, most recently used first
	inFlight map[[32]byte]*exchange
}

// exchanged is a token kept for one key.
type exchanged struct {
	key   [32]byte
	token string
	until time.Time // sent until then
	elem  *listpkg.Element
}

// exchange is one exchange under way, which the requests of its key wait
// for.
type exchange struct {
	done  chan struct{}
	token string
	err   error
}

// NewTokenExchange returns a TokenExchange of cfg. It makes no request.
func NewTokenExchange(cfg ExchangeConfig) (*TokenExchange, error) {
	if cfg.Exchange.TokenURL == "" {
		return nil, errors.New("gateway: ExchangeConfig.Exchange.TokenURL is required")
	}
	if cfg.Exchange.HTTPClient == nil {
		cfg.Exchange.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	cfg.Exchange.NoCache = true // kept here, per person
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = defaultMaxTokens
	}
	s := &TokenExchange{cfg: cfg, subject: cfg.SubjectToken, max: cfg.MaxTokens, now: time.Now,
		tokens: make(map[[32]byte]*exchanged), inFlight: make(map[[32]byte]*exchange)}
	if s.subject == nil {
		s.subject = subjectToken
	}
	if cfg.Exchange.Audience != "" || len(cfg.Exchange.Resource) > 0 {
		s.fixed = auth.TokenExchange(cfg.Exchange)
	}
	return s, nil
}

// Kind is "token-exchange".
func (*TokenExchange) Kind() string { return "token-exchange" }

// Credentials returns "Authorization: Bearer <token>", the token kept
// for the caller id at u, or one exchanged now for id's own token.
func (s *TokenExchange) Credentials(ctx context.Context, id mcphandler.Identity, u *Upstream) (http.Header, error) {
	subject, ok := s.subject(ctx, id)
	if !ok || subject == "" {
		return nil, fmt.Errorf("%w: no token of the caller's own to exchange", ErrNoCredentials)
	}
	key := s.key(id, subject, u)
	s.mu.Lock()
	if e, ok := s.tokens[key]; ok {
		if s.now().Before(e.until) {
			s.lru.MoveToFront(e.elem)
			tok := e.token
			s.mu.Unlock()
			return bearerHeader(tok), nil
		}
		s.forget(e)
	}
	x, ok := s.inFlight[key]
	if !ok {
		x = &exchange{done: make(chan struct{})}
		s.inFlight[key] = x
		go s.run(context.WithoutCancel(ctx), key, x, subject, u.URL)
	}
	s.mu.Unlock()
	select {
	case <-x.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if x.err != nil {
		return nil, x.err
	}
	return bearerHeader(x.token), nil
}

// run makes the exchange of x for key, keeps its token when it says
// when it expires, and wakes who waits for it.
func (s *TokenExchange) run(ctx context.Context, key [32]byte, x *exchange, subject, url string) {
	ctx, cancel := context.WithTimeout(ctx, exchangeTimeout)
	defer cancel()
	start := s.now()
	ex := s.fixed
	if ex == nil {
		cfg := s.cfg.Exchange
		cfg.Resource = []string{url}
		ex = auth.TokenExchange(cfg)
	}
	t, err := ex.Token(ctx, subject)
	if err == nil {
		err = checkExchanged(t)
	}
	s.mu.Lock()
	delete(s.inFlight, key)
	if err != nil {
		x.err = exchangeError(err)
	} else {
		x.token = t.AccessToken
		if life := time.Duration(t.ExpiresIn) * time.Second; life > exchangeLeeway {
			s.keep(key, t.AccessToken, start.Add(life-exchangeLeeway))
		}
	}
	s.mu.Unlock()
	close(x.done)
}

// keep keeps token for key until until, forgetting the least recently
// used token when max are kept. Called with mu held.
func (s *TokenExchange) keep(key [32]byte, token string, until time.Time) {
	if e, ok := s.tokens[key]; ok {
		s.forget(e)
	}
	for len(s.tokens) >= s.max {
		s.forget(s.lru.Back().Value.(*exchanged))
	}
	e := &exchanged{key: key, token: token, until: until}
	e.elem = s.lru.PushFront(e)
	s.tokens[key] = e
}

// forget drops e. Called with mu held.
func (s *TokenExchange) forget(e *exchanged) {
	s.lru.Remove(e.elem)
	delete(s.tokens, e.key)
}

// key is whose token for which upstream this is: tenant, subject, the
// caller's token, the upstream's ID and URL, each with its length.
// Audience, resources and scopes are this source's own.
func (s *TokenExchange) key(id mcphandler.Identity, subject string, u *Upstream) [32]byte {
	h := sha256.New()
	for _, v := range []string{id.Tenant, id.Subject, subject, u.ID, u.URL} {
		writeString(h, v)
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// len is how many tokens are kept.
func (s *TokenExchange) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tokens)
}

func bearerHeader(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

// checkExchanged refuses a token that cannot be sent as a bearer token:
// of another type, too long, or with bytes a header value cannot hold
// (RFC 6750's b64token is visible ASCII).
func checkExchanged(t *oauth2.Token) error {
	if t.TokenType != "" && !strings.EqualFold(t.TokenType, "bearer") {
		return fmt.Errorf("%w: the token exchange issued a token of type %.32q, not a bearer token", ErrNoCredentials, t.TokenType)
	}
	if len(t.AccessToken) > maxTokenBytes {
		return fmt.Errorf("%w: the token exchange issued a token of more than %d bytes", ErrNoCredentials, maxTokenBytes)
	}
	for i := 0; i < len(t.AccessToken); i++ {
		if c := t.AccessToken[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("%w: the token exchange issued a token that is not visible ASCII", ErrNoCredentials)
		}
	}
	return nil
}

// exchangeError is the error of a failed exchange: wrapping
// ErrNoCredentials when the token endpoint refused it for good (4xx but
// 429), plain when it may work later.
func exchangeError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		if c := re.Response.StatusCode; c >= 400 && c < 500 && c != http.StatusTooManyRequests {
			return fmt.Errorf("%w: %w", ErrNoCredentials, err)
		}
	}
	if errors.Is(err, ErrNoCredentials) {
		return err
	}
	return fmt.Errorf("gateway: token exchange failed: %w", err)
}

// subjectToken is the caller's own token: auth.SubjectTokenFrom(id), else
// the bearer token of the request in ctx when that request is id's.
func subjectToken(ctx context.Context, id mcphandler.Identity) (string, bool) {
	if t, ok := auth.SubjectTokenFrom(id); ok {
		return t, true
	}
	rid, ok := mcphandler.IdentityFrom(ctx)
	if !ok || rid.Tenant != id.Tenant || rid.Subject != id.Subject {
		return "", false
	}
	r, ok := mcphandler.RequestFrom(ctx)
	if !ok {
		return "", false
	}
	a := r.Header.Get("Authorization")
	if len(a) < 7 || !strings.EqualFold(a[:7], "bearer ") {
		return "", false
	}
	t := strings.TrimSpace(a[7:])
	return t, t != ""
}
