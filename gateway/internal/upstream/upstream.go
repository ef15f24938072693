package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Era is how an endpoint is spoken to.
type Era int

const (
	// Probe means the era is unknown: [Detect] finds it out, once per
	// operation (see [ListTools]).
	Probe Era = iota
	// Sessions is Streamable HTTP with sessions: 2025-03-26, 2025-06-18,
	// 2025-11-25.
	Sessions
	// Stateless is 2026-07-28: no session, every request carries its
	// version and the client's capabilities.
	Stateless
	// Legacy is the 2024-11-05 HTTP+SSE transport: GET the SSE URL, POST to
	// the endpoint its first event names.
	Legacy
)

// String names the era as in this package's documentation.
func (e Era) String() string {
	switch e {
	case Probe:
		return "probe"
	case Sessions:
		return "sessions"
	case Stateless:
		return "stateless"
	case Legacy:
		return "legacy"
	}
	return "era(" + itoa(int(e)) + ")"
}

// Endpoint is one upstream as one caller reaches it. The functions of this
// package read it and never change it or keep it.
type Endpoint struct {
	// URL is the MCP endpoint (Sessions, Stateless) or the SSE URL
	// (Legacy). With Probe, Detect tries every era on it.
	URL string
	// Header is sent with every request (credentials). It is never sent
	// on a redirect: redirects are not followed (see HTTP). The headers
	// the protocol sets (Content-Type, Accept, MCP-Protocol-Version,
	// Mcp-Session-Id, Mcp-Method, Mcp-Name, Mcp-Param-*, Last-Event-ID)
	// are never taken from Header, however it spells them.
	Header http.Header
	// Headers, if set, is called before each HTTP request of an
	// operation, with the request's context and its header, which holds
	// Header's already: what it adds or changes is sent (a trace context,
	// say). The headers the protocol sets are never taken from it either.
	// It runs on the operation's goroutine.
	Headers func(ctx context.Context, h http.Header)
	// Meta holds members added, as JSON strings, to the _meta of every
	// request an operation sends (initialize included; not its
	// notifications nor its answers to the upstream's questions): a trace
	// context, as the OpenTelemetry conventions for MCP carry it. A key the
	// protocol uses — progressToken, or of prefix io.modelcontextprotocol/
	// — is not taken from it, nor an empty key. They go in the order of
	// their keys.
	Meta map[string]string
	// Era is how URL is spoken to. Probe: find out with [Detect] before
	// each operation. Set it to override what an upstream advertises
	// (some advertise 2026-07-28 only, yet serve 2025 sessions).
	Era Era
	// HTTP sends the requests. If nil, a client with
	// http.DefaultTransport is used. Its CheckRedirect is always replaced
	// by one that refuses every redirect: a 3xx answer is a *StatusError
	// with its code. Its Timeout, if set, bounds each HTTP exchange with
	// the reading of its body: a stream (Legacy's, an SSE answer, a
	// watch's) included, so it ends a watch ([WatchTools]) after that long.
	HTTP *http.Client
	// MaxResponseBytes bounds each response body, and the whole of each
	// SSE stream (every event, comment and line of it, across the
	// reconnections of one request), so also each event and each line.
	// The pages of one tools/list hold at most 4 times as much together.
	// Past either the operation fails with [ErrTooLarge]; so does a watch
	// whose stream brought that much ([WatchTools]). If zero (or
	// negative), 4 MiB.
	MaxResponseBytes int64
	// Timeout bounds each operation (a list with all its pages, a call
	// with all its rounds, the questions the Asker answers included, and
	// Detect), on top of the ctx it is given; of a watch, only the
	// connection ([WatchTools]). If zero (or negative), 60
	// seconds. Ending a session after a failure or a cancellation is given
	// at most 5 seconds more (see CallTool).
	Timeout time.Duration
	// ClientInfo is the {"name":…,"version":…} object sent in initialize
	// (and in the _meta of 2026-07-28 requests). If nil,
	// {"name":"mcphandler-gateway","version":"0.1.0"}. It must be a JSON
	// object.
	ClientInfo json.RawMessage
	// LogLevel, if set, asks the upstream for its notifications/message
	// at this level and above (an MCP log level: "debug", "info", …),
	// which CallTool relays to Asker.Notify: with logging/setLevel after
	// initialize (Sessions, Legacy; only when the upstream declares
	// logging), and with _meta "io.modelcontextprotocol/logLevel"
	// (Stateless). If empty, no log messages are asked for.
	LogLevel string
}

