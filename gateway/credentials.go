package gateway

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/mcphandler/mcphandler"
)

// CredentialSource gives the headers that carry one caller's credentials
// to one upstream: a tenant's static token ([StaticCredentials]), a token
// of the caller's own obtained by token exchange ([TokenExchange]), or
// the caller's own authorization at the upstream.
//
// Credentials is asked for every list of the upstream and again for every
// call of its tools, with the request's context and id the caller of
// that request (for a call, mcphandler.ToolCall.Identity), just before
// the upstream is contacted: what it returns is sent for that caller only.
// Its headers are sent with [Upstream.Header], replacing any of the same
// name. The gateway keeps neither the headers nor id beyond the request,
// except as hashed keys (the list cache and the breakers).
//
// An error, or a header with no value, is a missing credential, and the
// gateway never falls back: not to Upstream.Header alone, not to another
// caller's credentials, not to sending none. The upstream is then not
// contacted for that caller: its tools are left out of that caller's
// list (status "failed", error "credentials" in the list's _meta, see
// [StatusMetaKey]; Config.Strict fails that caller's list), or, within
// Config.Grace, the list last served to that caller is listed ("stale",
// error "credentials"); and a call of its tools fails at once: a tool
// error naming the upstream, not retryable when the
// error wraps [ErrNoCredentials] (the caller has none there), retryable
// (backend_unavailable) otherwise (the source could not get one now).
// Neither counts against the upstream's breaker, nor touches another
// caller's lists, calls or breakers. The client is never told the
// source's error; it is logged.
//
// Kind labels the credentials for telemetry ("static", "token-exchange"):
// it is the upstream's CredentialKind unless the host sets that itself,
// and like it is 0–32 bytes of a-z, 0-9 and '-' (another value is
// reported as mcphandler.Other).
//
// A source is shared by every caller of its upstreams: Credentials is
// called concurrently, from several goroutines of one request (a list
// lists upstreams in parallel). It must not modify u, and the gateway
// does not modify the header returned. It should answer quickly, keeping
// what it obtains (as TokenExchange does): it runs on every list and
// call.
//
// A person's own OAuth authorization at an upstream is not a source:
// set Upstream.OAuth, and the gateway keeps each person's tokens, asks
// them to authorize, and refreshes and forgets the tokens itself.
type CredentialSource interface {
	Credentials(ctx context.Context, id mcphandler.Identity, u *Upstream) (http.Header, error)
	Kind() string
}

// ErrNoCredentials is what a [CredentialSource] wraps when the caller has
// no credentials for the upstream (as opposed to a source that could not
// get them now): a call of the upstream's tools then fails with an error
// the client is told not to retry.
var ErrNoCredentials = errors.New("gateway: no credentials for this caller at the upstream")

// StaticCredentials returns a [CredentialSource] that gives every caller
// of the upstream h: a tenant's credentials there, when the host's
// Upstreams builds one per tenant. Its Kind is "static". h is copied once,
// here: changing it afterwards changes nothing, and the copy Credentials
// returns must not be modified. An empty h is a missing credential.
func StaticCredentials(h http.Header) CredentialSource { return staticCredentials{h: h.Clone()} }

type staticCredentials struct{ h http.Header }

func (s staticCredentials) Credentials(context.Context, mcphandler.Identity, *Upstream) (http.Header, error) {
	return s.h, nil
}

func (staticCredentials) Kind() string { return "static" }

// credentialsError is a missing credential of one upstream for one caller.
type credentialsError struct {
	upstream string
	err      error
}

func (e *credentialsError) Error() string {
	return "gateway: upstream " + e.upstream + ": no credentials for this caller: " + e.err.Error()
}

func (e *credentialsError) Unwrap() error { return e.err }

// credentials are the headers sent to u for the caller id: u.Header
// itself without a source; with one, a new header holding u.Header and,
// over it, what the source gave. A missing credential is a
// *credentialsError, never a header.
func (g *Gateway) credentials(ctx context.Context, id mcphandler.Identity, u *Upstream) (http.Header, error) {
	var c http.Header
	var err error
	switch {
	case u.OAuth != nil:
		c, err = g.auths.credentials(ctx, id, u)
	case u.Credentials != nil:
		c, err = u.Credentials.Credentials(ctx, id, u)
	default:
		return u.Header, nil
	}
	if err == nil && !hasValue(c) {
		err = ErrNoCredentials
	}
	if err != nil {
		return nil, &credentialsError{upstream: u.ID, err: err}
	}
	h := make(http.Header, len(u.Header)+len(c))
	for k, vs := range u.Header {
		h[http.CanonicalHeaderKey(k)] = slices.Clone(vs)
	}
	for k, vs := range c {
		h[http.CanonicalHeaderKey(k)] = slices.Clone(vs)
	}
	return h, nil
}

// hasValue reports whether h holds a header with a value that is not
// empty.
func hasValue(h http.Header) bool {
	for _, vs := range h {
		for _, v := range vs {
			if v != "" {
				return true
			}
		}
	}
	return false
}

// noCredentials is the error of a call whose caller has no credentials
// at the upstream: the upstream was not contacted. The source's error is
// logged, never shown.
func (f *forward) noCredentials(err error) error {
	f.g.cfg.Logger.Warn("gateway: no credentials for a call, upstream not contacted", "upstream", f.upstream, "err", err)
	if errors.Is(err, ErrNoCredentials) {
		return &mcphandler.ToolError{Class: mcphandler.ClassInternal, Err: err,
			Detail: "upstream " + f.upstream + ": no credentials for this caller there; it was not contacted"}
	}
	return &mcphandler.ToolError{Class: mcphandler.ClassBackendUnavailable, Err: err,
		Detail: "upstream " + f.upstream + ": this caller's credentials there could not be obtained now; it was not contacted"}
}
