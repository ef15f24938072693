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
		Description: "Upstream " + u.ID + " needs your authorization before its tools can be used.",
		InputSchema: []byte(`{"type":"object"}`),
		// No annotations, hints not trusted: Destructive, whatever the
		// tool turns out to be, so that BeforeCall treats it as the worst.
		Origin:  &mcphandler.ToolOrigin{Upstream: u.ID, Name: local},
		Handler: z.handle,
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
// notifications/elicitation/complete, and then runs the tool found under
// its name); an input request on 2026-07-28 (the client's retry, once
// authorized, finds the tool itself, so a retry that comes here still
// has no authorization: it is told so); a tool error naming the URL to
// any other client (which calls again once authorized).
func (z *authorizer) handle(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
	req, err := z.required(ctx, call.Identity)
	if err != nil {
		return nil, err
	}
	if req == nil {
		return z.run(ctx, call) // authorized since the lookup
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
	return z.run(ctx, call)
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

// run runs the call as the tool of its name, now that the caller
// authorized the upstream: the tool as listed with the caller's own
// credentials (pinned definitions checked), or, when the upstream has no
// tool of that name, an unknown tool's error.
func (z *authorizer) run(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
	id := call.Identity
	tools, st := z.g.list(ctx, id, z.u, capsJSON(mcphandler.ClientCapabilitiesFrom(ctx)), false)
	if z.u.Pin {
		tools = z.g.filterPinned(ctx, id.Tenant, z.u, tools)
	}
	for _, t := range tools {
		if t.Name == z.name {
			return t.Handler(ctx, call)
		}
	}
	if st.status == statusFailed {
		return nil, mcphandler.Unavailable(errors.New("upstream " + z.u.ID + " could not be listed: " + st.class))
	}
	return nil, &mcphandler.ToolError{Class: mcphandler.ClassNotFound, Detail: "upstream " + z.u.ID + " has no tool " + z.name + " for you"}
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
