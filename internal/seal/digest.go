package seal

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mcphandler/mcphandler/internal/decimal"
)

// ErrInvalidJSON is returned (wrapped) by Digest and Canonical for input that
// is not exactly one JSON value, holds an object with a duplicate key, or
// nests deeper than MaxDepth.
var ErrInvalidJSON = errors.New("seal: invalid JSON")

// MaxDepth is the deepest nesting of arrays and objects that Canonical
// accepts.
const MaxDepth = 1000

// Digest returns the SHA-256 of the Canonical form of the JSON value args,
// for Binding.ArgsDigest. Arguments that differ only in formatting (key
// order, whitespace, number spelling, string escapes) have the same digest;
// arguments that differ in value do not. Empty input (no arguments) is
// treated as null. Invalid JSON is an error wrapping ErrInvalidJSON, never a
// digest, so a caller cannot bind a token to arguments it cannot interpret.
func Digest(args []byte) ([32]byte, error) {
	c, err := Canonical(args)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(c), nil
}

// Canonical returns the canonical encoding of the JSON value in args: valid
// JSON that depends only on the value, as encoding/json reads it.
//
//   - No insignificant whitespace.
//   - Object members sorted by key, compared as UTF-8 bytes; a duplicate key
//     is an error (parsers disagree on which one wins).
//   - Strings decoded (escapes resolved, invalid UTF-8 replaced by U+FFFD as
//     encoding/json does) and re-encoded escaping only '"', '\\' and control
//     characters, the latter as \u00XX; everything else is literal UTF-8.
//   - Numbers compared as exact decimals, without rounding to float64: the
//     value ±D×10^E with D free of leading and trailing zeros is written as
//     D followed by E zeros when 0 ≤ E ≤ 20, and as DeE otherwise; zero
//     (and -0) is 0. So 1, 1.0, 10e-1 and 1e0 are all 1, and 1.5e2 is 150.
//
// Empty input, or input of JSON whitespace only, is treated as null.
func Canonical(args []byte) ([]byte, error) {
	p := parser{s: args}
	p.ws()
	if p.i == len(p.s) {
		return []byte("null"), nil
	}
	out, err := p.value(make([]byte, 0, len(args)), 0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(p.s) {
		return nil, p.errorf("data after the value")
	}
	return out, nil
}

// parser is a strict JSON (RFC 8259) reader that writes the canonical form
// as it goes. It accepts exactly what json.Valid accepts, minus duplicate
// keys and nesting beyond MaxDepth.
type parser struct {
	s []byte
	i int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: offset %d: %s", ErrInvalidJSON, p.i, fmt.Sprintf(format, args...))
}

func (p *parser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(dst []byte, depth int) ([]byte, error) {
	p.ws()
	if p.i >= len(p.s) {
		return nil, p.errorf("unexpected end of input")
	}
	switch c := p.s[p.i]; {
	case c == '{' || c == '[':
		if depth >= MaxDepth {
			return nil, p.errorf("nested deeper than %d", MaxDepth)
		}
		if c == '{' {
			return p.object(dst, depth+1)
		}
		return p.array(dst, depth+1)
	case c == '"':
		str, err := p.str()
		if err != nil {
			return nil, err
		}
		return appendCanonString(dst, str), nil
	case c == 't':
		return p.literal(dst, "true")
	case c == 'f':
		return p.literal(dst, "false")
	case c == 'n':
		return p.literal(dst, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		start := p.i
		for p.i < len(p.s) && strings.IndexByte("0123456789+-.eE", p.s[p.i]) >= 0 {
			p.i++
		}
		return appendCanonNumber(dst, string(p.s[start:p.i]))
	}
	return nil, p.errorf("unexpected character %q", p.s[p.i])
}

func (p *parser) literal(dst []byte, lit string) ([]byte, error) {
	if !bytes.HasPrefix(p.s[p.i:], []byte(lit)) {
		return nil, p.errorf("invalid literal")
	}
	p.i += len(lit)
	return append(dst, lit...), nil
}

// str reads the string at p.i and returns its decoded value. Strings with
// escapes or non-ASCII bytes are decoded by encoding/json, so the value is
// the one a Go handler sees (invalid UTF-8 and lone surrogates become
// U+FFFD).
func (p *parser) str() (string, error) {
	start := p.i
	p.i++ // opening quote
	plain := true
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			if plain {
				return string(p.s[start+1 : p.i-1]), nil
			}
			var v string
			if err := json.Unmarshal(p.s[start:p.i], &v); err != nil {
				return "", p.errorf("string: %v", err)
			}
			return v, nil
		case c == '\\':
			plain = false
			p.i++
			if p.i >= len(p.s) {
				return "", p.errorf("unterminated string")
			}
			switch p.s[p.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i++
			case 'u':
				if p.i+5 > len(p.s) || !isHex4(p.s[p.i+1:p.i+5]) {
					return "", p.errorf("invalid \\u escape")
				}
				p.i += 5
			default:
				return "", p.errorf("invalid escape")
			}
		case c < 0x20:
			return "", p.errorf("control character in string")
		default:
			if c >= 0x80 {
				plain = false
			}
			p.i++
		}
	}
	return "", p.errorf("unterminated string")
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func (p *parser) array(dst []byte, depth int) ([]byte, error) {
	p.i++ // [
	dst = append(dst, '[')
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return append(dst, ']'), nil
	}
	for {
		var err error
		if dst, err = p.value(dst, depth); err != nil {
			return nil, err
		}
		p.ws()
		if p.i >= len(p.s) {
			return nil, p.errorf("unterminated array")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
			dst = append(dst, ',')
		case ']':
			p.i++
			return append(dst, ']'), nil
		default:
			return nil, p.errorf("want , or ] in array")
		}
	}
}

type member struct {
	key   string
	value []byte
}

func (p *parser) object(dst []byte, depth int) ([]byte, error) {
	p.i++ // {
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return append(dst, '{', '}'), nil
	}
	var members []member
	for {
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return nil, p.errorf("want object key")
		}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, p.errorf("want : after object key")
		}
		p.i++
		v, err := p.value(nil, depth)
		if err != nil {
			return nil, err
		}
		members = append(members, member{key, v})
		p.ws()
		if p.i >= len(p.s) {
			return nil, p.errorf("unterminated object")
		}
		if p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.s[p.i] != '}' {
			return nil, p.errorf("want , or } in object")
		}
		p.i++
		break
	}
	slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].key == m.key {
				return nil, fmt.Errorf("%w: duplicate key %q", ErrInvalidJSON, m.key)
			}
			dst = append(dst, ',')
		}
		dst = appendCanonString(dst, m.key)
		dst = append(dst, ':')
		dst = append(dst, m.value...)
	}
	return append(dst, '}'), nil
}

const hexDigits = "0123456789abcdef"

func appendCanonString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// appendCanonNumber appends the canonical form of the JSON number s
// (documented on Canonical).
func appendCanonNumber(dst []byte, s string) ([]byte, error) {
	n, ok := decimal.Parse(s, true)
	if !ok {
		return nil, fmt.Errorf("%w: number %q", ErrInvalidJSON, s)
	}
	if n.IsZero() {
		return append(dst, '0'), nil
	}
	if n.Neg {
		dst = append(dst, '-')
	}
	dst = append(dst, n.Digits...)
	if x, ok := n.Exp.Int64(); ok && x >= 0 && x <= 20 {
		for range x {
			dst = append(dst, '0')
		}
		return dst, nil
	}
	dst = append(dst, 'e')
	return n.Exp.Append(dst), nil
}
