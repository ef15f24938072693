package mcphandler

import (
	"cmp"
	"encoding/json"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// serverCaps is the capabilities object the server declares, in
// initialize's result (2025, 2024-11-05) and server/discover's
// (2026-07-28): what its hooks serve, and the extensions it speaks.
// List changes are announced through the Notify methods, so every list
// declares listChanged.
//
// Its members keep the order the handler has always written: by name,
// then tasks (2025-11-25 only); extensions take their place by name when
// the server has skills, else come last (see marshal). Clients read an
// object, not an order, but answers stay byte for byte what they were.
type serverCaps struct {
	Completions *struct{}      `json:"completions,omitempty"`
	Extensions  *extensionCaps `json:"extensions,omitempty"`
	Logging     struct{}       `json:"logging"`
	Prompts     *listChanged   `json:"prompts,omitempty"`
	Resources   *resourceCaps  `json:"resources,omitempty"`
	Tools       *listChanged   `json:"tools,omitempty"`
	Tasks       *tasksCaps     `json:"tasks,omitempty"`
}

// extensionCaps is capabilities.extensions, its members in the order they
// are written: MCP Apps (apps.go), tasks of 2026-07-28
// (tasks_stateless.go), skills (skills.go). The tags are the extensions'
// ids: appsExtensionID, task.ExtensionID, skillsExtensionID.
type extensionCaps struct {
	Apps   *appsCaps   `json:"io.modelcontextprotocol/ui,omitempty"`
	Tasks  *struct{}   `json:"io.modelcontextprotocol/tasks,omitempty"`
	Skills *skillsCaps `json:"io.modelcontextprotocol/skills,omitempty"`
}

// listChanged is the capability of a list whose changes are announced.
type listChanged struct {
	ListChanged bool `json:"listChanged"`
}

// resourceCaps is capabilities.resources; subscribe is true when
// Config.ReadResource is set.
type resourceCaps struct {
	Subscribe   bool `json:"subscribe"`
	ListChanged bool `json:"listChanged"`
}

// tasksCaps is capabilities.tasks of 2025-11-25 (tasks_sessions.go): the
// tasks methods served, and the requests that may become tasks.
type tasksCaps struct {
	List     struct{} `json:"list"`
	Cancel   struct{} `json:"cancel"`
	Requests struct {
		Tools struct {
			Call struct{} `json:"call"`
		} `json:"tools"`
	} `json:"requests"`
}

// skillsCaps is the skills extension's settings.
type skillsCaps struct {
	DirectoryRead bool `json:"directoryRead"`
}

// extensionsLast is a serverCaps written with its extensions last: its
// Extensions hides the embedded one, and follows the embedded members.
type extensionsLast struct {
	serverCaps
	Extensions *extensionCaps `json:"extensions,omitempty"`
}

// marshal writes sc, with its extensions last when the server has no
// skills (see serverCaps).
func (sc serverCaps) marshal() []byte {
	var v any = sc
	if sc.Extensions != nil && sc.Extensions.Skills == nil {
		v = extensionsLast{sc, sc.Extensions}
	}
	b, _ := json.Marshal(v)
	return b
}

// with returns sc with the extensions of apps (MCP Apps) and tasks (the
// 2026-07-28 tasks extension) added, leaving sc's own untouched.
func (sc serverCaps) with(apps, tasks bool) serverCaps {
	if !apps && !tasks {
		return sc
	}
	var ext extensionCaps
	if sc.Extensions != nil {
		ext = *sc.Extensions
	}
	if apps {
		ext.Apps = &appsCaps{MimeTypes: []string{AppMimeType}}
	}
	if tasks {
		ext.Tasks = &struct{}{}
	}
	sc.Extensions = &ext
	return sc
}

// capabilities is what the server declares of itself: its capabilities
// object for each answer that carries one, its serverInfo, and the two
// answers that declare them, initialize's result and server/discover's.
//
// The capabilities depend on the hooks that are set, on the revision
// (2025-11-25's capabilities.tasks, 2026-07-28's tasks extension) and on
// the caller, who is offered MCP Apps when one of their tools has a UI
// (catalog.offersApps); every combination is written once, by New, so an
// answer copies bytes. The serverInfo is written once too, unless
// Config.ServerInfo makes it per caller.
//
// It depends on the Handler's Config (the hooks, Name, Version,
// Instructions, ServerInfo) and its catalog, which tells whether the
// caller is offered MCP Apps. It is read-only once New returns, so safe
// for concurrent use.
type capabilities struct {
	cfg     *Config
	catalog *catalog

	// The capabilities objects, indexed by whether the caller is offered
	// MCP Apps: of initialize before 2025-11-25 (and 2024-11-05), of
	// initialize on 2025-11-25, and of server/discover.
	initCaps, initCaps20251125, discoverCaps [2][]byte
	staticInfo                               []byte // serverInfo when Config.ServerInfo is nil
}

// newCapabilities returns the declaration of the Handler whose Config is
// cfg and whose catalog is c.
func newCapabilities(cfg *Config, c *catalog) *capabilities {
	var sc serverCaps
	if cfg.ListTools != nil {
		sc.Tools = &listChanged{true}
	}
	if c.hasResources() {
		sc.Resources = &resourceCaps{Subscribe: cfg.ReadResource != nil, ListChanged: true}
	}
	if cfg.ListPrompts != nil {
		sc.Prompts = &listChanged{true}
	}
	if cfg.Complete != nil {
		sc.Completions = &struct{}{}
	}
	if c.hasSkills() {
		sc.Extensions = &extensionCaps{Skills: &skillsCaps{DirectoryRead: true}}
	}
	withTasks := sc
	if cfg.ListTools != nil {
		withTasks.Tasks = &tasksCaps{}
	}
	caps := &capabilities{cfg: cfg, catalog: c}
	caps.staticInfo, _ = json.Marshal(ServerInfo{Name: cfg.Name, Version: cmp.Or(cfg.Version, "0.0.0")})
	for i, apps := range [2]bool{false, true} {
		caps.initCaps[i] = sc.with(apps, false).marshal()
		caps.initCaps20251125[i] = withTasks.with(apps, false).marshal()
		// Without tools there are no tasks, and no tool offers an app.
		caps.discoverCaps[i] = sc.with(apps && cfg.ListTools != nil, cfg.ListTools != nil).marshal()
	}
	return caps
}

// of returns the capabilities object of an answer in version (initialize
// in a 2025 revision or 2024-11-05, server/discover in 2026-07-28) to a
// caller offered MCP Apps when apps. The caller must not modify it.
func (c *capabilities) of(version string, apps bool) []byte {
	i := 0
	if apps {
		i = 1
	}
	switch version {
	case Version20260728:
		return c.discoverCaps[i]
	case Version20251125:
		return c.initCaps20251125[i]
	}
	return c.initCaps[i]
}

// serverInfoJSON is the serverInfo object for the caller of rq.
func (c *capabilities) serverInfoJSON(rq *request) []byte {
	if c.cfg.ServerInfo == nil {
		return c.staticInfo
	}
	info := c.cfg.ServerInfo(rq.ctx)
	if info.Version == "" {
		info.Version = "0.0.0"
	}
	b, _ := json.Marshal(info)
	return b
}

// initializeResult answers initialize with the negotiated version, the
// capabilities and the caller's server info.
func (c *capabilities) initializeResult(rq *request, m *jsonrpc.Message, version string) {
	info := ServerInfo{Name: c.cfg.Name, Version: c.cfg.Version, Instructions: c.cfg.Instructions}
	if c.cfg.ServerInfo != nil {
		info = c.cfg.ServerInfo(rq.ctx)
	}
	if info.Version == "" {
		info.Version = "0.0.0"
	}
	si, _ := json.Marshal(info)
	caps := c.of(version, c.catalog.offersApps(rq))
	b := make([]byte, 0, 128+len(caps)+len(si)+len(info.Instructions))
	b = append(b, `{"protocolVersion":`...)
	b = jsonrpc.AppendString(b, version)
	b = append(b, `,"capabilities":`...)
	b = append(b, caps...)
	b = append(b, `,"serverInfo":`...)
	b = append(b, si...)
	if info.Instructions != "" {
		b = append(b, `,"instructions":`...)
		b = jsonrpc.AppendString(b, info.Instructions)
	}
	b = append(b, '}')
	rq.reply(m.ID, b)
}

// discover answers server/discover.
func (c *capabilities) discover(rq *request, m *jsonrpc.Message) {
	info := ServerInfo{Name: c.cfg.Name, Version: c.cfg.Version, Instructions: c.cfg.Instructions}
	if c.cfg.ServerInfo != nil {
		info = c.cfg.ServerInfo(rq.ctx)
	}
	b := make([]byte, 0, 256)
	b = append(b, `{"supportedVersions":`...)
	vs, _ := json.Marshal(discoverVersions)
	b = append(b, vs...)
	b = append(b, `,"capabilities":`...)
	// The same capabilities as for 2025: subscribe and listChanged announce
	// what subscriptions/listen delivers.
	b = append(b, c.of(Version20260728, c.catalog.offersApps(rq))...)
	if info.Instructions != "" {
		b = append(b, `,"instructions":`...)
		b = jsonrpc.AppendString(b, info.Instructions)
	}
	rq.reply(m.ID, append(b, '}'))
}
