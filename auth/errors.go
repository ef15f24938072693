package auth

import (
	"errors"

	"github.com/mcphandler/mcphandler"
)

// ErrNoToken is returned when a request carries no bearer token: no
// Authorization header, or one with another scheme. A token in the query
// string (access_token) is never read, so it counts as no token. The
// challenge of [ProtectedResource.Challenge] for it names no error code, as
// RFC 6750 §3.1 asks.
var ErrNoToken = errors.New("auth: no bearer token")

// ErrInvalidToken is wrapped by every error that refuses a presented token
// for good: malformed, badly signed, expired, for another audience or
// issuer, inactive or unknown. Errors wrapping it are [*TokenError]s. The
// challenge for it carries error="invalid_token".
var ErrInvalidToken = errors.New("auth: invalid token")

// ErrUnavailable is wrapped when a token could not be checked because the
// authorization server (discovery, key set or introspection endpoint) did
// not answer usefully. The token may be fine: retrying later may succeed.
// The challenge for it names no error code, so that clients do not discard
// a good token. It wraps [mcphandler.ErrAuthUnavailable], so the handler
// answers 503 rather than 401.
var ErrUnavailable = errorWrap("auth: authorization server unavailable", mcphandler.ErrAuthUnavailable)

// ErrNoTenant is returned by the claims mapping ([ClaimsMapping], [DefaultClaims])
// for a valid token that names no tenant. It wraps
// [mcphandler.ErrForbidden], so the handler answers 403: the caller is
// authenticated but belongs to no workspace, and signing in again with the
// same account would not help.
var ErrNoTenant = errorWrap("auth: the token names no tenant", mcphandler.ErrForbidden)

// TokenError refuses a presented token. It wraps [ErrInvalidToken]. Its
// text is "auth: invalid token (<reason>)"; it never contains the token nor
// any claim value.
//
// Reasons set by this package:
//
//	malformed      not a well-formed token (or not a JWT, for OIDC)
//	algorithm      signed with an algorithm that is not accepted (e.g. "none")
//	signature      signature does not verify, or its key id is unknown
//	issuer         issued by another issuer
//	audience       issued for another audience (resource)
//	expired        past its "exp" (or missing "exp", for OIDC)
//	not_yet_valid  before its "nbf"
//	claims         a required claim ("sub") is missing or of the wrong type,
//	               or [ClaimsMapping] refuses a claim (a role claim of the
//	               wrong type, a subject or tenant too long)
//	inactive       introspection says the token is not active
//	unrecognized   an API key that is not configured
//	redacted       another authenticator's error, rewritten by [First]
//	               because its text contained the token
type TokenError struct {
	Reason string
}

// Error implements error.
func (e *TokenError) Error() string { return "auth: invalid token (" + e.Reason + ")" }

// Unwrap returns [ErrInvalidToken].
func (e *TokenError) Unwrap() error { return ErrInvalidToken }

func invalid(reason string) error { return &TokenError{Reason: reason} }

// wrapped is an error with its own text that wraps another.
type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }

func errorWrap(msg string, err error) error { return &wrapped{msg: msg, err: err} }

// unavailable wraps ErrUnavailable with a description of what failed. The
// description must never contain the token.
func unavailable(what string) error {
	return errorWrap("auth: authorization server unavailable: "+what, ErrUnavailable)
}

// reasonDescriptions are the error_description values sent in challenges,
// per reason. Reasons not listed (set by hosts) send no description.
var reasonDescriptions = map[string]string{
	"malformed":     "The access token is malformed",
	"algorithm":     "The access token is signed with an algorithm that is not accepted",
	"signature":     "The access token signature is invalid",
	"issuer":        "The access token was issued by an untrusted issuer",
	"audience":      "The access token was not issued for this resource",
	"expired":       "The access token expired",
	"not_yet_valid": "The access token is not valid yet",
	"claims":        "The access token lacks required claims",
	"inactive":      "The access token is not active",
	"unrecognized":  "The access token is not recognized",
}