// Tool is one tool as the upstream listed it.
type Tool struct {
	// Name is the tool's name: 1–128 bytes of A-Z a-z 0-9 _ - .
	Name string
	// Def is the tool object exactly as the upstream sent it (one JSON
	// object, without repeated keys, nested at most 128 deep).
	Def json.RawMessage
}

// Asker carries what the upstream sends the client during a call. CallTool
// calls its methods from its own goroutine, one at a time, never after it
// returned.
type Asker interface {
	// Ask puts a server-to-client request (elicitation/create,
	// sampling/createMessage, roots/list) to the downstream client and
	// returns its result (a JSON object), or an error: a *RPCError is
	// sent back to the upstream as a JSON-RPC error (Sessions, Legacy);
	// any other error is sent as -32603 without its text. On Stateless,
	// which has no way to send an error back, an error of Ask ends the
	// call with that error. ctx ends with the call.
	Ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// Notify relays a notification of the call: notifications/progress
	// (params carry the progressToken CallTool sent upstream, which the
	// relay replaces with its own client's) and notifications/message.
	Notify(ctx context.Context, method string, params json.RawMessage)
}

// RPCError is a JSON-RPC error from the upstream (or to send to it).
type RPCError struct {
	Code int
	// Message is the upstream's message, cut to 256 bytes (at a UTF-8
	// boundary) with control characters replaced.
	Message string
	// Data is the error's data as the upstream sent it, if it was at most
	// 1 KiB; larger data is dropped.
	Data json.RawMessage
}

func (e *RPCError) Error() string {
	return "upstream: JSON-RPC error " + itoa(e.Code) + ": " + e.Message
}

// StatusError is an HTTP answer the operation could not use: a redirect
// (never followed), an auth failure (401, 403), a server failure (5xx), or
// another status where a success was needed.
type StatusError struct {
	// Op names the request: "POST initialize", "GET", "DELETE", …
	Op string
	// StatusCode is the HTTP status.
	StatusCode int
	// RPC is the JSON-RPC error the body carried, if it carried one.
	RPC *RPCError
	// Body is the start of a body that was not a JSON-RPC error, cut to
	// 256 bytes with control characters replaced.
	Body string
}

func (e *StatusError) Error() string {
	s := "upstream: " + e.Op + ": HTTP " + itoa(e.StatusCode)
	if t := http.StatusText(e.StatusCode); t != "" {
		s += " " + t
	}
	switch {
	case e.RPC != nil:
		s += ": JSON-RPC error " + itoa(e.RPC.Code) + ": " + e.RPC.Message
	case e.Body != "":
		s += ": " + e.Body
	}
	return s
}

// Unwrap returns the JSON-RPC error of the body, if any, so that
// errors.As finds it.
func (e *StatusError) Unwrap() error {
	if e.RPC == nil {
		return nil
	}
	return e.RPC
}

// Auth reports whether the upstream refused the credentials (401 or 403).
func (e *StatusError) Auth() bool {
	return e.StatusCode == http.StatusUnauthorized || e.StatusCode == http.StatusForbidden
}

