package authdisc

import (
	"maps"
	"strings"
	"testing"
)

func TestParseChallenge(t *testing.T) {
	type m = map[string]string
	long := strings.Repeat("a", maxHeaderValue-len(`Bearer scope=""`))
	tests := []struct {
		name   string
		values []string
		want   m // nil: ok is false
	}{
		{"params", []string{`Bearer resource_metadata="https://x/m", scope="a b"`}, m{"resource_metadata": "https://x/m", "scope": "a b"}},
		{"after another challenge", []string{`Basic realm="x", Bearer resource_metadata="https://x/m", scope="a b"`},
			m{"resource_metadata": "https://x/m", "scope": "a b"}},
		{"before another challenge", []string{`Bearer scope="a", Basic realm="x"`}, m{"scope": "a"}},
		{"over several values", []string{`Basic realm="x"`, `Bearer scope="a"`, `Negotiate`}, m{"scope": "a"}},
		{"RFC 9110's example, then Bearer", []string{`Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple", Bearer realm="mcp"`},
			m{"realm": "mcp"}},
		{"case-insensitive scheme and names", []string{`bEaReR Scope="a", RESOURCE_metadata=x`}, m{"scope": "a", "resource_metadata": "x"}},
		{"escapes", []string{`Bearer error_description="a \"quoted\" \\ w\ord"`}, m{"error_description": `a "quoted" \ word`}},
		{"a token value", []string{`Bearer error=invalid_token`}, m{"error": "invalid_token"}},
		{"whitespace around =", []string{"Bearer scope =\t\"a\" ,error= x"}, m{"scope": "a", "error": "x"}},
		{"no params", []string{`Bearer`}, m{}},
		{"no params, then another challenge", []string{`Bearer, Basic realm="x"`}, m{}},
		{"empty list elements", []string{` , Bearer  ,scope="a",, ,`}, m{"scope": "a"}},
		{"a param after a comma belongs to Bearer", []string{`Bearer, scope="a"`}, m{"scope": "a"}},
		{"an empty quoted-string", []string{`Bearer scope=""`}, m{"scope": ""}},
		{"a tab in a quoted-string", []string{"Bearer scope=\"a\tb\""}, m{"scope": "a\tb"}},
		{"obs-text", []string{"Bearer realm=\"caf\xc3\xa9\""}, m{"realm": "caf\xc3\xa9"}},
		{"a token68 elsewhere", []string{`Negotiate abc==, Bearer scope="a"`}, m{"scope": "a"}},
		{"a token68 with slashes", []string{`Other a/b+c=, Bearer scope="a"`}, m{"scope": "a"}},
		{"a malformed value is ignored, not the others", []string{`Bearer scope="a`, `Bearer scope="b"`}, m{"scope": "b"}},
		{"a value of 8 KiB", []string{`Bearer scope="` + long + `"`}, m{"scope": long}},

		{"none", nil, nil},
		{"an empty value", []string{""}, nil},
		{"no Bearer", []string{`Basic realm="x"`, `Negotiate abc`}, nil},
		{"Bearer with a token68", []string{`Bearer abc==`}, nil},
		{"Bearer with a token68 and params", []string{`Bearer abc, scope="a"`}, nil},
		{"a repeated param", []string{`Bearer scope="a", scope="b"`}, nil},
		{"a repeated param in another case", []string{`Bearer Scope="a", scope="a"`}, nil},
		{"a repeated param after a comma", []string{`Bearer, scope="a", scope="b"`}, nil},
		{"two Bearer challenges", []string{`Bearer scope="a", Bearer scope="b"`}, nil},
		{"two Bearer challenges in two values", []string{`Bearer scope="a"`, `Bearer`}, nil},
		{"an unterminated quoted-string", []string{`Bearer scope="a`}, nil},
		{"a backslash at the end", []string{`Bearer scope="a\`}, nil},
		{"a control character", []string{"Bearer scope=\"a\x01\""}, nil},
		{"an escaped control character", []string{"Bearer scope=\"a\\\x01\""}, nil},
		{"DEL", []string{"Bearer scope=\"a\x7f\""}, nil},
		{"a missing comma", []string{`Bearer scope="a" error="b"`}, nil},
		{"a value of two tokens", []string{`Bearer scope=a b`}, nil},
		{"an = in a token value", []string{`Bearer a=b=c`}, nil},
		{"a param before any scheme", []string{`scope="a", Bearer`}, nil},
		{"no scheme", []string{`=a`}, nil},
		{"a quote after the scheme", []string{`Bearer"x"`}, nil},
		{"a value longer than 8 KiB", []string{`Bearer scope="` + long + `a"`}, nil},
		{"a non-token scheme", []string{`Bea(rer scope="a"`}, nil},
		{"a param without a value", []string{`Bearer scope=, error="x"`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseChallenge(tt.values)
			if ok != (tt.want != nil) || !maps.Equal(got, tt.want) {
				t.Fatalf("ParseChallenge(%q) = %q, %v; want %q", tt.values, got, ok, tt.want)
			}
		})
	}
}
