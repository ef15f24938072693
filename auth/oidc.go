package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/mcphandler/mcphandler"
)

// defaultHTTPTimeout bounds every request to an authorization server made
// with the default HTTP client.
const defaultHTTPTimeout = 10 * time.Second

// nbfLeeway is go-oidc's allowance for clock skew on "nbf".
const nbfLeeway = 5 * time.Minute

// asymmetricAlgs are the JWS algorithms a verifier may accept. Symmetric
// (HS*) algorithms and "none" never are.
var asymmetricAlgs = []string{
	oidc.RS256, oidc.RS384, oidc.RS512,
	oidc.ES256, oidc.ES384, oidc.ES512,
	oidc.PS256, oidc.PS384, oidc.PS512,
	oidc.EdDSA,
}

func defaultHTTPClient(hc *http.Client) *http.Client {
	if hc != nil {
		return hc
	}
	return &http.Client{Timeout: defaultHTTPTimeout}
}

// OIDCConfig configures [NewOIDC].
type OIDCConfig struct {
	// Issuer is the authorization server's issuer URL, exactly as its
	// discovery document (Issuer + "/.well-known/openid-configuration")
	// states it, e.g. "https://login.example.com/realms/acme". Required.
	// Tokens must carry it in "iss".
	Issuer string
	// Audience is the value the token's "aud" must contain: this MCP
	// server's canonical resource URL (the [ProtectedResource.Resource],
	// e.g. "https://api.example.com/mcp"), which clients send as the RFC
	// 8707 resource parameter. Required: tokens issued for any other
	// audience (another API, a client's ID token) are refused.
	Audience string
	// TenantClaim names the claim the default mapping reads the tenant
	// from, e.g. "org_id". If "", "tenant". Ignored when Claims is set.
	TenantClaim string
	// Claims maps verified claims to the caller's identity. Set it to
	// the Map of the [ClaimsMapping] the approval page uses too. If nil,
	// [DefaultClaims](TenantClaim).
	Claims ClaimsMapper
	// HTTPClient fetches the discovery document and the key set. If nil,
	// a client with a 10 second timeout. It is also used for later key
	// set refreshes, so it must stay usable for the OIDC's lifetime.
	HTTPClient *http.Client
	// SupportedSigningAlgs lists the accepted JWS algorithms, e.g.
	// {"RS256"}. If empty, those of the discovery document's
	// id_token_signing_alg_values_supported that this package supports,
	// or {"RS256"} if none. Only asymmetric algorithms (RS*, PS*, ES*,
	// EdDSA) are allowed: "none" and HS* make NewOIDC fail.
	SupportedSigningAlgs []string
	// KeepSubjectToken stores the caller's raw token in the identity, for
	// tools that exchange it for an upstream token ([SubjectTokenFrom],
	// [TokenExchanger]). Off by default: the token then never leaves the
	// authenticator.
	KeepSubjectToken bool
}

// OIDC verifies JWT access tokens issued by one OpenID Connect provider
// (any authorization server publishing OIDC discovery and a JWKS). Its
// Authenticate method is a [mcphandler.AuthenticateFunc].
//
// Every request is checked for: a bearer token in the Authorization header
// (never the query string); a JWS signed with an accepted asymmetric
// algorithm ("none" is refused) by a key of the provider's key set whose
// key id is known; "iss" equal to the issuer; "aud" containing the
// audience; "exp" present and in the future (no leeway); "nbf", if present,
// not more than 5 minutes in the future (go-oidc's clock skew allowance).
//
// The provider's key set is fetched on first use and cached. A token whose
// key id is not in the cache makes the set be fetched again (concurrent
// fetches are merged into one), so a key rotation at the provider is picked
// up without a restart; a key id still unknown after that is refused. As
// with any such key set, tokens with made-up key ids make it be fetched
// again, at most one fetch at a time.
//
// An OIDC is safe for concurrent use.
type OIDC struct {
	issuer   string
	audience string
	algs     []string
	verifier *oidc.IDTokenVerifier
	mapper   ClaimsMapper
	keep     bool
}

