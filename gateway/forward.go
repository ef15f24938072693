package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
)

// forward calls one upstream tool for one caller: the Handler of the tool
// served for it.
type forward struct {
	g        *Gateway
	u        *Upstream         // as the caller's Upstreams gave it
	ep       upstream.Endpoint // with the headers the list was made with
	name     string            // the tool's name upstream
	upstream string            // the upstream's id
	era      string            // the revision it is spoken to in (ToolOrigin.Era)
	kind     string            // Upstream.CredentialKind
	sessions SessionMode       // Upstream.Sessions
	ttl      time.Duration     // Upstream.SessionTTL
}

// handle runs the call upstream, as a task when the client asked for one
// (or, on 2026-07-28, declared tasks: the only way its questions can be
// answered without a second run upstream). The caller's credentials are
// asked for again here, once the call's decision is made, and the call
// goes with them (a task's work too); without them, or while the
// upstream's breaker is open, it fails at once, before any task
// (credentials.go, breaker.go).
func (f *forward) handle(ctx context.Context, call *mcphandler.ToolCall) (*mcphandler.ToolResult, error) {
	ep, err := f.endpoint(ctx, call.Identity)
	if err != nil {
		return nil, f.noCredentials(err)
	}
	run, err := f.g.admitCall(ctx, f, ep, call)
	if err != nil {
		return nil, err
	}
	return call.RunAsTask(ctx, run)
}

// endpoint is how the caller id reaches the upstream now: the list's
// endpoint, with the credentials the upstream's source gives id now.
func (f *forward) endpoint(ctx context.Context, id mcphandler.Identity) (upstream.Endpoint, error) {
	ep := f.ep
	if f.u.Credentials == nil && f.u.OAuth == nil {
		return ep, nil
	}
	hdr, err := f.g.credentials(ctx, id, f.u)
	if err != nil {
		return upstream.Endpoint{}, err
	}
	ep.Header = hdr
	return ep, nil
}

// run makes the call upstream at ep and relays its result unchanged. A
// 2026-07-28 upstream's rounds go to a client that answers by retrying as
// rounds of the gateway's own (relay, rounds.go).
func (f *forward) run(ctx context.Context, call *mcphandler.ToolCall, ep upstream.Endpoint) (*mcphandler.ToolResult, error) {
	ctx, cancel := context.WithTimeout(ctx, f.g.cfg.Timeout)
	defer cancel()
	a := &asker{call: call, confirms: &confirmer{mode: f.u.Confirms, call: call}}
	if ep.Era == upstream.Stateless && call.Exchange.AnswersByRetry() {
		return f.relay(ctx, call, ep, a)
	}
	raw, _, err := f.callTool(ctx, call, ep, a, nil) // telemetry.go
	if a.refused.Load() {
		return nil, &mcphandler.ToolError{Class: mcphandler.ClassInternal, Err: errRefusedQuestion,
			Detail: "upstream " + f.upstream + " asked a question during the call, which this client could answer only by " +
				"calling again, running the upstream call twice: it was not asked, and the upstream may have acted before " +
				"asking. A client that declares the tasks extension (io.modelcontextprotocol/tasks) answers it during the call"}
	}
	if err != nil && f.u.OAuth != nil && refusedToken(err) {
		return nil, f.reauthorize(ctx, call, ep)
	}
	if err != nil {
		return nil, f.failed(ctx, err)
	}
	return f.result(raw)
}

// refusedToken reports an upstream's 401: the token sent was refused.
func refusedToken(err error) bool {
	var se *upstream.StatusError
	return errors.As(err, &se) && se.StatusCode == http.StatusUnauthorized
}

// reauthorize answers a call whose upstream refused the caller's own
// token (401): the token is forgotten, and the caller told where to
// authorize again; the call did not run.
func (f *forward) reauthorize(ctx context.Context, call *mcphandler.ToolCall, ep upstream.Endpoint) error {
	f.g.auths.refused(ctx, call.Identity, f.u, ep.Header.Get("Authorization"))
	req := f.g.auths.required(call.Identity, f.u).(*AuthorizationRequiredError)
	return &mcphandler.ToolError{Class: mcphandler.ClassInternal, Err: req,
		Detail: "upstream " + f.upstream + " refused your authorization, which is forgotten: the call did not run there. " +
			"Open " + req.URL + " , sign in as yourself and authorize it again, then call again"}
}

