package gateway

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/session"
)

// authorizeKey is the key of the authorization question in a 2026-07-28
// round (Exchange.Elicit).
const authorizeKey = "gateway.authorize"

// defaultAuthWait is how long a call waits, by default, for its caller
// to authorize an upstream (Config.AuthWait).
const defaultAuthWait = 10 * time.Minute

// classAuthorization is the class of an upstream left out of a list
// because the caller has not authorized it (StatusMetaKey).
const classAuthorization = "authorization"

// authorizeTools are the tools served, for a tools/call's lookup only
// (mcphandler.ToolLookupFrom), under the name asked for when it is one of
// an upstream with OAuth that the caller may reach but has not
// authorized, or whose credentials cannot be had now: the upstream's
// tools cannot be listed for the caller, so the name is taken as one of
// them, and its call asks for the authorization, or fails saying why
// (authorizer.handle). Nothing else is served for it: a name of no such
// upstream stays unknown.
func (g *Gateway) authorizeTools(ctx context.Context, u *Upstream) []mcphandler.Tool {
	name, ok := mcphandler.ToolLookupFrom(ctx)
	if !ok || !validName(name) {
		return nil
	}
	local, ok := strings.CutPrefix(name, u.ID+"_")
	for upName, alias := range u.Aliases {
		if alias == name {
			local, ok = upName, true
		}
	}
	if !ok || local == "" {
		return nil
	}
	z := &authorizer{g: g, u: u, name: name}
	return []mcphandler.Tool{{
		Name:        name,
		Description: "Upstream " + u.ID + " needs your authorization before its tools can be used: this asks for it, and changes nothing.",
		InputSchema: []byte(`{"type":"object"}`),
		// What this tool does is ask, and start the call over once
		// authorized: the upstream's tool is then looked up, and decided
		// on by BeforeCall, as listed (mcphandler.ErrCallAgain).
		Annotations: &mcphandler.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)},
		Origin:      &mcphandler.ToolOrigin{Upstream: u.ID, Name: local, TrustHints: true},
		Handler:     z.handle,
	}}
}

// authorizer is the call of a name of an upstream the caller has not
// authorized.
type authorizer struct {
	g    *Gateway
	u    *Upstream
	name string // as served
}

// handle asks the caller to authorize the upstream, in the request's era:
// a URL-mode elicitation on a 2025-11-25 session (the call waits, up to
// Config.AuthWait, for the authorization, says so with
// notifications/elicitation/complete, and starts over: the upstream's
// tool is looked up, decided on and run as any other call of it); an
// input request on 2026-07-28 (the client's retry, once authorized,
// finds the tool itself, so a retry that comes here still has no
// authorization: it is told so); a tool error naming the URL to any other
// client (which calls again once authorized). Nothing is sent upstream.
func (z *authorizer) handle(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
	req, err := z.required(ctx, call.Identity)
	if err != nil {
		return nil, err
	}
	if req == nil {
		return nil, z.callAgain() // authorized since the lookup
	}
	x := call.Exchange
	if !x.ClientCapabilities().Has(session.CapElicitationURL) {
		return nil, z.askToAuthorize(req)
	}
	ask := mcphandler.ElicitRequest{Key: authorizeKey, URL: req.URL,
		Message: "Upstream " + z.u.ID + " acts as you: authorize it, signed in as yourself, to call " + z.name + "."}
	if x.AnswersByRetry() {
		if _, err := x.Elicit(ctx, ask); err != nil {
			return nil, err // the round that asks (ErrInputRequired)
		}
		return nil, z.askToAuthorize(req) // answered, but not authorized: the retry did not find the tool
	}
	ask.ElicitationID = randomID()
	res, err := x.Elicit(ctx, ask)
	switch {
	case errors.Is(err, mcphandler.ErrCannotAsk):
		return nil, z.askToAuthorize(req)
	case err != nil:
		return nil, err
	case res.Action != elicitation.Accept:
		return nil, &mcphandler.ToolError{Class: mcphandler.ClassInternal,
			Detail: "upstream " + z.u.ID + " was not authorized: the call did not run"}
	}
	if err := z.wait(ctx, call.Identity); err != nil {
		return nil, err
	}
	_ = x.CompleteElicitation(ask.ElicitationID)
	return nil, z.callAgain()
}

// callAgain starts the call over now that the caller authorized the
// upstream (mcphandler.ErrCallAgain), or, where it cannot, tells the
// client to call again.
func (z *authorizer) callAgain() error {
	return &mcphandler.ToolError{Class: mcphandler.ClassBackendUnavailable, Err: mcphandler.ErrCallAgain,
		Detail: "upstream " + z.u.ID + " is authorized now: call " + z.name + " again"}
}

// required returns the authorization the caller id must give (nil once
// given), or the error of credentials that cannot be had now.
func (z *authorizer) required(ctx context.Context, id mcphandler.Identity) (*AuthorizationRequiredError, error) {
	_, err := z.g.auths.credentials(ctx, id, z.u)
	var req *AuthorizationRequiredError
	switch {
	case err == nil:
		return nil, nil
	case errors.As(err, &req):
		return req, nil
	}
	return nil, (&forward{g: z.g, upstream: z.u.ID}).noCredentials(err)
}

// wait waits for the caller id to authorize the upstream, up to
// Config.AuthWait, looking in the store every second or so (an
// authorization made on any replica counts).
func (z *authorizer) wait(ctx context.Context, id mcphandler.Identity) error {
	ctx, cancel := context.WithTimeout(ctx, z.g.cfg.AuthWait)
	defer cancel()
	for wait := 250 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return &mcphandler.ToolError{Class: mcphandler.ClassInternal, Err: ctx.Err(),
				Detail: "upstream " + z.u.ID + " was not authorized in time: the call did not run; call again once authorized"}
		}
		req, err := z.required(ctx, id)
		if err != nil || req == nil {
			return err
		}
	}
}

// askToAuthorize is the tool error that names where to authorize.
func (z *authorizer) askToAuthorize(req *AuthorizationRequiredError) error {
	return &mcphandler.ToolError{Class: mcphandler.ClassInternal, Err: req,
		Detail: "upstream " + z.u.ID + " acts as you and needs your authorization first: open " + req.URL +
			" , sign in as yourself and authorize it, then call " + z.name + " again"}
}

// randomID is a URL-mode elicitation's id: 128 random bits.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
