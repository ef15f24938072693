package oidctest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// ClaimsRoles are the roles, least to most privileged, that [ClaimsCases]
// expect the mapping to be configured with (the handler's Config.Roles).
var ClaimsRoles = []string{"viewer", "editor", "admin"}

// ClaimsCase is a set of claims that every path turning claims into an
// identity (bearer JWT, introspection answer, the approval page's ID
// token) must read alike, with the identity it must give.
type ClaimsCase struct {
	Name string
	// Members are JSON object members written after "sub":"ada" and
	// "tenant":"acme", so they may repeat or replace them (a repeated
	// member keeps its last value).
	Members string
	// RoleClaims and DefaultRole configure the mapping besides tenant
	// claim "tenant" and ClaimsRoles (nil RoleClaims: the default).
	RoleClaims  []string
	DefaultRole string
	// Tenant, Subject and Role are the identity; Refused is "" when the
	// claims give one, else "invalid" (a refused token) or "forbidden"
	// (no tenant).
	Tenant, Subject, Role string
	Refused               string
}

// Payload returns the claims object of c: base's members (iss, aud, exp…),
// then the subject and tenant, then c.Members.
func (c ClaimsCase) Payload(t testing.TB, base map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(base)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSuffix(string(b), "}")
	if s != "{" {
		s += ","
	}
	s += `"sub":"ada","tenant":"acme"`
	if c.Members != "" {
		s += "," + c.Members
	}
	return []byte(s + "}")
}

// manyRoles is n names of no role, as JSON array elements.
func manyRoles(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `"group-%d",`, i)
	}
	return b.String()
}

