package auth

import (
	"errors"
	"net/http"
	"strings"

	"github.com/mcphandler/mcphandler"
)

// maxTokenLen bounds the bearer tokens this package looks at. Larger values
// are refused as malformed before any parsing or hashing.
const maxTokenLen = 32 << 10

// BearerToken returns the bearer token of r's Authorization header (RFC
// 6750 §2.1), the only place this package reads tokens from: a token in the
// query string or the body is ignored.
//
// It returns [ErrNoToken] when there is no Authorization header or it names
// another scheme, and a [*TokenError] with reason "malformed" when the header
// is repeated, empty after "Bearer", longer than 32 KiB, or not of the
// b64token syntax. The scheme name is case-insensitive.
func BearerToken(r *http.Request) (string, error) {
	vals := r.Header.Values("Authorization")
	if len(vals) == 0 {
		return "", ErrNoToken
	}
	if len(vals) > 1 {
		return "", invalid("malformed")
	}
	v := strings.TrimSpace(vals[0])
	scheme, tok, _ := strings.Cut(v, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", ErrNoToken
	}
	tok = strings.TrimLeft(tok, " ")
	if tok == "" || len(tok) > maxTokenLen || !isB64Token(tok) {
		return "", invalid("malformed")
	}
	return tok, nil
}

// isB64Token reports whether s matches RFC 6750's
// b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return false
		}
	}
	return true
}

// hasCredentials reports whether r carries an Authorization header at all.
func hasCredentials(r *http.Request) bool {
	return len(r.Header.Values("Authorization")) > 0
}

// First returns an authenticator that tries auths in order and returns the
// identity of the first that succeeds, for example an API key for service
// accounts, then OIDC for people:
//
//	Authenticate: auth.First(keys.Authenticate, oidc.Authenticate)
//
// A failure never stops the search: a token that one authenticator refuses
// as invalid (an API key table does not know a JWT; a JWT verifier cannot
// parse an API key) is still offered to the next. When all fail, the most
// telling error is returned, in this order: one wrapping
// [mcphandler.ErrForbidden]; [ErrUnavailable]; any other error; a
// [*TokenError] other than "malformed" or "unrecognized"; a "malformed" or
// "unrecognized" one; [ErrNoToken]. Among equals, the earliest wins. With no
// authenticators (nil ones are skipped), every request fails with
// [ErrNoToken].
//
// An error whose text contains the presented token is replaced by one of
// the same kind (forbidden, unavailable, invalid) with a fixed text, so the
// returned error never contains the token even when a host's own
// authenticator is careless.
//
// The returned function is safe for concurrent use if every auth is.
func First(auths ...mcphandler.AuthenticateFunc) mcphandler.AuthenticateFunc {
	list := make([]mcphandler.AuthenticateFunc, 0, len(auths))
	for _, a := range auths {
		if a != nil {
			list = append(list, a)
		}
	}
	return func(r *http.Request) (mcphandler.Identity, error) {
		var best error
		bestRank := -1
		for _, a := range list {
			id, err := a(r)
			if err == nil {
				return id, nil
			}
			if rk := errorRank(err); rk > bestRank {
				best, bestRank = err, rk
			}
		}
		if best == nil {
			return mcphandler.Identity{}, ErrNoToken
		}
		return mcphandler.Identity{}, redact(r, best)
	}
}

// errorRank orders failures by how much they tell; see First.
func errorRank(err error) int {
	var te *TokenError
	switch {
	case errors.Is(err, mcphandler.ErrForbidden):
		return 5
	case errors.Is(err, ErrUnavailable):
		return 4
	case errors.As(err, &te):
		if te.Reason == "malformed" || te.Reason == "unrecognized" {
			return 1
		}
		return 2
	case errors.Is(err, ErrInvalidToken):
		return 2
	case errors.Is(err, ErrNoToken):
		return 0
	default:
		return 3
	}
}

// redact replaces err by a fixed error of the same kind if its text
// contains the request's token.
func redact(r *http.Request, err error) error {
	var tok string
	if vals := r.Header.Values("Authorization"); len(vals) > 0 {
		_, tok, _ = strings.Cut(strings.TrimSpace(vals[0]), " ")
		tok = strings.TrimSpace(tok)
	}
	if len(tok) < 4 || !strings.Contains(err.Error(), tok) {
		return err
	}
	switch {
	case errors.Is(err, mcphandler.ErrForbidden):
		return errorWrap("auth: forbidden (message redacted)", mcphandler.ErrForbidden)
	case errors.Is(err, ErrUnavailable):
		return unavailable("message redacted")
	default:
		return invalid("redacted")
	}
}