// NewOIDC fetches the provider's discovery document and returns a
// verifier for its tokens. It fails if Issuer or Audience is empty, if
// SupportedSigningAlgs names an algorithm that is not asymmetric, if the
// discovery document cannot be fetched, names another issuer or has no
// jwks_uri. ctx bounds the discovery request only; its values (not its
// cancellation) also apply to later key set fetches.
func NewOIDC(ctx context.Context, cfg OIDCConfig) (*OIDC, error) {
	if cfg.Issuer == "" {
		return nil, errors.New("auth: OIDCConfig.Issuer is required")
	}
	if cfg.Audience == "" {
		return nil, errors.New("auth: OIDCConfig.Audience is required: set it to this server's resource URL")
	}
	for _, a := range cfg.SupportedSigningAlgs {
		if !slices.Contains(asymmetricAlgs, a) {
			return nil, fmt.Errorf("auth: signing algorithm %q is not accepted (use RS*, PS*, ES* or EdDSA)", a)
		}
	}
	hc := defaultHTTPClient(cfg.HTTPClient)
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, hc), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("auth: OIDC discovery for %s: %w", cfg.Issuer, err)
	}
	var meta struct {
		JWKSURL string   `json:"jwks_uri"`
		Algs    []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := provider.Claims(&meta); err != nil {
		return nil, fmt.Errorf("auth: OIDC discovery for %s: %w", cfg.Issuer, err)
	}
	if meta.JWKSURL == "" {
		return nil, fmt.Errorf("auth: OIDC discovery for %s: no jwks_uri", cfg.Issuer)
	}
	algs := slices.Clone(cfg.SupportedSigningAlgs)
	if len(algs) == 0 {
		for _, a := range meta.Algs {
			if slices.Contains(asymmetricAlgs, a) {
				algs = append(algs, a)
			}
		}
	}
	if len(algs) == 0 {
		algs = []string{oidc.RS256}
	}
	keys := keySet{remote: oidc.NewRemoteKeySet(oidc.ClientContext(context.WithoutCancel(ctx), hc), meta.JWKSURL)}
	o := &OIDC{
		issuer:   cfg.Issuer,
		audience: cfg.Audience,
		algs:     algs,
		mapper:   cfg.Claims,
		keep:     cfg.KeepSubjectToken,
	}
	if o.mapper == nil {
		o.mapper = DefaultClaims(cfg.TenantClaim)
	}
	o.verifier = oidc.NewVerifier(cfg.Issuer, keys, &oidc.Config{
		ClientID:             cfg.Audience,
		SupportedSigningAlgs: algs,
	})
	return o, nil
}

// Authenticate verifies the bearer token of r and maps its claims to the
// caller's identity, whose Expires is the token's "exp". It is a
// [mcphandler.AuthenticateFunc].
//
// It returns [ErrNoToken] without a token, a [*TokenError] for a token
// refused for good (see its reasons), an error wrapping [ErrUnavailable]
// when the key set could not be fetched (or r's context ended while
// waiting for it), and the mapper's error when the mapping fails (with the
// default mapping, [ErrNoTenant] for a token without a tenant). No error
// contains the token.
func (o *OIDC) Authenticate(r *http.Request) (mcphandler.Identity, error) {
	tok, err := BearerToken(r)
	if err != nil {
		return mcphandler.Identity{}, err
	}
	return o.verify(r.Context(), tok)
}

func (o *OIDC) verify(ctx context.Context, tok string) (mcphandler.Identity, error) {
	if strings.Count(tok, ".") != 2 {
		return mcphandler.Identity{}, invalid("malformed")
	}
	st := &verifyState{}
	if _, err := o.verifier.Verify(context.WithValue(ctx, verifyStateKey{}, st), tok); err != nil {
		return mcphandler.Identity{}, o.classify(tok, st, err)
	}
	claims, err := ParseClaims(st.payload)
	if err != nil {
		return mcphandler.Identity{}, err
	}
	id, err := o.mapper(ctx, claims)
	if err != nil {
		return mcphandler.Identity{}, err
	}
	id = withExpiry(id, claims)
	if o.keep {
		id = withSubjectToken(id, tok)
	}
	return id, nil
}

// classify turns a go-oidc verification failure into this package's
// errors, from what the key set saw and, once the signature verified, from
// the verified claims, in go-oidc's order of checks.
func (o *OIDC) classify(tok string, st *verifyState, err error) error {
	if !st.reached {
		if alg := headerAlg(tok); alg != "" && !slices.Contains(o.algs, alg) {
			return invalid("algorithm")
		}
		return invalid("malformed")
	}
	if st.keyErr != nil {
		if errors.Is(st.keyErr, context.Canceled) || errors.Is(st.keyErr, context.DeadlineExceeded) ||
			strings.HasPrefix(st.keyErr.Error(), "fetching keys") {
			return unavailable("the key set could not be fetched")
		}
		return invalid("signature")
	}
	c, cerr := ParseClaims(st.payload)
	if cerr != nil {
		return cerr
	}
	var expired *oidc.TokenExpiredError
	switch {
	case c.Issuer != o.issuer:
		return invalid("issuer")
	case !slices.Contains(c.Audience, o.audience):
		return invalid("audience")
	case errors.As(err, &expired):
		return invalid("expired")
	}
	if v, ok := c.Raw["nbf"]; ok {
		if nbf, ok := numericDate(v); ok && time.Now().Add(nbfLeeway).Before(nbf) {
			return invalid("not_yet_valid")
		}
	}
	return invalid("claims")
}

// headerAlg returns the "alg" of a compact JWS's protected header, or "".
func headerAlg(tok string) string {
	h, _, _ := strings.Cut(tok, ".")
	b, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil {
		return ""
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(b, &hdr) != nil {
		return ""
	}
	return hdr.Alg
}

// verifyState records, for one verification, whether the key set was
// reached and what it answered.
type verifyState struct {
	reached bool
	keyErr  error
	payload []byte
}

type verifyStateKey struct{}

// keySet wraps go-oidc's remote key set to record its answer in the
// verification's verifyState.
type keySet struct {
	remote oidc.KeySet
}

func (k keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	payload, err := k.remote.VerifySignature(ctx, jwt)
	if st, ok := ctx.Value(verifyStateKey{}).(*verifyState); ok {
		st.reached, st.keyErr, st.payload = true, err, payload
	}
	return payload, err
}
