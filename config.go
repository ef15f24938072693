package mcphandler

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/internal/task"
	"github.com/mcphandler/mcphandler/session"
)

// Config configures a [Handler]. The zero value serves an endpoint with no
// tools that accepts every caller as one anonymous identity (and [New]
// warns about that); set the hooks to make it useful. The options that
// belong together are grouped (Scopes, Sessions, Limits, Tasks); the zero
// value of each group means its defaults.
//
// [New] copies the Config: changing it afterwards has no effect. Every
// hook may be called concurrently from many requests.
type Config struct {
	// Name and Version identify the server in initialize results when
	// ServerInfo is nil. If Name is empty, "mcphandler" is used.
	Name, Version string
	// Instructions is sent in initialize results when ServerInfo is nil.
	Instructions string
	// ServerInfo, if set, decides per request (per tenant) the server's
	// name, version and instructions. It sees the caller's identity.
	ServerInfo ServerInfoFunc

	// Authenticate decides who is calling. Package auth provides OIDC,
	// introspection and API-key authenticators. If nil, every request is
	// served with the zero Identity, whoever sends it, and New logs a
	// warning saying so; set it to [InsecureAnonymous] to serve anonymous
	// callers on purpose, without the warning. It runs on every request,
	// and again on the request of whatever outlives Sessions.KeepAlive:
	// every KeepAlive on a long-lived stream and on a POST that waits (a
	// confirm, an approval, a question to the client, a task's result),
	// and before the final message of a POST that waited or is older than
	// KeepAlive. A failure then, or an identity of another tenant or
	// subject, ends it.
	Authenticate AuthenticateFunc
	// Challenge returns the WWW-Authenticate value sent with a 401 when
	// Authenticate fails. If nil, `Bearer realm="mcp"` is used.
	Challenge ChallengeFunc

	// Roles orders the role names from least to most privileged, e.g.
	// {"viewer", "editor", "admin"}. A Tool's MinRole admits callers whose
	// Identity.Role is at or above it. A MinRole missing from Roles admits
	// nobody; a caller role missing from Roles passes only ungated entries.
	Roles []string
	// Scopes decides what a caller sees of the tools, resources and
	// prompts whose Scopes its token lacks (step-up authorization).
	Scopes ScopeOptions

	// ListTools returns the caller's tools. It backs both tools/list and
	// the tools/call lookup. If nil, the server has no tools capability.
	ListTools ListToolsFunc
	// BeforeCall decides whether a visible tool may run. If nil, every
	// visible tool is allowed.
	BeforeCall BeforeCallFunc
	// OnCall receives an event after every tools/call. If nil, nothing is
	// reported.
	OnCall OnCallFunc
	// Interceptors wrap every MCP operation (request, confirm answer, GET
	// stream, DELETE), the first one outermost: tracing, metrics, logging
	// or the host's own middleware. See [Interceptor].
	Interceptors []Interceptor

	// ListResources, ListResourceTemplates and ReadResource serve
	// resources, resolved per request like ListTools. A URI outside the
	// caller's resources and templates reads as not found. If the list
	// hooks are nil, the server has no resources capability.
	ListResources         ListResourcesFunc
	ListResourceTemplates ListResourceTemplatesFunc
	ReadResource          ReadResourceFunc

	// ListSkills serves the skills extension (io.modelcontextprotocol/skills):
	// skills/list, skills/get, resources/directory/read, and resources/read
	// and resources/list of skill:// URIs, which it answers instead of the
	// resource hooks. Resolved per request like ListTools; a skill is
	// further gated by its MinRole and Scopes. If nil, the server has no
	// skills. See skills.go for the limits (MaxSkillFiles, MaxSkillBytes).
	ListSkills ListSkillsFunc

	// ListPrompts and GetPrompt serve prompts. If ListPrompts is nil, the
	// server has no prompts capability.
	ListPrompts ListPromptsFunc
	GetPrompt   GetPromptFunc

	// Complete suggests argument values (completion/complete). If nil, the
	// server has no completions capability.
	Complete CompleteFunc

	// ConfirmTimeout bounds how long a Confirm waits for the human's
	// answer. If zero, 2 minutes. On 2026-07-28 it is also the lifetime of
	// a requestState. A confirm's record lives a minute longer than it
	// after its last change, so that late answers and retries find it
	// decided.
	ConfirmTimeout time.Duration

	// Approvals keeps the approvals an [Approve] decision asks for; the
	// host serves their page (package approval/page) from the same store.
	// It must share Store and StateKeys with the handler, and its TTL must
	// not exceed ConfirmTimeout (New panics otherwise). If nil, a call
	// decided Approve does not run. A call that would make one more
	// pending approval than its caller may hold
	// (approval.Config.MaxPendingPerIdentity, 20 by default) is refused
	// with -32000 saying how many are held and until when.
	Approvals *approval.Store

	// StateKeys are the secrets every replica shares, each at least 32
	// bytes. From each, the handler derives (HKDF-SHA256, one label per
	// purpose) the AES-256-GCM key that seals the requestState of
	// 2026-07-28 multi round-trip requests, and the HMAC-SHA256 keys that
	// authenticate the records and messages replicas exchange through
	// Store: confirms, decided 2026-07-28 confirms, answers,
	// cancellations, change notifications and stream events. Without
	// them, access to the store is not enough to answer a confirm, run a
	// tool, cancel a call or inject a notification. The first key seals
	// and signs, every key opens and verifies, so keys rotate by
	// prepending a new one (drop the old one once what it sealed expired:
	// ConfirmTimeout plus a minute, and Sessions.ResumeWindow for event
	// logs). Keep them in a secret store, never in the shared store
	// itself.
	//
	// If empty, a random key is made at New: fine for one replica with
	// the in-memory store (states do not survive a restart), and New
	// panics if Store is anything else, since replicas could not
	// authenticate each other.
	StateKeys [][]byte

	// CacheTTL is the ttlMs hint of cacheable 2026-07-28 results (lists,
	// resources/read, server/discover). Their cacheScope is always
	// "private", since every list is resolved per caller. If zero, 0: the
	// client should consider them stale at once.
	CacheTTL time.Duration

	// Store keeps sessions. If nil, a [session.NewMemory] store is used,
	// which is correct for a single replica only. Any other store is
	// treated as shared by replicas and needs StateKeys.
	Store session.Store
	// Sessions configures sessions and their streams: how long they live,
	// how streams are kept alive and resumed, and how often the caller of
	// a long-lived stream is checked again.
	Sessions SessionOptions
	// Stateless turns sessions off: no Mcp-Session-Id is issued or
	// required, each POST stands alone, GET and DELETE answer 405, and
	// the server cannot ask the client anything (confirms take their
	// fallback).
	Stateless bool

	// AllowedOrigins lists the browser origins (scheme://host[:port]) that
	// may call the endpoint; "*" allows any. Requests without an Origin
	// header are always allowed. If empty, only origins whose host equals
	// the request's Host are allowed. Independently, a request received on
	// a loopback address must name a loopback Host (DNS rebinding
	// protection).
	AllowedOrigins []string
	// Limits bounds what a client may make the handler read, keep and
	// run.
	Limits Limits

	// Tasks configures tasks (the extension io.modelcontextprotocol/tasks
	// and the tasks of 2025-11-25, see [ToolCall.RunAsTask]).
	Tasks TaskOptions

	// Logger receives the handler's own errors (a failing store, a
	// panicking hook). If nil, [slog.Default] is used.
	Logger *slog.Logger
}

