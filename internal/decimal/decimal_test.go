package decimal

import "testing"

func TestParse(t *testing.T) {
	same := func(a, b string, strict bool) bool {
		an, ad, ae, ok1 := Parse(a, strict)
		bn, bd, be, ok2 := Parse(b, strict)
		return ok1 && ok2 && ad == bd && (ad == "" || an == bn && ae.Cmp(be) == 0)
	}
	for _, tc := range []struct {
		a, b   string
		strict bool
		want   bool
	}{
		{"1", "1.0", true, true},
		{"1", "1e0", true, true},
		{"42", "4.2e1", true, true},
		{"-0", "0.0", true, true},
		{"0.1", "0.10000000000000001", true, false},
		{"100", "1e2", true, true},
		{"1", "-1", true, false},
		{"007", "7", false, true},
		{"007", "7", true, false}, // not a JSON number
		{"1.", "1", true, false},
		{"1e", "1", true, false},
		{"abc", "abc", false, false},
	} {
		if got := same(tc.a, tc.b, tc.strict); got != tc.want {
			t.Errorf("%q vs %q (strict %v): %v, want %v", tc.a, tc.b, tc.strict, got, tc.want)
		}
	}
}
