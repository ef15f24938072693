package mcphandler

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"

	"github.com/mcphandler/mcphandler/approval"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// Tool is one callable tool as a caller sees it.
//
// A definition the handler cannot serve (a Name that breaks the rules
// below or that two tools of a list share, a nil Handler, a MinRole not
// in Config.Roles, a TaskSupport it does not know, a schema that is not a
// compilable JSON Schema object) is left out: not listed, unknown to
// tools/call, logged once. [CheckTools] reports them all.
//
// See https://modelcontextprotocol.io/specification/2025-11-25/server/tools.
type Tool struct {
	// Name is unique within the caller's list: 1–128 bytes of
	// A-Z a-z 0-9 _ - . (the spec's guidance, 2025-11-25).
	Name string
	// Title is a display name.
	Title string
	// Description tells a model what the tool returns and when to use it.
	Description string
	// InputSchema is the JSON Schema of the arguments, sent verbatim and
	// enforced: every call's arguments are validated against it before
	// Config.BeforeCall, whether it was written by hand or derived by
	// [NewTool], and a call whose arguments do not conform gets a bad_args
	// tool error naming the field, without BeforeCall or the Handler running.
	// It must be a JSON object without repeated keys, nested at most 128 deep,
	// that github.com/google/jsonschema-go compiles (draft 2020-12, or
	// draft-07 when $schema says so; "format" is not checked), whose
	// references are "#", "#/$defs/<name>" or "#/definitions/<name>" and
	// neither loop (a recursive schema) nor reach one subschema along more
	// than 1024 paths: the validator has no guard against either, and a loop
	// would crash the process. A schema of plain properties is checked on the
	// raw arguments, without decoding them (schema_flat.go). Each distinct
	// schema is compiled once and cached (at most 4096 schemas and 1 MiB of
	// schema text). If nil, {"type":"object"} is sent and any object is
	// accepted.
	InputSchema json.RawMessage
	// OutputSchema, if set, is the JSON Schema that StructuredContent of
	// every successful result conforms to. It is sent verbatim; it must be
	// a JSON object that compiles, like InputSchema. Results are not
	// validated against it.
	OutputSchema json.RawMessage
	// Annotations are hints about the tool's behaviour.
	Annotations *ToolAnnotations
	// Icons are shown by clients that support them (2025-11-25).
	Icons []Icon
	// MinRole is the least role that may see and call the tool (see
	// [Config.Roles]). Empty means every caller; a role not in
	// Config.Roles leaves the tool out.
	MinRole string
	// Scopes are the OAuth scopes a caller's token needs to call the tool
	// (see [ScopeOptions.Hide] for whether it is listed without them).
	Scopes []string
	// Handler runs the tool. A tool without one is left out.
	Handler ToolHandler
	// TaskSupport says whether a call may run as a durable task (the
	// extension io.modelcontextprotocol/tasks): TaskNone (the default),
	// TaskOptional or TaskRequired. The Handler chooses the moment with
	// [ToolCall.RunAsTask]; see tasks.go.
	TaskSupport TaskSupport
	// UI links the tool to a ui:// resource for clients with MCP Apps
	// (the extension io.modelcontextprotocol/ui); see apps.go. A call of
	// such a tool always answers with a text block.
	UI *ToolUI
	// Origin, when set, says the tool is served on behalf of another MCP
	// server (package gateway sets it); nil for a tool of this server.
	Origin *ToolOrigin

	// input is what the handler made of InputSchema (schema_cache.go),
	// set on the tool a call resolves to; nil without an InputSchema.
	input *schemaInfo
}

// ToolHandler runs one call of a tool. A non-nil error is sent as an
// isError result of its class (see [ToolError]); any text of a
// non-[ToolError] error stays on the server.
type ToolHandler func(ctx context.Context, call *ToolCall) (*ToolResult, error)

// ToolAnnotations are hints to clients; they are not enforced. Fields
// left unset take the spec's defaults: readOnlyHint false,
// destructiveHint true (meaningful only when readOnlyHint is false),
// idempotentHint false, openWorldHint true. So a tool without annotations
// counts as destructive: mark a tool that only reads with ReadOnlyHint.
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    bool   `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  bool   `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// Destructive reports whether t may destroy data by the spec's defaults
// (server/tools, ToolAnnotations): true unless Annotations has
// ReadOnlyHint set, or has DestructiveHint set to false. So a tool with
// no Annotations, or with Annotations that set neither (a Title only),
// is destructive. A tool of another server (Origin set) is destructive
// whatever its Annotations say unless Origin.TrustHints is set: they are
// that server's hints, and the spec says not to rely on the hints of a
// server one does not trust.
func (t *Tool) Destructive() bool {
	a := t.Annotations
	if a == nil || t.Origin != nil && !t.Origin.TrustHints {
		return true
	}
	return !a.ReadOnlyHint && (a.DestructiveHint == nil || *a.DestructiveHint)
}