// ScopeOptions decides what a caller sees of the tools, resources and
// prompts whose Scopes its token lacks. Its zero value lists them and
// answers a use with the standard insufficient_scope challenge.
type ScopeOptions struct {
	// Hide hides tools, resources and prompts whose Scopes the caller's
	// token lacks, exactly as if they did not exist. If false (the
	// default), they are listed, and using one answers HTTP 403 with an
	// insufficient_scope challenge so that the client can ask the user
	// for more scopes (step-up authorization).
	Hide bool
	// Challenge returns the WWW-Authenticate value of that 403, given the
	// scopes the operation needs; the request's context holds the caller
	// (IdentityFrom). If nil,
	// `Bearer error="insufficient_scope", scope="<scopes>"` is used.
	Challenge func(r *http.Request, scopes []string) string
}

// SessionOptions configures sessions (Streamable HTTP and legacy
// HTTP+SSE) and the streams they hold. Its zero value means the defaults
// given for each field.
//
// KeepAlive is also the period of re-authentication, in every era
// (2026-07-28 included, which has no sessions): every KeepAlive, the
// caller of each long-lived stream (a session's GET stream, a resumed POST
// stream, subscriptions/listen, the 2024-11-05 stream) and of each POST
// that waits (a confirm, an approval, a question to the client, a task's
// result) is checked again with Config.Authenticate (see there).
type SessionOptions struct {
	// TTL is how long a session lives without requests. If zero, 30
	// minutes.
	TTL time.Duration
	// KeepAlive is the interval of comment lines on an idle GET stream. If
	// zero, 25 seconds. A write to a session's GET stream that cannot
	// complete within it ends the stream. It is also how often the caller
	// of a long-lived stream or of a waiting POST is checked again, in
	// every era (see Config.Authenticate).
	KeepAlive time.Duration
	// ResumeWindow is how long the events of an SSE response are kept so
	// that a client whose connection ended can resume it (GET with
	// Last-Event-ID) on any replica. If zero, 5 minutes.
	ResumeWindow time.Duration
	// SSERetry is the reconnection delay sent in the `retry:` field of SSE
	// streams to 2025-11-25 clients. If zero, 1 second.
	SSERetry time.Duration
	// KeepStreamRequests keeps the HTTP request of each session's GET
	// stream in progress for the stream's life. By default, on HTTP/1.x,
	// once the stream's header is sent the handler takes the connection
	// over from net/http (http.Hijacker) and its ServeHTTP returns: an
	// open stream then costs about a third of the memory (net/http's
	// buffers and goroutine for the request are gone). Middleware then
	// sees the GET complete, with status 200, when its stream starts;
	// Config.Interceptors still see the whole stream. The http.Server's
	// Shutdown and Close neither wait for nor close such a stream:
	// Shutdown ends the streams the handler took from that server (the
	// client sees the end of the body and reconnects), as does
	// Handler.Close for all of them. Such a stream's header says
	// "Connection: close": its connection closes when it ends, and the
	// client must not send another request on it. HTTP/2 streams, and any
	// whose ResponseWriter cannot be hijacked, always keep their request.
	KeepStreamRequests bool
}

