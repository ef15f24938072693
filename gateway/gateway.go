// Package gateway serves the tools of upstream MCP servers through a
// Handler's own hooks, so that they meet the same ListTools, role gates,
// scopes, BeforeCall decisions, rate limits and OnCall as local tools.
//
// The host says, per caller, which upstreams exist and with which
// credentials (Config.Upstreams, from the identity Authenticate gave:
// headers, or a CredentialSource asked for the caller's credentials
// before each list and call, such as TokenExchange, which sends each
// person a token of their own, never the caller's token itself; a
// missing credential is an error for that caller, never another's);
// [Gateway.Tools] lists their tools, named <id>_<name> (or an alias), for
// the host's ListTools to return with its own:
//
//	gw, err := gateway.New(gateway.Config{Upstreams: upstreamsOf})
//	…
//	ListTools: func(ctx context.Context) ([]mcphandler.Tool, error) {
//		remote, err := gw.Tools(ctx)
//		return append(localTools(ctx), remote...), err
//	},
//
// A call of an upstream tool reaches the upstream only from the tool's
// Handler, which the Handler runs once BeforeCall's decision — a confirm,
// an approval — is complete: nothing goes upstream before. The upstream's
// questions during the call (elicitation, sampling, roots) reach the
// client through the call's Exchange, in the client's era, and the answers
// go back upstream; the upstream is told the client's capabilities, never
// more. A 2026-07-28 client answers questions by retrying its call. When
// the upstream speaks 2026-07-28 too, its question is an input_required
// round of its own, which the gateway relays as one of its own rounds:
// the upstream's requestState rides, sealed and bound to the caller, the
// tool, the arguments and the upstream, in the gateway's requestState,
// each round's state is taken once, and nothing runs twice (rounds.go).
// With an older upstream, which holds the call open while it asks, the
// retry would run the upstream call twice: such a call becomes a task
// when the client declared tasks, and otherwise a question ends it with
// an error that says why.
//
// A call of a 2025 upstream's tool opens an upstream session of its own
// by default (PerCall). Upstream.Sessions keeps one per downstream
// session (PerSession) or per person (PerPerson) instead, in
// Config.Store, so that any replica reuses it and a stateful upstream (a
// browser, a shell) keeps its state between calls; add
// Gateway.Interceptor to the Handler's Config.Interceptors so that a
// client's DELETE of its session ends its upstream sessions too:
//
//	gw, err := gateway.New(gateway.Config{Upstreams: upstreamsOf,
//		Store: store, StateKeys: keys}) // the Handler's own
//	h := mcphandler.New(mcphandler.Config{…, Store: store, StateKeys: keys,
//		Interceptors: []mcphandler.Interceptor{gw.Interceptor()}})
//
// Upstream annotations are the upstream's hints: a tool's Origin keeps
// them untrusted (Tool.Destructive ignores them) unless the upstream's
// TrustHints is set.
//
// Each call goes upstream through mcphandler.ToolCall.CallUpstream:
// OnCall's CallEvent names the upstream, its era and the kind of
// credentials (Upstream.CredentialKind), with the time spent upstream,
// and the interceptors wrap the call (Request.OnUpstream; otelmcp makes
// it a CLIENT span whose trace context goes upstream in the headers and
// the _meta of the call's requests). What an interceptor adds never
// replaces a header the host set for the upstream, nor the protocol's.
package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
	"github.com/mcphandler/mcphandler/internal/ownerindex"
	"github.com/mcphandler/mcphandler/session"
)

// Era says how an upstream is spoken to.
type Era string

// The eras an upstream can be spoken to in.
const (
	// EraDetect: find out, 2026-07-28 first, then 2025, then 2024-11-05,
	// with the upstream's list: the answer is kept with it (ListTTL).
	EraDetect Era = ""
	// EraSessions: 2025-03-26, 2025-06-18 or 2025-11-25 Streamable HTTP,
	// the newest the upstream accepts.
	EraSessions Era = "2025"
	// EraStateless: 2026-07-28.
	EraStateless Era = "2026-07-28"
	// EraLegacy: the 2024-11-05 HTTP+SSE transport (URL is its SSE URL).
	EraLegacy Era = "2024-11-05"
)

