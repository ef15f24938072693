package canon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	cases := []struct{ in, want string }{
		{``, `null`},
		{" \n\t", `null`},
		{`null`, `null`},
		{` true `, `true`},
		{`false`, `false`},
		{`{}`, `{}`},
		{`[]`, `[]`},
		{` [ ] `, `[]`},
		{`{ "b" : 1 , "a" : [ 1 , 2 ] }`, `{"a":[1,2],"b":1}`},
		{`{"a":{"z":null,"y":{}}}`, `{"a":{"y":{},"z":null}}`},
		{`[3,1,2]`, `[3,1,2]`}, // arrays keep their order
		{`[{"b":1,"a":2},{"d":[{"f":1,"e":2}],"c":3}]`, `[{"a":2,"b":1},{"c":3,"d":[{"e":2,"f":1}]}]`},
		// Keys sort by UTF-8 bytes, after decoding.
		{`{"é":1,"z":2,"Z":3,"":4}`, `{"":4,"Z":3,"z":2,"é":1}`},
		{`{"\u007a":2,"\u0061":1}`, `{"a":1,"z":2}`},
		{`{"b":1,"a\"":2,"a":3}`, `{"a":3,"a\"":2,"b":1}`},
		// Numbers.
		{`0`, `0`},
		{`-0`, `0`},
		{`0.000`, `0`},
		{`-0e10`, `0`},
		{`1`, `1`},
		{`-7`, `-7`},
		{`1.0`, `1`},
		{`1e0`, `1`},
		{`1E+0`, `1`},
		{`10e-1`, `1`},
		{`0.1e1`, `1`},
		{`-1.50`, `-15e-1`},
		{`1.5e2`, `150`},
		{`100`, `100`},
		{`1e20`, `100000000000000000000`},
		{`100000000000000000000`, `100000000000000000000`},
		{`1e21`, `1e21`},
		{`1000000000000000000000`, `1e21`},
		{`-1000000000000000000000`, `-1e21`},
		{`0.001`, `1e-3`},
		{`123.456`, `123456e-3`},
		{`12345678901234567890123`, `12345678901234567890123`},
		{`1e007`, `10000000`},
		{`1e-99999999999999999999999`, `1e-99999999999999999999999`},
		{`2.5e99999999999999999999999`, `25e99999999999999999999998`},
		{`1.000e-99999999999999999999999`, `1e-99999999999999999999999`},
		{`1e1000000000000000000`, `1e1000000000000000000`},
		{`10e999999999999999999`, `1e1000000000000000000`},
		{`0.1e-999999999999999999`, `1e-1000000000000000000`},
		{`1000e-1000000000000000002`, `1e-999999999999999999`},
		{`[1.0,2.50,-0.0]`, `[1,25e-1,0]`},
		// Strings.
		{`"plain"`, `"plain"`},
		{`"\u0061\u00e9\u4e16\ud83d\ude00"`, `"aé世😀"`},
		{`"\/"`, `"/"`},
		{`"tab\there\nnl\u0001"`, `"tab\u0009here\u000anl\u0001"`},
		{`"\b\f\r"`, `"\u0008\u000c\u000d"`},
		{`"q\"b\\"`, `"q\"b\\"`},
		{`"<&>\u2028"`, "\"<&>\u2028\""},
		{"\"\x7f\"", "\"\x7f\""},
		{"\"\xff\"", "\"\uFFFD\""},                         // invalid UTF-8 as encoding/json reads it
		{"\"a\xed\xa0\x80b\"", "\"a\uFFFD\uFFFD\uFFFDb\""}, // an encoded surrogate: three invalid bytes
		{`"\ud800"`, "\"\uFFFD\""},                         // lone surrogate likewise
		{`"\ud800\u0041"`, "\"\uFFFDA\""},
		{`"\udc00\ud800"`, "\"\uFFFD\uFFFD\""},
		{`"\ud83d\ude00\ude00"`, "\"😀\uFFFD\""},
	}
	for _, tc := range cases {
		got, err := Canonical([]byte(tc.in))
		if err != nil {
			t.Errorf("Canonical(%s): %v", tc.in, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("Canonical(%s) = %s, want %s", tc.in, got, tc.want)
		}
		if !json.Valid(got) {
			t.Errorf("Canonical(%s) = %s is not valid JSON", tc.in, got)
		}
		again, err := Canonical(got)
		if err != nil || string(again) != string(got) {
			t.Errorf("Canonical is not idempotent on %s: %s, %v", got, again, err)
		}
		if tc.in != "" && strings.TrimSpace(tc.in) != "" {
			if err := Check([]byte(tc.in), Limits{}); err != nil {
				t.Errorf("Check(%s) = %v", tc.in, err)
			}
		}
	}
}

