package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcphandler/mcphandler/gateway/internal/wiretext"
	"github.com/mcphandler/mcphandler/internal/canon"
	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// limits are what every JSON value from the upstream must stay within;
// the size is bounded before (Endpoint.MaxResponseBytes).
var limits = canon.Limits{MaxDepth: maxDepth, MaxNumberBytes: maxNumberBytes}

// checkJSON reports whether b is one JSON value within limits, without a
// repeated key (a value with two meanings), as ErrMalformed.
func checkJSON(b []byte) error {
	if err := canon.Check(b, limits); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

// isObject reports whether b is a JSON object that checkJSON accepts.
func isObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{' && checkJSON(b) == nil
}

// message is one JSON-RPC message from the upstream.
type message struct {
	jsonrpc.Message
	kind jsonrpc.Kind
}

// decodeMessages decodes the body of a JSON response or the data of an
// SSE event: one JSON-RPC message, or an array of them (a 2025-03-26
// batch). The bytes are checked whole (checkJSON) before anything is read
// from them, and each message must be a valid request, notification or
// response.
func decodeMessages(b []byte) ([]message, error) {
	if err := checkJSON(b); err != nil {
		return nil, err
	}
	if !jsonrpc.IsBatch(b) {
		var m message
		if err := decodeOne(b, &m); err != nil {
			return nil, err
		}
		return []message{m}, nil
	}
	elems, err := jsonrpc.DecodeBatch(b)
	if err != nil || len(elems) == 0 {
		return nil, fmt.Errorf("%w: an empty or invalid batch", ErrMalformed)
	}
	ms := make([]message, len(elems))
	for i, e := range elems {
		if err := decodeOne(e, &ms[i]); err != nil {
			return nil, err
		}
	}
	return ms, nil
}

// decodeOne decodes one message of bytes checkJSON accepted.
func decodeOne(b []byte, m *message) error {
	if err := jsonrpc.DecodeValid(b, &m.Message); err != nil {
		return fmt.Errorf("%w: not a JSON-RPC message", ErrMalformed)
	}
	k, verr := m.Validate()
	if verr != nil {
		return fmt.Errorf("%w: %s", ErrMalformed, verr.Message)
	}
	if k == jsonrpc.KindResponse && m.Error == nil && !isObjectBytes(m.Result) {
		return fmt.Errorf("%w: a result that is not an object", ErrMalformed)
	}
	m.kind = k
	return nil
}

// isObjectBytes reports whether the valid JSON b is an object.
func isObjectBytes(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

// rpcError makes the upstream's JSON-RPC error safe to keep and show.
func rpcError(e *jsonrpc.Error) *RPCError {
	r := &RPCError{Code: e.Code, Message: cutText(e.Message)}
	if len(e.Data) > 0 && len(e.Data) <= maxErrorData {
		r.Data = bytes.Clone(e.Data)
	}
	return r
}

// cutText is wiretext.Cut.
func cutText(s string) string { return wiretext.Cut(s) }

// member is one member of a JSON object to build.
type member struct {
	key   string
	value []byte // raw JSON; nil leaves the member out
}

// object builds a JSON object of the members that have a value.
func object(ms ...member) []byte {
	b := make([]byte, 0, 128)
	b = append(b, '{')
	for _, m := range ms {
		if m.value == nil {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = jsonrpc.AppendString(b, m.key)
		b = append(b, ':')
		b = append(b, m.value...)
	}
	return append(b, '}')
}

// str is s as a JSON string.
func str(s string) []byte { return jsonrpc.AppendString(nil, s) }

func itoa(n int) string { return strconv.Itoa(n) }

// members returns the members of the JSON object obj (valid JSON) by key,
// exactly as spelled; a repeated key cannot occur in what checkJSON
// accepted.
func members(obj []byte) map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	jsonrpc.Members(obj, func(k, v []byte) bool {
		if key, ok := jsonrpc.String(k); ok {
			m[key] = v
		}
		return true
	})
	return m
}

// memberValue returns the value of obj's member key, as members(obj)[key]
// does, without making the map.
func memberValue(obj []byte, key string) json.RawMessage {
	var out json.RawMessage
	jsonrpc.Members(obj, func(k, v []byte) bool {
		if keyIs(k, key) {
			out = v
			return false
		}
		return true
	})
	return out
}

// keyIs reports whether the quoted key k is name, exactly, as
// jsonrpc.String reads it; a key of plain ASCII is compared without
// making a string of it.
func keyIs(k []byte, name string) bool {
	if inner, ok := plainKey(k); ok {
		return string(inner) == name
	}
	s, ok := jsonrpc.String(k)
	return ok && s == name
}

// keyHasPrefix reports whether the quoted key k begins with prefix, as
// keyIs reads it.
func keyHasPrefix(k []byte, prefix string) bool {
	if inner, ok := plainKey(k); ok {
		return bytes.HasPrefix(inner, []byte(prefix))
	}
	s, _ := jsonrpc.String(k)
	return strings.HasPrefix(s, prefix)
}

// plainKey returns the text of the quoted key k when it is plain ASCII
// without escapes, which is what jsonrpc.String would read of it.
func plainKey(k []byte) ([]byte, bool) {
	if len(k) < 2 || k[0] != '"' {
		return nil, false
	}
	inner := k[1 : len(k)-1]
	for _, c := range inner {
		if c == '\\' || c >= utf8.RuneSelf {
			return nil, false
		}
	}
	return inner, true
}

// reservedMeta is the prefix of the _meta keys the protocol reserves
// (protocol version, client capabilities, serverInfo, …).
const reservedMeta = "io.modelcontextprotocol/"

// finalResult returns the tools/call result the caller gets, the same in
// every era: the upstream's object without resultType (a 2026-07-28
// envelope) and without the reserved _meta keys (which describe the hop,
// not the result, and which an upstream must not make the gateway's
// answer carry). Every other member is kept as sent, in order.
func finalResult(res []byte) []byte {
	out := make([]byte, 0, len(res))
	out = append(out, '{')
	jsonrpc.Members(res, func(k, v []byte) bool {
		switch {
		case keyIs(k, "resultType"):
			return true
		case keyIs(k, "_meta"):
			if v = stripMeta(v); v == nil {
				return true
			}
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, k...)
		out = append(out, ':')
		out = append(out, v...)
		return true
	})
	return append(out, '}')
}

// stripMeta returns the _meta object without its reserved keys, or nil
// when nothing is left (or it is not an object).
func stripMeta(meta []byte) []byte {
	if !isObjectBytes(meta) {
		return nil
	}
	out := []byte{'{'}
	jsonrpc.Members(meta, func(k, v []byte) bool {
		if keyHasPrefix(k, reservedMeta) {
			return true
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, k...)
		out = append(out, ':')
		out = append(out, v...)
		return true
	})
	if len(out) == 1 {
		return nil
	}
	return append(out, '}')
}
