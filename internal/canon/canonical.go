package canon

import (
	"crypto/sha256"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/mcphandler/mcphandler/internal/decimal"
)

// Canonical returns the canonical encoding of the JSON value in b under the
// zero Limits: valid JSON that depends only on the value, as
// encoding/json reads it.
//
//   - No insignificant whitespace.
//   - Object members sorted by key, compared as UTF-8 bytes; a repeated key
//     is an error (parsers disagree on which one wins).
//   - Strings decoded (escapes resolved, invalid UTF-8 and lone surrogates
//     replaced by U+FFFD as encoding/json does) and re-encoded escaping only
//     '"', '\\' and control characters, the latter as \u00XX; everything
//     else is literal UTF-8.
//   - Numbers compared as exact decimals, without rounding to float64: the
//     value ±D×10^E with D free of leading and trailing zeros is written as
//     D followed by E zeros when 0 ≤ E ≤ 20, and as DeE otherwise; zero
//     (and -0) is 0. So 1, 1.0, 10e-1 and 1e0 are all 1, and 1.5e2 is 150.
//
// Empty input, or input of JSON whitespace only, is treated as null. The
// error is one of Check's. Canonical is idempotent, and it runs in time
// linear in len(b) (plus sorting each object's keys): the input is read
// once to validate it and sort every object's keys, and once more to write
// each value exactly once.
func Canonical(b []byte) ([]byte, error) {
	return AppendCanonical(nil, b, Limits{})
}

// AppendCanonical appends the canonical encoding of the JSON value in b
// (see Canonical) to dst, under lim. On error it returns dst unchanged.
func AppendCanonical(dst, b []byte, lim Limits) ([]byte, error) {
	if blank(b) {
		return append(dst, "null"...), nil
	}
	if lim.FoldCase {
		// Folded duplicates are found by Check's sort; the record pass
		// below sorts by bytes.
		if err := Check(b, lim); err != nil {
			return dst, err
		}
		lim.FoldCase = false
	}
	p := getParser(b, lim)
	defer putParser(p)
	p.record = true
	if err := p.run(); err != nil {
		return dst, err
	}
	e := emitter{s: b, objs: p.objs, mems: p.mems}
	if dst == nil {
		dst = make([]byte, 0, len(b))
	}
	dst, _ = e.value(dst, skipWS(b, 0))
	return dst, nil
}

// Digest returns the SHA-256 of Canonical(b): values that differ only in
// formatting (key order, whitespace, number spelling, string escapes) have
// one digest, values that differ do not. Since Canonical is idempotent, the
// digest of a canonical encoding c is sha256.Sum256(c).
func Digest(b []byte) ([32]byte, error) {
	c, err := Canonical(b)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(c), nil
}

func blank(b []byte) bool {
	return skipWS(b, 0) == len(b)
}

// emitter writes the canonical form of input that the parser validated,
// visiting each value once.
type emitter struct {
	s    []byte
	str  string // s as a string, made on the first number that needs it
	objs []object
	mems []keyRef
}

// value appends the canonical form of the value at pos and returns the
// offset after it.
func (e *emitter) value(dst []byte, pos int) ([]byte, int) {
	s := e.s
	switch c := s[pos]; c {
	case '{':
		o := e.object(pos)
		dst = append(dst, '{')
		for j, m := range e.mems[o.mem : o.mem+o.n] {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst, _ = appendString(dst, s, int(m.pos))
			dst = append(dst, ':')
			dst, _ = e.value(dst, int(m.val))
		}
		return append(dst, '}'), int(o.end)
	case '[':
		dst = append(dst, '[')
		pos = skipWS(s, pos+1)
		if s[pos] == ']' {
			return append(dst, ']'), pos + 1
		}
		for {
			dst, pos = e.value(dst, pos)
			pos = skipWS(s, pos)
			if s[pos] == ']' {
				return append(dst, ']'), pos + 1
			}
			dst = append(dst, ',')
			pos = skipWS(s, pos+1)
		}
	case '"':
		return appendString(dst, s, pos)
	case 't':
		return append(dst, "true"...), pos + 4
	case 'f':
		return append(dst, "false"...), pos + 5
	case 'n':
		return append(dst, "null"...), pos + 4
	}
	return e.number(dst, pos)
}

// object returns the record of the object whose '{' is at pos.
func (e *emitter) object(pos int) *object {
	i, _ := slices.BinarySearchFunc(e.objs, int32(pos), func(o object, t int32) int { return int(o.start - t) })
	return &e.objs[i]
}

// number appends the canonical form of the number at pos (documented on
// Canonical).
func (e *emitter) number(dst []byte, pos int) ([]byte, int) {
	s := e.s
	end, simple := pos, true
	for end < len(s) {
		c := s[end]
		if isDigit(c) || c == '-' {
			end++
			continue
		}
		if c == '.' || c == 'e' || c == 'E' || c == '+' {
			simple = false
			end++
			continue
		}
		break
	}
	if simple {
		// An integer literal: already canonical unless it is -0 or ends in
		// more than 20 zeros.
		lit := s[pos:end]
		if string(lit) == "-0" {
			return append(dst, '0'), end
		}
		z := 0
		for z < len(lit) && lit[len(lit)-1-z] == '0' {
			z++
		}
		if z <= 20 || z == len(lit) {
			return append(dst, lit...), end
		}
		dst = append(dst, lit[:len(lit)-z]...)
		dst = append(dst, 'e')
		return strconv.AppendInt(dst, int64(z), 10), end
	}
	if e.str == "" {
		e.str = string(s)
	}
	n, _ := decimal.Parse(e.str[pos:end], true) // validated by the parser
	return appendNumber(dst, n), end
}

// appendNumber appends the canonical form of n (documented on Canonical).
func appendNumber(dst []byte, n decimal.Number) []byte {
	if n.IsZero() {
		return append(dst, '0')
	}
	if n.Neg {
		dst = append(dst, '-')
	}
	dst = append(dst, n.Digits...)
	if x, ok := n.Exp.Int64(); ok && x >= 0 && x <= 20 {
		for range x {
			dst = append(dst, '0')
		}
		return dst
	}
	dst = append(dst, 'e')
	return n.Exp.Append(dst)
}

const hexDigits = "0123456789abcdef"

// appendString appends the canonical form of the validated string whose
// opening quote is at pos, and returns the offset after its closing quote.
func appendString(dst, s []byte, pos int) ([]byte, int) {
	dst = append(dst, '"')
	i := pos + 1
	for {
		// Copy the run of bytes that stay as they are.
		j := i
		for j < len(s) && keySafe[s[j]] {
			j++
		}
		dst = append(dst, s[i:j]...)
		i = j
		c := s[i]
		if c == '"' {
			return append(dst, '"'), i + 1
		}
		var r rune
		if c == '\\' {
			r, i = nextRune(s, i)
		} else {
			var size int
			r, size = utf8.DecodeRune(s[i:])
			if r != utf8.RuneError || size != 1 {
				dst = append(dst, s[i:i+size]...)
				i += size
				continue
			}
			i++
		}
		switch {
		case r == '"' || r == '\\':
			dst = append(dst, '\\', byte(r))
		case r < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xf])
		default:
			dst = utf8.AppendRune(dst, r)
		}
	}
}
