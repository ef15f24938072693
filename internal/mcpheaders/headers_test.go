package mcpheaders

import (
	"bufio"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestDecodeHeaderValue(t *testing.T) {
	cases := []struct {
		in, want string
		err      bool
	}{
		{"plain", "plain", false},
		{"", "", false},
		{"Hello World", "Hello World", false},
		{b64("café"), "café", false},
		{b64(" padded "), " padded ", false},
		{b64("line1\nline2"), "line1\nline2", false},
		{b64("=?base64?x?="), "=?base64?x?=", false},
		{b64(""), "", false},
		{"=?base64?SGVsbG8=?=", "Hello", false},
		{"=?base64?SGk=?=", "Hi", false},
		// Markers are case-sensitive: these are literals.
		{"=?BASE64?SGVsbG8=?=", "=?BASE64?SGVsbG8=?=", false},
		{"=?Base64?SGVsbG8=?=", "=?Base64?SGVsbG8=?=", false},
		// Incomplete sentinels are literals.
		{"=?base64?SGVsbG8=", "=?base64?SGVsbG8=", false},
		{"SGVsbG8=?=", "SGVsbG8=?=", false},
		{"=?base64?=", "=?base64?=", false}, // prefix and suffix overlap
		{"x=?base64?SGk=?=", "x=?base64?SGk=?=", false},
		// Invalid Base64 inside the sentinel.
		{"=?base64?not base64?=", "", true},
		{"=?base64?SGk?=", "", true},        // missing padding
		{"=?base64?SGk==?=", "", true},      // bad padding
		{"=?base64?SGVsbG8-?=", "", true},   // URL alphabet
		{"=?base64?SGVsbG9=?=", "", true},   // non-zero trailing bits
		{"=?base64?SGVs\nbG8=?=", "", true}, // line break
		{"=?base64?" + base64.StdEncoding.EncodeToString([]byte{0xff, 0xfe}) + "?=", "", true}, // not UTF-8
	}
	for _, tc := range cases {
		got, err := DecodeHeaderValue(tc.in)
		if tc.err {
			if !errors.Is(err, ErrInvalidEncoding) {
				t.Errorf("DecodeHeaderValue(%q) = %q, %v; want ErrInvalidEncoding", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("DecodeHeaderValue(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestCheckStandardHeaders(t *testing.T) {
	cases := []struct {
		name    string
		h       http.Header
		method  string
		body    string
		hasName bool
		bad     string // header expected in the error, "" for success
		msg     string // substring of the message
	}{
		{"ok tools/call", hdr("Mcp-Method", "tools/call", "Mcp-Name", "search_issues"), "tools/call", "search_issues", true, "", ""},
		{"ok no name needed", hdr("Mcp-Method", "tools/list"), "tools/list", "", false, "", ""},
		{"name ignored when not needed", hdr("Mcp-Method", "tools/list", "Mcp-Name", "junk"), "tools/list", "", false, "", ""},
		{"ok resources/read uri", hdr("Mcp-Method", "resources/read", "Mcp-Name", "docs://guide/intro"), "resources/read", "docs://guide/intro", true, "", ""},
		{"lower-case names", hdr("mcp-method", "prompts/get", "mcp-name", "greet"), "prompts/get", "greet", true, "", ""},
		{"upper-case names", hdr("MCP-METHOD", "prompts/get", "MCP-NAME", "greet"), "prompts/get", "greet", true, "", ""},
		{"surrounding whitespace", hdr("Mcp-Method", " tools/call\t", "Mcp-Name", "  foo "), "tools/call", "foo", true, "", ""},
		{"base64 name", hdr("Mcp-Method", "tools/call", "Mcp-Name", b64("café")), "tools/call", "café", true, "", ""},
		{"base64 name with spaces", hdr("Mcp-Method", "tools/call", "Mcp-Name", b64(" x ")), "tools/call", " x ", true, "", ""},
		{"raw non-ASCII name tolerated", hdr("Mcp-Method", "tools/call", "Mcp-Name", "café"), "tools/call", "café", true, "", ""},
		{"literal BASE64 sentinel", hdr("Mcp-Method", "tools/call", "Mcp-Name", "=?BASE64?Zm9v?="), "tools/call", "=?BASE64?Zm9v?=", true, "", ""},
		{"literal BASE64 is not decoded", hdr("Mcp-Method", "tools/call", "Mcp-Name", "=?BASE64?Zm9v?="), "tools/call", "foo", true, "Mcp-Name", "does not match"},
		{"sentinel-looking name encoded", hdr("Mcp-Method", "tools/call", "Mcp-Name", b64("=?base64?Zm9v?=")), "tools/call", "=?base64?Zm9v?=", true, "", ""},

		{"method missing", hdr("Mcp-Name", "x"), "tools/call", "x", true, "Mcp-Method", "Header mismatch: missing Mcp-Method header"},
		{"method empty", hdr("Mcp-Method", ""), "tools/list", "", false, "Mcp-Method", "missing"},
		{"method mismatch", hdr("Mcp-Method", "tools/list", "Mcp-Name", "x"), "tools/call", "x", true, "Mcp-Method", "Header mismatch: Mcp-Method header 'tools/list' does not match body 'tools/call'"},
		{"method case-sensitive", hdr("Mcp-Method", "TOOLS/CALL", "Mcp-Name", "x"), "tools/call", "x", true, "Mcp-Method", "does not match"},
		{"method not decoded", hdr("Mcp-Method", b64("tools/call"), "Mcp-Name", "x"), "tools/call", "x", true, "Mcp-Method", "does not match"},
		{"method repeated", hdr("Mcp-Method", "tools/call", "Mcp-Method", "tools/call", "Mcp-Name", "x"), "tools/call", "x", true, "Mcp-Method", "multiple"},
		{"method repeated across spellings", hdr("Mcp-Method", "tools/call", "mcp-method", "tools/list"), "tools/list", "", false, "Mcp-Method", "multiple"},
		{"method checked before name", hdr("Mcp-Method", "x"), "tools/call", "y", true, "Mcp-Method", ""},

		{"name missing", hdr("Mcp-Method", "tools/call"), "tools/call", "x", true, "Mcp-Name", "Header mismatch: missing Mcp-Name header"},
		{"name empty", hdr("Mcp-Method", "tools/call", "Mcp-Name", "  "), "tools/call", "x", true, "Mcp-Name", "missing"},
		{"name mismatch", hdr("Mcp-Method", "tools/call", "Mcp-Name", "search_issue"), "tools/call", "search_issues", true, "Mcp-Name", "Header mismatch: Mcp-Name header 'search_issue' does not match body 'search_issues'"},
		{"name case-sensitive", hdr("Mcp-Method", "tools/call", "Mcp-Name", "Search"), "tools/call", "search", true, "Mcp-Name", "does not match"},
		{"name bad base64", hdr("Mcp-Method", "tools/call", "Mcp-Name", "=?base64?!!!?="), "tools/call", "x", true, "Mcp-Name", "not valid base64"},
		{"name base64 mismatch", hdr("Mcp-Method", "tools/call", "Mcp-Name", b64("other")), "tools/call", "x", true, "Mcp-Name", "'other' does not match body 'x'"},
		{"name repeated", hdr("Mcp-Method", "tools/call", "Mcp-Name", "x", "Mcp-Name", "x"), "tools/call", "x", true, "Mcp-Name", "multiple"},
		{"inner whitespace kept", hdr("Mcp-Method", "tools/call", "Mcp-Name", "a  b"), "tools/call", "a b", true, "Mcp-Name", "does not match"},
	}
	for _, tc := range cases {
		e := CheckStandardHeaders(tc.h, tc.method, tc.body, tc.hasName)
		if tc.bad == "" {
			if e != nil {
				t.Errorf("%s: unexpected error %q", tc.name, e.Message)
			}
			continue
		}
		if e == nil {
			t.Errorf("%s: no error, want one for %s", tc.name, tc.bad)
			continue
		}
		if e.Header != tc.bad || !strings.Contains(e.Message, tc.msg) || !strings.HasPrefix(e.Message, "Header mismatch: ") {
			t.Errorf("%s: got {%s %q}, want header %s and message containing %q", tc.name, e.Header, e.Message, tc.bad, tc.msg)
		}
		if e.Error() != e.Message {
			t.Errorf("%s: Error() = %q", tc.name, e.Error())
		}
	}
}

// TestCheckStandardHeadersWire runs the check on headers parsed by net/http
// from a real request, which canonicalizes names and trims values.
func TestCheckStandardHeadersWire(t *testing.T) {
	raw := "POST /mcp HTTP/1.1\r\nHost: x\r\nmcp-method:   tools/call  \r\nMCP-NAME:\t" + b64("naïve") + " \r\nContent-Length: 0\r\n\r\n"
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if e := CheckStandardHeaders(req.Header, "tools/call", "naïve", true); e != nil {
		t.Fatalf("wire headers: %q", e.Message)
	}
}

func TestQuoteTruncates(t *testing.T) {
	long := strings.Repeat("é", 300)
	e := CheckStandardHeaders(hdr("Mcp-Method", long), "tools/call", "", false)
	if e == nil || len(e.Message) > 600 || !strings.Contains(e.Message, "…") {
		t.Fatalf("message not truncated: %v", e)
	}
}

// TestCheckStandardHeadersAllocs: the check every modern request makes
// allocates nothing when it passes.
func TestCheckStandardHeadersAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	h := hdr("Mcp-Method", "tools/call", "Mcp-Name", "echo", "Content-Type", "application/json", "Accept", "*/*")
	if n := testing.AllocsPerRun(100, func() {
		if CheckStandardHeaders(h, "tools/call", "echo", true) != nil {
			t.Fatal("refused")
		}
	}); n != 0 {
		t.Errorf("CheckStandardHeaders allocates %v times", n)
	}
}

// TestSameName: the length shortcut answers as strings.EqualFold, for
// names whose folds differ in length (the Kelvin sign, the long s).
func TestSameName(t *testing.T) {
	for _, c := range [][2]string{{"\u212aey", "key"}, {"X-\u017fig", "x-sig"}, {"KEY", "key"}, {"keys", "key"}, {"ke", "key"},
		{"", ""}, {"\u212a", "k"}, {"\u212a", "kk"}, {"Mcp-Name", "mcp-name"}, {"Mcp-Names", "mcp-name"}} {
		if got, want := sameName(c[0], c[1]), strings.EqualFold(c[0], c[1]); got != want {
			t.Errorf("sameName(%q, %q) = %v, EqualFold %v", c[0], c[1], got, want)
		}
	}
}

// headerValue, the reference for standardHeaders, returns the first value of the header called name, with
// surrounding spaces and tabs removed, and how many values it has, matching
// the name case-insensitively even in a Header built by hand with
// non-canonical keys. It does not allocate: it runs on every request.
func headerValue(h http.Header, name string) (first string, n int) {
	canon := http.CanonicalHeaderKey(name)
	for k, vs := range h {
		if k == canon || sameName(k, name) {
			if n == 0 && len(vs) > 0 {
				first = strings.Trim(vs[0], " \t")
			}
			n += len(vs)
		}
	}
	return first, n
}

// standardHeaders counts for each header what headerValue, one header at
// a time, counts, and finds the same value when there is one, however the keys of a hand-built Header are spelled,
// repeated or folded.
func FuzzStandardHeaders(f *testing.F) {
	f.Add("Mcp-Method:tools/call\nMcp-Name:echo")
	f.Add("mcp-method: a \nMCP-METHOD:b\nMcp-Name:\nmcp-NAME:x\nX:y")
	f.Add("Mcp-Meth\u017fod:a\nMcp-Nam\u212a:b\nMcp-Methodx:c\nMcp-Nam:d")
	f.Fuzz(func(t *testing.T, spec string) {
		h := http.Header{}
		for _, line := range strings.Split(spec, "\n") {
			k, v, _ := strings.Cut(line, ":")
			h[k] = append(h[k], v)
		}
		// With several values, which one is first depends on the map's
		// order, and the check refuses them all anyway.
		mv, mn, nv, nn := standardHeaders(h)
		if wv, wn := headerValue(h, HeaderMethod); mn != wn || mn == 1 && mv != wv {
			t.Fatalf("%q: Mcp-Method %q ×%d, headerValue %q ×%d", spec, mv, mn, wv, wn)
		}
		if wv, wn := headerValue(h, HeaderName); nn != wn || nn == 1 && nv != wv {
			t.Fatalf("%q: Mcp-Name %q ×%d, headerValue %q ×%d", spec, nv, nn, wv, wn)
		}
	})
}