// ToolOrigin is where a tool served on behalf of another MCP server (an
// upstream of package gateway) comes from. Its strings come from the
// host's configuration (Upstream, Era) or from the upstream (Name,
// Digest): bounded, but Name is the upstream's choice.
type ToolOrigin struct {
	// Upstream is the id the host gave the upstream.
	Upstream string
	// Name is the tool's name on the upstream (Tool.Name is the name it
	// is served under here).
	Name string
	// Digest is the hex SHA-256 of the tool's definition exactly as the
	// upstream sent it: it changes whenever the upstream changes the
	// tool's description, schemas or annotations.
	Digest string
	// Era is the revision the upstream is spoken to in: "2024-11-05",
	// "2025-03-26", "2025-06-18", "2025-11-25" or "2026-07-28".
	Era string
	// TrustHints makes Destructive read the tool's Annotations, which
	// come from the upstream; by default an upstream tool is destructive.
	TrustHints bool
}

// Icon is an image a client may show next to an entry.
type Icon struct {
	Src      string   `json:"src"`
	MimeType string   `json:"mimeType,omitempty"`
	Sizes    []string `json:"sizes,omitempty"`
	Theme    string   `json:"theme,omitempty"`
}

// ToolCall is one call of a tool, given to [BeforeCallFunc] and to the
// tool's [ToolHandler]. Its embedded [Exchange] lets the handler report
// progress, log, and ask the client (elicitation, sampling, roots) during
// the call.
type ToolCall struct {
	// Tool is the tool being called, as resolved for this caller.
	Tool Tool
	// Arguments are the raw arguments; "{}" when the client sent none.
	Arguments json.RawMessage
	// Identity is the caller.
	Identity Identity
	// SessionID is the 2025 session, or "" when there is none.
	SessionID string
	*Exchange

	task     *taskSlot          // set when the call may become a task (tasks.go)
	up       *upstreamSeen      // what CallUpstream reported (upstream_call.go)
	approver *approval.Identity // who approved the call (ApprovedBy)
}

// ApprovedBy returns the person who approved this call on the approval
// page, when it runs under an Approve decision (see [Approve]) that they
// approved and that this run consumed; false when the call runs under
// any other decision. The approval was for this caller, tool and
// arguments, and is used once: a handler may act on the person's behalf
// during this run (package gateway answers an upstream's own
// confirmation from it), never in another run. In a task's work it says
// what it said when the call began.
func (c *ToolCall) ApprovedBy() (approval.Identity, bool) {
	if c.approver == nil {
		return approval.Identity{}, false
	}
	return *c.approver, true
}

// ToolResult is the result of a tool call.
type ToolResult struct {
	Content []Content
	// StructuredContent, if non-nil, is marshalled as the result's
	// structuredContent; it must conform to the tool's OutputSchema.
	StructuredContent any
	IsError           bool

	// raw holds the members of a result relayed from another server
	// (ResultJSON), written instead of Content and StructuredContent.
	raw []byte
}

// TextResult returns a result with one text block.
func TextResult(text string) *ToolResult {
	return &ToolResult{Content: []Content{TextContent(text)}}
}

// ErrorResult returns an isError result with one text block.
func ErrorResult(text string) *ToolResult {
	return &ToolResult{Content: []Content{TextContent(text)}, IsError: true}
}

func (r *ToolResult) appendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, '{')
	dst, err := r.appendMembers(dst)
	if err != nil {
		return nil, err
	}
	return append(dst, '}'), nil
}

// appendMembers appends the members of the result object, without braces.
func (r *ToolResult) appendMembers(dst []byte) ([]byte, error) {
	if r.raw != nil {
		return append(dst, r.raw...), nil
	}
	dst = append(dst, `"content":[`...)
	for i := range r.Content {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = r.Content[i].appendJSON(dst); err != nil {
			return nil, err
		}
	}
	dst = append(dst, ']')
	if r.StructuredContent != nil {
		b, err := json.Marshal(r.StructuredContent)
		if err != nil {
			return nil, err
		}
		dst = append(dst, `,"structuredContent":`...)
		dst = append(dst, b...)
	}
	if r.IsError {
		dst = append(dst, `,"isError":true`...)
	}
	return dst, nil
}

// Content is one block of a tool result or prompt message. Build it with
// [TextContent], [ImageContent], [AudioContent], [ResourceLinkContent] or
// [EmbeddedResourceContent].
type Content struct {
	// Type is "text", "image", "audio", "resource_link" or "resource".
	Type string
	// Text of a text block.
	Text string
	// Data of an image or audio block (sent base64-encoded).
	Data []byte
	// MimeType of an image, audio or resource_link block.
	MimeType string
	// URI, Name, Title, Description of a resource_link block.
	URI, Name, Title, Description string
	// Resource of an embedded resource block.
	Resource *ResourceContents
	// Annotations for the client (audience, priority, lastModified).
	Annotations *Annotations
}

