package mcptest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// DefaultProtocolVersion is the protocol version the client asks for at
// initialize unless [WithProtocolVersion] says otherwise.
const DefaultProtocolVersion = "2025-11-25"

// Method names of the server requests the client can answer.
const (
	MethodElicit    = "elicitation/create"
	MethodSampling  = "sampling/createMessage"
	MethodRootsList = "roots/list"
	MethodPing      = "ping"
)

// RequestHandler answers a server request. It receives the request's raw
// params and returns the raw result; nil means {}. An error is sent as a
// JSON-RPC error: a *RPCError as it is, any other error as -32603 with its
// text.
type RequestHandler func(ctx context.Context, params json.RawMessage) (json.RawMessage, error)

// ElicitationHandler answers an elicitation/create request.
type ElicitationHandler func(ctx context.Context, params ElicitParams) (ElicitResult, error)

// Option configures a [Client].
type Option func(*config)

type config struct {
	era           Era
	token         string
	header        http.Header
	version       string
	versionSet    bool
	logLevel      string
	maxRounds     int
	caps          json.RawMessage
	capsSet       bool
	clientName    string
	clientVersion string
	httpClient    *http.Client
	handlers      map[string]RequestHandler
	onNotify      func(method string, params json.RawMessage)
	autoResume    bool
	cancelNotify  bool
	path          string
}

func newConfig(opts []Option) config {
	cfg := config{
		header:        http.Header{},
		version:       DefaultProtocolVersion,
		clientName:    "mcptest",
		clientVersion: "1.0.0",
		handlers:      map[string]RequestHandler{},
		autoResume:    true,
		cancelNotify:  true,
		path:          "/",
		maxRounds:     DefaultMaxRounds,
	}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return cfg
}

// WithToken makes the client send "Authorization: Bearer token" on every
// request (POST, GET and DELETE).
func WithToken(token string) Option {
	return func(c *config) { c.token = token }
}

// WithHeader adds a header to every request. Headers given this way replace
// the client's default value for the same name; several WithHeader options
// with the same name add several values. A header whose only value is ""
// is removed instead (for example WithHeader("Mcp-Method", "") sends no
// Mcp-Method).
func WithHeader(key, value string) Option {
	return func(c *config) { c.header.Add(key, value) }
}

// WithProtocolVersion sets the protocol version the client speaks. The
// [Sessions] and [SSE] eras ask for it at initialize; the default is
// [DefaultProtocolVersion] for [Sessions] and [LegacyProtocolVersion] for
// [SSE]. The [Stateless] era sends it in MCP-Protocol-Version and in every
// request's _meta; the default is [ModernProtocolVersion].
func WithProtocolVersion(v string) Option {
	return func(c *config) {
		c.version = v
		c.versionSet = true
	}
}

// WithCapabilities sets the client capabilities sent at initialize (for
// [Stateless], in every request's _meta). Without
// it the client declares {} plus one empty entry for each kind of handler it
// was given: "elicitation" for [WithElicitationHandler], "sampling" for
// [WithSamplingHandler] and "roots" for [WithRootsHandler].
func WithCapabilities(caps json.RawMessage) Option {
	return func(c *config) {
		c.caps = caps
		c.capsSet = true
	}
}

// WithClientInfo sets the clientInfo sent at initialize (for [Stateless],
// in every request's _meta). The default is mcptest 1.0.0.
func WithClientInfo(name, version string) Option {
	return func(c *config) {
		c.clientName = name
		c.clientVersion = version
	}
}

// WithElicitationHandler sets the function that answers elicitation/create.
// Without one the client answers it with -32601 Method not found.
func WithElicitationHandler(h ElicitationHandler) Option {
	return WithRequestHandler(MethodElicit, func(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
		var p ElicitParams
		if len(params) > 0 {
			if err := json.Unmarshal(params, &p); err != nil {
				return nil, &RPCError{Code: CodeInvalidParams, Message: "invalid elicitation params: " + err.Error()}
			}
		}
		p.Raw = params
		res, err := h(ctx, p)
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	})
}