func TestAppendCanonical(t *testing.T) {
	dst := []byte("prefix:")
	got, err := AppendCanonical(dst, []byte(`{"b":1,"a":2}`), Limits{})
	if err != nil || string(got) != `prefix:{"a":2,"b":1}` {
		t.Fatalf("AppendCanonical = %s, %v", got, err)
	}
	got, err = AppendCanonical(dst, []byte(`{"b":1,"b":2}`), Limits{})
	if err == nil || string(got) != "prefix:" {
		t.Fatalf("AppendCanonical of a duplicate = %s, %v; want dst unchanged and an error", got, err)
	}
	if _, err := AppendCanonical(nil, []byte(`{"id":1,"ID":2}`), Limits{FoldCase: true}); !isDup(err, true) {
		t.Fatalf("AppendCanonical with FoldCase: %v, want a folded DuplicateKeyError", err)
	}
	if got, err := AppendCanonical(nil, []byte(`{"id":1,"ID":2}`), Limits{}); err != nil || string(got) != `{"ID":2,"id":1}` {
		t.Fatalf("AppendCanonical without FoldCase = %s, %v", got, err)
	}
}

func isDup(err error, folded bool) bool {
	var d *DuplicateKeyError
	return errors.As(err, &d) && d.Folded == folded
}

func TestDigestEqual(t *testing.T) {
	groups := [][]string{
		{`{"a":1,"b":"x"}`, `{"b":"x","a":1}`, "{\n  \"b\": \"x\",\n  \"a\": 1.0\n}", `{"a":1e0,"b":"\u0078"}`, `{"\u0061":10E-1,"b":"x"}`},
		{`1`, `1.0`, `1e0`, `100e-2`, `0.01e2`},
		{`-0`, `0`, `0.0`, `0e5`},
		{`"é"`, `"\u00e9"`, `"\u00E9"`},
		{`[1,{"x":[true,null]}]`, ` [ 1.00 , { "x" : [ true , null ] } ] `},
		{``, `null`, "  "},
		{`1e99999999999999999999999`, `10e99999999999999999999998`, `0.1e100000000000000000000000`},
	}
	var digests [][32]byte
	for _, g := range groups {
		first := mustDigest(t, g[0])
		for _, in := range g[1:] {
			if d := mustDigest(t, in); d != first {
				t.Errorf("Digest(%s) != Digest(%s)", in, g[0])
			}
		}
		digests = append(digests, first)
	}
	for i := range digests {
		for j := i + 1; j < len(digests); j++ {
			if digests[i] == digests[j] {
				t.Errorf("groups %d and %d share a digest", i, j)
			}
		}
	}
}

func mustDigest(t testing.TB, s string) [32]byte {
	t.Helper()
	d, err := Digest([]byte(s))
	if err != nil {
		t.Fatalf("Digest(%s): %v", s, err)
	}
	return d
}

