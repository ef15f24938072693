// Package upstream is the gateway's wire client: it talks to one upstream
// MCP server over HTTP, in whichever revision the upstream speaks, to list
// its tools ([ListTools]), call one ([CallTool]) and watch its tool list
// for changes ([WatchTools]) on behalf of one downstream client, and finds
// out which revision that is ([Detect]).
//
// # Eras
//
// An [Endpoint] is spoken to in one [Era]:
//
//   - Sessions (2025-03-26, 2025-06-18, 2025-11-25, Streamable HTTP): every
//     operation opens a session of its own (initialize with the newest
//     revision, notifications/initialized, the operation, DELETE), so that
//     nothing of one caller's session reaches another's; or its caller
//     keeps one ([OpenSession]) and runs calls in it ([CallToolIn]) until
//     it ends it ([EndSession]) or the upstream answers 404
//     ([SessionGoneError], which says whether the call may run again).
//     Answers come as JSON or as an SSE stream, on which the upstream's
//     questions arrive before the result and are answered by POSTing the
//     response; a stream that breaks off is resumed with GET and
//     Last-Event-ID.
//   - Stateless (2026-07-28): each request carries the version, the
//     client's capabilities and info in _meta, and the MCP-Protocol-Version,
//     Mcp-Method and Mcp-Name headers. A tools/call answered input_required
//     is driven by CallTool: the inputRequests go to the [Asker], and the
//     call is retried with inputResponses and the echoed requestState.
//     [CallToolRound] instead returns the round's inputRequests and
//     requestState ([InputRequired]), for a caller that relays the round to
//     its own client and retries later with the answers ([Retry]).
//   - Legacy (2024-11-05 HTTP+SSE): GET the SSE URL, POST to the endpoint
//     its first event names (on the same origin only), read every answer
//     from the stream.
//
// # Bounds
//
// Everything an upstream sends is untrusted. Each response body, and each
// SSE stream whole, is bounded by Endpoint.MaxResponseBytes (4 MiB by
// default), so every event and line is too; each operation by
// Endpoint.Timeout (60 s by default), a watch's connection but not the
// watch itself, which its ctx ends; every JSON value is checked whole
// before it is read: valid, no repeated key, nested at most 128 deep, no
// number longer than 128 bytes. Counts are bounded: 10,000 tools and 100
// pages per list, 64 questions per call, 8 input_required rounds, 16
// reconnections of a stream. Redirects are never followed, so the
// credentials of Endpoint.Header go nowhere but Endpoint.URL's origin.
// Errors say what happened (the HTTP status, the JSON-RPC code) with at
// most 256 bytes of the upstream's text.
//
// # Concurrency
//
// Every function is safe for concurrent use and keeps nothing between
// calls: no session, no cache. A kept session is a [Session] value its
// caller holds (and may store anywhere): calls in one session, from any
// number of goroutines or processes, send request ids and progress tokens
// of their own. An operation runs on its caller's
// goroutine (Legacy adds one that reads the stream), calls its Asker from
// that goroutine only, and has ended everything it started when it
// returns.
package upstream