// Upstream is one upstream MCP server as one caller reaches it.
type Upstream struct {
	// ID names the upstream: 1–32 bytes of a-z, 0-9 and '-', unique among
	// a caller's upstreams. Its tools are served as <ID>_<name>.
	ID string
	// URL is its MCP endpoint (the SSE URL for EraLegacy). It comes from
	// the host, never from a client.
	URL string
	// Era overrides how it is spoken to; EraDetect by default.
	Era Era
	// Header is sent with every request to it: this caller's credentials
	// there (a tenant's static token, say), or headers every caller's
	// requests carry. Never the caller's own token: the gateway sends
	// nothing of the downstream request upstream. No redirect is
	// followed, so it goes nowhere else.
	Header http.Header
	// Credentials, if set, gives the caller's credentials there, asked
	// for every list and every call, for the caller of that request: a
	// token of the caller's own (TokenExchange), a tenant's
	// (StaticCredentials). What it gives is sent with Header, replacing
	// any header of the same name. A missing credential keeps the
	// upstream out of the caller's list (but for the caller's own last
	// list, for a while: see Grace) and fails the caller's calls of its
	// tools, without contacting it: never another caller's credentials,
	// never Header alone (see CredentialSource). Build a
	// source once and give it to every caller's Upstream: what it keeps
	// (exchanged tokens) lives in it.
	Credentials CredentialSource
	// CredentialKind labels the credentials, for telemetry: a kind such
	// as "static" or "token-exchange", never the credential. If empty,
	// the Kind of Credentials, when set. It reaches OnCall
	// (CallEvent.CredentialKind) and the interceptors
	// (mcphandler.UpstreamCall) with every call of the upstream's tools,
	// fit for a metric label: 0–32 bytes of a-z, 0-9 and '-'; another
	// value is reported as mcphandler.Other, and logged.
	CredentialKind string
	// OAuth, if set, makes each person act upstream as themselves: the
	// credentials sent are the person's own access token there, obtained
	// by the authorization code flow with PKCE through the gateway's page
	// (Gateway.AuthPage at Config.AuthURL), by this client of the
	// upstream's authorization server, discovered from the upstream
	// (its 401 challenge, RFC 9728 metadata, then RFC 8414 or OpenID
	// discovery), with the upstream's URL as the resource (RFC 8707).
	// Tokens are kept per tenant, authorization server, subject and
	// upstream, sealed in Config.Store, refreshed before they expire, and
	// forgotten when the upstream answers 401, a refresh is refused, or
	// the person revokes them on the page; there is never another
	// person's token, nor a shared one, nor none.
	//
	// Before a person has authorized it, the upstream's tools cannot be
	// listed for them: their list leaves them out, its status (see
	// StatusMetaKey) "failed", error "authorization", with authorizeUrl,
	// the link where they authorize it; and a call of any <ID>_… name
	// (or alias) asks for the authorization: a URL-mode elicitation on a
	// 2025-11-25 session (the call waits, up to Config.AuthWait, then
	// starts over, mcphandler.ErrCallAgain), an input request on
	// 2026-07-28 (the client's retry), or a tool error naming the link
	// (the client calls again). Such a call is looked up as a read-only
	// tool (annotations trusted) that sends nothing upstream: the
	// upstream's tool itself is looked up, and decided on by BeforeCall,
	// only when the call starts over or is made again once authorized.
	// Credentials must be nil (an upstream with both is left out,
	// logged); CredentialKind is "oauth" unless set.
	OAuth *OAuthClient
	// Aliases maps an upstream tool name to the name it is served under,
	// instead of <ID>_<name>.
	Aliases map[string]string
	// TrustHints makes its tools' annotations count for Tool.Destructive
	// (see mcphandler.ToolOrigin).
	TrustHints bool
	// Confirms says who answers the upstream's own confirmations during a
	// call (its form-mode elicitation/create): the client (ConfirmsRelay,
	// the default), nobody (ConfirmsDecline), or the person who approved
	// the call (ConfirmsApproval). An invalid mode is logged and taken as
	// ConfirmsDecline.
	Confirms ConfirmMode
	// Pin serves a tool of this upstream only in a definition the host
	// approved for the caller's tenant (Config.Unapproved,
	// Gateway.ApproveDefinition): a tool whose definition changed since
	// — a new description, schema, annotation, title or icon — is left
	// out, answering as an unknown tool, until its new definition is
	// approved.
	Pin bool
	// Sessions says which calls of its tools share an upstream session:
	// PerCall (the default), PerSession or PerPerson (see SessionMode).
	// A session kept is reused by any replica sharing Config.Store, ended
	// when the upstream ends it (answering 404: the gateway opens a new
	// one, see Config.Store) and forgotten SessionTTL after its last call.
	// An invalid mode is logged and taken as PerCall.
	Sessions SessionMode
	// SessionTTL is how long a kept upstream session (PerSession,
	// PerPerson) is kept after its last call through the gateway; the
	// next call after that opens a new one. 0 (or negative) means 30 min,
	// a downstream session's default lifetime. The upstream may end it
	// sooner (its own expiry): the gateway then opens a new one.
	SessionTTL time.Duration
}

// UpstreamsFunc returns the upstreams the caller may reach, with the
// credentials for this caller (Header, or a source of them:
// Credentials). ctx carries the request (IdentityFrom,
// ClientCapabilitiesFrom), except when Gateway.Interceptor asks for the
// upstreams of a session a client deleted: ctx is then the DELETE's, and
// id its owner.
type UpstreamsFunc func(ctx context.Context, id mcphandler.Identity) ([]Upstream, error)

