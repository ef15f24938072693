// Package wiretext makes text a remote server chose to send fit for an
// error or a log line.
package wiretext

import (
	"strings"
	"unicode/utf8"
)

// MaxBytes is how much of a server's text Cut keeps.
const MaxBytes = 256

// Cut cuts s to MaxBytes at a UTF-8 boundary (marking the cut with "…")
// and replaces control characters and invalid UTF-8 with '?', so that
// an error never carries more than a line of what a server chose to send.
func Cut(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i >= MaxBytes {
			b.WriteString("…")
			break
		}
		switch {
		case r == utf8.RuneError || r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			b.WriteByte('?')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
