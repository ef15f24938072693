package canon

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler/internal/costguard"
	"github.com/mcphandler/mcphandler/internal/decimal"
)

// seeds are shared by the fuzz targets of this package; the committed
// corpora under testdata/fuzz add what fuzzing found.
var seeds = []string{
	`{"a":1,"b":[1.0,"x",null,true]}`, `1e-7`, `"\u00e9"`, `[]`, `{}`, `{"a":1,"a":2}`, `[1,]`, `-0.0e+00`,
	`{"id":"x","ID":"y"}`, `{"\u0061":1,"a":2}`, "{\"\xff\":1,\"\xfe\":2}", `"\ud800\udc00\ud800"`,
	`{"b":{"y":1,"x":[{"q":1,"p":2}]},"a":"z"}`, `1e99999999999999999999999`, `12345678901234567890.5e-3`,
	"\"a\u202eb\u200bc\"", `[[[[[[[[]]]]]]]]`, " \t\n\r ", `{"a" : [ 1 , 2 ] }`, `01`, `1.`, `"\x"`, "\"\x01\"",
	string(toolsCall), string(args),
}

// attack returns inputs of the attacker's families, of about n bytes.
func attack(n int) [][]byte {
	var out [][]byte
	for _, f := range families {
		out = append(out, f.gen(n))
	}
	return out
}

// refCheck is an independent oracle for Check: encoding/json's tokenizer
// for syntax, and maps of the decoded keys for duplicates.
func refCheck(in []byte, lim Limits) (kind string) {
	if !json.Valid(in) {
		return "syntax"
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	type frame struct {
		obj       bool
		keys      []string
		expectKey bool
	}
	var stack []*frame
	maxDepth := lim.depth()
	result := ""
	valueDone := func() {
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].expectKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return result
		}
		if err != nil {
			return "syntax"
		}
		if tok == json.Delim('}') || tok == json.Delim(']') {
			stack = stack[:len(stack)-1]
			valueDone()
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].expectKey {
			top, k := stack[n-1], tok.(string)
			for _, o := range top.keys {
				if (o == k || lim.FoldCase && bytes.EqualFold([]byte(o), []byte(k))) && result == "" {
					result = "dup"
				}
			}
			top.keys = append(top.keys, k)
			top.expectKey = false
			continue
		}
		if tok == json.Delim('{') || tok == json.Delim('[') {
			if len(stack)+1 > maxDepth && result == "" {
				result = "depth"
			}
			stack = append(stack, &frame{obj: tok == json.Delim('{'), expectKey: true})
			continue
		}
		valueDone()
	}
}

func errKind(err error) string {
	var (
		se *SyntaxError
		de *DuplicateKeyError
		le *LimitError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &se):
		return "syntax"
	case errors.As(err, &de):
		return "dup"
	case errors.As(err, &le):
		return le.Limit
	}
	return fmt.Sprintf("untyped %T", err)
}

// FuzzCheck: Check accepts exactly json.Valid input without repeated keys
// and within the depth, says which rule failed, and costs linear time.
func FuzzCheck(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s), false, uint8(0))
	}
	for _, in := range attack(16 << 10) {
		f.Add(in, false, uint8(0))
	}
	f.Add([]byte(`{"a":{"b":[[1]]}}`), true, uint8(3))
	f.Fuzz(func(t *testing.T, in []byte, fold bool, depth uint8) {
		lim := Limits{FoldCase: fold, MaxDepth: int(depth)}
		var err error
		costguard.Check(t, len(in), func() { err = Check(in, lim) })
		got, want := errKind(err), refCheck(in, lim)
		// A repeated key can come before or after a depth violation; the
		// two readers may see either first.
		if got != want && !(got == "dup" && want == "depth" || got == "depth" && want == "dup") {
			t.Fatalf("Check(%.200q, %+v) = %v (%s), want %q", in, lim, err, got, want)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "canon: ") {
			t.Fatalf("error text %q", err)
		}
		checkMembers(t, in, lim, err)
	})
}

