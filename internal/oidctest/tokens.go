package oidctest

import (
	"crypto/rand"
	"maps"
	"time"
)

// A family is what one authorization granted: the access tokens issued
// from one code, and through refreshes.
type family struct {
	client   string
	claims   map[string]any // of the person signed in
	resource string         // "" without one
	scope    string         // space-separated
	revoked  bool
}

// audience is the access tokens' "aud": the resource, or the client
// without one.
func (f *family) audience() string {
	if f.resource != "" {
		return f.resource
	}
	return f.client
}

// accessToken is what the provider keeps of an access token it issued.
type accessToken struct {
	fam     *family
	revoked bool
}

// issue returns a token response for fam with a new access token for
// scope.
func (p *Provider) issue(fam *family, scope string) map[string]any {
	now := time.Now()
	jti := rand.Text()
	claims := maps.Clone(fam.claims)
	if claims == nil {
		claims = map[string]any{}
	}
	maps.Copy(claims, map[string]any{
		"iss": p.Issuer(), "aud": fam.audience(), "client_id": fam.client,
		"iat": now.Unix(), "exp": now.Add(p.AccessTTL).Unix(), "jti": jti,
	})
	if scope != "" {
		claims["scope"] = scope
	} else {
		delete(claims, "scope")
	}
	p.mu.Lock()
	k := p.keys[0]
	p.access.put(p.limit, jti, &accessToken{fam: fam})
	p.mu.Unlock()
	resp := map[string]any{
		"access_token": SignWith(p.t, k, "at+jwt", claims),
		"token_type":   "Bearer",
		"expires_in":   int64(p.AccessTTL / time.Second),
	}
	if scope != "" {
		resp["scope"] = scope
	}
	return resp
}
