package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/mcphandler/mcphandler"
)

// Claims are the verified claims of a token: the payload of a JWT whose
// signature, issuer, audience and lifetime were checked, or the response of
// a token introspection that said the token is active.
type Claims struct {
	// Subject is the "sub" claim ("" if absent).
	Subject string
	// Issuer is the "iss" claim ("" if absent).
	Issuer string
	// Audience is the "aud" claim, a string or an array in the token.
	Audience []string
	// Expiry is the "exp" claim (zero if absent).
	Expiry time.Time
	// Raw holds every claim as decoded from JSON, numbers as json.Number.
	// It is shared by the mapper and must not be modified.
	Raw map[string]any

	json []byte
}

// Decode unmarshals the claims into v, a pointer to a struct with json
// tags or to a map, for claims the fixed fields do not cover:
//
//	var c struct {
//		Org   string   `json:"org_id"`
//		Email string   `json:"email"`
//		Roles []string `json:"roles"`
//	}
//	err := claims.Decode(&c)
func (c Claims) Decode(v any) error {
	if c.json == nil {
		return fmt.Errorf("auth: no claims to decode")
	}
	return json.Unmarshal(c.json, v)
}

// String returns a fixed text: claims are not logged by accident.
func (c Claims) String() string { return "auth.Claims{sub:" + c.Subject + "}" }

// newClaims decodes a verified JSON object of claims.
func newClaims(payload []byte) (Claims, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return Claims{}, invalid("malformed")
	}
	if _, err := dec.Token(); err != io.EOF {
		return Claims{}, invalid("malformed")
	}
	c := Claims{Raw: raw, json: payload}
	var ok bool
	if v, present := raw["sub"]; present {
		if c.Subject, ok = v.(string); !ok {
			return Claims{}, invalid("claims")
		}
	}
	if v, present := raw["iss"]; present {
		if c.Issuer, ok = v.(string); !ok {
			return Claims{}, invalid("claims")
		}
	}
	if v, present := raw["aud"]; present {
		aud, ok := stringList(v)
		if !ok {
			return Claims{}, invalid("claims")
		}
		c.Audience = aud
	}
	if v, present := raw["exp"]; present {
		t, ok := numericDate(v)
		if !ok {
			return Claims{}, invalid("claims")
		}
		c.Expiry = t
	}
	return c, nil
}

// stringList reads a claim that is a string or an array of strings.
func stringList(v any) ([]string, bool) {
	switch v := v.(type) {
	case string:
		return []string{v}, true
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}

// numericDate reads a JWT NumericDate (seconds since the epoch, maybe with
// a fraction).
func numericDate(v any) (time.Time, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return time.Time{}, false
	}
	f, err := n.Float64()
	if err != nil || f < 0 || f > 1<<40 {
		return time.Time{}, false
	}
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9)), true
}

// ClaimsMapper turns verified claims into the caller's identity. It is
// called once per verified token (per request for OIDC; per cache miss for
// introspection), with the request's context, and must be safe for
// concurrent use. An error fails authentication: the handler answers 403
// if it wraps [mcphandler.ErrForbidden] and 401 otherwise; its text is
// never sent to the client.
//
// The Identity's Attributes map may be shared between requests by the
// package's caches: a mapper should return a fresh map each time and
// callers must treat it as read-only.
type ClaimsMapper func(ctx context.Context, claims Claims) (mcphandler.Identity, error)

// withExpiry returns id with Expires set to the token's expiry when that
// is known and earlier than what the mapper set, so that the handler ends
// the caller's long-lived streams when the token expires.
func withExpiry(id mcphandler.Identity, c Claims) mcphandler.Identity {
	if !c.Expiry.IsZero() && (id.Expires.IsZero() || c.Expiry.Before(id.Expires)) {
		id.Expires = c.Expiry
	}
	return id
}

// DefaultTenantClaim is the claim [DefaultClaims] reads the tenant from
// when given "".
const DefaultTenantClaim = "tenant"

