package auth

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

func TestTokenExchangeRequest(t *testing.T) {
	p := newFakeProvider(t)
	ex := TokenExchange(TokenExchangeConfig{
		TokenURL:           p.issuer() + "/token",
		ClientID:           p.clientID,
		ClientSecret:       p.clientSecret,
		Audience:           "calendar",
		Resource:           []string{"https://calendar.example.com/api", "https://files.example.com"},
		Scopes:             []string{"calendar.read", "files.read"},
		RequestedTokenType: TokenTypeAccessToken,
		HTTPClient:         p.client(),
	})
	tok, err := ex.Token(t.Context(), "caller-token")
	if err != nil {
		t.Fatal(err)
	}
	if tok.AccessToken != "upstream-1" || tok.TokenType != "Bearer" || tok.Extra("issued_token_type") != TokenTypeAccessToken ||
		time.Until(tok.Expiry) < 4*time.Minute || time.Until(tok.Expiry) > 5*time.Minute {
		t.Fatalf("token %+v", tok)
	}
	form, authz := p.lastTokenRequest()
	want := url.Values{
		"grant_type":           {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"subject_token":        {"caller-token"},
		"subject_token_type":   {"urn:ietf:params:oauth:token-type:access_token"},
		"audience":             {"calendar"},
		"resource":             {"https://calendar.example.com/api", "https://files.example.com"},
		"scope":                {"calendar.read files.read"},
		"requested_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
	}
	if form.Encode() != want.Encode() {
		t.Fatalf("form\n got %s\nwant %s", form.Encode(), want.Encode())
	}
	if !strings.HasPrefix(authz, "Basic ") {
		t.Fatalf("Authorization = %q, want Basic client authentication", authz)
	}

	// Cached per subject token.
	tok2, err := ex.Token(t.Context(), "caller-token")
	if err != nil || tok2.AccessToken != "upstream-1" || p.exchangeHits.Load() != 1 {
		t.Fatalf("second exchange: %v %v hits=%d", tok2, err, p.exchangeHits.Load())
	}
	if tok3, err := ex.Token(t.Context(), "other-caller"); err != nil || tok3.AccessToken != "upstream-2" {
		t.Fatalf("other subject: %v %v", tok3, err)
	}
	// The TokenSource form.
	ts := ex.TokenSource(t.Context(), "caller-token")
	if tok4, err := ts.Token(); err != nil || tok4.AccessToken != "upstream-1" {
		t.Fatalf("TokenSource: %v %v", tok4, err)
	}
}

func TestTokenExchangeParamsAndErrors(t *testing.T) {
	p := newFakeProvider(t)
	ex := TokenExchange(TokenExchangeConfig{
		TokenURL:     p.issuer() + "/token",
		ClientID:     p.clientID,
		ClientSecret: p.clientSecret,
		AuthStyle:    oauth2.AuthStyleInParams,
		NoCache:      true,
		HTTPClient:   p.client(),
	})
	for i := range 2 {
		if _, err := ex.Token(t.Context(), "caller-token"); err != nil {
			t.Fatal(err)
		}
		if n := p.exchangeHits.Load(); n != int64(i+1) {
			t.Fatalf("NoCache: hits = %d", n)
		}
	}
	form, authz := p.lastTokenRequest()
	if authz != "" || form.Get("client_id") != p.clientID || form.Get("client_secret") != p.clientSecret || form.Has("audience") || form.Has("scope") {
		t.Fatalf("form %v, Authorization %q", form, authz)
	}

	_, err := ex.Token(t.Context(), "refused-subject-token")
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" || strings.Contains(err.Error(), "refused-subject-token") {
		t.Fatalf("err = %v", err)
	}
	if _, err := ex.Token(t.Context(), ""); err == nil {
		t.Fatal("empty subject token accepted")
	}
	if _, err := TokenExchange(TokenExchangeConfig{}).Token(t.Context(), "x"); err == nil {
		t.Fatal("no TokenURL accepted")
	}

	// Wrong client secret.
	bad := TokenExchange(TokenExchangeConfig{TokenURL: p.issuer() + "/token", ClientID: p.clientID, ClientSecret: "no", HTTPClient: p.client()})
	_, err = bad.Token(t.Context(), "caller-token")
	if !errors.As(err, &re) || re.ErrorCode != "invalid_client" || !slices.Contains([]int{401}, re.Response.StatusCode) {
		t.Fatalf("err = %v", err)
	}
}