// Config configures a Gateway. Upstreams is required.
type Config struct {
	Upstreams UpstreamsFunc
	// HTTPClient makes the requests upstream; nil means a client of its
	// own, which keeps up to MaxConcurrent connections to each upstream
	// host open between requests (64 when MaxConcurrent is negative), so
	// that concurrent calls reuse them rather than open one each. Its
	// CheckRedirect is replaced: redirects are never followed.
	HTTPClient *http.Client
	// Timeout bounds one upstream operation (a list, a call, its
	// questions included); 0 means 60 s.
	Timeout time.Duration
	// MaxResponseBytes bounds what one upstream response may hold (all of
	// a call's stream); 0 means 4 MiB.
	MaxResponseBytes int64
	// ListTTL is how long a list of an upstream is reused for the same
	// tenant, URL, credentials (every header sent: a caller's own token
	// is a list of that caller's), era and client capabilities, by any
	// replica sharing Store; 0 means 30 s, a negative value never reuses
	// one (nor keeps one: see Grace). A tools/list reuses a 2026-07-28
	// upstream's list no longer than its ttlMs either (at most a day; 0,
	// never); a call's lookup of its tool takes a list up to ListTTL old,
	// as the upstream checks the call itself. A list_changed of the
	// upstream ends it sooner (see ToolsChanged).
	ListTTL time.Duration
	// MaxCachedLists bounds the lists this replica keeps in memory; 0
	// means 4096. Past it, the oldest is forgotten first. An expired list
	// is kept until then, as the last good list of its upstream (see
	// Grace); Store keeps each ListTTL + Grace after it was fetched. For
	// an upstream with Credentials, which list each caller was last
	// served counts as one more (per caller, URL, era and client
	// capabilities), kept by this replica only.
	MaxCachedLists int
	// Strict fails the whole list when an upstream's tools would be left
	// out of it (status "failed"); by default that upstream is left out,
	// logged and reported in the list's _meta (StatusMetaKey), and the
	// others listed. An upstream whose last good tools are listed within
	// Grace (status "stale") does not fail a strict list: its tools are
	// all there, marked stale, and their calls fail fast while its
	// breaker is open. Set Grace negative for a strict list that fails at
	// an upstream's first failure.
	Strict bool

	// FailureThreshold is how many failures in a row of one upstream, per
	// URL and credentials (every header sent: with a caller's own token,
	// a breaker of that caller's), open its breaker: lists that got
	// no usable answer (a refused connection, a timeout, 401 or 403, 5xx,
	// a malformed or oversized answer) and calls that got none
	// (backend_unavailable; a call's timeout or a caller that went away
	// counts neither way). Any answer closes it again, the upstream's own
	// JSON-RPC error included. A missing credential (CredentialSource)
	// is not the upstream's failure: the upstream was not contacted, and
	// no breaker counts it. 0 means 3; negative never opens one.
	//
	// While a breaker is open the upstream is not contacted: lists serve
	// its last good tools as "stale" (see Grace), and calls of its tools
	// fail at once, backend_unavailable (retryable, the detail saying
	// retryAfterMs). After the cool-down, one request goes through as the
	// probe (a list, or a call's list of the upstream's tools before it
	// goes), while the others are answered as while open: an answer
	// closes the breaker, a failure opens it again for twice as long.
	FailureThreshold int
	// CoolDown is how long a breaker stays open the first time; each
	// failed probe doubles it, up to MaxCoolDown. 0 means 30 s.
	CoolDown time.Duration
	// MaxCoolDown caps the doubled cool-down; 0 means 5 min. It is never
	// less than CoolDown.
	MaxCoolDown time.Duration
	// Grace is how long, from the first of its failures in a row, an
	// upstream's last good list (its newest list still kept, see
	// MaxCachedLists) stays listed, marked "stale" in the list's _meta;
	// past it, the upstream's tools are left out ("failed"). 0 means
	// 5 min; negative lists no stale tools. With a negative ListTTL no
	// list is kept, so there is nothing stale to list.
	//
	// A caller whose credentials at an upstream are missing now (see
	// CredentialSource) is served, "stale" with error "credentials", the
	// list of that upstream last served to that caller, never another's,
	// for Grace after it expired (ListTTL after it was served): calling
	// one of its tools asks for the credentials again, and fails at once
	// without them, with an error that says so.
	Grace time.Duration
	// MaxConcurrent bounds the requests in flight from this replica to
	// one upstream URL: calls (their questions' waits included) and
	// lists, not watches. 0 means 64; negative, no bound. A request past
	// it waits up to 1 s (less if its context ends first) for one to end;
	// then a call fails at once, backend_unavailable, retryable, its
	// detail saying the upstream is busy, and a list serves the
	// upstream's last list kept, marked "stale" with error "busy", or
	// leaves it out ("failed", "busy"). Neither counts against the
	// upstream's breaker (ErrBusy).
	MaxConcurrent int
	// MaxBreakers bounds the upstreams (per URL and credentials) whose
	// failures are remembered; one that answers is forgotten at once.
	// 0 means 4096 (some 300 bytes each). Past it, the one touched least
	// recently is forgotten, and its upstream is contacted again.
	MaxBreakers int
	// ToolsChanged, if set, passes on an upstream's list_changed: give it
	// the Handler's NotifyToolsChanged (the Handler is made after the
	// Gateway, whose Tools its ListTools calls, so through a variable):
	//
	//	var h *mcphandler.Handler
	//	gw, err := gateway.New(gateway.Config{…,
	//		ToolsChanged: func(ctx context.Context, t mcphandler.Target) error {
	//			return h.NotifyToolsChanged(ctx, t)
	//		}})
	//	h = mcphandler.New(…)
	//
	// The gateway watches each upstream whose lists it serves, when the
	// upstream declares tools.listChanged (on the 2025 revisions, a GET
	// stream of a session of its own; on 2026-07-28, subscriptions/listen;
	// on 2024-11-05, its SSE stream), per tenant, URL and credentials (a
	// scope), with the credentials of the scope's newest list, for 5 min
	// after its last list; one replica at a time watches a scope (a lease
	// in Store). A notification makes the scope's lists stale on every
	// replica sharing Store, and calls ToolsChanged with the tenant's
	// Target (mcphandler.TenantOf), at most once a second per scope
	// (faster ones are folded into one). A watch that ends is opened again
	// after a backoff (1 s doubling to 1 min), and the scope's lists made
	// stale then too, as a change may have been missed. Without
	// ToolsChanged, lists are still made stale, and clients learn of the
	// change when they list again.
	ToolsChanged func(ctx context.Context, t mcphandler.Target) error
	// Unapproved is asked about a tool of a pinned upstream (Upstream.Pin)
	// whose definition the caller's tenant has not approved: a tool seen
	// for the first time (Definition.Approved empty) or one that changed.
	// It returns true to approve it now (recorded in Store for the
	// tenant: it is served from then on, by every replica), false to
	// leave it out; it is asked again a minute later at the earliest (per
	// replica), until it approves or Gateway.ApproveDefinition does. It
	// runs within the list (or a call's lookup) that found the tool: it
	// should answer at once, and report a change to whoever approves
	// rather than wait for them. nil leaves out every definition not
	// approved by Gateway.ApproveDefinition.
	Unapproved func(ctx context.Context, d Definition) bool
	// AuthURL is the absolute URL where the host mounts Gateway.AuthPage,
	// ending in "/" (e.g. "https://gw.example.com/upstream-auth/"): people
	// are sent there to authorize an upstream with OAuth (Upstream.OAuth),
	// and its "callback" is the redirect URI registered at the upstreams'
	// authorization servers. Required for such upstreams: without it they
	// are left out, logged.
	AuthURL string
	// AuthWait bounds how long a 2025-11-25 call waits for its caller to
	// authorize an upstream it asked them to (Upstream.OAuth); 0 means
	// 10 min.
	AuthWait time.Duration
	// MaxWatches bounds the scopes one replica watches at once (each an
	// open connection upstream); 0 means 256, negative watches none. A
	// scope past it is not watched: its lists go stale by their TTL
	// alone. With a caller's own credentials (TokenExchange), each person
	// is a scope of their own.
	MaxWatches int

	// Logger receives what was dropped and what failed; nil means
	// slog.Default(). Names from upstreams are cut before they are logged.
	Logger *slog.Logger

	// Store keeps the upstream sessions of PerSession and PerPerson
	// upstreams (Upstream.Sessions) and the upstreams' lists (see ListTTL),
	// so that any replica sharing it reuses them, and who watches which
	// upstream (see ToolsChanged): give every replica the Handler's own
	// Config.Store (which implements session.Records; its PubSub, when it
	// has one, tells every replica of a list made stale). nil means a
	// session.NewMemory of this Gateway's: one replica. Lists are sealed
	// as sessions are, below (lists.go).
	//
	// Each session is kept under a key that is a MAC of whose it is (the
	// caller's tenant and subject, the downstream session or the client's
	// capabilities, the upstream's ID, URL and Header), so that no other
	// caller, session, upstream or credentials ever reach it, and sealed
	// (AES-256-GCM under StateKeys, bound to that key and identity): what
	// can write the store but holds no StateKeys cannot read an upstream
	// session id there nor make the gateway use one on another's call; a
	// value that does not open reads as no session, so the call opens a
	// fresh one (logged). Of concurrent calls that find none, on any
	// replica, one keeps its session (a compare-and-swap) and the others
	// end theirs and use it. A session the upstream ended (404) is opened
	// again once per call: the call is made in the new one only when the
	// upstream refused it whole, and otherwise ends with an error saying
	// it may have run upstream; never is a session left half-alive.
	Store session.Records
	// StateKeys seal the upstream sessions kept in Store: every replica
	// gives the same, each at least 32 bytes (the Handler's
	// Config.StateKeys may be reused: the gateway derives keys of its
	// own from them). The first seals, every key opens, so keys rotate by
	// prepending a new one; the keys of the store are derived from the
	// first, so a rotation opens each kept session again once. If empty,
	// a random key is made at New, and New fails unless Store is a
	// *session.Memory (or nil).
	StateKeys [][]byte
	// MaxUpstreamSessions bounds the upstream sessions kept for one
	// identity (tenant and subject; every caller without one counts as
	// one), across upstreams, downstream sessions and replicas, each
	// counting until SessionTTL after its last call. 0 means 64; at most
	// 1024. Past it, a call that would keep one more goes as PerCall
	// (logged) until one of them ends. Whoever can write Store can reset
	// the count: the bound holds against clients.
	MaxUpstreamSessions int
}

