package decimal

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/mcphandler/mcphandler/internal/costguard"
)

func same(a, b string, strict bool) bool {
	x, ok1 := Parse(a, strict)
	y, ok2 := Parse(b, strict)
	return ok1 && ok2 && x == y
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		a, b   string
		strict bool
		want   bool
	}{
		{"1", "1.0", true, true},
		{"1", "1e0", true, true},
		{"42", "4.2e1", true, true},
		{"-0", "0.0", true, true},
		{"-0", "0e99999999999999999999999999", true, true},
		{"0.1", "0.10000000000000001", true, false},
		{"100", "1e2", true, true},
		{"1", "-1", true, false},
		{"007", "7", false, true},
		{"007", "7", true, false}, // not a JSON number
		{"1.", "1", true, false},
		{"1e", "1", true, false},
		{"abc", "abc", false, false},
		{"1e999999999999999999999", "10e999999999999999999998", true, true},
		{"1e999999999999999999999", "1e999999999999999999998", true, false},
		{"1e-999999999999999999999", "0.1e-999999999999999999998", true, true},
		{"1e1000000000000000000", "10e999999999999999999", true, true}, // crossing 10^18 in the exponent
		{"1e-1000000000000000000", "0.1e-999999999999999999", true, true},
		{"123.456e1000000000000000003", "123456e1000000000000000000", true, true},
		{"5e-17", "0.00000000000000005", true, true},
		{"1e+5", "100000", true, true},
		{"1E5", "1e5", true, true},
		{"1e05", "1e5", true, true},
		{"1e0000000000000000000000005", "1e5", true, true},
	} {
		if got := same(tc.a, tc.b, tc.strict); got != tc.want {
			t.Errorf("%q vs %q (strict %v): %v, want %v", tc.a, tc.b, tc.strict, got, tc.want)
		}
	}
}

func TestParseForm(t *testing.T) {
	for _, tc := range []struct {
		in     string
		neg    bool
		digits string
		exp    string
	}{
		{"0", false, "", "0"},
		{"-0.000e7", false, "", "0"},
		{"1", false, "1", "0"},
		{"-1.50", true, "15", "-1"},
		{"1200", false, "12", "2"},
		{"1200.00", false, "12", "2"},
		{"0.0012", false, "12", "-4"},
		{"100.001", false, "100001", "-3"},
		{"1e17", false, "1", "17"},
		{"1e999999999999999999", false, "1", "999999999999999999"},
		{"10e999999999999999999", false, "1", "1000000000000000000"},
		{"1e-1000000000000000000", false, "1", "-1000000000000000000"},
		{"0.1e-999999999999999999", false, "1", "-1000000000000000000"},
		{"1000e-1000000000000000002", false, "1", "-999999999999999999"},
		{"12345678901234567890", false, "1234567890123456789", "1"},
		{"1e" + strings.Repeat("9", 40), false, "1", strings.Repeat("9", 40)},
		{"10e" + strings.Repeat("9", 40), false, "1", "1" + strings.Repeat("0", 40)},
		{"0.1e-" + strings.Repeat("9", 40), false, "1", "-1" + strings.Repeat("0", 40)},
	} {
		n, ok := Parse(tc.in, true)
		if !ok || n.Neg != tc.neg || n.Digits != tc.digits || n.Exp.String() != tc.exp {
			t.Errorf("Parse(%q) = %v %q %s %v, want %v %q %s", tc.in, n.Neg, n.Digits, n.Exp, ok, tc.neg, tc.digits, tc.exp)
		}
	}
}

func TestIntAdd(t *testing.T) {
	vals := []string{"0", "1", "-1", "999999999999999999", "-999999999999999999", "1000000000000000000",
		"-1000000000000000000", "9223372036854775807", "-9223372036854775808", "123456789012345678901234567890",
		"-123456789012345678901234567890", "100000000000000000000000000000"}
	adds := []int64{0, 1, -1, 2, -2, 999999999999999999, -999999999999999999, 1 << 62, -(1 << 62), 9223372036854775807, -9223372036854775808}
	for _, v := range vals {
		neg := strings.HasPrefix(v, "-")
		x := newInt(neg, strings.TrimPrefix(v, "-"))
		if x.String() != v {
			t.Fatalf("newInt(%s) = %s", v, x)
		}
		for _, d := range adds {
			want, _ := new(big.Int).SetString(v, 10)
			want.Add(want, big.NewInt(d))
			got := x.Add(d)
			if got.String() != want.String() {
				t.Errorf("%s + %d = %s, want %s", v, d, got, want)
			}
			if (got.big == "") != (new(big.Int).Abs(want).Cmp(big.NewInt(smallLimit)) < 0) {
				t.Errorf("%s + %d: not in normal form (%+v)", v, d, got)
			}
			if got.Sign() != want.Sign() {
				t.Errorf("%s + %d: sign %d, want %d", v, d, got.Sign(), want.Sign())
			}
			if i, ok := got.Int64(); ok != want.IsInt64() && ok || ok && i != want.Int64() {
				t.Errorf("%s + %d: Int64 = %d, %v", v, d, i, ok)
			}
		}
	}
}

