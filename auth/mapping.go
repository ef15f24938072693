package auth

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/approval"
)

// DefaultTenantClaim is the claim a [ClaimsMapping] reads the tenant from
// when its TenantClaim is "".
const DefaultTenantClaim = "tenant"

// MaxNameBytes bounds the subject and the tenant a [ClaimsMapping] takes
// from claims: a token with a longer one is refused. It is
// [approval.MaxFieldBytes], so that every identity the mapping makes can
// ask for approvals and decide them. (OpenID Connect limits "sub" to 255
// ASCII characters.) A role value longer than this names no role.
const MaxNameBytes = approval.MaxFieldBytes

// ClaimsMapping is the one mapping from verified claims to the caller's
// identity. Configure it once and give it to every place that turns
// claims into an identity — the access tokens of [OIDC] and
// [Introspection], and the ID tokens of the approval page (package
// approval/page, page.MapClaims) — so that a person is the same tenant,
// subject and role wherever they sign in: an admin who calls tools as an
// admin can approve as one. Its Map method is a [ClaimsMapper]:
//
//	claims := auth.ClaimsMapping{TenantClaim: "tid", Roles: cfg.Roles}
//	oidc, err := auth.NewOIDC(ctx, auth.OIDCConfig{Issuer: issuer, Audience: resource, Claims: claims.Map})
//	pg, err := page.New(ctx, page.Config{ /* … */ Identity: page.MapClaims(claims.Map)})
//
// Map refuses a token without a subject, or whose subject or tenant is
// longer than [MaxNameBytes], or whose role claims are of the wrong type
// ([*TokenError] "claims", 401), and a token that names no tenant
// ([ErrNoTenant], 403). Otherwise:
//
//   - Subject is "sub".
//   - Tenant is the claim TenantClaim: a string, or an integer written in
//     decimal (kept exactly). Absent, null, "" or of another type, the
//     token names no tenant.
//   - Role is the highest role of Roles named by the role claims, in any
//     order and across all of them: each claim of RoleClaims that is
//     present and not null must be a string (one name) or an array of
//     strings (a token with a claim of another type, or an array with an
//     element that is not a string, is refused). Names are compared
//     exactly; names not in Roles are ignored. Without Roles there is no
//     order to choose by: the role is the name the claims give if they
//     give exactly one distinct name, never one picked by its position.
//     Otherwise (no role of Roles named; without Roles, no name or
//     several), Role is DefaultRole.
//   - Scopes are the space-separated string claim "scope" (RFC 8693,
//     RFC 9068), or else the claim "scp" (an array of strings, or a
//     space-separated string as Azure AD writes it).
//   - Attributes is nil.
//
// A claim name starting with "/" is a JSON Pointer (RFC 6901) into nested
// objects, e.g. "/realm_access/roles" for Keycloak's realm roles or
// "/resource_access/my-client/roles" for a client's roles ("~1" stands for
// "/" and "~0" for "~" in a member name); any other name is a top-level
// member, such as "https://example.com/roles".
//
// Map reads each role value once and keeps none of them: its cost is
// linear in the size of the claims (at most 32 KiB for a bearer JWT, 1 MiB
// for an introspection answer or an ID token), and the Role it returns is
// an element of Roles (or DefaultRole), never a string of the token,
// unless Roles is empty. A ClaimsMapping is a value: Map reads it and
// never changes it, so it is safe for concurrent use as long as its slices
// are not modified.
type ClaimsMapping struct {
	// TenantClaim names the claim of the tenant, e.g. "org_id", "tid"
	// (Microsoft Entra ID) or "https://example.com/workspace". If "",
	// [DefaultTenantClaim] ("tenant").
	TenantClaim string
	// RoleClaims name the claims that give the caller's roles. If nil,
	// {"role", "roles"}; an empty (non-nil) list, or "" names, read no
	// role claim, so the role is always DefaultRole.
	RoleClaims []string
	// Roles orders the role names from least to most privileged: the
	// handler's Config.Roles (and approval.Config.Roles). Use the same
	// slice.
	Roles []string
	// DefaultRole is the role of a caller whose claims name no role of
	// Roles ("" for none). It is given as is, so it should be one of
	// Roles.
	DefaultRole string
}