// Limits bounds what a client may make the handler read, keep and run,
// and sets the size of a list's pages. Each field has a default, which its
// zero value means, and says what happens past it. Past a bound on what a
// client may make the handler keep, the request is refused with a message
// naming the limit (or, for client info, the value is kept cut short), so
// that a session record stays a few KB whatever a client sends.
type Limits struct {
	// MaxBodyBytes bounds a POST body. If zero, 4 MiB; larger bodies get
	// 413.
	MaxBodyBytes int64
	// ReadBodyTimeout bounds the time spent reading a POST body, from the
	// moment the handler starts reading it, so that a client that sends
	// its headers and then trickles the body cannot hold a connection and
	// a goroutine for long: past it the request gets 408 and the
	// connection is closed. It is set with
	// [http.ResponseController.SetReadDeadline] and lifted once the body
	// is read, so long SSE responses are not cut. If zero, 30 seconds.
	ReadBodyTimeout time.Duration
	// PageSize is the number of entries per page of a list result. If
	// zero, 500.
	PageSize int
	// MaxIDBytes bounds the JSON text of a request id and of a
	// progressToken, which are echoed in every response and progress
	// event. A message with a longer id is refused with HTTP 400 and
	// -32600; a request with a longer progress token with -32602. If
	// zero, 256.
	MaxIDBytes int
	// MaxClientInfoBytes bounds each of the clientInfo name and version
	// that initialize records in the session. A longer value is kept cut
	// to this many bytes (at a UTF-8 boundary): initialize does not fail
	// for it. If zero, 256.
	MaxClientInfoBytes int
	// MaxSubscriptions bounds the resources/subscribe URIs one session
	// holds and the resourceSubscriptions of one subscriptions/listen
	// filter. A subscription past it, or a filter naming more, is refused
	// with -32602. If zero, 16.
	MaxSubscriptions int
	// MaxSubscriptionURIBytes bounds the length of a URI given to
	// resources/subscribe or in a listen filter; a longer one is refused
	// with -32602. If zero, 512.
	MaxSubscriptionURIBytes int
	// MaxSessionsPerIdentity bounds the live sessions (Streamable HTTP and
	// legacy HTTP+SSE alike) of one identity (tenant and subject), across
	// every replica sharing the Store. An initialize past it ends the
	// identity's oldest session, as a client that leaves without DELETE
	// would let it expire: requests with its id get 404, which tells its
	// client to initialize again, and its streams end. The zero Identity
	// (no Authenticate hook, or one that names no tenant and subject) is
	// not limited: its callers cannot be told apart. If zero, 100.
	MaxSessionsPerIdentity int
	// MaxConfirmsPerIdentity bounds the confirm records one identity
	// (tenant and subject; the zero Identity is one) makes the store keep,
	// across every replica sharing it: one per confirm asked on a 2025
	// session and per first round of a 2026-07-28 confirm (an Approve's
	// too), each counting from its creation for twice
	// Config.ConfirmTimeout plus a minute, answered or not: a decision
	// frees no place, since the record outlives it. A confirm past the
	// bound is refused before it is asked, with -32000 saying how many
	// are held and until when (data.retryAfterMs). If zero, 100; at most
	// 1024.
	MaxConfirmsPerIdentity int
	// MaxResumableStreamsPerSession bounds the POST streams of one session
	// whose events are kept for a resume (see SessionOptions.ResumeWindow),
	// across every replica sharing the Store: each counts for ResumeWindow
	// from its first event. A stream past it is served whole and live,
	// but not kept: it has no priming event and its events no ids, so its
	// client cannot resume it, and Exchange.CloseStream fails on it. A
	// JSON answer is no such stream. If zero, 64; at most 1024.
	MaxResumableStreamsPerSession int
	// MaxRunningPerSession bounds the requests one session runs at once
	// on one replica: tools/call, resources/read, prompts/get,
	// completion/complete and tasks/result, which go on when their client
	// hangs up (only notifications/cancelled ends them), so that no
	// connection bounds them; and every such request of the 2024-11-05
	// transport, answered 202 before it runs. A request past it is refused
	// with -32000 saying so, before anything runs. If zero, 32.
	MaxRunningPerSession int
}

