package oidctest

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
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

// refreshToken is what the provider keeps of a refresh token it issued.
type refreshToken struct {
	fam  *family
	used bool // rotated
}

// SetRefreshFail makes every refresh answer invalid_grant while fail is
// true, as when the person's grant ended at the provider.
func (p *Provider) SetRefreshFail(fail bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refFail = fail
}

// refreshGrant redeems a refresh token of the authenticated client, once,
// for a new access token and a new refresh token of the same grant
// (rotation). A token already redeemed is refused and its whole grant
// revoked (OAuth 2.1's reuse detection), as is any token of a revoked
// grant. A resource, if given, must be the grant's (invalid_target); a
// scope, if given, must be within the grant's (invalid_scope), and is the
// new access token's.
func (p *Provider) refreshGrant(w http.ResponseWriter, r *http.Request) {
	p.RefreshHits.Add(1)
	form := r.PostForm
	scope := strings.Fields(form.Get("scope"))
	p.mu.Lock()
	rt := p.refresh.m[form.Get("refresh_token")]
	var fail string
	switch res := form["resource"]; {
	case p.refFail, rt == nil, rt.fam.revoked, rt.fam.client != p.ClientID:
		fail = "invalid_grant"
	case rt.used:
		rt.fam.revoked = true
		fail = "invalid_grant"
	case len(res) > 1, len(res) == 1 && res[0] != rt.fam.resource:
		fail = "invalid_target"
	case slices.ContainsFunc(scope, func(s string) bool { return !slices.Contains(strings.Fields(rt.fam.scope), s) }):
		fail = "invalid_scope"
	default:
		rt.used = true
	}
	p.mu.Unlock()
	if fail != "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": fail})
		return
	}
	granted := rt.fam.scope
	if len(scope) > 0 {
		granted = strings.Join(scope, " ")
	}
	writeJSON(w, http.StatusOK, p.issue(rt.fam, granted, true))
}

// issue returns a token response for fam with a new access token for
// scope and, if refresh, a new refresh token.
func (p *Provider) issue(fam *family, scope string, refresh bool) map[string]any {
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
	var rt string
	if refresh {
		rt = rand.Text() + rand.Text()
		p.refresh.put(p.limit, rt, &refreshToken{fam: fam})
	}
	p.mu.Unlock()
	resp := map[string]any{
		"access_token": SignWith(p.t, k, "at+jwt", claims),
		"token_type":   "Bearer",
		"expires_in":   int64(p.AccessTTL / time.Second),
	}
	if scope != "" {
		resp["scope"] = scope
	}
	if refresh {
		resp["refresh_token"] = rt
	}
	return resp
}

// revoke is the revocation endpoint (RFC 7009): for the authenticated
// client, a refresh token revokes its grant (every token issued from the
// same code), an access token itself only. Unknown tokens are answered
// 200 like known ones.
func (p *Provider) revoke(w http.ResponseWriter, r *http.Request) {
	p.RevokeHits.Add(1)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	if !p.clientOK(r) {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_client"})
		return
	}
	tok := r.PostForm.Get("token")
	if tok == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_request"})
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if rt := p.refresh.m[tok]; rt != nil && rt.fam.client == p.ClientID {
		rt.fam.revoked = true
	} else if at := p.accessToken(tok); at != nil && at.fam.client == p.ClientID {
		at.revoked = true
	}
	w.WriteHeader(http.StatusOK)
}

// accessToken returns the record of the access token raw, by its jti, or
// nil. p.mu is held.
func (p *Provider) accessToken(raw string) *accessToken {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil
	}
	var claims struct {
		JTI string `json:"jti"`
	}
	if json.Unmarshal(b, &claims) != nil {
		return nil
	}
	return p.access.m[claims.JTI]
}

// Revoked reports whether token, a refresh or access token the provider
// issued, is revoked: by the revocation endpoint, reuse of a refresh
// token or RevokeAll. A refresh token merely rotated is not revoked;
// unknown tokens are not.
func (p *Provider) Revoked(token string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if rt := p.refresh.m[token]; rt != nil {
		return rt.fam.revoked
	}
	at := p.accessToken(token)
	return at != nil && (at.revoked || at.fam.revoked)
}

// RevokeAll revokes every grant of the person whose "sub" is sub, as when
// they sign out or are removed at the provider: their refresh tokens and
// codes not yet redeemed are refused from now on, and Revoked reports
// their access tokens.
func (p *Provider) RevokeAll(sub string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, g := range p.codes.m {
		if g.claims["sub"] == sub {
			g.used = true
		}
	}
	for _, rt := range p.refresh.m {
		if rt.fam.claims["sub"] == sub {
			rt.fam.revoked = true
		}
	}
	for _, at := range p.access.m {
		if at.fam.claims["sub"] == sub {
			at.fam.revoked = true
		}
	}
}
