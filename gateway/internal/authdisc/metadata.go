package authdisc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/mcphandler/mcphandler/gateway/internal/wiretext"
	"github.com/mcphandler/mcphandler/internal/canon"
)

// limits are what every metadata document must stay within; its size is
// bounded before (Config.MaxBytes).
var limits = canon.Limits{MaxDepth: maxDepth, MaxNumberBytes: maxNumberBytes}

// decodeResource decodes protected resource metadata (RFC 9728 §2):
// resource, a URL (checkURL); authorization_servers, 1 to 32 issuer URLs
// (checkIssuer); scopes_supported, if present, at most 64 scope tokens.
// local is whether http URLs to loopback hosts are accepted. Other members
// are ignored. It does not compare resource with anything.
func decodeResource(b []byte, local bool) (Resource, error) {
	m, err := object(b)
	if err != nil {
		return Resource{}, err
	}
	var r Resource
	if r.Resource, err = urlMember(m, "resource", true, local); err != nil {
		return Resource{}, err
	}
	if r.AuthorizationServers, err = list(m, "authorization_servers", maxServers); err != nil {
		return Resource{}, err
	}
	if len(r.AuthorizationServers) == 0 {
		return Resource{}, errors.New("authorization_servers names no authorization server")
	}
	for i, s := range r.AuthorizationServers {
		if _, err := checkIssuer(s, local); err != nil {
			return Resource{}, fmt.Errorf("authorization_servers[%d]: %v", i, err)
		}
	}
	if r.ScopesSupported, err = tokenList(m, "scopes_supported"); err != nil {
		return Resource{}, err
	}
	return r, nil
}

// decodeServer decodes authorization server metadata (RFC 8414 §2, OpenID
// Connect Discovery §3): issuer (checkIssuer), authorization_endpoint and
// token_endpoint (checkURL), revocation_endpoint if present (checkURL),
// code_challenge_methods_supported (at most 64, S256 among them),
// scopes_supported if present (at most 64 scope tokens). local is whether
// http URLs to loopback hosts are accepted. Other members are ignored. It
// does not compare issuer with anything.
func decodeServer(b []byte, local bool) (Server, error) {
	m, err := object(b)
	if err != nil {
		return Server{}, err
	}
	var s Server
	if s.Issuer, err = stringMember(m, "issuer", true); err != nil {
		return Server{}, err
	}
	if _, err := checkIssuer(s.Issuer, local); err != nil {
		return Server{}, fmt.Errorf("issuer: %v", err)
	}
	if s.AuthorizationEndpoint, err = urlMember(m, "authorization_endpoint", true, local); err != nil {
		return Server{}, err
	}
	if s.TokenEndpoint, err = urlMember(m, "token_endpoint", true, local); err != nil {
		return Server{}, err
	}
	if s.RevocationEndpoint, err = urlMember(m, "revocation_endpoint", false, local); err != nil {
		return Server{}, err
	}
	if s.CodeChallengeMethods, err = tokenList(m, "code_challenge_methods_supported"); err != nil {
		return Server{}, err
	}
	if !slices.Contains(s.CodeChallengeMethods, "S256") {
		return Server{}, errors.New("code_challenge_methods_supported does not list S256 (PKCE is required)")
	}
	if s.ScopesSupported, err = tokenList(m, "scopes_supported"); err != nil {
		return Server{}, err
	}
	return s, nil
}

// object checks b whole (one JSON value within limits, without a repeated
// key) and returns the members of the object it must be.
func object(b []byte) (map[string]json.RawMessage, error) {
	if err := canon.Check(b, limits); err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	return m, nil
}

// present returns the member name of m, unless it is absent or null.
func present(m map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	raw, ok := m[name]
	if !ok || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

// stringMember returns the string member name of m, at most 2 KiB: ""
// when it is absent (or null) and not required.
func stringMember(m map[string]json.RawMessage, name string, required bool) (string, error) {
	raw, ok := present(m, name)
	if !ok {
		if required {
			return "", fmt.Errorf("%s is missing", name)
		}
		return "", nil
	}
	s, err := str(raw)
	if err != nil {
		return "", fmt.Errorf("%s: %v", name, err)
	}
	return s, nil
}

// urlMember is stringMember of a URL that checkURL accepts.
func urlMember(m map[string]json.RawMessage, name string, required, local bool) (string, error) {
	s, err := stringMember(m, name, required)
	if err != nil {
		return "", err
	}
	if _, ok := present(m, name); !ok {
		return "", nil
	}
	if _, err := checkURL(s, local); err != nil {
		return "", fmt.Errorf("%s: %v", name, err)
	}
	return s, nil
}

// str decodes a JSON string of at most 2 KiB, once decoded.
func str(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", errors.New("not a string")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errors.New("not a string")
	}
	if len(s) > maxString {
		return "", fmt.Errorf("a string longer than %d bytes", maxString)
	}
	return s, nil
}

