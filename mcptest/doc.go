// Package mcptest is a wire-level test client for MCP (Model Context
// Protocol) servers. One [Client] type speaks every protocol era, chosen
// with [WithEra]:
//
//   - [Sessions] (the default): the Streamable HTTP transport with sessions
//     of revisions 2025-03-26, 2025-06-18 and 2025-11-25;
//   - [Stateless]: the stateless revision 2026-07-28;
//   - [SSE]: the HTTP+SSE transport of 2024-11-05.
//
// Every era has the same method set and shares how requests are built
// (ids, bodies, Authorization, [WithHeader] headers, raw access). A method
// that has no meaning in an era fails with an error matching
// [errors.ErrUnsupported] and sends nothing:
//
//	method                          Sessions  Stateless  SSE
//	Initialize                      yes       -          yes (connects first)
//	Call, CallOnce, CallTool, ...   yes       yes        yes
//	Notify, Respond, Post, Do       yes       yes        yes
//	Retry, Listen                   -         yes        -
//	OpenStream, Resume, Delete      yes       -          -
//	Batch                           yes       -          -
//	Connect                         -         -          yes
//
// [NewModern], [DialModern], [NewLegacy] and [DialLegacy] are shorthands
// for [New] and [Dial] with an era.
//
// The client depends only on the standard library and knows nothing about
// how the server is built, so it can exercise any [net/http.Handler] or any
// running server by URL. It is meant for tests: errors carry the HTTP status,
// the body and the JSON-RPC error so that a test can assert on them, and raw
// access ([Client.Post], [Client.Do], [Client.CallOnce], [ReadSSE]) is
// available for protocol tests that need to send malformed or unusual
// requests.
//
// # Typical use
//
//	func TestHook(t *testing.T) {
//		c := mcptest.New(t, myHandler, mcptest.WithToken("secret"))
//		if _, err := c.Initialize(t.Context()); err != nil {
//			t.Fatal(err)
//		}
//		res, err := c.CallTool(t.Context(), "echo", map[string]any{"text": "hi"})
//		if err != nil {
//			t.Fatal(err)
//		}
//		if res.IsError || res.Text() != "hi" {
//			t.Fatalf("unexpected result %s", res.Raw)
//		}
//	}
//
// The same test for another era needs only the option (and no Initialize
// for [Stateless]):
//
//	c := mcptest.New(t, h, mcptest.WithEra(mcptest.Stateless), mcptest.WithElicitationHandler(accept))
//	res, err := c.CallTool(t.Context(), "delete_project", map[string]any{"project": "alpha"})
//
// # The Sessions era on the wire
//
//   - Every POST carries Content-Type: application/json and
//     Accept: application/json, text/event-stream.
//   - [Client.Initialize] posts initialize without a session header, stores
//     the Mcp-Session-Id response header and the negotiated protocolVersion,
//     then posts notifications/initialized and requires 202 Accepted.
//   - Every later request carries Mcp-Session-Id (when the server gave one)
//     and MCP-Protocol-Version (the negotiated version).
//   - A request may be answered with application/json (one object, or an
//     array for 2025-03-26 batches) or with text/event-stream. While an SSE
//     response is read, server notifications are recorded (see
//     [Client.Notifications]) and passed to the handler set with
//     [WithNotificationHandler]; server requests (elicitation/create,
//     sampling/createMessage, roots/list, ping, …) are answered by POSTing a
//     JSON-RPC response, which the server must accept with 202. Reading
//     stops at the response whose id matches the request.
//   - If a response stream ends (or its connection breaks) before the
//     response arrives but after an event with an id, the client resumes
//     it (2025-11-25 polling) with a
//     GET carrying Last-Event-ID, after waiting for the server's retry
//     interval. See [WithAutoResume].
//   - When the context of a request is cancelled, the client sends
//     notifications/cancelled for it. See [WithCancelNotifications].
//   - [Client.OpenStream] and [Client.Resume] open the GET stream;
//     [Client.Delete] ends the session.
//
// # The Stateless era on the wire
//
// There is no initialize and no session. Every request carries
// params._meta with io.modelcontextprotocol/protocolVersion,
// clientCapabilities, clientInfo and (with [WithLogLevel]) logLevel, and the
// headers MCP-Protocol-Version, Mcp-Method and, for tools/call, prompts/get
// and resources/read, Mcp-Name (Base64-encoded when it is not header-safe,
// see [EncodeHeaderValue]). An input_required result is answered with the
// handlers given as options and retried with a new id, inputResponses and
// the requestState echoed byte for byte ([Client.Call], at most
// [WithMaxRounds] round trips); [Client.CallOnce] and [Client.Retry] drive
// rounds by hand. [Client.Listen] opens a subscriptions/listen stream. A
// JSON-RPC request on a response stream is an error ([ErrServerRequest]).
//
// # The SSE era on the wire
//
// [Client.Connect] (or [Client.Initialize], which connects if needed)
// opens the SSE stream with a GET and reads the endpoint event; every
// message is then POSTed to the message URL (202 Accepted) and every answer
// read from the stream, by a goroutine the client owns until
// [Client.Close]. Server requests read there are answered with the
// handlers given as options, each on a goroutine of its own; problems no
// caller could be told about are kept in [Client.Errors].
//
// # Concurrency and cleanup
//
// A [Client] is safe for concurrent use. Request ids come from an atomic
// counter. The client starts a goroutine for each open [Stream] (the GET
// stream of [Sessions], the subscriptions/listen stream of [Stateless]); it
// ends when the stream ends, when [Stream.Close] or [Client.Close] is
// called, or when the stream's context is cancelled. An [SSE] client also
// runs a stream reader, and a goroutine per server request it answers,
// while connected; [Client.Close] ends them and waits for them. Handlers
// passed as options run on the goroutine that made the call whose response
// stream carried the server message (for [SSE], on the goroutine of that
// server request).
package mcptest
