package canon

// The implementation of Canonical before it was made linear (it lived in
// internal/seal, with decimal.Parse on math/big), kept to measure the new
// one against it side by side in the same benchmark run. Not used by any
// test as a reference for correctness: the golden tables are.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

var errOldInvalidJSON = errors.New("seal: invalid JSON")

const oldMaxDepth = 1000

func oldCanonical(args []byte) ([]byte, error) {
	p := oldParser{s: args}
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
// keys and nesting beyond oldMaxDepth.
type oldParser struct {
	s []byte
	i int
}

func (p *oldParser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: offset %d: %s", errOldInvalidJSON, p.i, fmt.Sprintf(format, args...))
}

func (p *oldParser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *oldParser) value(dst []byte, depth int) ([]byte, error) {
	p.ws()
	if p.i >= len(p.s) {
		return nil, p.errorf("unexpected end of input")
	}
	switch c := p.s[p.i]; {
	case c == '{' || c == '[':
		if depth >= oldMaxDepth {
			return nil, p.errorf("nested deeper than %d", oldMaxDepth)
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
		return oldAppendCanonString(dst, str), nil
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
		return oldAppendCanonNumber(dst, string(p.s[start:p.i]))
	}
	return nil, p.errorf("unexpected character %q", p.s[p.i])
}

func (p *oldParser) literal(dst []byte, lit string) ([]byte, error) {
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
func (p *oldParser) str() (string, error) {
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
				if p.i+5 > len(p.s) || !oldIsHex4(p.s[p.i+1:p.i+5]) {
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

func oldIsHex4(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func (p *oldParser) array(dst []byte, depth int) ([]byte, error) {
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

type oldMember struct {
	key   string
	value []byte
}

func (p *oldParser) object(dst []byte, depth int) ([]byte, error) {
	p.i++ // {
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return append(dst, '{', '}'), nil
	}
	var members []oldMember
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
		members = append(members, oldMember{key, v})
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
	slices.SortFunc(members, func(a, b oldMember) int { return strings.Compare(a.key, b.key) })
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].key == m.key {
				return nil, fmt.Errorf("%w: duplicate key %q", errOldInvalidJSON, m.key)
			}
			dst = append(dst, ',')
		}
		dst = oldAppendCanonString(dst, m.key)
		dst = append(dst, ':')
		dst = append(dst, m.value...)
	}
	return append(dst, '}'), nil
}

func oldAppendCanonString(dst []byte, s string) []byte {
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

// oldAppendCanonNumber appends the canonical form of the JSON number s
// (documented on Canonical).
func oldAppendCanonNumber(dst []byte, s string) ([]byte, error) {
	neg, digits, exp, ok := oldDecimalParse(s, true)
	if !ok {
		return nil, fmt.Errorf("%w: number %q", errOldInvalidJSON, s)
	}
	if digits == "" {
		return append(dst, '0'), nil
	}
	if neg {
		dst = append(dst, '-')
	}
	dst = append(dst, digits...)
	if exp.IsInt64() && exp.Int64() >= 0 && exp.Int64() <= 20 {
		for range exp.Int64() {
			dst = append(dst, '0')
		}
		return dst, nil
	}
	dst = append(dst, 'e')
	return exp.Append(dst, 10), nil
}
func oldDecimalParse(s string, strict bool) (neg bool, digits string, exp *big.Int, ok bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	intPart := s[start:i]
	if intPart == "" || (strict && len(intPart) > 1 && intPart[0] == '0') {
		return false, "", nil, false
	}
	frac := ""
	if i < len(s) && s[i] == '.' {
		i++
		start = i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		frac = s[start:i]
		if frac == "" {
			return false, "", nil, false
		}
	}
	exp = new(big.Int)
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		start = i
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if _, good := exp.SetString(strings.TrimPrefix(s[start:i], "+"), 10); !good {
			return false, "", nil, false
		}
	}
	if i != len(s) {
		return false, "", nil, false
	}
	all := strings.TrimLeft(intPart+frac, "0")
	digits = strings.TrimRight(all, "0")
	exp.Add(exp, big.NewInt(int64(len(all)-len(digits)-len(frac))))
	return neg, digits, exp, true
}