// ClaimsCases are the attacker's claims: roles as a string or an array in
// any order, unknown, duplicated, nested, of the wrong type or many; a
// tenant of every type.
var ClaimsCases = []ClaimsCase{
	{Name: "role string", Members: `"role":"admin"`, Tenant: "acme", Subject: "ada", Role: "admin"},
	{Name: "roles array", Members: `"roles":["admin"]`, Tenant: "acme", Subject: "ada", Role: "admin"},
	{Name: "highest last", Members: `"roles":["viewer","editor","admin"]`, Tenant: "acme", Subject: "ada", Role: "admin"},
	{Name: "highest first", Members: `"roles":["admin","editor","viewer"]`, Tenant: "acme", Subject: "ada", Role: "admin"},
	{Name: "highest between", Members: `"roles":["viewer","editor","viewer"]`, Tenant: "acme", Subject: "ada", Role: "editor"},
	{Name: "unknown roles ignored", Members: `"roles":["Reader","admin","Owner"]`, Tenant: "acme", Subject: "ada", Role: "admin"},
	{Name: "only unknown roles", Members: `"roles":["Reader","superuser"]`, Tenant: "acme", Subject: "ada"},
	{Name: "unknown role string", Members: `"role":"superuser"`, Tenant: "acme", Subject: "ada"},
	{Name: "names are exact", Members: `"roles":["Admin"," admin","admin "]`, Tenant: "acme", Subject: "ada"},
	{Name: "no role", Tenant: "acme", Subject: "ada"},
	{Name: "empty roles", Members: `"roles":[]`, Tenant: "acme", Subject: "ada"},
	{Name: "empty role", Members: `"role":""`, Tenant: "acme", Subject: "ada"},
	{Name: "role and roles", Members: `"role":"viewer","roles":["editor"]`, Tenant: "acme", Subject: "ada", Role: "editor"},
	{Name: "roles and role", Members: `"roles":["editor"],"role":"admin"`, Tenant: "acme", Subject: "ada", Role: "admin"},
	{Name: "roles a string", Members: `"roles":"editor"`, Tenant: "acme", Subject: "ada", Role: "editor"},
	{Name: "null role", Members: `"role":null,"roles":["editor"]`, Tenant: "acme", Subject: "ada", Role: "editor"},
	{Name: "many unknown roles", Members: `"roles":[` + manyRoles(1500) + `"editor"]`, Tenant: "acme", Subject: "ada", Role: "editor"},
	{Name: "default role", Members: `"roles":["Reader"]`, DefaultRole: "viewer", Tenant: "acme", Subject: "ada", Role: "viewer"},
	{Name: "default role not used", Members: `"roles":["Reader","editor"]`, DefaultRole: "viewer", Tenant: "acme", Subject: "ada", Role: "editor"},
	{Name: "other role claim", Members: `"role":"admin","groups":["editor"]`, RoleClaims: []string{"groups"}, Tenant: "acme", Subject: "ada", Role: "editor"},
	{Name: "no role claims", Members: `"role":"admin"`, RoleClaims: []string{}, Tenant: "acme", Subject: "ada"},
	{Name: "keycloak realm roles", Members: `"realm_access":{"roles":["offline_access","uma_authorization","editor"]}`,
		RoleClaims: []string{"/realm_access/roles"}, Tenant: "acme", Subject: "ada", Role: "editor"},
	{Name: "keycloak client roles", Members: `"resource_access":{"mcp/app":{"roles":["admin"]},"other":{"roles":["viewer"]}}`,
		RoleClaims: []string{"/resource_access/mcp~1app/roles"}, Tenant: "acme", Subject: "ada", Role: "admin"},
	{Name: "pointer through a string", Members: `"realm_access":"admin"`, RoleClaims: []string{"/realm_access/roles"}, Tenant: "acme", Subject: "ada"},
	{Name: "namespaced claim", Members: `"https://example.com/roles":["admin"]`, RoleClaims: []string{"https://example.com/roles"},
		Tenant: "acme", Subject: "ada", Role: "admin"},
	{Name: "duplicated role", Members: `"role":"admin","role":"viewer"`, Tenant: "acme", Subject: "ada", Role: "viewer"},
	{Name: "duplicated roles", Members: `"roles":["viewer"],"roles":["admin"]`, Tenant: "acme", Subject: "ada", Role: "admin"},
	{Name: "duplicated tenant", Members: `"tenant":"globex","role":"admin"`, Tenant: "globex", Subject: "ada", Role: "admin"},
	{Name: "duplicated subject", Members: `"sub":"eve","role":"admin"`, Tenant: "acme", Subject: "eve", Role: "admin"},
	{Name: "numeric tenant", Members: `"tenant":12345678901234567`, Tenant: "12345678901234567", Subject: "ada"},
	{Name: "non-string element", Members: `"roles":["admin",1]`, Refused: "invalid"},
	{Name: "null element", Members: `"roles":["admin",null]`, Refused: "invalid"},
	{Name: "nested element", Members: `"roles":[["admin"]]`, Refused: "invalid"},
	{Name: "role an object", Members: `"role":{"name":"admin"}`, Refused: "invalid"},
	{Name: "role a number", Members: `"role":3`, Refused: "invalid"},
	{Name: "role a boolean", Members: `"role":true`, Refused: "invalid"},
	{Name: "bad element after the highest", Members: `"roles":["admin",{}]`, Refused: "invalid"},
	{Name: "empty subject", Members: `"sub":""`, Refused: "invalid"},
	{Name: "subject a number", Members: `"sub":5`, Refused: "invalid"},
	{Name: "subject too long", Members: `"sub":"` + strings.Repeat("s", 513) + `"`, Refused: "invalid"},
	{Name: "tenant too long", Members: `"tenant":"` + strings.Repeat("t", 513) + `"`, Refused: "invalid"},
	{Name: "role too long", Members: `"role":"` + strings.Repeat("r", 513) + `"`, Tenant: "acme", Subject: "ada"},
	{Name: "no tenant", Members: `"tenant":null`, Refused: "forbidden"},
	{Name: "empty tenant", Members: `"tenant":""`, Refused: "forbidden"},
	{Name: "fractional tenant", Members: `"tenant":1.5`, Refused: "forbidden"},
	{Name: "tenant an object", Members: `"tenant":{"id":"acme"}`, Refused: "forbidden"},
	{Name: "tenant an array", Members: `"tenant":["acme"]`, Refused: "forbidden"},
}
