// Package mcptest is a wire-level test client for MCP (Model Context
// Protocol) servers: [Client] speaks the Streamable HTTP transport of
// revisions 2025-03-26, 2025-06-18 and 2025-11-25, [ModernClient] the
// stateless revision 2026-07-28, and [LegacyClient] the HTTP+SSE transport
// of 2024-11-05.
//
// The client depends only on the standard library and knows nothing about
// how the server is built, so it can exercise any [net/http.Handler] or any
// running server by URL. It is meant for tests: errors carry the HTTP status,
// the body and the JSON-RPC error so that a test can assert on them, and raw
// access ([Client.Post], [Client.Do], [ReadSSE]) is available for protocol
// tests that need to send malformed or unusual requests.
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
// # What the client does on the wire
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
//   - If a response stream ends before the response arrives but after an
//     event with an id, the client resumes it (2025-11-25 polling) with a
//     GET carrying Last-Event-ID, after waiting for the server's retry
//     interval. See [WithAutoResume].
//   - When the context of a request is cancelled, the client sends
//     notifications/cancelled for it. See [WithCancelNotifications].
//
// # The 2026-07-28 client
//
// [ModernClient] has no initialize and no session. Every request carries
// params._meta with io.modelcontextprotocol/protocolVersion,
// clientCapabilities, clientInfo and (with [WithLogLevel]) logLevel, and the
// headers MCP-Protocol-Version, Mcp-Method and, for tools/call, prompts/get
// and resources/read, Mcp-Name (Base64-encoded when it is not header-safe,
// see [EncodeHeaderValue]). An input_required result is answered with the
// handlers given as options and retried with a new id, inputResponses and
// the requestState echoed byte for byte ([ModernClient.Call]);
// [ModernClient.CallOnce] and [ModernClient.Retry] drive rounds by hand.
// [ModernClient.Listen] opens a subscriptions/listen stream.
//
//	c := mcptest.NewModern(t, h, mcptest.WithElicitationHandler(accept))
//	res, err := c.CallTool(t.Context(), "delete_project", map[string]any{"project": "alpha"})
//
// # The 2024-11-05 HTTP+SSE client
//
// [LegacyClient] opens the SSE stream with a GET, reads the endpoint event,
// POSTs every message to the message URL (202 Accepted) and reads every
// answer from the stream on a goroutine it owns until [LegacyClient.Close].
//
// # Concurrency and cleanup
//
// A [Client] is safe for concurrent use. Request ids come from an atomic
// counter. The client starts a goroutine only for an open [Stream]; it ends
// when the stream ends, when [Stream.Close] or [Client.Close] is called, or
// when the stream's context is cancelled. The same holds for a
// [ModernClient] and the streams of [ModernClient.Listen]. A [LegacyClient]
// runs a stream reader (and a goroutine per server request it answers)
// while connected; [LegacyClient.Close] ends them and waits for them. Handlers passed as options run on
// the goroutine that made the call whose response stream carried the server
// message.
package mcptest
