package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/internal/oidctest"
)

// checkCase fails unless id and err are what c says every path gives.
func checkCase(t *testing.T, path string, c oidctest.ClaimsCase, id mcphandler.Identity, err error) {
	t.Helper()
	switch c.Refused {
	case "":
		if err != nil || id.Tenant != c.Tenant || id.Subject != c.Subject || id.Role != c.Role {
			t.Errorf("%s: %q/%q/%q, %v; want %q/%q/%q", path, id.Tenant, clip(id.Subject), id.Role, err, c.Tenant, c.Subject, c.Role)
		}
	case "invalid":
		if !errors.Is(err, ErrInvalidToken) || errors.Is(err, mcphandler.ErrForbidden) {
			t.Errorf("%s: %+v, %v; want an invalid token", path, id, err)
		}
	case "forbidden":
		if !errors.Is(err, ErrNoTenant) {
			t.Errorf("%s: %+v, %v; want ErrNoTenant", path, id, err)
		}
	}
}

func clip(s string) string { return s[:min(len(s), 40)] }

// TestClaimsMappingEveryPath: the attacker's claims
// (oidctest.ClaimsCases: roles in any order, unknown, duplicated, nested,
// of the wrong type or many; tenants of every type) give the same
// identity, or the same refusal, as a bearer JWT (OIDC), as an
// introspection answer and through ParseClaims and Map.
func TestClaimsMappingEveryPath(t *testing.T) {
	p := newFakeProvider(t)
	for i, c := range oidctest.ClaimsCases {
		t.Run(c.Name, func(t *testing.T) {
			m := ClaimsMapping{RoleClaims: c.RoleClaims, Roles: oidctest.ClaimsRoles, DefaultRole: c.DefaultRole}
			o := newTestOIDC(t, p, func(cfg *OIDCConfig) { cfg.Claims = m.Map })
			in := newTestIntrospection(t, p, func(cfg *IntrospectionConfig) { cfg.Claims = m.Map })
			exp := time.Now().Add(time.Hour).Unix()
			payload := c.Payload(t, map[string]any{"iss": p.issuer(), "aud": testAudience, "exp": exp})
			jwt := oidctest.SignPayload(t, p.key(), "at+jwt", payload)
			opaque := fmt.Sprintf("opaque-%d", i)
			p.setIntrospection(opaque, json.RawMessage(c.Payload(t, map[string]any{"active": true, "iss": p.issuer(), "aud": []string{testAudience}, "exp": exp})))

			id, err := o.Authenticate(bearerRequest("Bearer " + jwt))
			checkCase(t, "bearer JWT", c, id, err)
			for range 2 { // the second from the cache
				id, err = in.Authenticate(bearerRequest("Bearer " + opaque))
				checkCase(t, "introspection", c, id, err)
			}
			claims, err := ParseClaims(payload)
			if err == nil {
				id, err = m.Map(t.Context(), claims)
			}
			checkCase(t, "ParseClaims and Map", c, id, err)
		})
	}
}

// TestDefaultClaimsNoOrder: the default mapping (no Roles to order roles
// by) never picks a role by its position in the token: two roles give
// none, whatever their order, through OIDC and introspection alike; one
// role, as a string or an array, is taken as is.
func TestDefaultClaimsNoOrder(t *testing.T) {
	p := newFakeProvider(t)
	o := newTestOIDC(t, p, nil)
	in := newTestIntrospection(t, p, func(cfg *IntrospectionConfig) { cfg.CacheTTL = -1 })
	exp := time.Now().Add(time.Hour)
	for i, c := range []struct {
		roles any
		want  string
	}{
		{[]string{"admin", "viewer"}, ""},
		{[]string{"viewer", "admin"}, ""},
		{[]string{"admin", "admin"}, "admin"},
		{[]string{"superuser"}, "superuser"},
		{"superuser", "superuser"},
	} {
		claims := p.claims(testAudience, "ada", "acme")
		delete(claims, "role")
		claims["roles"] = c.roles
		answer := activeAnswer(p, "ada", "acme", exp)
		answer["roles"] = c.roles
		p.setIntrospection(fmt.Sprintf("opaque-%d", i), answer)
		for path, authn := range map[string]func() (mcphandler.Identity, error){
			"bearer JWT": func() (mcphandler.Identity, error) {
				return o.Authenticate(bearerRequest("Bearer " + sign(t, p.key(), claims)))
			},
			"introspection": func() (mcphandler.Identity, error) {
				return in.Authenticate(bearerRequest(fmt.Sprintf("Bearer opaque-%d", i)))
			},
		} {
			if id, err := authn(); err != nil || id.Role != c.want {
				t.Errorf("%s, roles %v: role %q, %v; want %q", path, c.roles, id.Role, err, c.want)
			}
		}
	}
}