// Gateway lists and calls the tools of upstream MCP servers. It is safe
// for concurrent use.
type Gateway struct {
	cfg      Config
	lists    *listStore
	callers  *listCache // each caller's last list of an upstream with Credentials (missingCredentials)
	breakers *breakers
	hc       *http.Client // Config.HTTPClient, or the Gateway's own (upstreamClient)
	keeper   *keeper      // upstream sessions kept in Config.Store (sessions.go)
	watches  *watches
	inflight *inflight       // Config.MaxConcurrent (limit.go)
	flights  *flights        // one fetch of a list at a time (flight.go)
	pins     *pins           // approved definitions (pins.go)
	auths    *authorizations // each person's authorization of upstreams with OAuth (oauth.go)
	now      func() time.Time
}

// New returns a Gateway of cfg.
func New(cfg Config) (*Gateway, error) {
	if cfg.Upstreams == nil {
		return nil, errors.New("gateway: Config.Upstreams is required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = 4 << 20
	}
	if cfg.ListTTL == 0 {
		cfg.ListTTL = 30 * time.Second
	}
	if cfg.MaxCachedLists <= 0 {
		cfg.MaxCachedLists = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.FailureThreshold == 0 {
		cfg.FailureThreshold = defaultFailureThreshold
	}
	if cfg.CoolDown <= 0 {
		cfg.CoolDown = defaultCoolDown
	}
	if cfg.MaxCoolDown <= 0 {
		cfg.MaxCoolDown = defaultMaxCoolDown
	}
	cfg.MaxCoolDown = max(cfg.MaxCoolDown, cfg.CoolDown)
	if cfg.Grace == 0 {
		cfg.Grace = defaultGrace
	}
	if cfg.MaxBreakers <= 0 {
		cfg.MaxBreakers = defaultMaxBreakers
	}
	if cfg.Store == nil {
		cfg.Store = session.NewMemory()
	}
	if cfg.MaxConcurrent == 0 {
		cfg.MaxConcurrent = defaultMaxConcurrent
	}
	if cfg.MaxWatches == 0 {
		cfg.MaxWatches = defaultMaxWatches
	}
	if cfg.MaxUpstreamSessions <= 0 {
		cfg.MaxUpstreamSessions = defaultMaxUpstreamSessions
	}
	cfg.MaxUpstreamSessions = min(cfg.MaxUpstreamSessions, ownerindex.MaxEntries)
	if cfg.AuthWait <= 0 {
		cfg.AuthWait = defaultAuthWait
	}
	if cfg.AuthURL != "" {
		if u, err := url.Parse(cfg.AuthURL); err != nil || !u.IsAbs() || u.Host == "" || !strings.HasSuffix(u.Path, "/") ||
			u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, errors.New("gateway: Config.AuthURL must be an absolute URL ending in /, without query or fragment")
		}
	}
	secrets, err := stateSecrets(&cfg)
	if err != nil {
		return nil, err
	}
	g := &Gateway{cfg: cfg, callers: newListCache(cfg.MaxCachedLists), breakers: newBreakers(&cfg), now: time.Now,
		inflight: newInflight(cfg.MaxConcurrent), flights: newFlights(), hc: upstreamClient(&cfg)}
	if g.keeper, err = newKeeper(&g.cfg, secrets, func() time.Time { return g.now() }); err != nil {
		return nil, err
	}
	if g.lists, err = newListStore(&g.cfg, secrets, func() time.Time { return g.now() }); err != nil {
		return nil, err
	}
	if g.pins, err = newPins(&g.cfg, secrets, func() time.Time { return g.now() }); err != nil {
		return nil, err
	}
	if g.auths, err = newAuthorizations(g, secrets); err != nil {
		return nil, err
	}
	if err := g.lists.listen(context.Background()); err != nil {
		return nil, fmt.Errorf("gateway: Config.Store: subscribing to list invalidations: %w", err)
	}
	g.watches = newWatches(g)
	return g, nil
}

// Close stops what the Gateway runs in the background: its subscription
// to other replicas' list invalidations (and the watches of upstream
// lists), and closes the idle connections of its own HTTP client (not of
// Config.HTTPClient's). Calls in flight are not interrupted. It is safe to call more
// than once.
func (g *Gateway) Close() error {
	g.watches.close()
	g.lists.close()
	if g.hc != g.cfg.HTTPClient {
		g.hc.CloseIdleConnections() // the Gateway's own
	}
	return nil
}

// upstreamClient is the client of the requests upstream: cfg.HTTPClient,
// or one whose transport keeps as many connections idle per host as may
// be in flight to one upstream (Config.MaxConcurrent), where
// http.DefaultTransport keeps 2: past those, every concurrent call would
// open a connection and close it after its answer. A DefaultTransport a
// program replaced by another RoundTripper is used as it is.
func upstreamClient(cfg *Config) *http.Client {
	if cfg.HTTPClient != nil {
		return cfg.HTTPClient
	}
	dt, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return &http.Client{Transport: http.DefaultTransport}
	}
	idle := cfg.MaxConcurrent
	if idle <= 0 {
		idle = defaultMaxConcurrent
	}
	t := dt.Clone()
	t.MaxIdleConnsPerHost = idle
	t.MaxIdleConns = max(t.MaxIdleConns, idle)
	return &http.Client{Transport: t}
}

