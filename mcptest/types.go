package mcptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/mcphandler/mcphandler"
)

// JSON-RPC and MCP error codes that tests commonly assert on.
const (
	CodeParseError           = -32700
	CodeInvalidRequest       = -32600
	CodeMethodNotFound       = -32601
	CodeInvalidParams        = -32602
	CodeInternalError        = -32603
	CodeResourceNotFound     = -32002
	CodeURLElicitationNeeded = -32042
)

// ErrNoResponse is returned when a response stream ends without the
// response to the request and cannot be resumed.
var ErrNoResponse = errors.New("mcptest: the response stream ended before the response arrived")

// ErrStreamClosed is returned by [Stream.Next] after [Stream.Close].
var ErrStreamClosed = errors.New("mcptest: stream closed")

// Message is one JSON-RPC 2.0 message: a request, a notification or a
// response. Absent members are nil or empty; a member that is present with
// the value null is kept as the raw JSON "null".
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// hasID reports whether id is present and not null.
func hasID(id json.RawMessage) bool {
	id = bytes.TrimSpace(id)
	return len(id) > 0 && string(id) != "null"
}

// IsRequest reports whether m is a request: it has a method and an id.
func (m *Message) IsRequest() bool { return m.Method != "" && hasID(m.ID) }

// IsNotification reports whether m is a notification: it has a method and
// no id.
func (m *Message) IsNotification() bool { return m.Method != "" && !hasID(m.ID) }

// IsResponse reports whether m is a response: it has no method and has a
// result or an error.
func (m *Message) IsResponse() bool { return m.Method == "" && (m.Result != nil || m.Error != nil) }

// RPCError is a JSON-RPC error object. Methods of [Client] return it (as a
// *RPCError) when the server answers a request with an error. Handlers
// passed as options may return one to choose the error the client sends.
type RPCError struct {
	Code    mcphandler.Code `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error implements error.
func (e *RPCError) Error() string {
	if len(e.Data) > 0 {
		return fmt.Sprintf("mcptest: JSON-RPC error %d: %s (data: %s)", e.Code, e.Message, e.Data)
	}
	return fmt.Sprintf("mcptest: JSON-RPC error %d: %s", e.Code, e.Message)
}

// HTTPError is returned when the server answers with an HTTP status the
// client did not expect: any non-2xx status, or a status other than 202 for
// a notification or a response the client posted.
type HTTPError struct {
	Status int
	Body   []byte
	Header http.Header
}

// Error implements error.
func (e *HTTPError) Error() string {
	body := strings.TrimSpace(string(e.Body))
	if len(body) > 300 {
		body = body[:300] + "…"
	}
	if body == "" {
		return fmt.Sprintf("mcptest: HTTP %d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("mcptest: HTTP %d %s: %s", e.Status, http.StatusText(e.Status), body)
}

// RPCError decodes the body as a JSON-RPC error response and returns its
// error object, or nil if the body is not one. Servers may explain an HTTP
// error status with such a body.
func (e *HTTPError) RPCError() *RPCError {
	var m Message
	if json.Unmarshal(e.Body, &m) != nil {
		return nil
	}
	return m.Error
}

// Notification is a server notification the client received while reading
// a response stream.
type Notification struct {
	Method string
	Params json.RawMessage
}

// Implementation describes a client or server (clientInfo, serverInfo).
type Implementation struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// InitializeResult is the server's answer to initialize.
type InitializeResult struct {
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
	ServerInfo      Implementation  `json:"serverInfo"`
	Instructions    string          `json:"instructions,omitempty"`
	// Raw is the whole result object.
	Raw json.RawMessage `json:"-"`
}

// Tool is one entry of a tools/list result.
type Tool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	Meta         json.RawMessage `json:"_meta,omitempty"`
	// Raw is the whole tool object.
	Raw json.RawMessage `json:"-"`
}

// Content is one content block of a tool result. Which fields are set
// depends on Type ("text", "image", "audio", "resource_link", "resource").
type Content struct {
	Type        string          `json:"type"`
	Text        string          `json:"text,omitempty"`
	Data        string          `json:"data,omitempty"`
	MimeType    string          `json:"mimeType,omitempty"`
	URI         string          `json:"uri,omitempty"`
	Name        string          `json:"name,omitempty"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	Resource    json.RawMessage `json:"resource,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
	Meta        json.RawMessage `json:"_meta,omitempty"`
	// Raw is the whole content object.
	Raw json.RawMessage `json:"-"`
}

// ToolResult is the result of tools/call.
type ToolResult struct {
	Content           []Content       `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
	Meta              json.RawMessage `json:"_meta,omitempty"`
	// Raw is the whole result object.
	Raw json.RawMessage `json:"-"`
}

// Text returns the text of the result's text content blocks, joined with
// "\n".
func (r *ToolResult) Text() string {
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// ElicitParams are the params of an elicitation/create request.
type ElicitParams struct {
	// Mode is "form", "url" or "" (form).
	Mode            string          `json:"mode,omitempty"`
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requestedSchema,omitempty"`
	// URL and ElicitationID are set in URL mode.
	URL           string          `json:"url,omitempty"`
	ElicitationID string          `json:"elicitationId,omitempty"`
	Meta          json.RawMessage `json:"_meta,omitempty"`
	// Raw is the whole params object.
	Raw json.RawMessage `json:"-"`
}

// Elicitation actions.
const (
	ActionAccept  = "accept"
	ActionDecline = "decline"
	ActionCancel  = "cancel"
)

// ElicitResult is the client's answer to elicitation/create.
type ElicitResult struct {
	// Action is "accept", "decline" or "cancel".
	Action string `json:"action"`
	// Content holds the form values of an accept in form mode.
	Content map[string]any `json:"content,omitempty"`
}
