package mcphandler

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/mcphandler/mcphandler/session"
)

// MCP Apps, the extension io.modelcontextprotocol/ui: a tool names a ui://
// resource (an HTML page served as text/html;profile=mcp-app) that a host
// renders in a sandbox.
//
//   - A client declares the extension in its capabilities (initialize, or
//     each 2026-07-28 request's _meta) with
//     {"mimeTypes":["text/html;profile=mcp-app"]}. Only such a client is
//     offered apps: tools/list gives it each tool's _meta.ui, and lists
//     app-only tools and ui:// resources. Any other client sees the tools
//     without _meta.ui, no app-only tool and no ui:// resource.
//   - Reads of a ui:// resource default its contents' mimeType to
//     AppMimeType; their _meta.ui (CSP, permissions) comes from
//     [ResourceContents.Meta].
//   - A call of a tool with a UI always answers with a text block: when
//     the Handler's result has none, the JSON of its structuredContent
//     becomes one; a result with neither is an internal tool error.
//
// See https://modelcontextprotocol.io/extensions/apps.

// The identifier of the MCP Apps extension, and the MIME type of an
// app's ui:// resource.
const (
	appsExtensionID = "io.modelcontextprotocol/ui"
	AppMimeType     = "text/html;profile=mcp-app"
)

// ToolUI links a tool to its ui:// resource (the tool's _meta.ui).
type ToolUI struct {
	// ResourceURI is the ui:// resource the host renders for the tool.
	ResourceURI string `json:"resourceUri"`
	// Visibility is who may call the tool: "model", "app" or both; empty
	// means both. A tool visible to "app" only is listed only to clients
	// that declared MCP Apps. Visibility is not access control: use
	// MinRole and Scopes.
	Visibility []string `json:"visibility,omitempty"`
}

// ResourceMeta is the _meta of a resource's contents.
type ResourceMeta struct {
	UI *ResourceUI `json:"ui,omitempty"`
}

// ResourceUI is how a host sandboxes a ui:// resource.
type ResourceUI struct {
	CSP           *ResourceCSP         `json:"csp,omitempty"`
	Permissions   *ResourcePermissions `json:"permissions,omitempty"`
	Domain        string               `json:"domain,omitempty"`
	PrefersBorder *bool                `json:"prefersBorder,omitempty"`
}

// ResourceCSP lists the origins the page may reach.
type ResourceCSP struct {
	ConnectDomains  []string `json:"connectDomains,omitempty"`
	ResourceDomains []string `json:"resourceDomains,omitempty"`
	FrameDomains    []string `json:"frameDomains,omitempty"`
	BaseURIDomains  []string `json:"baseUriDomains,omitempty"`
}

// ResourcePermissions are the browser permissions the page asks for.
type ResourcePermissions struct {
	Camera         *struct{} `json:"camera,omitempty"`
	Microphone     *struct{} `json:"microphone,omitempty"`
	Geolocation    *struct{} `json:"geolocation,omitempty"`
	ClipboardWrite *struct{} `json:"clipboardWrite,omitempty"`
}

// offersApps reports whether the server declares MCP Apps to the caller
// of rq: when the caller's tools (ListTools, after MinRole and Scopes)
// include one with a UI. Hosts find pages through tools, so a ui://
// resource no tool names is no reason to declare it, and no resource hook
// is called for it. A failing ListTools is logged and leaves the
// declaration out; the answer still goes.
func (c *catalog) offersApps(rq *request) bool {
	if c.cfg.ListTools == nil {
		return false
	}
	tools, err := c.visibleTools(rq.ctx, rq.id)
	if err != nil {
		c.log(rq.ctx).Error("mcphandler: ListTools, for the capabilities", "err", err)
		return false
	}
	for i := range tools {
		if tools[i].UI != nil {
			return true
		}
	}
	return false
}

// appsCaps is the extension as a client declares it.
type appsCaps struct {
	MimeTypes []string `json:"mimeTypes"`
}

// declaresApps reports whether a client's extensions declare MCP Apps with
// the app MIME type.
func declaresApps(ext map[string]json.RawMessage) bool {
	var a appsCaps
	return json.Unmarshal(ext[appsExtensionID], &a) == nil && slices.Contains(a.MimeTypes, AppMimeType)
}

// appsDeclared reports whether the client of rq declared MCP Apps.
func (rq *request) appsDeclared() bool { return rq.clientCaps().Has(session.CapUIApps) }

// appOnly reports whether t is visible to apps only.
func (t *Tool) appOnly() bool {
	return t.UI != nil && len(t.UI.Visibility) > 0 && !slices.Contains(t.UI.Visibility, "model")
}

// offeredTools drops the app-only tools of a client without MCP Apps,
// without modifying the host's slice.
func (rq *request) offeredTools(tools []Tool) []Tool {
	if rq.appsDeclared() {
		return tools
	}
	return keep(tools, func(t *Tool) bool { return !t.appOnly() })
}

// appendToolUI adds _meta.ui to a tools/list entry for a client with MCP
// Apps.
func appendToolUI(rq *request, t *Tool, dst []byte) []byte {
	if t.UI == nil || !rq.appsDeclared() {
		return dst
	}
	b, err := json.Marshal(t.UI)
	if err != nil {
		return dst
	}
	dst = append(dst[:len(dst)-1], `,"_meta":{"ui":`...)
	dst = append(dst, b...)
	return append(dst, "}}"...)
}

// offeredResources drops the ui:// resources of a client without MCP
// Apps, without modifying the host's slice.
func (rq *request) offeredResources(rs []Resource) []Resource {
	if rq.appsDeclared() {
		return rs
	}
	return keep(rs, func(r *Resource) bool { return !strings.HasPrefix(r.URI, "ui://") })
}

// appContents defaults the mimeType of ui:// contents to AppMimeType.
func appContents(contents []ResourceContents) {
	for i := range contents {
		if strings.HasPrefix(contents[i].URI, "ui://") && contents[i].MimeType == "" {
			contents[i].MimeType = AppMimeType
		}
	}
}

// textFallback gives the result of a tool with a UI a text block: the
// JSON of its structuredContent when it has none; false when it has
// neither.
func textFallback(t *Tool, r *ToolResult) bool {
	if t.UI == nil || slices.ContainsFunc(r.Content, func(c Content) bool { return c.Type == "text" }) {
		return true
	}
	if r.StructuredContent == nil {
		return false
	}
	b, err := json.Marshal(r.StructuredContent)
	if err != nil {
		return false
	}
	r.Content = append(r.Content, TextContent(string(b)))
	return true
}