// maxParallel bounds the upstreams listed at once for one request.
const maxParallel = 8

// Tools returns the tools of the upstreams of the caller in ctx, in a
// stable order (by name), each with Origin set and a Handler that calls it
// upstream. The slice is new at each call, the caller's to change; what
// its tools point to (Origin, Annotations, Icons, schemas) is shared with
// other calls, and is not to be changed. The tools of an upstream's list
// are made once for each configuration of it (Upstream) and headers
// sent, not at every call. A name that breaks the spec's rules for this handler (1–64
// bytes of A-Z a-z 0-9 _ - .) or that two tools claim is dropped, every
// claimant, and logged: never truncated, never one of them picked.
//
// An upstream that fails is logged, and its last good tools are listed
// within Config.Grace ("stale"), or it is left out ("failed", which fails
// the whole list with Config.Strict); one whose breaker is open is not
// contacted (see Config.FailureThreshold). When ctx builds a tools/list
// result, each upstream's status is added to its _meta under
// StatusMetaKey (mcphandler.AddListMeta); the upstreams are listed in
// parallel, and the statuses added once, after all of them.
func (g *Gateway) Tools(ctx context.Context) ([]mcphandler.Tool, error) {
	id, _ := mcphandler.IdentityFrom(ctx)
	ups, err := g.cfg.Upstreams(ctx, id)
	if err != nil {
		return nil, err
	}
	ups = g.checkUpstreams(ups)
	caps := capsJSON(mcphandler.ClientCapabilitiesFrom(ctx))
	// A tools/list honors each upstream's ttlMs; a call's lookup, which
	// builds no list, takes a list up to ListTTL old (list.freshAt).
	listing := mcphandler.LimitListTTL(ctx, max(g.cfg.ListTTL, 0)) == nil
	lists := make([][]mcphandler.Tool, len(ups))
	sts := make([]upstreamStatus, len(ups))
	one := func(i int) {
		lists[i], sts[i] = g.list(ctx, id, &ups[i], caps, listing)
		if ups[i].OAuth != nil && !listing && (sts[i].authorize != nil || sts[i].class == classCredentials) {
			lists[i] = g.authorizeTools(ctx, &ups[i])
			return
		}
		if ups[i].Pin {
			lists[i] = g.filterPinned(ctx, id.Tenant, &ups[i], slices.Clone(lists[i])) // filtered in place; the list's are shared
		}
	}
	if len(ups) == 1 {
		one(0) // the usual lookup of a call: no goroutine to start
	} else {
		sem := make(chan struct{}, maxParallel)
		done := make(chan struct{})
		for i := range ups {
			go func() {
				sem <- struct{}{}
				defer func() { <-sem; done <- struct{}{} }()
				one(i)
			}()
		}
		for range ups {
			<-done
		}
	}
	n := 0
	for i, u := range ups {
		if sts[i].status == statusFailed && sts[i].authorize == nil && g.cfg.Strict {
			return nil, fmt.Errorf("gateway: upstream %s: %w", u.ID, sts[i].err)
		}
		n += len(lists[i])
	}
	all := make([]mcphandler.Tool, 0, n) // the caller's: lists[i] may be shared (Gateway.tools)
	for i := range ups {
		all = append(all, lists[i]...)
	}
	g.report(ctx, ups, sts)
	if listing {
		g.limitTTL(ctx, sts)
	}
	return g.dropClaimedTwice(all), nil
}