func TestDigestDiffer(t *testing.T) {
	pairs := [][2]string{
		{`{"a":1}`, `{"a":2}`},
		{`{"a":1}`, `{"a":"1"}`},
		{`{"a":1}`, `{"b":1}`},
		{`{"a":1}`, `{"a":1,"b":null}`},
		{`{"a":null}`, `{}`},
		{`{}`, `[]`},
		{`[]`, `null`},
		{`[1,2]`, `[2,1]`},
		{`[1,2]`, `[[1,2]]`},
		{`"a"`, `"A"`},
		{`"a"`, `"a "`},
		{`true`, `"true"`},
		{`0`, `false`},
		{`1`, `-1`},
		{`0.1`, `0.10000000000000001`},           // equal as float64, not as decimals
		{`9007199254740993`, `9007199254740992`}, // beyond float64 precision
		{`12345678901234567890`, `12345678901234567891`}, // beyond int64 too
		{`1e400`, `1e401`},
		{`1e99999999999999999999999`, `1e99999999999999999999998`},
		{`1e-99999999999999999999999`, `1e99999999999999999999999`},
		{`{"a":"b","c":"d"}`, `{"a":"b\",\"c\":\"d"}`},
		{`{"a\u0000":1}`, `{"a":1}`},
		{`["a,b"]`, `["a","b"]`},
		{`{"id":1,"ID":2}`, `{"id":2,"ID":1}`},
	}
	for _, p := range pairs {
		if mustDigest(t, p[0]) == mustDigest(t, p[1]) {
			t.Errorf("Digest(%s) == Digest(%s)", p[0], p[1])
		}
	}
}