// result relays the upstream's result unchanged (ResultJSON).
func (f *forward) result(raw json.RawMessage) (*mcphandler.ToolResult, error) {
	res, err := mcphandler.ResultJSON(raw)
	if err != nil {
		f.g.cfg.Logger.Warn("gateway: upstream result not relayed", "upstream", f.upstream, "tool", clip(f.name), "err", err)
		return nil, mcphandler.Unavailable(errors.New("upstream " + f.upstream + " answered with a malformed result"))
	}
	return res, nil
}

// failed classifies a failed upstream call for the client.
func (f *forward) failed(ctx context.Context, err error) error {
	var rpc *upstream.RPCError
	var gone *upstream.SessionGoneError
	switch {
	case errors.As(err, &rpc):
		// The upstream refused the call: its own words, cut.
		return &mcphandler.ToolError{Class: mcphandler.ClassInternal, Detail: "upstream " + f.upstream + ": " + clip(rpc.Message), Err: err}
	case errors.As(err, &gone) && gone.NotRun:
		return &mcphandler.ToolError{Class: mcphandler.ClassBackendUnavailable, Err: err,
			Detail: "upstream " + f.upstream + " ended its session as the call was sent; the call did not run there"}
	case errors.As(err, &gone):
		return &mcphandler.ToolError{Class: mcphandler.ClassInternal, Err: err,
			Detail: "upstream " + f.upstream + " ended its session during the call, which may have run there: it was not run again"}
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return mcphandler.Timeout(err)
	}
	f.g.cfg.Logger.Warn("gateway: upstream call failed", "upstream", f.upstream, "tool", clip(f.name), "err", err)
	return mcphandler.Unavailable(err)
}

// errRefusedQuestion is the cause of a call whose upstream asked what its
// client could answer only by retrying.
var errRefusedQuestion = errors.New("gateway: an upstream question refused: the client answers by retrying")

// asker carries the upstream's questions and notifications of one call to
// its client, through the call's Exchange.
type asker struct {
	call     *mcphandler.ToolCall
	confirms *confirmer  // who answers the upstream's own confirmations (Upstream.Confirms)
	refused  atomic.Bool // a question was refused: the client answers by retrying
}

// Ask relays a question to the client. A client that would answer by
// retrying the call (2026-07-28 rounds; a 2026-07-28 upstream's rounds
// are relayed instead, and never come here) is not asked: the upstream
// gets an error, and the call ends with one that says why.
func (a *asker) Ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if res, ok := a.confirms.answer(method, params); ok {
		return res, nil // never the client's to answer (Upstream.Confirms)
	}
	x := a.call.Exchange
	if x.AnswersByRetry() {
		a.refused.Store(true)
		return nil, &upstream.RPCError{Code: -32603, Message: "the client cannot answer during this call"}
	}
	res, err := x.Request(ctx, method, params)
	var ce *mcphandler.ClientError
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &ce):
		return nil, &upstream.RPCError{Code: int(ce.Code), Message: ce.Message}
	}
	var mc *mcphandler.MissingCapabilityError
	if errors.As(err, &mc) {
		return nil, &upstream.RPCError{Code: -32601, Message: "the client does not support " + method}
	}
	return nil, &upstream.RPCError{Code: -32603, Message: "the client could not be asked"}
}

// Notify relays the upstream's progress and log messages of the call.
func (a *asker) Notify(ctx context.Context, method string, params json.RawMessage) {
	x := a.call.Exchange
	switch method {
	case "notifications/progress":
		var p struct {
			Progress float64 `json:"progress"`
			Total    float64 `json:"total"`
			Message  string  `json:"message"`
		}
		if json.Unmarshal(params, &p) == nil {
			x.Progress(p.Progress, p.Total, p.Message)
		}
	case "notifications/message":
		var p struct {
			Level  mcphandler.LogLevel `json:"level"`
			Logger string              `json:"logger"`
			Data   json.RawMessage     `json:"data"`
		}
		if json.Unmarshal(params, &p) == nil && len(p.Data) > 0 {
			x.Log(p.Level, p.Logger, p.Data)
		}
	}
}