// defaultRoleClaims are read when ClaimsMapping.RoleClaims is nil.
var defaultRoleClaims = []string{"role", "roles"}

// Map maps verified claims to the caller's identity by the rules of
// [ClaimsMapping]. It is a [ClaimsMapper].
func (m ClaimsMapping) Map(_ context.Context, c Claims) (mcphandler.Identity, error) {
	if c.Subject == "" || len(c.Subject) > MaxNameBytes {
		return mcphandler.Identity{}, invalid("claims")
	}
	id := mcphandler.Identity{Subject: c.Subject}
	switch t := claimAt(c.Raw, cmp.Or(m.TenantClaim, DefaultTenantClaim)).(type) {
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
	if len(id.Tenant) > MaxNameBytes {
		return mcphandler.Identity{}, invalid("claims")
	}
	role, err := m.role(c.Raw)
	if err != nil {
		return mcphandler.Identity{}, err
	}
	id.Role = role
	id.Scopes = scopesOf(c.Raw)
	return id, nil
}

// role applies the rule for roles: the highest of Roles named by the role
// claims, or without Roles the one name they give; else DefaultRole.
func (m ClaimsMapping) role(raw map[string]any) (string, error) {
	names := m.RoleClaims
	if names == nil {
		names = defaultRoleClaims
	}
	best := -1                 // index in m.Roles of the highest role named
	only, several := "", false // without Roles: the one name given
	see := func(v any) bool {
		s, ok := v.(string)
		if !ok {
			return false
		}
		switch {
		case s == "" || len(s) > MaxNameBytes:
		case len(m.Roles) > 0:
			if i := slices.Index(m.Roles, s); i > best {
				best = i
			}
		case only == "":
			only = s
		case only != s:
			several = true
		}
		return true
	}
	for _, name := range names {
		if name == "" {
			continue
		}
		switch v := claimAt(raw, name).(type) {
		case nil:
		case []any:
			for _, e := range v {
				if !see(e) {
					return "", invalid("claims")
				}
			}
		default:
			if !see(v) {
				return "", invalid("claims")
			}
		}
	}
	switch {
	case best >= 0:
		return m.Roles[best], nil
	case len(m.Roles) == 0 && only != "" && !several:
		return only, nil
	}
	return m.DefaultRole, nil
}

// claimAt returns the claim name of raw (nil if absent): a top-level
// member, or for a name starting with "/" the member a JSON Pointer (RFC
// 6901) names through nested objects.
func claimAt(raw map[string]any, name string) any {
	if !strings.HasPrefix(name, "/") {
		return raw[name]
	}
	var v any = raw
	for tok := range strings.SplitSeq(name[1:], "/") {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = obj[strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")]
	}
	return v
}

// DefaultClaims returns the mapping used when no [ClaimsMapper] is
// configured: [ClaimsMapping] with the tenant claim tenantClaim ("tenant"
// if "") and nothing else set, so roles are read from "role" and "roles"
// without an order (the role is the one name they give, if exactly one)
// and there is no default role. Set [ClaimsMapping.Roles] to the handler's
// Config.Roles instead, so that a caller with several roles gets the
// highest:
//
//	claims := auth.ClaimsMapping{TenantClaim: "org_id", Roles: cfg.Roles, DefaultRole: "viewer"}
//	oidc, err := auth.NewOIDC(ctx, auth.OIDCConfig{Issuer: issuer, Audience: resource, Claims: claims.Map})
//
// Whatever the mapper, the authenticators of this package set
// Identity.Expires to the token's expiry ("exp") when it is earlier than
// the mapper's value, so that the handler ends long-lived streams then.
func DefaultClaims(tenantClaim string) ClaimsMapper {
	return ClaimsMapping{TenantClaim: tenantClaim}.Map
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
