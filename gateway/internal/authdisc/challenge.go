package authdisc

import (
	"strings"
)

// maxHeaderValue is the longest WWW-Authenticate value ParseChallenge
// reads; a longer one is skipped whole, never cut (a cut could end inside
// a quoted string and change what follows it).
const maxHeaderValue = 8 << 10

// ParseChallenge parses WWW-Authenticate header values (RFC 9110 §11.6.1)
// and returns the auth-params of the Bearer challenge (RFC 6750 §3): names
// lower-cased, values as sent (quoted-strings unescaped). ok is false when
// there is no Bearer challenge, more than one, or one with a token68 or
// with a repeated param name (compared ignoring case): a challenge with
// two meanings has none.
//
// Each value may hold several challenges, separated by commas, each a
// scheme (compared ignoring case) followed by a token68 or by auth-params
// (name = token or quoted-string); challenges spread over several values
// count together. An auth-param that follows a comma belongs to the
// challenge before it. A value that does not parse as a whole (an
// unterminated quoted-string, a control character, two items without a
// comma between them, …) is ignored, as is one longer than 8 KiB; the
// other values still count.
//
// It reads values in one pass, each byte a bounded number of times (a
// token at most twice, to tell a token68 from a first auth-param), so in
// time linear in their total length. It is safe for concurrent use.
func ParseChallenge(values []string) (params map[string]string, ok bool) {
	var found *bearer
	n := 0
	for _, v := range values {
		if len(v) > maxHeaderValue {
			continue
		}
		bs, ok := parseValue(v)
		if !ok {
			continue
		}
		n += len(bs)
		if len(bs) > 0 {
			found = &bs[0]
		}
	}
	if n != 1 || found.refused {
		return nil, false
	}
	return found.params, true
}

// bearer is a Bearer challenge of a value: its params, or refused when it
// has a token68 or a repeated param.
type bearer struct {
	params  map[string]string
	refused bool
}

// parseValue parses one header value and returns its Bearer challenges,
// or ok false when the value is not a list of challenges.
func parseValue(s string) (bs []bearer, ok bool) {
	var (
		cur     = -1 // the index in bs of the current challenge, when it is a Bearer one
		open    bool // a challenge has begun
		token68 bool // the current challenge has a token68
	)
	addParam := func(name, value string) {
		if cur < 0 || bs[cur].refused {
			return
		}
		b := &bs[cur]
		name = strings.ToLower(name)
		if _, dup := b.params[name]; dup {
			b.refused, b.params = true, nil
			return
		}
		b.params[name] = value
	}
	i := 0
	for {
		i = skipOWS(s, i)
		if i == len(s) {
			return bs, true
		}
		if s[i] == ',' { // an empty list element
			i++
			continue
		}
		j := skipToken(s, i)
		if j == i {
			return nil, false
		}
		name := s[i:j]
		if k := skipOWS(s, j); k < len(s) && s[k] == '=' {
			// name = value: an auth-param of the current challenge.
			if !open || token68 {
				return nil, false
			}
			value, end, ok := paramValue(s, k+1)
			if !ok {
				return nil, false
			}
			addParam(name, value)
			i = end
		} else {
			// A new challenge: its scheme, then 1*SP and a token68 or its
			// first auth-param, or nothing.
			open, token68, cur = true, false, -1
			if strings.EqualFold(name, "Bearer") {
				bs = append(bs, bearer{params: map[string]string{}})
				cur = len(bs) - 1
			}
			i = j
			if i < len(s) && s[i] != ',' {
				if s[i] != ' ' && s[i] != '\t' {
					return nil, false
				}
				i = skipOWS(s, i)
				if i < len(s) && s[i] != ',' {
					if pname, value, end, ok := firstParam(s, i); ok {
						addParam(pname, value)
						i = end
					} else if end, ok := skipToken68(s, i); ok {
						token68 = true
						if cur >= 0 {
							bs[cur].refused, bs[cur].params = true, nil
						}
						i = end
					} else {
						return nil, false
					}
				}
			}
		}
		// An item ends with OWS, then a comma or the end.
		i = skipOWS(s, i)
		if i < len(s) {
			if s[i] != ',' {
				return nil, false
			}
			i++
		}
	}
}

// firstParam reads name BWS "=" BWS value at i, the first auth-param of a
// challenge, if that is what is there: a token68 such as "abc==" or "a="
// (followed by a comma or the end) is not, and ok is false.
func firstParam(s string, i int) (name, value string, end int, ok bool) {
	j := skipToken(s, i)
	if j == i {
		return "", "", 0, false
	}
	k := skipOWS(s, j)
	if k == len(s) || s[k] != '=' {
		return "", "", 0, false
	}
	if v := skipOWS(s, k+1); v == len(s) || (s[v] != '"' && !isTchar(s[v])) {
		return "", "", 0, false
	}
	value, end, ok = paramValue(s, k+1)
	return s[i:j], value, end, ok
}

// paramValue reads BWS ( token / quoted-string ) at i and returns the
// value (a quoted-string unescaped) and where it ends.
func paramValue(s string, i int) (value string, end int, ok bool) {
	i = skipOWS(s, i)
	if i < len(s) && s[i] == '"' {
		return quotedString(s, i)
	}
	j := skipToken(s, i)
	if j == i {
		return "", 0, false
	}
	return s[i:j], j, true
}

// quotedString reads the quoted-string that begins at s[i] == '"'.
// qdtext is HTAB, SP and every byte but '"', '\' and the other controls;
// a quoted-pair is '\' followed by HTAB, SP or any byte but a control.
func quotedString(s string, i int) (value string, end int, ok bool) {
	var b []byte // the unescaped value, once an escape is seen
	start := i + 1
	for j := start; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			if b == nil {
				return s[start:j], j + 1, true
			}
			return string(b), j + 1, true
		case c == '\\':
			if j+1 == len(s) || !isQText(s[j+1]) {
				return "", 0, false
			}
			if b == nil {
				b = append(make([]byte, 0, len(s)-start), s[start:j]...)
			}
			j++
			b = append(b, s[j])
		case !isQText(c):
			return "", 0, false
		default:
			if b != nil {
				b = append(b, c)
			}
		}
	}
	return "", 0, false // unterminated
}

// isQText reports whether c may appear in a quoted-string (after a '\'
// for '"' and '\' themselves): HTAB, SP, VCHAR, obs-text.
func isQText(c byte) bool { return c == '\t' || (c >= ' ' && c != 0x7f) }

// skipOWS returns the index of the first byte at or after i that is not
// SP or HTAB.
func skipOWS(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// skipToken returns the end of the token (1*tchar) at i, or i if there is
// none.
func skipToken(s string, i int) int {
	for i < len(s) && isTchar(s[i]) {
		i++
	}
	return i
}

// skipToken68 reads 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" )
// *"=" at i; it must be followed by OWS and a comma or the end.
func skipToken68(s string, i int) (end int, ok bool) {
	j := i
	for j < len(s) && isToken68(s[j]) {
		j++
	}
	if j == i {
		return 0, false
	}
	for j < len(s) && s[j] == '=' {
		j++
	}
	if k := skipOWS(s, j); k < len(s) && s[k] != ',' {
		return 0, false
	}
	return j, true
}

// tchars are the bytes of a token (RFC 9110 §5.6.2).
var tchars = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

func isTchar(c byte) bool { return tchars[c] }

func isToken68(c byte) bool {
	switch {
	case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		return true
	}
	return c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/'
}
