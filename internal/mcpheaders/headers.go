// Package mcpheaders validates the HTTP request headers of MCP revision
// 2026-07-28 against the JSON-RPC body: the standard Mcp-Method and
// Mcp-Name headers, and the Mcp-Param-* headers that mirror tool arguments
// annotated with x-mcp-header in the tool's input schema.
//
// Everything here is a pure function of its inputs. A failed check is a
// *HeaderError, which the caller answers with JSON-RPC error
// CodeHeaderMismatch (-32020) and HTTP status 400.
//
// Header names are matched case-insensitively. Header values are compared
// after removing surrounding spaces and tabs (which net/http already does)
// and after decoding the =?base64?…?= sentinel (see DecodeHeaderValue);
// values themselves are case-sensitive.
package mcpheaders

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// CodeHeaderMismatch is the JSON-RPC error code for a missing, malformed or
// mismatched MCP header. It is sent with HTTP status 400.
const CodeHeaderMismatch = -32020

// Header names defined by revision 2026-07-28.
const (
	// HeaderMethod mirrors the JSON-RPC method of every request.
	HeaderMethod = "Mcp-Method"
	// HeaderName mirrors params.name (tools/call, prompts/get) or params.uri
	// (resources/read).
	HeaderName = "Mcp-Name"
	// ParamHeaderPrefix is prepended to an x-mcp-header annotation to name
	// the header that mirrors the annotated argument.
	ParamHeaderPrefix = "Mcp-Param-"
)

// The Base64 sentinel markers. They are case-sensitive: =?BASE64?…?= is a
// literal value.
const (
	sentinelPrefix = "=?base64?"
	sentinelSuffix = "?="
)

// ErrInvalidEncoding is returned (wrapped) by DecodeHeaderValue for a
// sentinel-wrapped value whose content is not standard, padded Base64 of
// UTF-8 text.
var ErrInvalidEncoding = errors.New("modern: invalid base64 header value")

// HeaderError reports a header that is missing, malformed or does not match
// the body. The caller answers it with JSON-RPC code CodeHeaderMismatch and
// HTTP status 400, using Message as the error message.
type HeaderError struct {
	// Header is the name of the offending header, such as "Mcp-Name" or
	// "Mcp-Param-Region".
	Header string
	// Message is the client-facing error message, such as "Header mismatch:
	// Mcp-Name header 'x' does not match body 'y'".
	Message string
}

// Error returns e.Message.
func (e *HeaderError) Error() string { return e.Message }

func headerErr(header, format string, args ...any) *HeaderError {
	return &HeaderError{Header: header, Message: "Header mismatch: " + fmt.Sprintf(format, args...)}
}

// DecodeHeaderValue decodes a header value of the form =?base64?B?= where B
// is standard Base64 (RFC 4648 §4, padded) of UTF-8 text, and returns any
// other value unchanged. The markers are case-sensitive, so =?BASE64?…?= is
// returned as is. A sentinel whose content is not valid Base64, or decodes
// to invalid UTF-8, is an error wrapping ErrInvalidEncoding. The value is
// not trimmed: net/http has already removed surrounding whitespace.
func DecodeHeaderValue(v string) (string, error) {
	if len(v) < len(sentinelPrefix)+len(sentinelSuffix) ||
		!strings.HasPrefix(v, sentinelPrefix) || !strings.HasSuffix(v, sentinelSuffix) {
		return v, nil
	}
	enc := v[len(sentinelPrefix) : len(v)-len(sentinelSuffix)]
	// The decoder skips '\r' and '\n'; no valid encoding contains them.
	if strings.ContainsAny(enc, "\r\n") {
		return "", fmt.Errorf("%w: line break in encoded value", ErrInvalidEncoding)
	}
	b, err := base64.StdEncoding.Strict().DecodeString(enc)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidEncoding, err)
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%w: decoded value is not UTF-8", ErrInvalidEncoding)
	}
	return string(b), nil
}

// sameName is strings.EqualFold(k, name), skipping the comparison when an
// ASCII k has another length (only non-ASCII runes fold to ASCII letters).
func sameName(k, name string) bool {
	if len(k) != len(name) {
		for i := 0; i < len(k); i++ {
			if k[i] >= 0x80 {
				return strings.EqualFold(k, name)
			}
		}
		return false
	}
	return strings.EqualFold(k, name)
}

// CheckStandardHeaders checks the Mcp-Method and Mcp-Name headers of a
// modern request against its body, in the order of the spec (steps 5 and 6
// of the modern validation order):
//
//  1. Mcp-Method must be present once and equal method exactly
//     (case-sensitive; it is not Base64-decoded).
//  2. When hasName is true (tools/call, prompts/get, resources/read, or an
//     extension method that names a target), Mcp-Name must be present once,
//     decode (DecodeHeaderValue) and equal name exactly.
//
// An empty header value counts as missing. A repeated header is malformed.
// It returns nil when the headers are valid.
//
// Mcp-Name is not checked for characters that the client should have
// encoded: a raw value that equals the body is accepted, for clients that
// send non-ASCII names without the sentinel.
func CheckStandardHeaders(h http.Header, method string, name string, hasName bool) *HeaderError {
	mv, mn, nv, nn := standardHeaders(h)
	if e := checkOne(HeaderMethod, mv, mn, method, false); e != nil {
		return e
	}
	if hasName {
		return checkOne(HeaderName, nv, nn, name, true)
	}
	return nil
}

// standardHeaders returns the first value of each of the Mcp-Method and
// Mcp-Name headers, with surrounding spaces and tabs removed, and how many
// values each has, matching the names case-insensitively even in a Header
// built by hand with non-canonical keys, in one pass over h. It does not
// allocate: it runs on every request.
func standardHeaders(h http.Header) (method string, nm int, name string, nn int) {
	for k, vs := range h {
		switch {
		case k == canonMethod || k != canonName && sameName(k, HeaderMethod):
			if nm == 0 && len(vs) > 0 {
				method = strings.Trim(vs[0], " \t")
			}
			nm += len(vs)
		case k == canonName || sameName(k, HeaderName):
			if nn == 0 && len(vs) > 0 {
				name = strings.Trim(vs[0], " \t")
			}
			nn += len(vs)
		}
	}
	return method, nm, name, nn
}

var canonMethod, canonName = http.CanonicalHeaderKey(HeaderMethod), http.CanonicalHeaderKey(HeaderName)

// checkOne checks the first value v of header, which has n values,
// against body.
func checkOne(header, v string, n int, body string, decode bool) *HeaderError {
	switch {
	case n > 1:
		return headerErr(header, "multiple %s headers", header)
	case n == 0 || v == "":
		return headerErr(header, "missing %s header", header)
	}
	if decode {
		d, err := DecodeHeaderValue(v)
		if err != nil {
			return headerErr(header, "%s header is not valid base64", header)
		}
		v = d
	}
	if v != body {
		return headerErr(header, "%s header %s does not match body %s", header, quote(v), quote(body))
	}
	return nil
}

// quote wraps s in single quotes for a message, shortening long values.
func quote(s string) string {
	const limit = 200
	if len(s) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return "'" + s + "'"
}
