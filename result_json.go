package mcphandler

import (
	"bytes"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/mcphandler/mcphandler/internal/canon"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// reservedMetaPrefix starts the _meta keys the protocol reserves: a result
// relayed from another server never carries that server's.
const reservedMetaPrefix = "io.modelcontextprotocol/"

// ResultJSON returns the result of a tool call that another MCP server
// answered with b (a CallToolResult object), to be passed on unchanged:
// its content blocks, structuredContent, isError, _meta and any other
// member, byte for byte, but for what this handler writes itself — the
// 2026-07-28 resultType, and the _meta keys reserved to the protocol
// (io.modelcontextprotocol/…), which the other server must not set for
// this one. IsError is read from b; Content and StructuredContent stay
// empty (b is the result).
//
// b must be one JSON object, nested at most 128 deep, without a repeated
// key (nor two equal but for case), in valid UTF-8, with a content array; structuredContent, when present, an object;
// isError a boolean; _meta an object. Anything else is an error, and the
// caller should answer with an error result of its own rather than relay
// it. Its cost is linear in len(b).
func ResultJSON(b []byte) (*ToolResult, error) {
	if err := canon.Check(b, canon.Limits{FoldCase: true}); err != nil {
		return nil, errors.New("mcphandler: result: " + err.Error())
	}
	if !utf8.Valid(b) {
		return nil, errors.New("mcphandler: result: not valid UTF-8")
	}
	if t := bytes.TrimSpace(b); t[0] != '{' {
		return nil, errors.New("mcphandler: result: not a JSON object")
	}
	r := &ToolResult{raw: make([]byte, 0, len(b))}
	var bad error
	hasContent := false
	ok := jsonrpc.Members(b, func(key, value []byte) bool {
		// Keys are compared exactly once decoded, as MCP clients read
		// them (not case-insensitively, as encoding/json matches fields).
		k, _ := jsonrpc.String(key)
		switch k {
		case "resultType":
			return true
		case "content":
			hasContent = true
		case "_meta":
			if value[0] != '{' {
				bad = errors.New("mcphandler: result: _meta is not an object")
				return false
			}
			r.appendRaw(key, unreservedMeta(value))
			return true
		}
		bad = r.checkMember(k, value)
		r.appendRaw(key, value)
		return bad == nil
	})
	switch {
	case !ok && bad == nil:
		return nil, errors.New("mcphandler: result: not a JSON object")
	case bad != nil:
		return nil, bad
	case !hasContent:
		return nil, errors.New("mcphandler: result: no content")
	}
	return r, nil
}

// appendRaw adds the member key: value to the raw result.
func (r *ToolResult) appendRaw(key, value []byte) {
	if len(r.raw) > 0 {
		r.raw = append(r.raw, ',')
	}
	r.raw = append(append(append(r.raw, key...), ':'), value...)
}

// unreservedMeta is the _meta object meta without its reserved keys.
func unreservedMeta(meta []byte) []byte {
	out := []byte{'{'}
	jsonrpc.Members(meta, func(key, value []byte) bool {
		if k, ok := jsonrpc.String(key); !ok || strings.HasPrefix(k, reservedMetaPrefix) {
			return true // reserved, or a key that does not decode
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(out, key...), ':'), value...)
		return true
	})
	return append(out, '}')
}

// checkMember checks the value of result member k that ResultJSON keeps as
// it is, and reads isError.
func (r *ToolResult) checkMember(k string, value []byte) error {
	switch k {
	case "content":
		if value[0] != '[' {
			return errors.New("mcphandler: result: content is not an array")
		}
	case "structuredContent":
		if value[0] != '{' {
			return errors.New("mcphandler: result: structuredContent is not an object")
		}
	case "isError":
		switch string(value) {
		case "true":
			r.IsError = true
		case "false":
		default:
			return errors.New("mcphandler: result: isError is not a boolean")
		}
	}
	return nil
}
