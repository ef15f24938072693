package mcptest

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// The markers of the 2026-07-28 header value encoding. They are
// case-sensitive.
const (
	headerB64Prefix = "=?base64?"
	headerB64Suffix = "?="
)

// isHeaderSentinel reports whether v has the form =?base64?…?=.
func isHeaderSentinel(v string) bool {
	return len(v) >= len(headerB64Prefix)+len(headerB64Suffix) &&
		strings.HasPrefix(v, headerB64Prefix) && strings.HasSuffix(v, headerB64Suffix)
}

// HeaderValueNeedsEncoding reports whether v must be sent in the
// =?base64?…?= form in a 2026-07-28 header (Mcp-Name, Mcp-Param-*): when
// it contains a non-ASCII or control character, starts or ends with a space
// or a tab, or itself has the form of the sentinel.
func HeaderValueNeedsEncoding(v string) bool {
	if v == "" {
		return false
	}
	if first, last := v[0], v[len(v)-1]; first == ' ' || first == '\t' || last == ' ' || last == '\t' {
		return true
	}
	for i := 0; i < len(v); i++ {
		if b := v[i]; b < 0x20 || b >= 0x7f {
			return true
		}
	}
	return isHeaderSentinel(v)
}

// EncodeHeaderValue returns v as a 2026-07-28 client sends it in Mcp-Name
// or Mcp-Param-*: as is when it is header-safe, otherwise "=?base64?" + the
// standard Base64 encoding of its UTF-8 bytes + "?=".
func EncodeHeaderValue(v string) string {
	if !HeaderValueNeedsEncoding(v) {
		return v
	}
	return headerB64Prefix + base64.StdEncoding.EncodeToString([]byte(v)) + headerB64Suffix
}

// DecodeHeaderValue undoes [EncodeHeaderValue]: a value of the form
// =?base64?…?= (markers are case-sensitive) is decoded as standard Base64,
// anything else is returned as is. Invalid Base64 inside the markers is an
// error, which a server answers with -32020.
func DecodeHeaderValue(v string) (string, error) {
	if !isHeaderSentinel(v) {
		return v, nil
	}
	b, err := base64.StdEncoding.Strict().DecodeString(v[len(headerB64Prefix) : len(v)-len(headerB64Suffix)])
	if err != nil {
		return "", fmt.Errorf("mcptest: invalid Base64 in header value %q: %w", v, err)
	}
	return string(b), nil
}