// DefaultClaims returns the mapping used when no [ClaimsMapper] is
// configured:
//
//   - Subject is "sub". A token without one is refused ([*TokenError]
//     "claims").
//   - Tenant is the top-level claim tenantClaim ("tenant" if ""), for
//     example "org_id" or "https://example.com/workspace"; a string, or a
//     number written in decimal. A token without it fails with
//     [ErrNoTenant] (403).
//   - Role is the string claim "role", or else the first string of the
//     array claim "roles"; "" if neither.
//   - Scopes are the space-separated string claim "scope" (RFC 8693,
//     RFC 9068), or else the claim "scp" (an array of strings, or a
//     space-separated string as Azure AD writes it).
//   - Attributes is nil.
//
// Whatever the mapper, the authenticators of this package set
// Identity.Expires to the token's expiry ("exp") when it is earlier than
// the mapper's value, so that the handler ends long-lived streams then.
//
// A custom mapper may call the default one and adjust its result:
//
//	base := auth.DefaultClaims("org_id")
//	mapper := func(ctx context.Context, c auth.Claims) (mcphandler.Identity, error) {
//		id, err := base(ctx, c)
//		if err == nil && id.Role == "" {
//			id.Role = "viewer"
//		}
//		return id, err
//	}
func DefaultClaims(tenantClaim string) ClaimsMapper {
	if tenantClaim == "" {
		tenantClaim = DefaultTenantClaim
	}
	return func(_ context.Context, c Claims) (mcphandler.Identity, error) {
		if c.Subject == "" {
			return mcphandler.Identity{}, invalid("claims")
		}
		id := mcphandler.Identity{Subject: c.Subject}
		switch t := c.Raw[tenantClaim].(type) {
		case string:
			id.Tenant = t
		case json.Number:
			if _, err := t.Int64(); err == nil {
				id.Tenant = t.String()
			}
		}
		if id.Tenant == "" {
			return mcphandler.Identity{}, ErrNoTenant
		}
		if role, ok := c.Raw["role"].(string); ok {
			id.Role = role
		} else if roles, ok := c.Raw["roles"].([]any); ok && len(roles) > 0 {
			id.Role, _ = roles[0].(string)
		}
		id.Scopes = scopesOf(c.Raw)
		return id, nil
	}
}

// scopesOf reads "scope", or else "scp".
func scopesOf(raw map[string]any) []string {
	if s, ok := raw["scope"].(string); ok {
		return strings.Fields(s)
	}
	switch v := raw["scp"].(type) {
	case string:
		return strings.Fields(v)
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// subjectTokenKey is the Attributes key under which the caller's raw token
// is kept when KeepSubjectToken is set. The value has the unexported type
// subjectToken, readable only through SubjectTokenFrom.
const subjectTokenKey = "github.com/mcphandler/mcphandler/auth.subjectToken"

// subjectToken holds a raw token. Every way of printing or encoding it
// shows "[REDACTED]".
type subjectToken struct{ raw string }

func (subjectToken) String() string               { return "[REDACTED]" }
func (subjectToken) GoString() string             { return "[REDACTED]" }
func (subjectToken) Format(f fmt.State, _ rune)   { _, _ = io.WriteString(f, "[REDACTED]") }
func (subjectToken) MarshalJSON() ([]byte, error) { return []byte(`"[REDACTED]"`), nil }
func (subjectToken) MarshalText() ([]byte, error) { return []byte("[REDACTED]"), nil }
func (subjectToken) LogValue() slog.Value         { return slog.StringValue("[REDACTED]") }

// SubjectTokenFrom returns the caller's own access token, as presented to
// the server, if the authenticator that produced id was configured with
// KeepSubjectToken ([OIDCConfig], [IntrospectionConfig]).
//
// Its only legitimate use is as the subject_token of an OAuth 2.0 Token
// Exchange ([TokenExchanger.Token]) that obtains a token for an upstream
// API: never forward it upstream as is (MCP forbids token passthrough), and
// never log it. The value is stored in id.Attributes under a key reserved
// for this package, with a type that prints and encodes as "[REDACTED]".
func SubjectTokenFrom(id mcphandler.Identity) (string, bool) {
	t, ok := id.Attributes[subjectTokenKey].(subjectToken)
	if !ok || t.raw == "" {
		return "", false
	}
	return t.raw, true
}

// withSubjectToken returns id with tok added to a copy of its Attributes.
func withSubjectToken(id mcphandler.Identity, tok string) mcphandler.Identity {
	attrs := make(map[string]any, len(id.Attributes)+1)
	maps.Copy(attrs, id.Attributes)
	attrs[subjectTokenKey] = subjectToken{raw: tok}
	id.Attributes = attrs
	return id
}