// Annotations tell a client how to use a content block.
type Annotations struct {
	Audience     []string `json:"audience,omitempty"`
	Priority     *float64 `json:"priority,omitempty"`
	LastModified string   `json:"lastModified,omitempty"`
}

// ResourceContents is the content of a resource: Text or Blob.
type ResourceContents struct {
	URI      string `json:"uri"`
	MimeType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     []byte `json:"blob,omitempty"`
	// Meta is the contents' _meta: for a ui:// resource, its _meta.ui.
	Meta *ResourceMeta `json:"_meta,omitempty"`
}

// TextContent returns a text block.
func TextContent(text string) Content { return Content{Type: "text", Text: text} }

// ImageContent returns an image block.
func ImageContent(data []byte, mimeType string) Content {
	return Content{Type: "image", Data: data, MimeType: mimeType}
}

// AudioContent returns an audio block.
func AudioContent(data []byte, mimeType string) Content {
	return Content{Type: "audio", Data: data, MimeType: mimeType}
}

// ResourceLinkContent returns a link to a resource the client may read.
func ResourceLinkContent(uri, name, mimeType string) Content {
	return Content{Type: "resource_link", URI: uri, Name: name, MimeType: mimeType}
}

// EmbeddedResourceContent returns a block that carries a resource inline.
func EmbeddedResourceContent(r ResourceContents) Content {
	return Content{Type: "resource", Resource: &r}
}

// MarshalJSON implements [json.Marshaler].
func (c Content) MarshalJSON() ([]byte, error) { return c.appendJSON(nil) }

func (c *Content) appendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, `{"type":`...)
	dst = jsonrpc.AppendString(dst, c.Type)
	switch c.Type {
	case "text":
		dst = append(dst, `,"text":`...)
		dst = jsonrpc.AppendString(dst, c.Text)
	case "image", "audio":
		dst = append(dst, `,"data":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, c.Data)
		dst = append(dst, `","mimeType":`...)
		dst = jsonrpc.AppendString(dst, c.MimeType)
	case "resource_link":
		dst = append(dst, `,"uri":`...)
		dst = jsonrpc.AppendString(dst, c.URI)
		dst = append(dst, `,"name":`...)
		dst = jsonrpc.AppendString(dst, c.Name)
		dst = appendOpt(dst, "title", c.Title)
		dst = appendOpt(dst, "description", c.Description)
		dst = appendOpt(dst, "mimeType", c.MimeType)
	case "resource":
		if c.Resource == nil {
			return nil, &Error{Code: CodeInternalError, Message: "resource content without a resource"}
		}
		var err error
		if dst, err = appendMember(dst, "resource", c.Resource); err != nil {
			return nil, err
		}
	default:
		return nil, &Error{Code: CodeInternalError, Message: "unknown content type " + strconv.Quote(c.Type)}
	}
	if c.Annotations != nil {
		var err error
		if dst, err = appendMember(dst, "annotations", c.Annotations); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendMember appends `,"name":` and v encoded by encoding/json.
func appendMember(dst []byte, name string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dst = append(dst, `,"`...)
	dst = append(dst, name...)
	dst = append(dst, `":`...)
	return append(dst, b...), nil
}

func appendOpt(dst []byte, key, v string) []byte {
	if v == "" {
		return dst
	}
	dst = append(dst, `,"`...)
	dst = append(dst, key...)
	dst = append(dst, `":`...)
	return jsonrpc.AppendString(dst, v)
}

var emptyObjectSchema = json.RawMessage(`{"type":"object"}`)

// appendJSON writes the tools/list entry of t.
func (t *Tool) appendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, `{"name":`...)
	dst = jsonrpc.AppendString(dst, t.Name)
	dst = appendOpt(dst, "title", t.Title)
	dst = appendOpt(dst, "description", t.Description)
	dst = append(dst, `,"inputSchema":`...)
	if len(t.InputSchema) > 0 {
		dst = append(dst, t.InputSchema...)
	} else {
		dst = append(dst, emptyObjectSchema...)
	}
	if len(t.OutputSchema) > 0 {
		dst = append(dst, `,"outputSchema":`...)
		dst = append(dst, t.OutputSchema...)
	}
	if t.Annotations != nil {
		b, err := json.Marshal(t.Annotations)
		if err != nil {
			return nil, err
		}
		dst = append(dst, `,"annotations":`...)
		dst = append(dst, b...)
	}
	if len(t.Icons) > 0 {
		b, err := json.Marshal(t.Icons)
		if err != nil {
			return nil, err
		}
		dst = append(dst, `,"icons":`...)
		dst = append(dst, b...)
	}
	return append(dst, '}'), nil
}