// TaskOptions configures tasks (the extension
// io.modelcontextprotocol/tasks and the tasks of 2025-11-25, see
// [ToolCall.RunAsTask]), which are kept in Config.Store, signed with
// Config.StateKeys. Its zero value means the defaults given for each
// field.
type TaskOptions struct {
	// TTL is how long a task is kept from its creation, reported to the
	// client as ttlMs; a task still running then is failed. If zero, 1
	// hour.
	TTL time.Duration
	// ResultRetention is how long an ended task (its result) is kept at
	// least after it ended, within TTL+ResultRetention of its creation. If
	// zero, 10 minutes.
	ResultRetention time.Duration
	// MaxPerIdentity bounds the tasks one identity (tenant and subject)
	// holds across replicas: each counts from its creation for
	// TTL+ResultRetention. A tools/call that would create one more is
	// refused with -32000 saying how many are held and until when. If
	// zero, 100; at most 1024.
	MaxPerIdentity int
	// MaxResultBytes bounds the result of a task; a larger one fails the
	// task with -32603 saying so. If zero, 1 MiB.
	MaxResultBytes int
}

// Defaults applied by New.
const (
	defaultName           = "mcphandler"
	defaultConfirmTimeout = 2 * time.Minute
	defaultMaxBodyBytes   = 4 << 20
	defaultPageSize       = 500
	defaultSSERetry       = time.Second
	defaultKeepAlive      = 25 * time.Second
	defaultResumeWindow   = 5 * time.Minute

	defaultMaxClientInfoBytes      = 256
	defaultMaxSubscriptions        = 16
	defaultMaxSubscriptionURIBytes = 512
	defaultMaxIDBytes              = 256
	defaultMaxSessionsPerIdentity  = 100
	defaultMaxConfirmsPerIdentity  = 100
	defaultMaxRunningPerSession    = 32
	defaultMaxResumableStreams     = 64
	defaultReadBodyTimeout         = 30 * time.Second
)