// Transient reports whether the status says to try again later: 408, 425,
// 429 or a 5xx.
func (e *StatusError) Transient() bool {
	switch e.StatusCode {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return e.StatusCode >= 500
}

// The conditions an operation fails with, besides *StatusError, *RPCError,
// the ctx's error (context.Canceled, context.DeadlineExceeded: the
// operation's Timeout is a deadline) and the HTTP client's errors. Each is
// wrapped with what happened; test with errors.Is.
var (
	// ErrTooLarge: a response, an SSE stream, event or line went past
	// Endpoint.MaxResponseBytes.
	ErrTooLarge = errors.New("upstream: response too large")
	// ErrMalformed: the upstream sent something that is not MCP as its era
	// speaks it: a wrong or missing Content-Type, invalid JSON, JSON nested
	// deeper than 128 or with a number longer than 128 bytes or a
	// repeated key, a message that is not JSON-RPC, a response whose id
	// is not the request's, a result of the wrong shape, a legacy
	// endpoint on another origin.
	ErrMalformed = errors.New("upstream: malformed message")
	// ErrTooMany: the upstream went past a bound on counts: tools (10,000),
	// pages of tools/list (100), input_required rounds (8), server-to-client
	// requests in one call (64), stream reconnections of one request (16).
	ErrTooMany = errors.New("upstream: too many")
	// ErrUnsupported: the upstream speaks no era or version this package
	// speaks: Detect found none, or initialize agreed on a version it does
	// not know.
	ErrUnsupported = errors.New("upstream: unsupported protocol")
)

// Bounds on what an upstream can make an operation do. They are not
// configurable: each is far above what a working upstream needs.
const (
	maxTools        = 10000
	maxPages        = 100
	maxRounds       = 8
	maxAsks         = 64
	maxResumes      = 16
	maxListFactor   = 4 // a list's pages together: 4 × MaxResponseBytes
	maxDepth        = 128
	maxNumberBytes  = 128
	maxErrorText    = 256
	maxErrorData    = 1024
	maxSessionID    = 1024
	maxEventID      = 1024
	maxCursor       = 16 << 10
	maxRequestState = 1 << 20
	cleanupTimeout  = 5 * time.Second
	defaultMax      = 4 << 20
	defaultTimeout  = 60 * time.Second
)

var defaultClientInfo = json.RawMessage(`{"name":"mcphandler-gateway","version":"0.1.0"}`)

// endpoint is an Endpoint checked and with its defaults applied.
type endpoint struct {
	url        *url.URL
	header     http.Header
	client     *http.Client
	max        int64
	timeout    time.Duration
	clientInfo json.RawMessage
	logLevel   string
	headers    func(context.Context, http.Header)
	meta       []member // from Endpoint.Meta, sorted by key
}

// refuseRedirect makes the client return a 3xx answer as it is.
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func (ep *Endpoint) check() (*endpoint, error) {
	u, err := url.Parse(ep.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("upstream: Endpoint.URL must be an absolute http or https URL")
	}
	e := &endpoint{url: u, header: ep.Header, max: ep.MaxResponseBytes, timeout: ep.Timeout,
		clientInfo: ep.ClientInfo, logLevel: ep.LogLevel, headers: ep.Headers, meta: metaMembers(ep.Meta)}
	c := http.Client{Transport: http.DefaultTransport}
	if ep.HTTP != nil {
		c = *ep.HTTP
	}
	c.CheckRedirect = refuseRedirect
	e.client = &c
	if e.max <= 0 {
		e.max = defaultMax
	}
	if e.timeout <= 0 {
		e.timeout = defaultTimeout
	}
	if e.clientInfo == nil {
		e.clientInfo = defaultClientInfo
	} else if !isObject(e.clientInfo) {
		return nil, errors.New("upstream: Endpoint.ClientInfo must be a JSON object")
	}
	if e.logLevel != "" && !logLevels[e.logLevel] {
		return nil, errors.New("upstream: Endpoint.LogLevel is not an MCP log level")
	}
	return e, nil
}

// metaMembers are the members of Endpoint.Meta a request's _meta may
// carry, sorted by key.
func metaMembers(meta map[string]string) []member {
	if len(meta) == 0 {
		return nil
	}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		if k != "" && k != "progressToken" && !strings.HasPrefix(k, reservedMeta) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	ms := make([]member, len(keys))
	for i, k := range keys {
		ms[i] = member{k, str(meta[k])}
	}
	return ms
}

var logLevels = map[string]bool{"debug": true, "info": true, "notice": true, "warning": true,
	"error": true, "critical": true, "alert": true, "emergency": true}