// checkUpstreams keeps the upstreams with a valid, unique ID and a URL;
// the others are logged and left out (two with one ID, both).
func (g *Gateway) checkUpstreams(ups []Upstream) []Upstream {
	count := make(map[string]int, len(ups))
	for _, u := range ups {
		count[u.ID]++
	}
	out := make([]Upstream, 0, len(ups))
	for _, u := range ups {
		switch {
		case !validID(u.ID):
			g.cfg.Logger.Warn("gateway: upstream with an invalid id left out", "upstream", clip(u.ID))
		case count[u.ID] > 1:
			g.cfg.Logger.Warn("gateway: upstream id given twice, both left out", "upstream", u.ID)
		case u.URL == "":
			g.cfg.Logger.Warn("gateway: upstream without a URL left out", "upstream", u.ID)
		case u.OAuth != nil && (u.Credentials != nil || u.OAuth.ClientID == "" || g.cfg.AuthURL == ""):
			g.cfg.Logger.Warn("gateway: upstream with OAuth left out: it needs a ClientID, no Credentials, and Config.AuthURL", "upstream", u.ID)
		default:
			if u.CredentialKind == "" && u.OAuth != nil {
				u.CredentialKind = "oauth"
			}
			if u.CredentialKind == "" && u.Credentials != nil {
				u.CredentialKind = u.Credentials.Kind()
			}
			if u.Sessions < PerCall || u.Sessions > PerPerson {
				g.cfg.Logger.Warn("gateway: upstream with an invalid Sessions mode, taken as PerCall", "upstream", u.ID, "mode", int(u.Sessions))
				u.Sessions = PerCall
			}
			if u.Confirms < ConfirmsRelay || u.Confirms > ConfirmsApproval {
				g.cfg.Logger.Warn("gateway: upstream with an invalid Confirms mode, taken as ConfirmsDecline", "upstream", u.ID, "mode", int(u.Confirms))
				u.Confirms = ConfirmsDecline
			}
			if u.SessionTTL <= 0 {
				u.SessionTTL = defaultSessionTTL
			}
			if u.CredentialKind != "" && !validID(u.CredentialKind) {
				g.cfg.Logger.Warn("gateway: upstream's credential kind is not 1 to 32 bytes of a-z 0-9 -, reported as "+mcphandler.Other,
					"upstream", u.ID, "kind", clip(u.CredentialKind))
				u.CredentialKind = mcphandler.Other
			}
			out = append(out, u)
		}
	}
	return out
}

// list returns the tools of u as the caller id sees them, from a list
// kept when it is fresh (for a tools/list, listing, within the upstream's
// ttlMs too), and how u fared: listed now or from a fresh list (ok), not
// listed now but its last good tools within Config.Grace (stale), or
// neither (failed). u is not contacted while its breaker is open, nor
// without the caller's credentials there (see missingCredentials: no
// breaker counts it).
func (g *Gateway) list(ctx context.Context, id mcphandler.Identity, u *Upstream, caps json.RawMessage, listing bool) ([]mcphandler.Tool, upstreamStatus) {
	hdr, err := g.credentials(ctx, id, u)
	if req := (*AuthorizationRequiredError)(nil); errors.As(err, &req) {
		return nil, upstreamStatus{status: statusFailed, class: classAuthorization, err: err, authorize: req}
	}
	if err != nil {
		return g.missingCredentials(u, id, caps, err)
	}
	ref := g.lists.ref(id.Tenant, u.URL, hdr, u.Era, caps)
	bkey := breakerKey(u.URL, hdr)
	t, v, ok := g.breakers.admit(bkey, g.now())
	if !ok {
		return g.stale(ctx, u, hdr, ref, v, ErrBreakerOpen)
	}
	var l *list
	var old []byte
	if g.cfg.ListTTL > 0 {
		l, old = g.lists.cached(ctx, ref, g.now(), listing, g.cfg.ListTTL)
	}
	if t.probe || l == nil || !l.freshAt(g.now(), listing, g.cfg.ListTTL) { // a probe asks the upstream, whatever is kept
		fetched, err := g.flights.do(ctx, ref.l1, func(ctx context.Context) (*list, error) {
			return g.refresh(ctx, u, hdr, caps, ref, old)
		})
		o, class := listOutcome(ctx, err)
		v, opened := g.breakers.done(bkey, t, o, class, g.now())
		if errors.Is(err, ErrBusy) {
			return g.busy(u, hdr, l)
		}
		if u.OAuth != nil && refusedToken(err) {
			g.auths.refused(ctx, id, u, hdr.Get("Authorization"))
			req := g.auths.required(id, u).(*AuthorizationRequiredError)
			return nil, upstreamStatus{status: statusFailed, class: classAuthorization, err: err, authorize: req}
		}
		if err != nil {
			tools, st := g.stale(ctx, u, hdr, ref, v, err)
			if st.class == "" {
				st.class = failureClass(err)
			}
			g.cfg.Logger.Warn("gateway: upstream list failed", "upstream", u.ID, "status", st.status, "err", err)
			if opened {
				g.cfg.Logger.Warn("gateway: upstream breaker opened", "upstream", u.ID, "for", v.retryAfter)
			}
			return tools, st
		}
		l = fetched
	}
	if u.Credentials != nil && g.cfg.ListTTL > 0 && callerKnown(id) {
		served := *l
		served.fetched = g.now()
		g.callers.put(callerKey(u.URL, id, u.Era, caps), &served)
	}
	ep := g.endpoint(u, hdr)
	ep.Era = l.era
	g.watches.want(ref, u, ep, caps)
	fresh := l.fetched.Add(l.fresh).Sub(g.now())
	return g.tools(u, hdr, l), upstreamStatus{status: statusOK, freshFor: max(fresh, 0)}
}