// WithSamplingHandler sets the function that answers sampling/createMessage.
// Without one the client answers it with -32601 Method not found.
func WithSamplingHandler(h RequestHandler) Option {
	return WithRequestHandler(MethodSampling, h)
}

// WithRootsHandler sets the function that answers roots/list. Without one
// the client answers it with -32601 Method not found.
func WithRootsHandler(h RequestHandler) Option {
	return WithRequestHandler(MethodRootsList, h)
}

// WithRequestHandler sets the function that answers server requests with
// the given method. ping is answered with {} unless a handler is set for it;
// requests with no handler get -32601 Method not found. A nil handler
// removes the one set before.
func WithRequestHandler(method string, h RequestHandler) Option {
	return func(c *config) {
		if h == nil {
			delete(c.handlers, method)
			return
		}
		c.handlers[method] = h
	}
}

// WithNotificationHandler sets a function called with every server
// notification read from a response stream, after it has been recorded. It
// runs on the goroutine of the call that read it, so concurrent calls may
// run it concurrently; for [SSE], on the goroutine that reads the SSE
// stream.
func WithNotificationHandler(h func(method string, params json.RawMessage)) Option {
	return func(c *config) { c.onNotify = h }
}

// WithHTTPClient sets the HTTP client. [New] defaults to the test server's
// client and [Dial] to a client with its own transport.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *config) { c.httpClient = hc }
}

// WithAutoResume turns on (the default) or off resuming a POST's response
// stream that ends before the response, or whose connection breaks, in
// the [Sessions] era: after an event with an id, the client waits for the
// stream's retry interval and issues a GET with Last-Event-ID, as
// 2025-11-25 servers that close connections early expect. Off, such a
// call fails with [ErrNoResponse], or the error that broke the stream.
func WithAutoResume(on bool) Option {
	return func(c *config) { c.autoResume = on }
}

// WithCancelNotifications turns on (the default) or off sending
// notifications/cancelled for a request whose context ends before its
// response arrives, in the [Sessions] and [SSE] eras.
func WithCancelNotifications(on bool) Option {
	return func(c *config) { c.cancelNotify = on }
}

// WithPath sets the path of the MCP endpoint on the test server started by
// [New] (for [SSE], of the SSE endpoint); the default is "/". [Dial]
// ignores it.
func WithPath(path string) Option {
	return func(c *config) { c.path = path }
}

// capabilities returns the client capabilities to declare: the ones set
// with [WithCapabilities], or {} plus one empty entry for each kind of
// handler given.
func (cfg *config) capabilities() json.RawMessage {
	if cfg.capsSet {
		if len(cfg.caps) == 0 {
			return json.RawMessage("{}")
		}
		return cfg.caps
	}
	caps := map[string]struct{}{}
	if cfg.handlers[MethodElicit] != nil {
		caps["elicitation"] = struct{}{}
	}
	if cfg.handlers[MethodSampling] != nil {
		caps["sampling"] = struct{}{}
	}
	if cfg.handlers[MethodRootsList] != nil {
		caps["roots"] = struct{}{}
	}
	b, _ := json.Marshal(caps)
	return b
}

// httpClientOrOwn returns the configured HTTP client, or a new one with its own
// transport (a clone of the default one).
func (cfg *config) httpClientOrOwn() *http.Client {
	if cfg.httpClient != nil {
		return cfg.httpClient
	}
	var rt http.RoundTripper = http.DefaultTransport
	if tr, ok := rt.(*http.Transport); ok {
		rt = tr.Clone()
	}
	return &http.Client{Transport: rt}
}

// serve starts an httptest.Server for h, closed when the test ends, makes
// cfg use its client unless one was given, and returns the URL of path on
// it.
func (cfg *config) serve(t testing.TB, h http.Handler, path string) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if cfg.httpClient == nil {
		cfg.httpClient = srv.Client()
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return srv.URL + path
}
