// Package authdisc finds the OAuth authorization server of an upstream MCP
// server the way the MCP authorization specification (2025-06-18,
// 2025-11-25) has a client find it, so that the gateway can run the
// authorization code flow with PKCE for a person ([Discover]):
//
//  1. It sends the MCP endpoint a request without credentials (POST of an
//     initialize request; GET of the SSE URL of a 2024-11-05 server) and
//     expects 401. The Bearer challenge of its WWW-Authenticate header
//     ([ParseChallenge]) names the protected resource metadata
//     (resource_metadata) and the scope to ask for (scope).
//  2. It fetches the protected resource metadata (RFC 9728): from
//     resource_metadata, or else from the well-known URIs, path-inserted
//     first, then at the root. The metadata's resource must be the MCP
//     endpoint; its first authorization server is the one used.
//  3. It fetches that server's metadata from the RFC 8414 and OpenID
//     Connect Discovery well-known URIs, in the specification's order. Its
//     issuer must be the server's URL exactly, it must have authorization
//     and token endpoints, and it must support PKCE with S256.
//
// # Bounds
//
// Everything the upstream and the servers it names send is untrusted.
// Each body read is bounded by Config.MaxBytes (64 KiB by default): a
// longer one is an error, never cut. A WWW-Authenticate value longer than
// 8 KiB is ignored. A metadata document must be one JSON object, nested at
// most 32 deep, without a repeated key (a document with two meanings); at
// most 32 authorization servers and 64 scopes or code challenge methods
// are accepted in one list, and no string of more than 2 KiB. Every URL
// taken from a header or a document must be absolute https, without
// userinfo or fragment; http is accepted only to a loopback host
// (127.0.0.0/8, ::1, localhost) and only when Config.URL is on a loopback
// host itself, for development and tests. Redirects are never followed,
// and no request carries credentials or cookies. Errors name the URL that
// failed, and quote at most 256 bytes of anything received.
//
// Every URL the upstream names is fetched: to keep an upstream from
// making the gateway reach addresses of its own network, give
// Config.HTTPClient a dialer that refuses them.
//
// # Concurrency
//
// Every function is safe for concurrent use and keeps nothing between
// calls: no cache. Discover runs on its caller's goroutine and has ended
// every request it made when it returns.
package authdisc
