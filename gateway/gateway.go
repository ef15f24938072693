// Package gateway serves the tools of upstream MCP servers through a
// Handler's own hooks, so that they meet the same ListTools, role gates,
// scopes, BeforeCall decisions, rate limits and OnCall as local tools.
//
// The host says, per caller, which upstreams exist and with which
// credentials (Config.Upstreams, from the identity Authenticate gave);
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
// more. A 2026-07-28 client answers questions by retrying its call, which
// would run the upstream call twice: such a call becomes a task when the
// client declared tasks, and otherwise a question ends it with an error
// that says why.
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
	"slices"
	"time"

	"github.com/mcphandler/mcphandler"
	"github.com/mcphandler/mcphandler/gateway/internal/upstream"
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
	// there (a tenant's static token, say). Never the caller's own token:
	// the gateway sends nothing of the downstream request upstream. No
	// redirect is followed, so it goes nowhere else.
	Header http.Header
	// CredentialKind labels what Header carries, for telemetry: a kind
	// the host declares, such as "static" or "token-exchange", never the
	// credential. It reaches OnCall (CallEvent.CredentialKind) and the
	// interceptors (mcphandler.UpstreamCall) with every call of the
	// upstream's tools, fit for a metric label: 0–32 bytes of a-z, 0-9
	// and '-'; another value is reported as mcphandler.Other, and
	// logged.
	CredentialKind string
	// Aliases maps an upstream tool name to the name it is served under,
	// instead of <ID>_<name>.
	Aliases map[string]string
	// TrustHints makes its tools' annotations count for Tool.Destructive
	// (see mcphandler.ToolOrigin).
	TrustHints bool
}

// UpstreamsFunc returns the upstreams the caller may reach, with the
// credentials for this caller. ctx carries the request (IdentityFrom,
// ClientCapabilitiesFrom).
type UpstreamsFunc func(ctx context.Context, id mcphandler.Identity) ([]Upstream, error)

// Config configures a Gateway. Upstreams is required.
type Config struct {
	Upstreams UpstreamsFunc
	// HTTPClient makes the requests upstream; nil means a client of its
	// own. Its CheckRedirect is replaced: redirects are never followed.
	HTTPClient *http.Client
	// Timeout bounds one upstream operation (a list, a call, its
	// questions included); 0 means 60 s.
	Timeout time.Duration
	// MaxResponseBytes bounds what one upstream response may hold (all of
	// a call's stream); 0 means 4 MiB.
	MaxResponseBytes int64
	// ListTTL is how long a list of an upstream is reused for the same
	// URL, credentials, era and client capabilities; 0 means 30 s, a
	// negative value never reuses one.
	ListTTL time.Duration
	// MaxCachedLists bounds the lists kept; 0 means 4096. Past it, the
	// oldest is forgotten first.
	MaxCachedLists int
	// Strict fails the whole list when one upstream fails; by default a
	// failing upstream is left out (and logged) and the others listed.
	Strict bool
	// Logger receives what was dropped and what failed; nil means
	// slog.Default(). Names from upstreams are cut before they are logged.
	Logger *slog.Logger
}

// Gateway lists and calls the tools of upstream MCP servers. It is safe
// for concurrent use.
type Gateway struct {
	cfg   Config
	lists *listCache
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
	return &Gateway{cfg: cfg, lists: newListCache(cfg.MaxCachedLists)}, nil
}

// maxParallel bounds the upstreams listed at once for one request.
const maxParallel = 8

