package seal

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler/internal/costguard"
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
		{`{ "b" : 1 , "a" : [ 1 , 2 ] }`, `{"a":[1,2],"b":1}`},
		{`{"a":{"z":null,"y":{}}}`, `{"a":{"y":{},"z":null}}`},
		{`[3,1,2]`, `[3,1,2]`}, // arrays keep their order
		// Keys sort by UTF-8 bytes.
		{`{"é":1,"z":2,"Z":3,"":4}`, `{"":4,"Z":3,"z":2,"é":1}`},
		// Numbers.
		{`0`, `0`},
		{`-0`, `0`},
		{`0.000`, `0`},
		{`-0e10`, `0`},
		{`1`, `1`},
		{`1.0`, `1`},
		{`1e0`, `1`},
		{`1E+0`, `1`},
		{`10e-1`, `1`},
		{`0.1e1`, `1`},
		{`-1.50`, `-15e-1`},
		{`1.5e2`, `150`},
		{`100`, `100`},
		{`1e20`, `100000000000000000000`},
		{`1e21`, `1e21`},
		{`0.001`, `1e-3`},
		{`123.456`, `123456e-3`},
		{`12345678901234567890123`, `12345678901234567890123`},
		{`1e007`, `10000000`},
		{`1e-99999999999999999999999`, `1e-99999999999999999999999`},
		{`2.5e99999999999999999999999`, `25e99999999999999999999998`},
		// Strings.
		{`"plain"`, `"plain"`},
		{`"\u0061\u00e9\u4e16\ud83d\ude00"`, `"aé世😀"`},
		{`"\/"`, `"/"`},
		{`"tab\there\nnl\u0001"`, `"tab\u0009here\u000anl\u0001"`},
		{`"q\"b\\"`, `"q\"b\\"`},
		{`"<&>\u2028"`, "\"<&>\u2028\""},
		{"\"\xff\"", "\"\uFFFD\""}, // invalid UTF-8 as encoding/json reads it
		{`"\ud800"`, "\"\uFFFD\""}, // lone surrogate likewise
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
	}
}

func TestDigestEqual(t *testing.T) {
	groups := [][]string{
		{`{"a":1,"b":"x"}`, `{"b":"x","a":1}`, "{\n  \"b\": \"x\",\n  \"a\": 1.0\n}", `{"a":1e0,"b":"\u0078"}`, `{"\u0061":10E-1,"b":"x"}`},
		{`1`, `1.0`, `1e0`, `100e-2`, `0.01e2`},
		{`-0`, `0`, `0.0`, `0e5`},
		{`"é"`, `"\u00e9"`, `"\u00E9"`},
		{`[1,{"x":[true,null]}]`, ` [ 1.00 , { "x" : [ true , null ] } ] `},
		{``, `null`, "  "},
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
		{`{"a":"b","c":"d"}`, `{"a":"b\",\"c\":\"d"}`},
		{`{"a\u0000":1}`, `{"a":1}`},
		{`["a,b"]`, `["a","b"]`},
	}
	for _, p := range pairs {
		if mustDigest(t, p[0]) == mustDigest(t, p[1]) {
			t.Errorf("Digest(%s) == Digest(%s)", p[0], p[1])
		}
	}
}

func TestDigestInvalid(t *testing.T) {
	cases := []string{
		`{`, `}`, `[1,]`, `[1 2]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{1:1}`,
		`01`, `1.`, `.5`, `+1`, `1e`, `--1`, `NaN`, `Infinity`, `'a'`,
		`"unterminated`, `"bad \x escape"`, "\"ctl\x01\"", `tru`, `nul`,
		`1 2`, `{} {}`, `{}x`, `[]]`, `null null`,
		`{"a":1,"a":1}`, `{"a":1,"\u0061":2}`, `{"x":{"k":1,"k":2}}`,
		strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
	}
	for _, in := range cases {
		if d, err := Digest([]byte(in)); !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("Digest(%.40q) = %x, %v; want ErrInvalidJSON", in, d[:4], err)
		}
	}
	deep := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	if _, err := Digest([]byte(deep)); err != nil {
		t.Errorf("depth %d rejected: %v", MaxDepth, err)
	}
}

func FuzzDigest(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[1.0,"x",null,true]}`, `1e-7`, `"\u00e9"`, `[]`, `{"a":1,"a":2}`, `[1,]`, `-0.0e+00`} {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"a":1e` + strings.Repeat("9", 16<<10) + `}`)) // a long exponent: linear time
	f.Fuzz(func(t *testing.T, in []byte) {
		blank := len(strings.Trim(string(in), " \t\r\n")) == 0
		var c []byte
		var err error
		costguard.Check(t, len(in), func() { c, err = Canonical(in) })
		if err != nil {
			if !errors.Is(err, ErrInvalidJSON) {
				t.Fatalf("error %v does not wrap ErrInvalidJSON", err)
			}
			if json.Valid(in) && !strings.Contains(err.Error(), "duplicate key") && !strings.Contains(err.Error(), "nested deeper") {
				t.Fatalf("rejected valid JSON %q: %v", in, err)
			}
			return
		}
		if !blank && !json.Valid(in) {
			t.Fatalf("accepted invalid JSON %q", in)
		}
		if !json.Valid(c) {
			t.Fatalf("Canonical(%q) = %q, invalid JSON", in, c)
		}
		again, err := Canonical(c)
		if err != nil || string(again) != string(c) {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, c, again, err)
		}
		// encoding/json reads the same value from both.
		var v1, v2 any
		if !blank && json.Unmarshal(in, &v1) == nil {
			if err := json.Unmarshal(c, &v2); err != nil || !reflect.DeepEqual(v1, v2) {
				t.Fatalf("value changed: %q -> %q (%v vs %v, %v)", in, c, v1, v2, err)
			}
		}
	})
}

func BenchmarkDigest(b *testing.B) {
	args := []byte(`{"project":"alpha","force":true,"limit":50,"filters":{"labels":["bug","p1"],"since":"2026-07-01"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Digest(args); err != nil {
			b.Fatal(err)
		}
	}
}