// list returns the array of strings name of m, of at most max strings of
// at most 2 KiB each; nil when it is absent, null or empty.
func list(m map[string]json.RawMessage, name string, max int) ([]string, error) {
	raw, ok := present(m, name)
	if !ok {
		return nil, nil
	}
	if raw[0] != '[' {
		return nil, fmt.Errorf("%s: not an array", name)
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, fmt.Errorf("%s: not an array", name)
	}
	if len(elems) > max {
		return nil, fmt.Errorf("%s: more than %d elements", name, max)
	}
	if len(elems) == 0 {
		return nil, nil
	}
	out := make([]string, len(elems))
	for i, e := range elems {
		s, err := str(e)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %v", name, i, err)
		}
		out[i] = s
	}
	return out, nil
}

// tokenList is list of at most 64 tokens that checkToken accepts.
func tokenList(m map[string]json.RawMessage, name string) ([]string, error) {
	l, err := list(m, name, maxList)
	if err != nil {
		return nil, err
	}
	for i, s := range l {
		if err := checkToken(s); err != nil {
			return nil, fmt.Errorf("%s[%d]: %v", name, i, err)
		}
	}
	return l, nil
}

// checkToken accepts a scope token (RFC 6749 §3.3), which is also what a
// code challenge method is: 1*( %x21 / %x23-5B / %x5D-7E ), at most 2 KiB.
func checkToken(s string) error {
	switch {
	case s == "":
		return errors.New("empty")
	case len(s) > maxString:
		return fmt.Errorf("longer than %d bytes", maxString)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return fmt.Errorf("%q has byte %#x, not allowed in a scope", cut(s), c)
		}
	}
	return nil
}

// challengeScope checks the scope parameter of a challenge: at most 64
// scope tokens of at most 2 KiB together, separated by spaces. It returns
// them separated by single spaces.
func challengeScope(s string) (string, error) {
	if len(s) > maxString {
		return "", fmt.Errorf("longer than %d bytes", maxString)
	}
	var toks []string
	for t := range strings.SplitSeq(s, " ") {
		if t == "" {
			continue
		}
		if len(toks) == maxList {
			return "", fmt.Errorf("more than %d scopes", maxList)
		}
		if err := checkToken(t); err != nil {
			return "", err
		}
		toks = append(toks, t)
	}
	return strings.Join(toks, " "), nil
}

// checkURL accepts an absolute https URL of at most 2 KiB of printable
// ASCII (no space), without userinfo or fragment; http only when local
// and to a loopback host.
func checkURL(s string, local bool) (*url.URL, error) {
	switch {
	case s == "":
		return nil, errors.New("empty URL")
	case len(s) > maxString:
		return nil, fmt.Errorf("a URL longer than %d bytes", maxString)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return nil, fmt.Errorf("%q is not a URL: byte %#x", cut(s), c)
		}
	}
	if strings.IndexByte(s, '#') >= 0 {
		return nil, fmt.Errorf("%q has a fragment", cut(s))
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL", cut(s))
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("%q is not an absolute URL", cut(s))
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopback(u.Hostname()) {
			return nil, fmt.Errorf("%q is not https", cut(s))
		}
		if !local {
			return nil, fmt.Errorf("%q is not https (http to a loopback host only from an upstream on one)", cut(s))
		}
	default:
		return nil, fmt.Errorf("%q is not https", cut(s))
	}
	if u.User != nil {
		return nil, fmt.Errorf("%q has userinfo", cut(s))
	}
	return u, nil
}

// checkIssuer is checkURL for an issuer, which has no query either (RFC
// 8414 §2).
func checkIssuer(s string, local bool) (*url.URL, error) {
	u, err := checkURL(s, local)
	if err != nil {
		return nil, err
	}
	if strings.IndexByte(s, '?') >= 0 {
		return nil, fmt.Errorf("%q has a query, which an issuer has not", cut(s))
	}
	return u, nil
}

// isLoopback reports whether host (without brackets and port) is
// localhost or an IP address in 127.0.0.0/8 or ::1.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// canonical is u as resource identifiers are compared: scheme and host
// lower-cased, the scheme's default port removed, an empty path made "/",
// without fragment. The path and query are kept as they are written.
func canonical(u *url.URL) string {
	host := strings.ToLower(u.Hostname())
	if strings.IndexByte(host, ':') >= 0 {
		host = "[" + host + "]"
	}
	switch port := u.Port(); {
	case port == "", u.Scheme == "https" && port == "443", u.Scheme == "http" && port == "80":
	default:
		host += ":" + port
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	s := strings.ToLower(u.Scheme) + "://" + host + path
	if u.RawQuery != "" {
		s += "?" + u.RawQuery
	}
	return s
}

// cut is wiretext.Cut.
func cut(s string) string { return wiretext.Cut(s) }