// checkMembers: CheckMembers answers as Check does (cerr) and, for an
// object, locates exactly its members, in order.
func checkMembers(t *testing.T, in []byte, lim Limits, cerr error) {
	var dst [3][4]int32
	n, err := CheckMembers(in, lim, dst[:])
	if errKind(err) != errKind(cerr) {
		t.Fatalf("CheckMembers(%.200q) = %v, Check %v", in, err, cerr)
	}
	if err != nil {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	tok, _ := dec.Token()
	if tok != json.Delim('{') {
		if n != 0 {
			t.Fatalf("CheckMembers(%.200q) found %d members of a non-object", in, n)
		}
		return
	}
	var i int
	for ; dec.More(); i++ {
		k, _ := dec.Token()
		var v json.RawMessage
		dec.Decode(&v)
		if i >= len(dst) {
			continue
		}
		m := dst[i]
		var key string
		if json.Unmarshal(in[m[0]:m[1]], &key) != nil || key != k.(string) {
			t.Fatalf("CheckMembers(%.200q): member %d key %q, want %q", in, i, in[m[0]:m[1]], k)
		}
		if got := in[m[2]:m[3]]; !bytes.Equal(got, v) {
			t.Fatalf("CheckMembers(%.200q): member %d value %q, want %q", in, i, got, v)
		}
	}
	if n != i {
		t.Fatalf("CheckMembers(%.200q) = %d members, want %d", in, n, i)
	}
}

// FuzzCanonical: Canonical is idempotent, valid JSON, the same value as
// encoding/json reads, accepted exactly when Check accepts, equal to the
// former implementation wherever that one was defined, and linear.
func FuzzCanonical(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	for _, in := range attack(16 << 10) {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var c []byte
		var err error
		costguard.Check(t, len(in), func() { c, err = Canonical(in) })
		blank := len(bytes.Trim(in, " \t\r\n")) == 0
		if cerr := Check(in, Limits{}); !blank && errKind(cerr) != errKind(err) {
			t.Fatalf("Check says %v, Canonical %v", cerr, err)
		}
		if len(in) <= 4096 {
			old, oerr := oldCanonical(in)
			if err == nil && (oerr != nil || !bytes.Equal(old, c)) {
				t.Fatalf("Canonical(%q) = %q, the former one %q, %v", in, c, old, oerr)
			}
			if oerr == nil && err != nil && errKind(err) != "depth" {
				t.Fatalf("Canonical(%q): %v, the former one accepted it", in, err)
			}
		}
		if err != nil {
			return
		}
		if !json.Valid(c) {
			t.Fatalf("Canonical(%q) = %q, invalid JSON", in, c)
		}
		again, err := Canonical(c)
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, c, again, err)
		}
		if d, err := Digest(in); err != nil || d != sha256.Sum256(c) {
			t.Fatalf("Digest differs from the hash of Canonical: %v", err)
		}
		if blank {
			return
		}
		v1, v2 := decodeExact(t, in), decodeExact(t, c)
		if !sameValue(v1, v2) {
			t.Fatalf("value changed: %q -> %q", in, c)
		}
	})
}

// decodeExact decodes with encoding/json, numbers as json.Number.
func decodeExact(t *testing.T, b []byte) any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// sameValue compares decoded values, numbers as exact decimals.
func sameValue(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			if w, ok := b[k]; !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameValue(a[i], b[i]) {
				return false
			}
		}
		return true
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		x, ok1 := decimal.Parse(string(a), true)
		y, ok2 := decimal.Parse(string(b), true)
		return ok1 && ok2 && x == y
	}
	return a == b
}

// FuzzDescribe: Describe never panics, stays within its budget or says it
// cannot, shows every top-level member and marks everything it elides, and
// is linear.
func FuzzDescribe(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s), uint16(0), uint8(0), uint8(0))
	}
	for _, in := range attack(16 << 10) {
		f.Add(in, uint16(0), uint8(0), uint8(0))
	}
	f.Add([]byte(`{"a":[1,2,3,4,5],"b":"abcdefghijklmnop","c":{"x":1,"y":2,"z":3}}`), uint16(40), uint8(5), uint8(3))
	f.Fuzz(func(t *testing.T, in []byte, budget uint16, strRunes, items uint8) {
		opt := DescribeOptions{Budget: int(budget), StringRunes: int(strRunes), Items: int(items)}
		var got string
		var err error
		costguard.Check(t, len(in), func() { got, err = Describe(in, opt) })
		if _, cerr := Canonical(in); cerr != nil {
			if err == nil || errKind(err) != errKind(cerr) {
				t.Fatalf("Describe(%q) = %q, %v; Canonical: %v", in, got, err, cerr)
			}
			return
		}
		if errors.Is(err, ErrTooLong) {
			// Only the keys of a top-level object may force it: fully
			// elided, any value renders in at most maxElided runes.
			const maxElided = 32
			b := opt.Budget
			if b <= 0 {
				b = DefaultBudget
			}
			c, _ := Canonical(in)
			bound := maxElided
			if c[0] == '{' {
				var m map[string]json.RawMessage
				json.Unmarshal(c, &m)
				bound = 2
				for k := range m {
					bound += 2 + 1 + maxElided + 1 // quotes, ':', the value, ','
					for _, r := range k {
						bound += charWidth(r)
					}
				}
			}
			if bound <= b {
				t.Fatalf("Describe(%q) with budget %d: %v, but it fits in %d", in, b, err, bound)
			}
			return
		}
		if err != nil {
			t.Fatalf("Describe(%q): %v", in, err)
		}
		if err := checkDescription(in, got, opt); err != nil {
			t.Fatal(err)
		}
	})
}

// TestAttackCost runs every attacker's family at 1 MiB through Check,
// Canonical and Describe under the cost guard: each must stay within
// costguard.PerMB (200 ms per MiB; the former Canonical took 2.8 s on a
// 1 MiB exponent).
func TestAttackCost(t *testing.T) {
	for _, f := range families {
		in := f.gen(1 << 20)
		t.Run(f.name, func(t *testing.T) {
			costguard.Check(t, len(in), func() {
				if err := Check(in, Limits{}); err != nil {
					t.Fatal(err)
				}
			})
			costguard.Check(t, len(in), func() {
				if _, err := Canonical(in); err != nil {
					t.Fatal(err)
				}
			})
			costguard.Check(t, len(in), func() {
				if _, err := Describe(in, DescribeOptions{}); err != nil && !errors.Is(err, ErrTooLong) {
					t.Fatal(err)
				}
			})
		})
	}
}
