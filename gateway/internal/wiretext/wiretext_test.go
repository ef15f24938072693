package wiretext

import (
	"strings"
	"testing"
)

func TestCut(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                  "plain",
		"a\nb\x7f\u0085c":        "a?b??c",
		"bad \xff utf8":          "bad ? utf8",
		strings.Repeat("é", 200): strings.Repeat("é", 128) + "…",
	} {
		if got := Cut(in); got != want {
			t.Errorf("Cut(%q) = %q, want %q", in, got, want)
		}
	}
}
