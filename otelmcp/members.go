package otelmcp

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// This file walks the members of a JSON object without decoding it, for
// the trace context in _meta (walkCarrier). It is otelmcp's own so that
// the module depends on the public API of mcphandler only; the core module
// has a walker of its own that it does not export.

// members calls fn with the key (still quoted, as in the input) and the
// raw value of each member of the JSON object obj, in order, without
// allocating; fn returning false stops the walk. obj must be valid JSON
// (metaCarrier checks it with json.Valid): members does not validate it,
// and on invalid input only promises not to panic. It reports false,
// calling fn for nothing, when obj is neither an object nor null (which
// has no members, as encoding/json decodes it into a map).
func members(obj []byte, fn func(key, value []byte) bool) bool {
	i := skipSpace(obj, 0)
	if bytes.HasPrefix(obj[i:], []byte("null")) {
		return true
	}
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	i = skipSpace(obj, i+1)
	for i < len(obj) && obj[i] == '"' {
		kEnd := skipString(obj, i)
		j := skipSpace(obj, kEnd)
		if j >= len(obj) || obj[j] != ':' {
			return false
		}
		vStart := skipSpace(obj, j+1)
		vEnd := skipValue(obj, vStart)
		if vEnd > len(obj) || !fn(obj[i:kEnd], obj[vStart:vEnd]) {
			return vEnd <= len(obj)
		}
		i = skipSpace(obj, vEnd)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	return true
}

// jsonString returns the string a raw JSON string value holds, as
// json.Unmarshal would; ok is false when value is not a string. A value
// of plain ASCII without escapes is copied without decoding.
func jsonString(value []byte) (s string, ok bool) {
	if len(value) < 2 || value[0] != '"' {
		return "", false
	}
	inner := value[1 : len(value)-1]
	plain := bytes.IndexByte(inner, '\\') < 0
	for _, c := range inner {
		if c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(inner), true
	}
	return s, json.Unmarshal(value, &s) == nil
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue returns the end of the valid JSON value starting at b[i], or
// more than len(b) when b ends first.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i + 1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b) + 1
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
		i++
	}
	return i
}

// skipString returns the end of the string starting at b[i] (a quote), or
// more than len(b) when b ends first.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b) + 1
}
