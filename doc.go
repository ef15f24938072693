// Package mcphandler serves the Model Context Protocol (MCP) to many tenants
// from one http.Handler, built from one [Config] of hooks.
//
//	h := mcphandler.New(mcphandler.Config{
//		Authenticate: auth,      // who is calling
//		Roles:        []string{"viewer", "editor", "admin"},
//		ListTools:    listTools, // what this caller may see and call
//		BeforeCall:   policy,    // allow, deny, or ask a human first
//		OnCall:       audit,     // what happened
//	})
//	mux.Handle("/mcp", h)
//
// # Transport
//
// The handler speaks Streamable HTTP for the revisions 2025-03-26,
// 2025-06-18 and 2025-11-25 on one endpoint: POST carries client messages,
// GET opens the session's server-to-client stream, DELETE ends the session.
// A request is answered with JSON, or with an SSE stream when something must
// be sent before its result (progress, logs, a question for the human).
//
// The same endpoint serves 2026-07-28, the stateless revision: no
// initialize and no session; each POST names its version and client
// capabilities in _meta (and in headers), results carry cache hints, and
// a question for the client (a confirm too) is an input_required result
// the client answers by retrying the request. subscriptions/listen
// replaces the GET stream.
//
// The 2024-11-05 HTTP+SSE transport, for older clients, is served by the
// two handlers of [Handler.LegacySSE]: a GET stream that carries every
// answer, and an endpoint for POSTed messages. Every era shares the hooks,
// gates, confirms and store; ARCHITECTURE.md in the repository draws the
// path of a request in each.
//
// # Tenants
//
// Nothing is global. [Config.Authenticate] maps each HTTP request to an
// [Identity] (subject, tenant, role, scopes); [Config.ListTools] runs per
// request with that identity in its context ([IdentityFrom]) and returns the
// caller's tools. A tool that is not in the caller's list, or whose
// [Tool.MinRole] is above the caller's role, does not exist for that caller:
// tools/call answers it exactly as it answers an unknown name (-32602), and
// it never runs.
//
// # Hooks
//
// Every hook is an optional field of [Config] with a documented default. For
// a tools/call the handler runs them in this order:
//
//	Authenticate ──► ListTools (lookup + role gate) ──► argument validation
//	      ──► BeforeCall ──► [confirm] ──► Tool.Handler ──► response ──► OnCall
//
// A tool definition the handler cannot serve (see [Tool]) is left out of
// what ListTools returned, logged once, and reported by [CheckTools]; every
// tool's InputSchema is enforced at "argument validation".
//
// [Config.Interceptors] wrap all of it, per MCP operation: tracing, metrics,
// logging or the host's own middleware (module otelmcp records
// OpenTelemetry traces and metrics with one).
//
// Hooks are called concurrently from many requests and must be safe for
// that. A hook's error never reaches the client verbatim unless it is an
// [*Error] (protocol errors) or a [*ToolError] (tool failures): anything else
// becomes an internal error whose text says nothing of the server or of other
// tenants.
//
// # Sessions
//
// initialize opens a session bound to the caller's tenant and subject; its
// id (Mcp-Session-Id) presented by any other identity is unknown (404). The
// session record — negotiated version, client capabilities, log level —
// lives in a [session.Store]: in memory by default, or shared by replicas.
// Idle sessions expire after Config.Sessions.TTL ([SessionOptions]).
// [Config.Stateless] turns sessions off. What a client can make a session
// keep is bounded (client info, subscriptions, ids; see [Limits]), and one
// identity holds at most Config.Limits.MaxSessionsPerIdentity sessions:
// past it, its oldest session ends.
//
// # Serving it
//
// Long-lived streams (GET, subscriptions/listen, legacy HTTP+SSE), and
// POSTs that wait (a confirm, an approval, a question to the client, a
// task's result), re-run [Config.Authenticate] every
// Config.Sessions.KeepAlive and end when the caller's credentials are
// revoked, change identity, or reach [Identity.Expires]; no result goes to
// a caller after that. The handler bounds the time it reads a POST body
// (Config.Limits.ReadBodyTimeout); the host's [net/http.Server] should set
// ReadHeaderTimeout and IdleTimeout, and neither ReadTimeout nor
// WriteTimeout, which would cut those streams:
//
//	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
//
// # Confirms
//
// BeforeCall may return [Confirm]: if the session's client declared the
// elicitation capability, the handler asks the human with an
// elicitation/create on the call's own SSE stream and waits up to
// [Config.ConfirmTimeout]. Only an accept with the box ticked runs the
// tool; decline, cancel, timeout and a disconnect each end the call without
// running it, with their own [Outcome]. A client that cannot be asked gets
// the decision's fallback result, or a tool error: never an unconfirmed run.
// Tool handlers ask the client through the same machinery ([Exchange]).
//
// A confirm is decided once, in the store: the replica that receives the
// answer records it, and the asker closes the confirm when it gives up;
// whichever happens first is the decision, on every replica. The replica
// responsible for a confirm holds a lease on it; another replica finishes
// a confirm only once that lease lapsed. On 2026-07-28 the confirm is
// asked in an input_required round under a key with [ReservedKeyPrefix],
// and a confirmed tool may go on asking the client in further rounds.
//
// # Approvals
//
// BeforeCall may return [Approve] instead: a person the host authenticates
// itself decides on the host's approval page ([Config.Approvals], packages
// approval and approval/page), and the client only carries the link — a
// URL-mode elicitation on 2025-11-25, an input request on 2026-07-28, a
// tool result naming the page for any other client. The call runs once
// per approval, on any replica; see [Approve].
//
// # Replicas
//
// With a store shared by replicas (session/redisstore), every replica must
// hold the same [Config.StateKeys]: the records and messages they exchange
// through the store are authenticated with keys derived from them, so that
// access to the store alone can deny service but cannot answer a confirm,
// run a tool, cancel a call or inject a notification.
package mcphandler