// rolesClaims returns verified claims whose "roles" holds n names of no
// role, then "admin".
func rolesClaims(t testing.TB, n int) Claims {
	var b strings.Builder
	b.WriteString(`{"sub":"ada","tenant":"acme","scope":"mcp:tools","roles":[`)
	for i := range n {
		fmt.Fprintf(&b, `"group-%d",`, i)
	}
	b.WriteString(`"admin"]}`)
	c, err := ParseClaims([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClaimsMappingKeepsNothing: a huge roles array costs Map no
// allocation more than a short one (it is read in place, not copied), and
// the role Map returns is the element of Roles, not a string of the token,
// so the identity holds nothing of the array.
func TestClaimsMappingKeepsNothing(t *testing.T) {
	m := ClaimsMapping{Roles: slices.Clone(oidctest.ClaimsRoles)}
	small, huge := rolesClaims(t, 1), rolesClaims(t, 100_000)
	ctx := context.Background()
	for _, c := range []Claims{small, huge} {
		id, err := m.Map(ctx, c)
		if err != nil || id.Role != "admin" {
			t.Fatalf("%+v %v", id, err)
		}
		if unsafe.StringData(id.Role) != unsafe.StringData(m.Roles[2]) {
			t.Fatal("the role is a string of the token, not of Roles")
		}
	}
	a := testing.AllocsPerRun(20, func() { _, _ = m.Map(ctx, small) })
	b := testing.AllocsPerRun(5, func() { _, _ = m.Map(ctx, huge) })
	if a != b {
		t.Fatalf("Map allocates %v times for 2 roles, %v for 100 001", a, b)
	}
}

// BenchmarkClaimsMappingRoles: Map's time grows linearly with the size of
// the roles array.
func BenchmarkClaimsMappingRoles(b *testing.B) {
	m := ClaimsMapping{Roles: oidctest.ClaimsRoles}
	for _, n := range []int{10, 1_000, 100_000} {
		c := rolesClaims(b, n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				if _, err := m.Map(context.Background(), c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzClaimsMapping: for any verified claims, Map never panics; an
// identity it gives has a subject and a tenant within MaxNameBytes and a
// role of Roles or the default; and the order of the roles never matters.
func FuzzClaimsMapping(f *testing.F) {
	for _, c := range oidctest.ClaimsCases {
		if len(c.Members) < 1000 {
			f.Add(c.Payload(f, nil))
		}
	}
	m := ClaimsMapping{Roles: oidctest.ClaimsRoles, DefaultRole: "none", RoleClaims: []string{"role", "roles", "/a/roles"}}
	f.Fuzz(func(t *testing.T, payload []byte) {
		c, err := ParseClaims(payload)
		if err != nil {
			return
		}
		id, err := m.Map(context.Background(), c)
		if err == nil && (id.Subject == "" || id.Tenant == "" || len(id.Subject) > MaxNameBytes || len(id.Tenant) > MaxNameBytes ||
			(id.Role != m.DefaultRole && !slices.Contains(m.Roles, id.Role))) {
			t.Fatalf("identity %+v", id)
		}
		roles, ok := c.Raw["roles"].([]any)
		if !ok {
			return
		}
		rev := Claims{Subject: c.Subject, Raw: maps.Clone(c.Raw)}
		r := slices.Clone(roles)
		slices.Reverse(r)
		rev.Raw["roles"] = r
		id2, err2 := m.Map(context.Background(), rev)
		if id.Role != id2.Role || id.Tenant != id2.Tenant || (err == nil) != (err2 == nil) {
			t.Fatalf("roles %v: %+v %v; reversed: %+v %v", roles, id, err, id2, err2)
		}
	})
}
