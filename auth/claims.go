package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
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

// ParseClaims decodes a JSON object of claims that the caller has
// verified (the payload of a JWT whose signature it checked), as [OIDC]
// and [Introspection] do before they call their [ClaimsMapper]: for
// verifiers outside this package, such as the approval page's ID tokens
// (package approval/page), so that one mapper reads every token alike.
//
// It fails with a [*TokenError] "malformed" unless payload is one JSON
// object (a repeated member keeps its last value, as RFC 7519 allows), and
// "claims" when "sub" or "iss" is not a string, "aud" not a string or an
// array of strings, or "exp" not a NumericDate. Numbers are kept as
// [json.Number]. It costs time linear in len(payload); the Claims refer to
// payload, which must not be modified afterwards.
func ParseClaims(payload []byte) (Claims, error) {
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
