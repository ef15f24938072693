package canon

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDescribe(t *testing.T) {
	long := strings.Repeat("a", 300) + strings.Repeat("z", 300)
	cases := []struct {
		name string
		in   string
		opt  DescribeOptions
		want string
	}{
		{name: "scalars", in: `[true,false,null,"x",1]`, want: `[true,false,null,"x",1]`},
		{name: "canonical order", in: `{"b":1, "a":{"d":2,"c":3}}`, want: `{"a":{"c":3,"d":2},"b":1}`},
		{name: "empty", in: `{"a":{},"b":[],"c":""}`, want: `{"a":{},"b":[],"c":""}`},
		{name: "top-level scalar", in: `"hi"`, want: `"hi"`},
		{name: "numbers in plain notation", in: `[123.456,0.001,1e21,-0.5,1e400,0.0000015,1e-7,150,-1.50,100e-2,2.5e99999999999999999999999]`,
			want: `[123.456,0.001,1e21,-0.5,1e400,0.0000015,1e-7,150,-1.5,1,2.5e99999999999999999999999]`},
		{name: "escapes", in: `{"s":"q\"b\\s/\n\t\u0000\u007f"}`, want: `{"s":"q\"b\\s/\u000a\u0009\u0000\u007f"}`},
		{name: "bidi override", in: "{\"file\":\"invoice\u202egnp.exe\"}", want: `{"file":"invoice\u202egnp.exe"}`},
		{name: "bidi isolates and marks", in: "\"\u2066a\u2069\u200e\u200f\u061c\"", want: `"\u2066a\u2069\u200e\u200f\u061c"`},
		{name: "zero-width", in: "{\"id\":\"cust\u200bomers\u200c\u200d\u2060\ufeff\"}", want: `{"id":"cust\u200bomers\u200c\u200d\u2060\ufeff"}`},
		{name: "zero-width in a key", in: "{\"i\u200bd\":1,\"id\":2}", want: `{"id":2,"i\u200bd":1}`},
		{name: "line separators", in: "\"a\u2028b\u2029c\u0085d\"", want: `"a\u2028b\u2029c\u0085d"`},
		{name: "odd spaces", in: "\"a\u00a0b\u3000c\u2800d\u3164e\"", want: `"a\u00a0b\u3000c\u2800d\u3164e"`},
		{name: "variation selector and tags", in: "\"a\ufe0fb\U000e0041c\"", want: `"a\ufe0fb\udb40\udc41c"`},
		{name: "private use and unassigned", in: "\"\ue000\U0010fffd\ufffe\"", want: `"\ue000\udbff\udffd\ufffe"`},
		{name: "invalid UTF-8 replaced", in: "\"a\xffb\\ud800c\"", want: `"a\ufffdb\ufffdc"`},
		{name: "a forged marker", in: `{"a":"x…[9 characters elided]…y"}`, want: `{"a":"x\u2026[9 characters elided]\u2026y"}`},
		{name: "visible text stays", in: `{"name":"Zoë 世界 😀 ä"}`, want: `{"name":"Zoë 世界 😀 ä"}`},
		{name: "long string", in: `{"s":"` + long + `"}`,
			want: `{"s":"` + strings.Repeat("a", 100) + `…[400 characters elided]…` + strings.Repeat("z", 100) + `"}`},
		{name: "long string, small budget", in: `{"s":"` + long + `"}`, opt: DescribeOptions{Budget: 80},
			want: `{"s":"` + strings.Repeat("a", 13) + `…[575 characters elided]…` + strings.Repeat("z", 12) + `"}`},
		{name: "one character elided", in: `"abcdefghijklmnopqrstuvwxyz"`, opt: DescribeOptions{StringRunes: 25},
			want: `"abcdefghijklmnopqrstuvwxyz"`}, // the marker would be longer
		{name: "many items", in: `[1,2,3,4,5,6,7,8,9,10]`, opt: DescribeOptions{Items: 4}, want: `[1,2,…[6 more items]…,9,10]`},
		{name: "one item more", in: `[1,2,3,4,5]`, opt: DescribeOptions{Items: 4}, want: `[1,2,…[1 more item]…,4,5]`},
		{name: "odd items", in: `[1,2,3,4,5,6,7,8,9,10]`, opt: DescribeOptions{Items: 3}, want: `[1,2,…[7 more items]…,10]`},
		{name: "nested object members", in: `{"o":{"a":1,"b":2,"c":3,"d":4,"e":5}}`, opt: DescribeOptions{Items: 2},
			want: `{"o":{"a":1,…[3 more items]…,"e":5}}`},
		{name: "top-level members are never elided", in: `{"a":1,"b":2,"c":3,"d":4,"e":5}`, opt: DescribeOptions{Items: 2},
			want: `{"a":1,"b":2,"c":3,"d":4,"e":5}`},
		{name: "everything elided", in: `{"a":[1,2,3],"b":{"x":1},"s":"` + long + `"}`, opt: DescribeOptions{Budget: 70},
			want: `{"a":[…[3 items]…],"b":{…[1 item]…},"s":"a…[599 characters elided]…"}`},
		{name: "deep nesting", in: strings.Repeat(`{"a":`, 5) + `1` + strings.Repeat(`}`, 5), want: `{"a":{"a":{"a":{"a":{"a":1}}}}}`},
		{name: "deep nesting collapsed", in: strings.Repeat(`[`, 100) + strings.Repeat(`]`, 100), opt: DescribeOptions{Budget: 50},
			want: `[…[1 item]…]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Describe([]byte(tc.in), tc.opt)
			if err != nil {
				t.Fatalf("Describe: %v", err)
			}
			if got != tc.want {
				t.Fatalf("Describe(%.80s)\n got %s\nwant %s", tc.in, got, tc.want)
			}
			verifyDescription(t, []byte(tc.in), got, tc.opt)
		})
	}
}

// TestDescribeShowsWhatRuns is the confirm attack: arguments whose
// rendering would be cut before a field that the tool reads.
func TestDescribeShowsWhatRuns(t *testing.T) {
	pad := strings.Repeat(" ", 400)
	// A repeated key is refused, not shown one way and run the other.
	_, err := Describe([]byte(`{"id":"draft-notes.txt"`+pad+`,"id":"customers-prod"}`), DescribeOptions{})
	var dup *DuplicateKeyError
	if !errors.As(err, &dup) || dup.Key != "id" {
		t.Fatalf("duplicate id: %v", err)
	}
	// A long value first does not push later fields out of sight.
	huge := strings.Repeat("x", 100000)
	for _, in := range []string{
		`{"note":"` + huge + `","target":"customers-prod"}`,
		`{"target":"customers-prod","note":"` + huge + `"}`,
		`{"a":[` + strings.Repeat(`"`+strings.Repeat("y", 100)+`",`, 500) + `0],"target":"customers-prod"}`,
		`{"a":` + strings.Repeat(`{"b":`, 100) + `"` + huge + `"` + strings.Repeat(`}`, 100) + `,"target":"customers-prod"}`,
	} {
		got, err := Describe([]byte(in), DescribeOptions{})
		if err != nil {
			t.Fatalf("Describe: %v", err)
		}
		if !strings.Contains(got, `"target":"customers-prod"`) {
			t.Errorf("target not shown: %.200s", got)
		}
		if n := utf8.RuneCountInString(got); n > DefaultBudget {
			t.Errorf("rendering of %d runes, budget %d", n, DefaultBudget)
		}
		verifyDescription(t, []byte(in), got, DescribeOptions{})
	}
	// Too many fields to show them all: refused, not cut.
	var b strings.Builder
	b.WriteString("{")
	for i := range 300 {
		fmt.Fprintf(&b, `"field%03d":"v",`, i)
	}
	b.WriteString(`"target":"customers-prod"}`)
	if got, err := Describe([]byte(b.String()), DescribeOptions{}); !errors.Is(err, ErrTooLong) {
		t.Errorf("300 fields: %.100s, %v; want ErrTooLong", got, err)
	}
	if _, err := Describe([]byte(`{"`+strings.Repeat("k", 3000)+`":1}`), DescribeOptions{}); !errors.Is(err, ErrTooLong) {
		t.Errorf("a key beyond the budget: %v; want ErrTooLong", err)
	}
}

func TestDescribeInvalid(t *testing.T) {
	var se *SyntaxError
	if _, err := Describe([]byte(`{"a":`), DescribeOptions{}); !errors.As(err, &se) {
		t.Errorf("invalid JSON: %v", err)
	}
	var le *LimitError
	deep := strings.Repeat("[", DefaultMaxDepth+1) + strings.Repeat("]", DefaultMaxDepth+1)
	if _, err := Describe([]byte(deep), DescribeOptions{}); !errors.As(err, &le) {
		t.Errorf("too deep: %v", err)
	}
	if got, err := Describe(nil, DescribeOptions{}); err != nil || got != "null" {
		t.Errorf("empty: %q, %v", got, err)
	}
}

// verifyDescription parses the rendering got of in and checks that it
// shows the value of in: every top-level member, and elsewhere either the
// value itself or a prefix and suffix (of characters or of elements) with
// counts that add up; and that it fits the budget and holds no hidden
// character unescaped.
func verifyDescription(t testing.TB, in []byte, got string, opt DescribeOptions) {
	t.Helper()
	if err := checkDescription(in, got, opt); err != nil {
		t.Fatal(err)
	}
}

// TestCheckDescription makes sure the checker of renderings catches what a
// wrong rendering would do.
func TestCheckDescription(t *testing.T) {
	in := []byte(`{"a":[1,2,3,4,5],"b":"abcdefghij","c":{"x":1,"y":2,"z":3}}`)
	good := `{"a":[1,…[3 more items]…,5],"b":"ab…[6 characters elided]…ij","c":{"x":1,…[1 more item]…,"z":3}}`
	if err := checkDescription(in, good, DescribeOptions{}); err != nil {
		t.Fatalf("a good rendering fails: %v", err)
	}
	for _, bad := range []string{
		`{"a":[1,…[3 more items]…,5],"b":"ab…[6 characters elided]…ij"}`,                                   // a member dropped
		`{"a":[1,…[2 more items]…,5],"b":"ab…[6 characters elided]…ij","c":{"x":1,…[1 more item]…,"z":3}}`, // a count wrong
		`{"a":[1,…[3 more items]…,4],"b":"ab…[6 characters elided]…ij","c":{"x":1,…[1 more item]…,"z":3}}`, // a wrong tail
		`{"a":[1,…[3 more items]…,5],"b":"ab…[5 characters elided]…ij","c":{"x":1,…[1 more item]…,"z":3}}`, // a wrong length
		`{"a":[1,…[3 more items]…,5],"b":"ab…[6 characters elided]…iJ","c":{"x":1,…[1 more item]…,"z":3}}`, // a wrong text
		`{"a":[1,…[3 more items]…,5],"b":"abcdefghij","c":{"x":1,…[1 more item]…,"y":3}}`,                  // a wrong key
		`{"a":[1,2,3,4,5],"b":"abcdefghij","c":{"x":1,"y":2,"z":3}}` + "‮",                                 // a hidden character
		`{"a":[1,2,3,4,5],"b":"abcdefghij","c":{"x":1,"y":2,"z":3},…[1 more item]…}`,                       // an elided top-level member
		`{"a":[1,2,3,4,5],"b":"abcdefghij","c":{"x":1,"y":2,"z":3}`,                                        // cut
	} {
		if err := checkDescription(in, bad, DescribeOptions{}); err == nil {
			t.Errorf("a bad rendering passes: %s", bad)
		}
	}
	if err := checkDescription([]byte(`"a\u202eb"`), "\"a\u202eb\"", DescribeOptions{}); err == nil {
		t.Error("a rendering with a bidi override unescaped passes")
	}
	if err := checkDescription([]byte(`"a\u202eb"`), `"a\u202eb"`, DescribeOptions{}); err != nil {
		t.Errorf("a rendering with the bidi override escaped fails: %v", err)
	}
	if err := checkDescription(in, good, DescribeOptions{Budget: 20}); err == nil {
		t.Error("a rendering over budget passes")
	}
}
