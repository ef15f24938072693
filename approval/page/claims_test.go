package page

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/auth"
	"github.com/mcphandler/mcphandler/internal/oidctest"
)

const mcpResource = "https://mcp.example.com/mcp"

// samePerson fails unless the approver the page made of an ID token (who,
// err) is the caller auth made of an access token with the same claims:
// the same tenant, subject and role, or refused on both sides.
func samePerson(t *testing.T, path string, bearer func() (approval.Identity, error), who approval.Identity, err error) {
	t.Helper()
	want, werr := bearer()
	if (err != nil) != (werr != nil) || (err == nil && who != want) {
		t.Errorf("%s: approver %+v (%v), caller %+v (%v)", path, who, err, want, werr)
	}
}

// bearerIdentity is what auth.NewOIDC with mapper makes of an access token
// of payload, signed by idp.
func bearerIdentity(t *testing.T, idp *oidctest.Provider, mapper auth.ClaimsMapper, payload []byte) func() (approval.Identity, error) {
	o, err := auth.NewOIDC(t.Context(), auth.OIDCConfig{Issuer: idp.Issuer(), Audience: mcpResource, HTTPClient: idp.Client(), Claims: mapper})
	if err != nil {
		t.Fatal(err)
	}
	return func() (approval.Identity, error) {
		r, _ := http.NewRequest(http.MethodPost, mcpResource, nil)
		r.Header.Set("Authorization", "Bearer "+oidctest.SignPayload(t, idp.Key(), "at+jwt", payload))
		id, err := o.Authenticate(r)
		return approval.Identity{Subject: id.Subject, Tenant: id.Tenant, Role: id.Role}, err
	}
}

// TestSignInAsBearer: the attacker's claims (oidctest.ClaimsCases: roles
// in any order, unknown, duplicated, nested, of the wrong type or many;
// tenants of every type) in an ID token make the approver exactly the
// caller the same claims in an access token make — with the one
// auth.ClaimsMapping given to both sides (MapClaims), and with the
// defaults of both sides (DefaultIdentity, auth.DefaultClaims).
func TestSignInAsBearer(t *testing.T) {
	e := newEnv(t, envOpt{})
	for _, c := range oidctest.ClaimsCases {
		t.Run(c.Name, func(t *testing.T) {
			now := time.Now()
			idPayload := c.Payload(t, map[string]any{"iss": e.idp.Issuer(), "aud": e.idp.ClientID, "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()})
			tok, err := e.h.verifier.Verify(t.Context(), oidctest.SignPayload(t, e.idp.Key(), "JWT", idPayload))
			if err != nil {
				if c.Refused == "" {
					t.Fatal(err)
				}
				return // go-oidc refused the ID token itself (a "sub" that is not a string)
			}
			atPayload := c.Payload(t, map[string]any{"iss": e.idp.Issuer(), "aud": mcpResource, "exp": now.Add(time.Hour).Unix()})
			m := auth.ClaimsMapping{RoleClaims: c.RoleClaims, Roles: oidctest.ClaimsRoles, DefaultRole: c.DefaultRole}

			who, err := MapClaims(m.Map)(t.Context(), tok)
			samePerson(t, "MapClaims", bearerIdentity(t, e.idp, m.Map, atPayload), who, err)
			if want := (approval.Identity{Subject: c.Subject, Tenant: c.Tenant, Role: c.Role}); (err != nil) != (c.Refused != "") || (err == nil && who != want) {
				t.Errorf("MapClaims: %+v, %v; want %+v (refused %q)", who, err, want, c.Refused)
			}
			who, err = DefaultIdentity(t.Context(), tok)
			samePerson(t, "DefaultIdentity", bearerIdentity(t, e.idp, nil, atPayload), who, err)
		})
	}
}

// TestSignInWithRolesArray: through the whole sign-in, a person whose ID
// token gives roles as an array (Entra ID app roles, Keycloak realm roles)
// in any order, among roles of other applications, signs in with the
// highest, and an admin approves; the same claims in an access token make
// an admin caller.
func TestSignInWithRolesArray(t *testing.T) {
	for _, c := range []struct {
		name       string
		roleClaims []string
		claims     string
	}{
		{"entra", nil, `{"sub":"ada","tenant":"acme","roles":["admin","Task.Read","viewer"]}`},
		{"keycloak", []string{"/realm_access/roles"},
			`{"sub":"ada","tenant":"acme","realm_access":{"roles":["default-roles-acme","offline_access","viewer","admin"]}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := auth.ClaimsMapping{RoleClaims: c.roleClaims, Roles: oidctest.ClaimsRoles}
			e := newEnv(t, envOpt{mod: func(cfg *Config) { cfg.Identity = MapClaims(m.Map) }})
			a := e.ask(`{"id":"n1"}`)
			var claims map[string]any
			dec := json.NewDecoder(strings.NewReader(c.claims))
			dec.UseNumber()
			if err := dec.Decode(&claims); err != nil {
				t.Fatal(err)
			}
			b := newBrowser(t)
			code, body := e.open(b, claims, a)
			if code != http.StatusOK || !strings.Contains(body, "Signed in as ada (workspace acme, role admin)") {
				t.Fatalf("%d\n%s", code, body)
			}
			if code, body = b.post(a.URL, decision("approve", csrfOf(t, body)), nil); code != http.StatusOK || !strings.Contains(body, "Approved") {
				t.Fatalf("decision: %d\n%s", code, body)
			}
			access := fmt.Sprintf(`%s,"iss":%q,"aud":%q,"exp":%d}`, strings.TrimSuffix(c.claims, "}"), e.idp.Issuer(), mcpResource, time.Now().Add(time.Hour).Unix())
			caller, err := bearerIdentity(t, e.idp, m.Map, []byte(access))()
			if err != nil || caller != (approval.Identity{Subject: "ada", Tenant: "acme", Role: "admin"}) {
				t.Fatalf("caller %+v %v", caller, err)
			}
		})
	}
}
