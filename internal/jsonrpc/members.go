package jsonrpc

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Members calls fn with the key (still quoted, as in the input) and the raw
// value of each member of the JSON object obj, in order, without
// allocating. obj must be valid JSON, as every json.RawMessage that
// json.Unmarshal filled is: Members does not validate it again. It reports
// false, calling fn for nothing, when obj is neither an object nor null
// (which has no members); fn returning false stops the walk.
//
// Read with [KeyIs] and [String], the members mean what encoding/json's
// Unmarshal would make of them for a struct of json.RawMessage fields: a
// key matches a field name case-insensitively, and the last match wins.
func Members(obj []byte, fn func(key, value []byte) bool) bool {
	i := skipSpace(obj, 0)
	if bytes.HasPrefix(obj[i:], []byte("null")) {
		return true // as encoding/json: null sets nothing
	}
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	i = skipSpace(obj, i+1)
	for i < len(obj) && obj[i] == '"' {
		kEnd := skipValue(obj, i)
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

// KeyIs reports whether the quoted key names the field name (ASCII, with
// no escapes) as encoding/json matches keys to struct fields: equal but
// for case (Unicode case folding).
func KeyIs(key []byte, name string) bool {
	if len(key) < 2 {
		return false
	}
	k := key[1 : len(key)-1]
	if bytes.IndexByte(k, '\\') >= 0 {
		var s string
		if json.Unmarshal(key, &s) != nil {
			return false
		}
		k = []byte(s)
	}
	if len(k) == len(name) && string(k) == name {
		return true
	}
	if len(k) != len(name) && isASCII(k) {
		return false // folding keeps the length of ASCII text
	}
	return bytes.EqualFold(k, []byte(name))
}

// KeyIndex returns the index of the first of names (field names as KeyIs
// takes them) that the quoted key names, as KeyIs matches
// it, or -1. A key spelled as a name, as every client sends it, is found
// by comparing bytes; another of plain ASCII by length and ASCII case
// only, which for such a key is all the folding encoding/json does; any
// other goes through KeyIs.
func KeyIndex(key []byte, names ...string) int {
	if len(key) < 2 {
		return -1
	}
	k := key[1 : len(key)-1]
	for i, n := range names {
		if string(k) == n {
			return i
		}
	}
	for _, c := range k {
		if c >= utf8.RuneSelf || c == '\\' {
			for i, n := range names {
				if KeyIs(key, n) {
					return i
				}
			}
			return -1
		}
	}
next:
	for i, n := range names {
		if len(n) != len(k) {
			continue
		}
		for j := 0; j < len(k); j++ {
			if lowerASCII(k[j]) != lowerASCII(n[j]) {
				continue next
			}
		}
		return i
	}
	return -1
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// String returns the string a raw JSON string value holds, as
// json.Unmarshal would; ok is false when value is not a string.
func String(value []byte) (s string, ok bool) {
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

// skipValue returns the end of the valid JSON value starting at b[i].
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

// skipString returns the end of the string starting at b[i] (a quote).
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
