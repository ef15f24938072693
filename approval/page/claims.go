package page

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/mcphandler/mcphandler/approval"
)

// ClaimsIdentity returns an IdentityFunc that reads the approver's tenant
// from the claim named tenantClaim (a string) and their role from the
// claim named roleClaim: a string, or an array of strings of which the
// highest in roles (least to most privileged, the handler's Config.Roles)
// is taken. An empty name reads nothing: the tenant or role is "". A claim
// of another type refuses the sign-in; a missing one, or an array with no
// role of roles, leaves the field "".
//
// For example ClaimsIdentity("tid", "roles", roles) for Microsoft Entra ID
// (tenant id, app roles), ClaimsIdentity("hd", "", nil) for Google
// Workspace domains.
func ClaimsIdentity(tenantClaim, roleClaim string, roles []string) IdentityFunc {
	roles = slices.Clone(roles)
	return func(_ context.Context, tok *oidc.IDToken) (approval.Identity, error) {
		var claims map[string]json.RawMessage
		if err := tok.Claims(&claims); err != nil {
			return approval.Identity{}, err
		}
		who := approval.Identity{Subject: tok.Subject}
		if raw, ok := claims[tenantClaim]; ok && tenantClaim != "" {
			if err := json.Unmarshal(raw, &who.Tenant); err != nil {
				return approval.Identity{}, fmt.Errorf("page: claim %q is not a string", tenantClaim)
			}
		}
		if raw, ok := claims[roleClaim]; ok && roleClaim != "" {
			role, err := highestRole(raw, roles)
			if err != nil {
				return approval.Identity{}, fmt.Errorf("page: claim %q: %w", roleClaim, err)
			}
			who.Role = role
		}
		return who, nil
	}
}

// highestRole reads a role claim: a string as is, or the highest of an
// array's strings in roles.
func highestRole(raw json.RawMessage, roles []string) (string, error) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return "", fmt.Errorf("not a string or an array of strings")
	}
	best, rank := "", -1
	for _, r := range many {
		if i := slices.Index(roles, r); i > rank {
			best, rank = r, i
		}
	}
	return best, nil
}