func (c *Config) applyDefaults() {
	if c.Name == "" {
		c.Name = defaultName
	}
	if c.ConfirmTimeout <= 0 {
		c.ConfirmTimeout = defaultConfirmTimeout
	}
	if c.Store == nil {
		c.Store = session.NewMemory()
	}
	c.Sessions.applyDefaults()
	c.Limits.applyDefaults()
	c.Tasks.applyDefaults()
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Roles = append([]string(nil), c.Roles...)
	c.Interceptors = append([]Interceptor(nil), c.Interceptors...)
	c.AllowedOrigins = append([]string(nil), c.AllowedOrigins...)
}

// applyDefaults sets the session options left zero.
func (o *SessionOptions) applyDefaults() {
	if o.TTL <= 0 {
		o.TTL = session.DefaultTTL
	}
	if o.SSERetry <= 0 {
		o.SSERetry = defaultSSERetry
	}
	if o.ResumeWindow <= 0 {
		o.ResumeWindow = defaultResumeWindow
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = defaultKeepAlive
	}
}

// applyDefaults sets the bounds on client input left zero.
func (l *Limits) applyDefaults() {
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = defaultMaxBodyBytes
	}
	if l.PageSize <= 0 {
		l.PageSize = defaultPageSize
	}
	if l.MaxClientInfoBytes <= 0 {
		l.MaxClientInfoBytes = defaultMaxClientInfoBytes
	}
	if l.MaxSubscriptions <= 0 {
		l.MaxSubscriptions = defaultMaxSubscriptions
	}
	if l.MaxSubscriptionURIBytes <= 0 {
		l.MaxSubscriptionURIBytes = defaultMaxSubscriptionURIBytes
	}
	if l.MaxIDBytes <= 0 {
		l.MaxIDBytes = defaultMaxIDBytes
	}
	if l.MaxSessionsPerIdentity <= 0 {
		l.MaxSessionsPerIdentity = defaultMaxSessionsPerIdentity
	}
	if l.MaxConfirmsPerIdentity <= 0 {
		l.MaxConfirmsPerIdentity = defaultMaxConfirmsPerIdentity
	}
	if l.MaxResumableStreamsPerSession <= 0 {
		l.MaxResumableStreamsPerSession = defaultMaxResumableStreams
	}
	if l.MaxRunningPerSession <= 0 {
		l.MaxRunningPerSession = defaultMaxRunningPerSession
	}
	if l.ReadBodyTimeout <= 0 {
		l.ReadBodyTimeout = defaultReadBodyTimeout
	}
}

// applyDefaults sets the task options left zero, to the defaults of
// package internal/task, which would apply them anyway.
func (o *TaskOptions) applyDefaults() {
	if o.TTL <= 0 {
		o.TTL = task.DefaultTTL
	}
	if o.ResultRetention <= 0 {
		o.ResultRetention = task.DefaultResultRetention
	}
	if o.MaxPerIdentity <= 0 {
		o.MaxPerIdentity = task.DefaultMaxTasks
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = task.DefaultMaxResultBytes
	}
}