// TestCheck compares Check with json.Valid on valid and invalid JSON of
// every shape, and checks which kind of error it reports.
func TestCheck(t *testing.T) {
	valid := []string{
		`null`, `true`, `false`, `0`, `-0`, `1.5e-3`, `-12E+7`, `""`, `"\u0000\ud800"`, "\"\xff\"",
		`[]`, `{}`, ` { "a" : [ 1 , { } , [ ] , "x" ] } `, "\t\r\n[1]\n", `{"a":{"a":{"a":1}}}`,
		`{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}`, // the same key in different objects
		`{"id":1,"ID":2}`, `{"a":1,"A":2,"á":3,"Á":4}`,
		`[` + strings.Repeat(`"x",`, 100) + `"x"]`,
	}
	for _, in := range valid {
		if !json.Valid([]byte(in)) {
			t.Fatalf("test case %q is not valid JSON", in)
		}
		if err := Check([]byte(in), Limits{}); err != nil {
			t.Errorf("Check(%q) = %v", in, err)
		}
	}
	syntax := []string{
		``, ` `, `{`, `}`, `[`, `]`, `[1,]`, `[1 2]`, `[,1]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{1:1}`, `{"a":}`, `{,}`,
		`01`, `-01`, `1.`, `.5`, `+1`, `1e`, `1e+`, `1.e5`, `--1`, `-`, `NaN`, `Infinity`, `'a'`, `0x10`,
		`"unterminated`, `"bad \x escape"`, `"\u12"`, `"\u12g4"`, `"\`, "\"ctl\x01\"", "\"nl\n\"",
		`tru`, `nul`, `nulL`, `truex`, `falsey`, `t`,
		// A syntax error wins over a repeated key or a limit before it.
		`{"a":0,"a"`, `{"a":1,"a":2} x`, `[[[[[` + strings.Repeat("[", DefaultMaxDepth) + `1`, `{"a":1,"a":2,}`,
		`1 2`, `{} {}`, `{}x`, `[]]`, `null null`, `[1]x`, "\xef\xbb\xbf{}", "\x00", `[1,2`, `{"a":1`, `{"a"`,
	}
	for _, in := range syntax {
		if json.Valid([]byte(in)) {
			t.Fatalf("test case %q is valid JSON", in)
		}
		var se *SyntaxError
		if err := Check([]byte(in), Limits{}); !errors.As(err, &se) {
			t.Errorf("Check(%q) = %v, want a *SyntaxError", in, err)
		} else if se.Offset < 0 || se.Offset > int64(len(in)) {
			t.Errorf("Check(%q): offset %d out of range", in, se.Offset)
		}
	}
}

func TestCheckDuplicateKeys(t *testing.T) {
	many := func(n int, extra string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		b.WriteString(extra)
		b.WriteString(`"end":0}`)
		return b.String()
	}
	cases := []struct {
		in     string
		key    string
		folded bool
		fold   bool // Limits.FoldCase
	}{
		{in: `{"a":1,"a":1}`, key: "a"},
		{in: `{"a":1,"\u0061":2}`, key: "a"},
		{in: `{"\u0061":1,"a":2}`, key: "a"},
		{in: `{"a\/b":1,"a/b":2}`, key: "a/b"},
		{in: `{"\ud83d\ude00":1,"😀":2}`, key: "😀"},
		{in: "{\"\xff\":1,\"\xfe\":2}", key: "\uFFFD"}, // both read as U+FFFD
		{in: "{\"\xff\":1,\"\\ufffd\":2}", key: "\uFFFD"},
		{in: `{"\ud800":1,"\udc00":2}`, key: "\uFFFD"},
		{in: `{"x":{"k":1,"k":2}}`, key: "k"},
		{in: `[{"ok":1},{"k":1,"j":2,"k":3}]`, key: "k"},
		{in: `{"id":"draft-notes.txt"` + strings.Repeat(" ", 400) + `,"id":"customers-prod"}`, key: "id"},
		{in: many(10, `"k3":1,`), key: "k3"},
		{in: many(100, `"k3":1,`), key: "k3"},
		{in: many(100000, `"k99999":1,`), key: "k99999"},
		{in: many(1000, `"\u006b7":1,`), key: "k7"},
		{in: `{"id":1,"ID":2}`, key: "ID", folded: true, fold: true},
		{in: `{"ID":1,"id":2}`, key: "id", folded: true, fold: true},
		{in: `{"ſ":1,"S":2}`, key: "S", folded: true, fold: true},               // U+017F folds to s
		{in: "{\"k\":1,\"\u212a\":2}", key: "\u212a", folded: true, fold: true}, // KELVIN SIGN
		{in: `{"id":1,"id":2}`, key: "id", fold: true},
		{in: many(100, `"K3":1,`), key: "K3", folded: true, fold: true},
		{in: many(100, `"k3":1,`), key: "k3", fold: true},
	}
	for _, tc := range cases {
		err := Check([]byte(tc.in), Limits{FoldCase: tc.fold})
		var d *DuplicateKeyError
		if !errors.As(err, &d) {
			t.Errorf("Check(%.60q) = %v, want a *DuplicateKeyError", tc.in, err)
			continue
		}
		if d.Key != tc.key || d.Folded != tc.folded {
			t.Errorf("Check(%.60q): key %q folded %v, want %q folded %v", tc.in, d.Key, d.Folded, tc.key, tc.folded)
		}
		if d.Offset <= 0 || d.Offset >= int64(len(tc.in)) || tc.in[d.Offset] != '"' {
			t.Errorf("Check(%.60q): offset %d does not point at a key", tc.in, d.Offset)
		}
		if !strings.Contains(d.Error(), "key") {
			t.Errorf("error text %q does not say key", d.Error())
		}
		if _, err := Canonical([]byte(tc.in)); !tc.folded && !isDup(err, false) {
			t.Errorf("Canonical(%.60q) = %v, want a *DuplicateKeyError", tc.in, err)
		}
	}
	// The offset is the later key's, even when the object is sorted.
	in := many(100, `"k3":1,`)
	var d *DuplicateKeyError
	if errors.As(Check([]byte(in), Limits{}), &d) && int(d.Offset) != strings.LastIndex(in, `"k3"`) {
		t.Errorf("offset %d, want %d", d.Offset, strings.LastIndex(in, `"k3"`))
	}
	// Keys are bounded in the error.
	long := strings.Repeat("é", 1000)
	errors.As(Check([]byte(`{"`+long+`":1,"`+long+`":2}`), Limits{}), &d)
	if d == nil || len(d.Key) > MaxErrorKeyBytes+len("…") || !strings.HasSuffix(d.Key, "…") || !strings.HasPrefix(long, strings.TrimSuffix(d.Key, "…")) {
		t.Errorf("long key in error: %q", d.Key)
	}
}

func TestCheckLimits(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deepObj := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	type tc struct {
		in    string
		lim   Limits
		limit string // "" for accepted
	}
	cases := []tc{
		{deep(DefaultMaxDepth), Limits{}, ""},
		{deep(DefaultMaxDepth + 1), Limits{}, "depth"},
		{deepObj(DefaultMaxDepth), Limits{}, ""},
		{deepObj(DefaultMaxDepth + 1), Limits{}, "depth"},
		{deep(3), Limits{MaxDepth: 3}, ""},
		{deep(4), Limits{MaxDepth: 3}, "depth"},
		{`[{"a":[]}]`, Limits{MaxDepth: 3}, ""},
		{`[{"a":[[]]}]`, Limits{MaxDepth: 3}, "depth"},
		{`1`, Limits{MaxDepth: 1}, ""},
		{deep(10000), Limits{MaxDepth: 1 << 20}, ""},
		{deep(10001), Limits{MaxDepth: 1 << 20}, "syntax"}, // beyond encoding/json's limit
		{`"abcd"`, Limits{MaxStringBytes: 4}, ""},
		{`"abcde"`, Limits{MaxStringBytes: 4}, "string"},
		{`{"abcde":1}`, Limits{MaxStringBytes: 4}, "string"},
		{`"\u0041"`, Limits{MaxStringBytes: 4}, "string"}, // bytes as written
		{`-1.5e3`, Limits{MaxNumberBytes: 6}, ""},
		{`-1.5e30`, Limits{MaxNumberBytes: 6}, "number"},
	}
	for _, c := range cases {
		err := Check([]byte(c.in), c.lim)
		if c.limit == "syntax" {
			if _, ok := err.(*SyntaxError); !ok {
				t.Errorf("Check(%.40q, %+v) = %v, want a SyntaxError", c.in, c.lim, err)
			}
			continue
		}
		if c.limit == "" {
			if err != nil {
				t.Errorf("Check(%.40q, %+v) = %v", c.in, c.lim, err)
			}
			continue
		}
		var le *LimitError
		if !errors.As(err, &le) || le.Limit != c.limit {
			t.Errorf("Check(%.40q, %+v) = %v, want a %s LimitError", c.in, c.lim, err, c.limit)
			continue
		}
		if c.limit == "depth" && !strings.Contains(le.Error(), "nested deeper than") {
			t.Errorf("depth error text %q", le.Error())
		}
		if _, err := AppendCanonical(nil, []byte(c.in), c.lim); !errors.As(err, &le) {
			t.Errorf("AppendCanonical(%.40q, %+v) = %v, want a LimitError", c.in, c.lim, err)
		}
	}
	if _, err := Canonical([]byte(deep(DefaultMaxDepth + 1))); err == nil {
		t.Error("Canonical accepted nesting beyond DefaultMaxDepth")
	}
}

// TestCanonicalNoCopies checks that a deep value is written once: the
// output of a value nested at every depth is the same size as its input.
func TestCanonicalDeepLarge(t *testing.T) {
	payload := `"` + strings.Repeat("x", 1<<16) + `"`
	in := strings.Repeat(`{"a":[`, 60) + payload + strings.Repeat("]}", 60)
	got, err := Canonical([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, []byte(in)) {
		t.Fatalf("canonical form of already canonical deep input differs")
	}
}

// TestCheckAllocs: Check allocates nothing on the hot path, for a body of
// small objects and for one object of many keys.
func TestCheckAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop its items")
	}
	var wide strings.Builder
	wide.WriteString("{")
	for i := range 1000 {
		fmt.Fprintf(&wide, `"key%d":%d,`, i, i)
	}
	wide.WriteString(`"end":0}`)
	for _, in := range [][]byte{toolsCall, []byte(wide.String())} {
		Check(in, Limits{}) // fill the pool
		if n := testing.AllocsPerRun(100, func() { Check(in, Limits{}) }); n != 0 {
			t.Errorf("Check(%.40s…) allocates %v times", in, n)
		}
		if n := testing.AllocsPerRun(100, func() { Check(in, Limits{FoldCase: true}) }); n != 0 {
			t.Errorf("Check(%.40s…, FoldCase) allocates %v times", in, n)
		}
	}
}
