package page

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/auth"
)

// MapClaims returns an IdentityFunc that maps the ID token's claims with
// m, the mapper of the handler's bearer tokens — typically the Map method
// of the one [auth.ClaimsMapping] also given to [auth.OIDCConfig] or
// [auth.IntrospectionConfig] — so that a person signs in here as the
// tenant, subject and role they call tools with:
//
//	claims := auth.ClaimsMapping{TenantClaim: "tid", Roles: cfg.Roles}
//	// auth.OIDCConfig{…, Claims: claims.Map}
//	// page.Config{…, Identity: page.MapClaims(claims.Map)}
//
// The claims are decoded by [auth.ParseClaims], as the bearer tokens' are
// (numbers kept exact, a repeated member keeps its last value); the
// approver is the Subject, Tenant and Role of m's identity. An error of m
// (a token without a tenant, a role claim of the wrong type) refuses the
// sign-in.
func MapClaims(m auth.ClaimsMapper) IdentityFunc {
	return func(ctx context.Context, tok *oidc.IDToken) (approval.Identity, error) {
		var payload json.RawMessage
		if err := tok.Claims(&payload); err != nil {
			return approval.Identity{}, err
		}
		c, err := auth.ParseClaims(payload)
		if err != nil {
			return approval.Identity{}, err
		}
		id, err := m(ctx, c)
		if err != nil {
			return approval.Identity{}, err
		}
		return approval.Identity{Subject: id.Subject, Tenant: id.Tenant, Role: id.Role}, nil
	}
}

// DefaultIdentity is the IdentityFunc of a Config without one: the ID
// token mapped as [auth.DefaultClaims]("") maps bearer tokens by default
// (subject "sub", tenant "tenant", a role from "role" or "roles"). A
// token without a tenant refuses the sign-in. Set Config.Identity to
// MapClaims of the mapping the bearer tokens use instead.
func DefaultIdentity(ctx context.Context, tok *oidc.IDToken) (approval.Identity, error) {
	return defaultIdentity(ctx, tok)
}

var defaultIdentity = MapClaims(auth.DefaultClaims(""))

// ClaimsIdentity is MapClaims of the [auth.ClaimsMapping] with the tenant
// claim tenantClaim ("tenant" if ""), the one role claim roleClaim (none
// if "") and roles, the handler's Config.Roles: a role claim that is a
// string or an array of strings gives the highest of roles it names.
//
// For example ClaimsIdentity("tid", "roles", roles) for Microsoft Entra ID
// (tenant id, app roles), ClaimsIdentity("hd", "", nil) for Google
// Workspace domains.
//
// Deprecated: use MapClaims with the ClaimsMapping the bearer tokens are
// mapped with, so that both sides read claims alike.
func ClaimsIdentity(tenantClaim, roleClaim string, roles []string) IdentityFunc {
	return MapClaims(auth.ClaimsMapping{TenantClaim: tenantClaim, RoleClaims: []string{roleClaim}, Roles: slices.Clone(roles)}.Map)
}