// missingCredentials answers for u when the caller id has no credentials
// there now (err): u is not contacted and no breaker counts it. The
// caller's own last good list of u, when it expired less than
// Config.Grace ago, is listed "stale" (calling its tools asks for the
// credentials again, and fails at once without them); else u's tools are
// left out, "failed". The error class is "credentials". Each replica
// keeps its own callers' lists.
func (g *Gateway) missingCredentials(u *Upstream, id mcphandler.Identity, caps json.RawMessage, err error) ([]mcphandler.Tool, upstreamStatus) {
	g.cfg.Logger.Warn("gateway: no credentials for a list, upstream not contacted", "upstream", u.ID, "err", err)
	st := upstreamStatus{status: statusFailed, class: classCredentials, err: err}
	if g.cfg.Grace > 0 && callerKnown(id) {
		l, ok := g.callers.get(callerKey(u.URL, id, u.Era, caps))
		if ok && g.now().Before(l.fetched.Add(g.cfg.ListTTL+g.cfg.Grace)) {
			st.status = statusStale
			return g.tools(u, nil, l), st
		}
	}
	return nil, st
}

// refresh lists u's tools upstream for ref, with the headers hdr, and
// keeps the list (old: what the store held under ref, nil when nothing).
// The scope's generation (for other replicas) and this replica's count of
// its invalidations are read before the list is asked for, so that a
// list_changed during the list makes it stale at once, everywhere. Concurrent
// refreshes of one ref are one (Gateway.flights).
func (g *Gateway) refresh(ctx context.Context, u *Upstream, hdr http.Header, caps json.RawMessage, ref listRef, old []byte) (*list, error) {
	epoch := g.lists.l1.epoch(ref.scope)
	gen := ""
	if g.cfg.ListTTL > 0 {
		gen = g.lists.newGeneration(ctx, ref)
	}
	l, err := g.fetch(ctx, u, hdr, caps)
	if err != nil {
		return nil, err
	}
	l.fetched, l.gen, l.scope = g.now(), gen, ref.scope
	// A list_changed heard during the list (by this replica, or told by
	// another) may be newer than the list: it is kept, stale.
	l.invalid = g.lists.l1.epoch(ref.scope) != epoch
	l.fresh = max(g.cfg.ListTTL, 0)
	if l.hinted {
		l.fresh = min(l.fresh, l.hintTTL)
	}
	if g.cfg.ListTTL > 0 {
		g.lists.save(ctx, ref, l, old)
	}
	return l, nil
}

// busy answers for u when this replica had too many requests in flight
// to it to list it now (Config.MaxConcurrent): its list kept, l, if any,
// "stale", else none, "failed"; the error class is "busy".
func (g *Gateway) busy(u *Upstream, hdr http.Header, l *list) ([]mcphandler.Tool, upstreamStatus) {
	g.cfg.Logger.Warn("gateway: upstream busy, not listed now", "upstream", u.ID)
	st := upstreamStatus{status: statusFailed, class: classBusy, err: ErrBusy}
	if l != nil && g.cfg.Grace >= 0 {
		st.status = statusStale
		return g.tools(u, hdr, l), st
	}
	return nil, st
}

// callerKnown reports whether id names someone: a caller without tenant
// and subject has no list of its own.
func callerKnown(id mcphandler.Identity) bool { return id.Tenant != "" || id.Subject != "" }

// fetch lists u's tools upstream with the headers hdr, finding its era
// first if needed.
func (g *Gateway) fetch(ctx context.Context, u *Upstream, hdr http.Header, caps json.RawMessage) (*list, error) {
	release, err := g.inflight.acquire(ctx, u.URL)
	if err != nil {
		return nil, err
	}
	defer release()
	ep := g.endpoint(u, hdr)
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	defer cancel()
	version := string(u.Era)
	if ep.Era == upstream.Probe {
		era, v, err := upstream.Detect(ctx, ep)
		if err != nil {
			return nil, err
		}
		ep.Era, version = era, v
	}
	tools, hints, err := upstream.ListToolsHinted(ctx, ep, caps)
	if err != nil {
		return nil, err
	}
	return &list{era: ep.Era, version: version, tools: tools, hinted: hints.Given, hintTTL: hints.TTL, defs: new(listDefs)}, nil
}

// stale answers for u, with the headers hdr, when it was not listed now
// (v says why, err is the failure): its last good tools, kept for ref
// (by this replica or in the store), while Config.Grace runs from the
// first failure in a row; else none.
func (g *Gateway) stale(ctx context.Context, u *Upstream, hdr http.Header, ref listRef, v view, err error) ([]mcphandler.Tool, upstreamStatus) {
	st := upstreamStatus{status: statusFailed, class: v.class, retryAfter: v.retryAfter, err: err}
	if g.cfg.Grace > 0 && g.cfg.ListTTL > 0 && !v.since.IsZero() && g.now().Before(v.since.Add(g.cfg.Grace)) {
		if l, _ := g.lists.cached(ctx, ref, g.now(), true, 0); l != nil {
			st.status = statusStale
			return g.tools(u, hdr, l), st
		}
	}
	return nil, st
}

// tools are the tools served for the upstream tools of l, listed with
// the headers hdr, sorted by name. They are made once for an upstream
// and headers equal to u and hdr, and shared by every list and call that
// finds them so (list.served): the slice is read only.
func (g *Gateway) tools(u *Upstream, hdr http.Header, l *list) []mcphandler.Tool {
	if tools, ok := l.served(u, hdr); ok {
		return tools
	}
	s := &servedTools{u: *u, hdr: hdr}
	u = &s.u // the tools' Handlers call upstream as this copy says
	defs := l.decoded()
	s.tools = make([]mcphandler.Tool, 0, len(l.tools))
	for i, t := range l.tools {
		tool, err := g.tool(u, hdr, l, t, &defs[i])
		if err != nil {
			g.cfg.Logger.Warn("gateway: upstream tool left out", "upstream", u.ID, "tool", clip(t.Name), "err", err)
			continue
		}
		s.tools = append(s.tools, tool)
	}
	sortByName(s.tools)
	l.keepServed(s)
	return s.tools
}

