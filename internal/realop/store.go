package realop

import (
	"context"
	"sync"
	"time"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// store is zitadel's example storage, with the methods this package
// changes overridden. Everything else (codes, tokens, rotation,
// revocation, keys) is the example's.
type store struct {
	*storage.Storage
	users   userStore
	clients map[string]Client
	ttl     time.Duration

	mu sync.Mutex
	// resources are the RFC 8707 resources granted, by auth request ID
	// and by refresh token.
	resources map[string][]string
}

// userStore gives the example storage the users of Config.
type userStore struct {
	byID   map[string]*storage.User
	claims map[string]map[string]any
}

func (u userStore) GetUserByID(id string) *storage.User { return u.byID[id] }

func (u userStore) GetUserByUsername(name string) *storage.User {
	for _, user := range u.byID {
		if user.Username == name {
			return user
		}
	}
	return nil
}

// ExampleClientID names the example's service user (for the JWT profile
// grant, unused here).
func (u userStore) ExampleClientID() string { return storage.ServiceUserID }

// client is an example web client with the access token type and grant
// types of Config (the example's fields for them are unexported).
type client struct {
	op.Client
	cfg Client
}

func (c client) AccessTokenType() op.AccessTokenType {
	if c.cfg.JWTAccessTokens {
		return op.AccessTokenTypeJWT
	}
	return op.AccessTokenTypeBearer
}

func (c client) GrantTypes() []oidc.GrantType {
	if c.cfg.Refresh {
		return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
	}
	return []oidc.GrantType{oidc.GrantTypeCode}
}

func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return client{c, s.clients[id]}, nil
}

// authRequest and refreshRequest add the granted resources to the
// example's "aud" (the client ID).
type authRequest struct {
	*storage.AuthRequest
	resources []string
}

func (r *authRequest) GetAudience() []string { return audience(r.ApplicationID, r.resources) }

type refreshRequest struct {
	*storage.RefreshTokenRequest
	resources []string
}

func (r *refreshRequest) GetAudience() []string { return audience(r.ApplicationID, r.resources) }

func audience(clientID string, resources []string) []string {
	return append([]string{clientID}, resources...)
}

// unwrap returns the example's request, which its methods expect, and
// the resources granted.
func unwrap(r op.TokenRequest) (op.TokenRequest, []string) {
	switch r := r.(type) {
	case *authRequest:
		return r.AuthRequest, r.resources
	case *refreshRequest:
		return r.RefreshTokenRequest, r.resources
	}
	return r, nil
}

func (s *store) granted(key string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resources[key]
}

func (s *store) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, userID string) (op.AuthRequest, error) {
	r, err := s.Storage.CreateAuthRequest(ctx, req, userID)
	if err != nil {
		return nil, err
	}
	if res, _ := ctx.Value(resourcesKey{}).([]string); len(res) > 0 {
		s.mu.Lock()
		s.resources[r.GetID()] = res
		s.mu.Unlock()
	}
	return r, nil
}

func (s *store) AuthRequestByID(ctx context.Context, id string) (op.AuthRequest, error) {
	r, err := s.Storage.AuthRequestByID(ctx, id)
	if err != nil {
		return nil, err
	}
	return &authRequest{r.(*storage.AuthRequest), s.granted(id)}, nil
}

func (s *store) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	r, err := s.Storage.AuthRequestByCode(ctx, code)
	if err != nil {
		return nil, err
	}
	return &authRequest{r.(*storage.AuthRequest), s.granted(r.GetID())}, nil
}

func (s *store) TokenRequestByRefreshToken(ctx context.Context, token string) (op.RefreshTokenRequest, error) {
	r, err := s.Storage.TokenRequestByRefreshToken(ctx, token)
	if err != nil {
		return nil, err
	}
	return &refreshRequest{r.(*storage.RefreshTokenRequest), s.granted(token)}, nil
}

func (s *store) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	inner, _ := unwrap(req)
	id, exp, err := s.Storage.CreateAccessToken(ctx, inner)
	return id, s.expiry(exp), err
}

// CreateAccessAndRefreshTokens moves the resources granted on to the new
// refresh token: the example rotates them.
func (s *store) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	inner, res := unwrap(req)
	id, refresh, exp, err := s.Storage.CreateAccessAndRefreshTokens(ctx, inner, current)
	if err != nil {
		return "", "", time.Time{}, err
	}
	s.mu.Lock()
	delete(s.resources, current)
	if len(res) > 0 {
		s.resources[refresh] = res
	}
	s.mu.Unlock()
	return id, refresh, s.expiry(exp), nil
}

func (s *store) expiry(exp time.Time) time.Time {
	if s.ttl > 0 && !exp.IsZero() {
		return time.Now().Add(s.ttl)
	}
	return exp
}

// addClaims adds the user's extra claims; claims of the token win.
func (s *store) addClaims(claims map[string]any, userID string) map[string]any {
	for k, v := range s.users.claims[userID] {
		if _, ok := claims[k]; !ok {
			if claims == nil {
				claims = map[string]any{}
			}
			claims[k] = v
		}
	}
	return claims
}

// GetPrivateClaimsFromScopes gives the claims of a JWT access token.
func (s *store) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	claims, err := s.Storage.GetPrivateClaimsFromScopes(ctx, userID, clientID, scopes)
	if err != nil {
		return nil, err
	}
	return s.addClaims(claims, userID), nil
}

// SetUserinfoFromRequest gives the claims of an ID token.
func (s *store) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, req, scopes); err != nil {
		return err
	}
	info.Claims = s.addClaims(info.Claims, req.GetSubject())
	return nil
}

// SetUserinfoFromToken gives the userinfo endpoint's answer.
func (s *store) SetUserinfoFromToken(ctx context.Context, info *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, info, tokenID, subject, origin); err != nil {
		return err
	}
	info.Claims = s.addClaims(info.Claims, subject)
	return nil
}
