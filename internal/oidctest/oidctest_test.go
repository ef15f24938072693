package oidctest

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// TestCodeFlow: the provider issues a code only to the registered client
// and redirect URI with an S256 challenge, and redeems it once, with the
// verifier, for an ID token go-oidc verifies, carrying the nonce.
func TestCodeFlow(t *testing.T) {
	const redirect = "https://rp.example/callback"
	p := New(t, redirect)
	p.SignInAs(map[string]any{"sub": "ada", "tenant": "acme"})
	ctx := oidc.ClientContext(context.WithValue(context.Background(), oauth2.HTTPClient, p.Client()), p.Client())
	op, err := oidc.NewProvider(ctx, p.Issuer())
	if err != nil {
		t.Fatal(err)
	}
	cfg := oauth2.Config{ClientID: p.ClientID, ClientSecret: p.ClientSecret, Endpoint: op.Endpoint(), RedirectURL: redirect, Scopes: []string{"openid"}}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	authorize := func(u string) (int, url.Values) {
		resp, err := noFollow.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if loc == nil {
			return resp.StatusCode, nil
		}
		return resp.StatusCode, loc.Query()
	}
	verifier := oauth2.GenerateVerifier()
	code, q := authorize(cfg.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("nonce", "nn")))
	if code != http.StatusFound || q.Get("state") != "st" || q.Get("code") == "" {
		t.Fatalf("authorize: %d %v", code, q)
	}
	for name, u := range map[string]string{
		"no challenge":   cfg.AuthCodeURL("st"),
		"plain":          cfg.AuthCodeURL("st", oauth2.SetAuthURLParam("code_challenge", "x"), oauth2.SetAuthURLParam("code_challenge_method", "plain")),
		"other redirect": strings.Replace(cfg.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)), "rp.example", "evil.example", 1),
	} {
		if c, _ := authorize(u); c != http.StatusBadRequest {
			t.Errorf("%s: %d", name, c)
		}
	}
	if _, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption("wrong"+verifier)); err == nil {
		t.Fatal("wrong verifier redeemed")
	}
	// The failed attempt burnt the code; a fresh one redeems once.
	_, q = authorize(cfg.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("nonce", "nn")))
	tok, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	idt, err := op.Verifier(&oidc.Config{ClientID: p.ClientID}).Verify(ctx, tok.Extra("id_token").(string))
	if err != nil || idt.Subject != "ada" || idt.Nonce != "nn" {
		t.Fatalf("id token: %+v %v", idt, err)
	}
	if _, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier)); err == nil {
		t.Fatal("code redeemed twice")
	}
	bad := cfg
	bad.ClientSecret = "no"
	_, q = authorize(cfg.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)))
	if _, err := bad.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier)); err == nil {
		t.Fatal("wrong client secret redeemed")
	}
}
