package mcphandler

import "bytes"

// containsKey reports whether b contains s, as bytes.Contains does, for s
// a member name as it appears in JSON (often with its quotes). It looks
// first for the part of s from its first upper case letter: the quote and
// the lower case letters such names start with occur all over a JSON
// body, which makes bytes.Index test a match at almost every byte (15
// times slower on a 2026-07-28 tools/call's params), while an upper case
// letter is rare. A name without one is searched as it is.
func containsKey(b []byte, s string) bool {
	i := 0
	for i < len(s) && (s[i] < 'A' || s[i] > 'Z') {
		i++
	}
	if i == 0 || i == len(s) {
		return bytes.Contains(b, []byte(s))
	}
	head, tail := s[:i], s[i:]
	for off := i; off <= len(b)-len(tail); {
		j := bytes.Index(b[off:], []byte(tail))
		if j < 0 {
			return false
		}
		j += off
		if string(b[j-i:j]) == head {
			return true
		}
		off = j + 1
	}
	return false
}