// endpoint is how u is reached with the headers hdr: its URL, the
// caller's credentials, era and bounds.
func (g *Gateway) endpoint(u *Upstream, hdr http.Header) upstream.Endpoint {
	ep := upstream.Endpoint{URL: u.URL, Header: hdr, HTTP: g.hc,
		MaxResponseBytes: g.cfg.MaxResponseBytes, Timeout: g.cfg.Timeout}
	switch u.Era {
	case EraSessions:
		ep.Era = upstream.Sessions
	case EraStateless:
		ep.Era = upstream.Stateless
	case EraLegacy:
		ep.Era = upstream.Legacy
	}
	return ep
}

// toolDef is what the gateway reads of an upstream tool's definition.
type toolDef struct {
	Title        string                      `json:"title"`
	Description  string                      `json:"description"`
	InputSchema  json.RawMessage             `json:"inputSchema"`
	OutputSchema json.RawMessage             `json:"outputSchema"`
	Annotations  *mcphandler.ToolAnnotations `json:"annotations"`
	Icons        []mcphandler.Icon           `json:"icons"`
}

// decodedDef is an upstream tool's definition as decoded once for its
// list (list.decoded): what the gateway reads of it and its digest, or
// why it cannot be served.
type decodedDef struct {
	def    toolDef
	digest string // hexadecimal SHA-256 of the definition's bytes
	err    error
}

// decodeDef decodes the definition of t.
func decodeDef(t upstream.Tool) decodedDef {
	var d decodedDef
	if err := json.Unmarshal(t.Def, &d.def); err != nil {
		return decodedDef{err: errors.New("its definition does not decode")}
	}
	sum := sha256.Sum256(t.Def)
	d.digest = hex.EncodeToString(sum[:])
	return d
}

// tool is the tool served for upstream tool t of u, listed with the
// headers hdr, of definition d. What d holds (schemas, annotations,
// icons) is shared by every tool served of it: read only.
func (g *Gateway) tool(u *Upstream, hdr http.Header, l *list, t upstream.Tool, d *decodedDef) (mcphandler.Tool, error) {
	name, ok := u.Aliases[t.Name]
	if !ok {
		name = u.ID + "_" + t.Name
	}
	if !validName(name) {
		return mcphandler.Tool{}, errors.New("its name is not 1 to 64 bytes of A-Z a-z 0-9 _ - .: " + clip(name))
	}
	if d.err != nil {
		return mcphandler.Tool{}, d.err
	}
	origin := &mcphandler.ToolOrigin{Upstream: u.ID, Name: t.Name, Digest: d.digest,
		Era: l.version, TrustHints: u.TrustHints}
	f := &forward{g: g, u: u, ep: g.endpoint(u, hdr), name: t.Name, upstream: u.ID, era: l.version, kind: u.CredentialKind,
		sessions: u.Sessions, ttl: u.SessionTTL}
	f.ep.Era = l.era
	return mcphandler.Tool{
		Name: name, Title: d.def.Title, Description: d.def.Description,
		InputSchema: d.def.InputSchema, OutputSchema: d.def.OutputSchema,
		Annotations: d.def.Annotations, Icons: d.def.Icons,
		Origin:      origin,
		TaskSupport: mcphandler.TaskOptional,
		Handler:     f.handle,
	}, nil
}

// dropClaimedTwice sorts tools by name, unless they are already, and
// leaves out every tool whose name another claims too.
func (g *Gateway) dropClaimedTwice(tools []mcphandler.Tool) []mcphandler.Tool {
	if sortedOnce(tools) {
		return tools // the usual merged list: each upstream's sorted, their names apart
	}
	sortByName(tools)
	out := tools[:0]
	for i := 0; i < len(tools); {
		j := i + 1
		for j < len(tools) && tools[j].Name == tools[i].Name {
			j++
		}
		if j-i == 1 {
			out = append(out, tools[i])
		} else {
			claimants := make([]string, 0, j-i)
			for _, t := range tools[i:j] {
				claimants = append(claimants, t.Origin.Upstream+":"+clip(t.Origin.Name))
			}
			g.cfg.Logger.Warn("gateway: a tool name claimed more than once, every claimant left out",
				"tool", tools[i].Name, "claimants", claimants)
		}
		i = j
	}
	return out
}

// sortedOnce reports whether tools are sorted by name, each name once.
func sortedOnce(tools []mcphandler.Tool) bool {
	for i := 1; i < len(tools); i++ {
		if tools[i-1].Name >= tools[i].Name {
			return false
		}
	}
	return true
}

// sortByName sorts tools by name, stably, unless they are already.
func sortByName(tools []mcphandler.Tool) {
	byName := func(a, b mcphandler.Tool) int { return strings.Compare(a.Name, b.Name) }
	if !slices.IsSortedFunc(tools, byName) {
		slices.SortStableFunc(tools, byName)
	}
}

// validID reports whether id is 1–32 bytes of a-z, 0-9 and '-'.
func validID(id string) bool {
	if len(id) == 0 || len(id) > 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// maxNameBytes is the longest name served for an upstream tool: the
// limit most clients and the spec's guidance for model-facing names keep.
const maxNameBytes = 64

// validName reports whether name is 1–64 bytes of A-Z a-z 0-9 _ - . .
func validName(name string) bool {
	if len(name) == 0 || len(name) > maxNameBytes {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// clip cuts a string from an upstream before it is logged.
func clip(s string) string {
	if len(s) <= 128 {
		return s
	}
	n := 128
	for n > 0 && !utf8.RuneStart(s[n]) {
		n-- // never split a character: the cut text stays valid UTF-8
	}
	return s[:n] + "…"
}