// FuzzParse compares Parse with the former math/big implementation on
// short inputs, and guards its cost on all.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "-0", "1", "1.0", "1e0", "-1.50", "0.001", "1e21", "007", "1.", ".5", "1e", "1e+", "--1",
		"1e999999999999999999", "10e999999999999999999", "0.1e-999999999999999999", "12345678901234567890.0e-5", "1E-0"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Add("1e"+strings.Repeat("7", 16<<10), true)
	f.Add("1"+strings.Repeat("0", 16<<10)+"e-"+strings.Repeat("3", 16<<10), true)
	f.Fuzz(func(t *testing.T, s string, strict bool) {
		var n Number
		var ok bool
		costguard.Check(t, len(s), func() { n, ok = Parse(s, strict) })
		if len(s) > 200 {
			return // math/big is quadratic: compare on short inputs
		}
		rneg, rdigits, rexp, rok := oldParse(s, strict) // exact, with math/big
		if ok != rok {
			t.Fatalf("Parse(%q, %v) ok = %v, math/big says %v", s, strict, ok, rok)
		}
		if !ok {
			return
		}
		if n.Digits != rdigits || rdigits != "" && (n.Neg != rneg || n.Exp.String() != rexp.String()) {
			t.Fatalf("Parse(%q) = %v %q e%s, math/big says %v %q e%s", s, n.Neg, n.Digits, n.Exp, rneg, rdigits, rexp)
		}
		if rdigits == "" && (n.Neg || n.Exp != (Int{})) {
			t.Fatalf("Parse(%q) = %+v, want the zero Number", s, n)
		}
		// The exponent's normal form: small below 10^18, else digits.
		if ab := new(big.Int).Abs(rexp); rdigits != "" && (n.Exp.big == "") != (ab.Cmp(big.NewInt(smallLimit)) < 0) {
			t.Fatalf("Parse(%q): exponent %+v not in normal form", s, n.Exp)
		}
		// Equality is value equality: compare with another spelling.
		if n.Digits != "" {
			alt := fmt.Sprintf("%s0.%s0e%s", map[bool]string{true: "-"}[n.Neg], n.Digits, n.Exp.Add(int64(len(n.Digits))))
			m, ok := Parse(alt, true)
			if !ok || m != n {
				t.Fatalf("Parse(%q) = %+v, but %q gives %+v", s, n, alt, m)
			}
		}
	})
}

// FuzzEqual compares equality of two parsed numbers with math/big's exact
// rationals, on inputs short enough for big.Rat.
func FuzzEqual(f *testing.F) {
	for _, p := range [][2]string{{"1", "1.0"}, {"0.1", "0.10000000000000001"}, {"-0", "0e7"}, {"1e2", "100"}, {"007", "7"},
		{"12.5e-1", "1.25"}, {"9007199254740993", "9007199254740992"}, {"1e-3", "0.001"}, {"-1", "1"}} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		x, ok1 := Parse(a, false)
		y, ok2 := Parse(b, false)
		if !ok1 || !ok2 || len(a) > 40 || len(b) > 40 || tooBig(a) || tooBig(b) {
			return
		}
		ra, oka := new(big.Rat).SetString(a)
		rb, okb := new(big.Rat).SetString(b)
		if !oka || !okb {
			t.Fatalf("math/big cannot read %q or %q, which Parse reads", a, b)
		}
		if got, want := x == y, ra.Cmp(rb) == 0; got != want {
			t.Fatalf("Parse(%q) == Parse(%q) is %v, math/big says %v", a, b, got, want)
		}
	})
}

// tooBig reports a number whose exponent makes big.Rat slow.
func tooBig(s string) bool {
	i := strings.IndexAny(s, "eE")
	return i >= 0 && len(strings.TrimLeft(strings.TrimLeft(s[i+1:], "+-"), "0")) > 3
}

// TestParseCost: a number with an exponent of a million digits costs
// linear time (the former Parse, on math/big, took seconds).
func TestParseCost(t *testing.T) {
	for _, s := range []string{
		"1e" + strings.Repeat("7", 1<<20),
		"-1e-" + strings.Repeat("9", 1<<20),
		"1." + strings.Repeat("3", 1<<20) + "e" + strings.Repeat("1", 1<<19),
		"0." + strings.Repeat("0", 1<<20) + "1e" + strings.Repeat("9", 1<<10),
	} {
		costguard.Check(t, len(s), func() {
			if _, ok := Parse(s, true); !ok {
				t.Fatal("not a number")
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	for _, n := range []int{1 << 10, 16 << 10, 256 << 10} {
		in := "1e" + strings.Repeat("7", n)
		b.Run("huge_exponent/"+strconv.Itoa(n)+"/new", func(b *testing.B) {
			for b.Loop() {
				Parse(in, true)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(in)), "ns/B")
		})
		b.Run("huge_exponent/"+strconv.Itoa(n)+"/old", func(b *testing.B) {
			for b.Loop() {
				oldParse(in, true)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(in)), "ns/B")
		})
	}
	for _, s := range []string{"42", "-1.50", "6.02214076e23"} {
		b.Run(s+"/new", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Parse(s, true)
			}
		})
		b.Run(s+"/old", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				oldParse(s, true)
			}
		})
	}
}