// Tools returns the tools of the upstreams of the caller in ctx, in a
// stable order (by name), each with Origin set and a Handler that calls it
// upstream. A name that breaks the spec's rules for this handler (1–64
// bytes of A-Z a-z 0-9 _ - .) or that two tools claim is dropped, every
// claimant, and logged: never truncated, never one of them picked. An
// upstream that fails is left out and logged, unless Config.Strict.
func (g *Gateway) Tools(ctx context.Context) ([]mcphandler.Tool, error) {
	id, _ := mcphandler.IdentityFrom(ctx)
	ups, err := g.cfg.Upstreams(ctx, id)
	if err != nil {
		return nil, err
	}
	ups = g.checkUpstreams(ups)
	caps := capsJSON(mcphandler.ClientCapabilitiesFrom(ctx))
	lists := make([][]mcphandler.Tool, len(ups))
	errs := make([]error, len(ups))
	sem := make(chan struct{}, maxParallel)
	done := make(chan struct{})
	for i := range ups {
		go func() {
			sem <- struct{}{}
			defer func() { <-sem; done <- struct{}{} }()
			lists[i], errs[i] = g.list(ctx, &ups[i], caps)
		}()
	}
	for range ups {
		<-done
	}
	var all []mcphandler.Tool
	for i, u := range ups {
		if errs[i] != nil {
			if g.cfg.Strict {
				return nil, fmt.Errorf("gateway: upstream %s: %w", u.ID, errs[i])
			}
			g.cfg.Logger.Warn("gateway: upstream left out of the list", "upstream", u.ID, "err", errs[i])
			continue
		}
		all = append(all, lists[i]...)
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
		default:
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

// list returns the tools of u as this caller sees them, from the cache
// when it holds them.
func (g *Gateway) list(ctx context.Context, u *Upstream, caps json.RawMessage) ([]mcphandler.Tool, error) {
	ep := g.endpoint(u)
	key := cacheKey(u, caps)
	l, ok := g.lists.get(key, time.Now())
	if !ok {
		lctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
		defer cancel()
		version := string(u.Era)
		if ep.Era == upstream.Probe {
			era, v, err := upstream.Detect(lctx, ep)
			if err != nil {
				return nil, err
			}
			ep.Era, version = era, v
		}
		tools, err := upstream.ListTools(lctx, ep, caps)
		if err != nil {
			return nil, err
		}
		l = &list{era: ep.Era, version: version, tools: tools}
		if g.cfg.ListTTL > 0 {
			g.lists.put(key, l, time.Now().Add(g.cfg.ListTTL))
		}
	}
	out := make([]mcphandler.Tool, 0, len(l.tools))
	for _, t := range l.tools {
		tool, err := g.tool(u, l, t)
		if err != nil {
			g.cfg.Logger.Warn("gateway: upstream tool left out", "upstream", u.ID, "tool", clip(t.Name), "err", err)
			continue
		}
		out = append(out, tool)
	}
	return out, nil
}

// endpoint is how u is reached: its URL, credentials, era and bounds.
func (g *Gateway) endpoint(u *Upstream) upstream.Endpoint {
	ep := upstream.Endpoint{URL: u.URL, Header: u.Header, HTTP: g.cfg.HTTPClient,
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

// tool is the tool served for upstream tool t of u.
func (g *Gateway) tool(u *Upstream, l *list, t upstream.Tool) (mcphandler.Tool, error) {
	name, ok := u.Aliases[t.Name]
	if !ok {
		name = u.ID + "_" + t.Name
	}
	if !validName(name) {
		return mcphandler.Tool{}, errors.New("its name is not 1 to 64 bytes of A-Z a-z 0-9 _ - .: " + clip(name))
	}
	var d toolDef
	if err := json.Unmarshal(t.Def, &d); err != nil {
		return mcphandler.Tool{}, errors.New("its definition does not decode")
	}
	sum := sha256.Sum256(t.Def)
	origin := &mcphandler.ToolOrigin{Upstream: u.ID, Name: t.Name, Digest: hex.EncodeToString(sum[:]),
		Era: l.version, TrustHints: u.TrustHints}
	f := &forward{g: g, ep: g.endpoint(u), name: t.Name, upstream: u.ID, era: l.version, kind: u.CredentialKind}
	f.ep.Era = l.era
	return mcphandler.Tool{
		Name: name, Title: d.Title, Description: d.Description,
		InputSchema: d.InputSchema, OutputSchema: d.OutputSchema,
		Annotations: d.Annotations, Icons: d.Icons,
		Origin:      origin,
		TaskSupport: mcphandler.TaskOptional,
		Handler:     f.handle,
	}, nil
}

// dropClaimedTwice sorts tools by name and leaves out every tool whose
// name another claims too.
func (g *Gateway) dropClaimedTwice(tools []mcphandler.Tool) []mcphandler.Tool {
	slices.SortStableFunc(tools, func(a, b mcphandler.Tool) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
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
	if len(s) > 128 {
		return s[:128] + "…"
	}
	return s
}
