package canon

import (
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// hex4 returns the value of the four hex digits at b[0:4], or -1. b is
// known to hold hex digits when it comes from validated input.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// nextRune decodes one character of the validated string content raw (no
// quotes) at i, exactly as encoding/json decodes strings: escapes resolved,
// a surrogate pair joined, a lone surrogate or an invalid UTF-8 byte read as
// U+FFFD. It returns the rune and the offset after it.
func nextRune(raw []byte, i int) (rune, int) {
	c := raw[i]
	if c < utf8.RuneSelf {
		if c != '\\' {
			return rune(c), i + 1
		}
		switch raw[i+1] {
		case 'b':
			return '\b', i + 2
		case 'f':
			return '\f', i + 2
		case 'n':
			return '\n', i + 2
		case 'r':
			return '\r', i + 2
		case 't':
			return '\t', i + 2
		case 'u':
			r := hex4(raw[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				var r2 rune = -1
				if i+1 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					r2 = hex4(raw[i+2:])
				}
				if d := utf16.DecodeRune(r, r2); d != unicode.ReplacementChar {
					return d, i + 6
				}
				return unicode.ReplacementChar, i
			}
			return r, i
		}
		return rune(raw[i+1]), i + 2 // '"', '\\', '/'
	}
	r, size := utf8.DecodeRune(raw[i:])
	return r, i + size // RuneError for an invalid byte, size 1
}

// appendDecoded appends the decoded value of the validated string content
// raw to dst.
func appendDecoded(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		if c := raw[i]; c < utf8.RuneSelf && c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		var r rune
		r, i = nextRune(raw, i)
		dst = utf8.AppendRune(dst, r)
	}
	return dst
}

// foldRune returns the smallest rune of r's simple case folding orbit, as
// encoding/json folds names.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			r -= 'a' - 'A'
		}
		return r
	}
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// appendFolded appends the UTF-8 string k folded as encoding/json folds
// names: two strings are equal ignoring case exactly when their folded
// forms are equal.
func appendFolded(dst, k []byte) []byte {
	for i := 0; i < len(k); {
		if c := k[i]; c < utf8.RuneSelf {
			dst = append(dst, byte(foldRune(rune(c))))
			i++
			continue
		}
		r, size := utf8.DecodeRune(k[i:])
		dst = utf8.AppendRune(dst, foldRune(r))
		i += size
	}
	return dst
}

// compareFold compares the UTF-8 strings a and b as encoding/json's folded
// names: it is 0 exactly when bytes.EqualFold(a, b).
func compareFold(a, b []byte) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		var ra, rb rune
		if c := a[i]; c < utf8.RuneSelf {
			ra, i = rune(c), i+1
		} else {
			var n int
			ra, n = utf8.DecodeRune(a[i:])
			i += n
		}
		if c := b[j]; c < utf8.RuneSelf {
			rb, j = rune(c), j+1
		} else {
			var n int
			rb, n = utf8.DecodeRune(b[j:])
			j += n
		}
		if ra, rb = foldRune(ra), foldRune(rb); ra != rb {
			if ra < rb {
				return -1
			}
			return 1
		}
	}
	switch {
	case i < len(a):
		return 1
	case j < len(b):
		return -1
	}
	return 0
}
