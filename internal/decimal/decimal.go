// Package decimal compares decimal numbers by value, exactly: the JSON
// canonical form of request arguments and the Mcp-Param header checks both
// need "1", "1.0" and "1e0" to be one number, and 0.1 not to equal
// 0.10000000000000001.
//
// Every operation takes time linear in the length of its input, whatever
// the magnitude of the exponent: exponents are kept as decimal digits, not
// converted to binary, so a number such as 1e followed by a million digits
// costs one pass over its bytes.
package decimal

import (
	"strconv"
	"strings"
)

// Number is the exact value ±Digits × 10^Exp of a decimal number, in a
// normal form: two spellings of one value give equal Numbers, so Numbers
// compare with ==.
type Number struct {
	// Neg reports a negative number; it is never set for zero.
	Neg bool
	// Digits are the significant digits, without leading or trailing
	// zeros; empty for zero.
	Digits string
	// Exp is the power of ten Digits are scaled by; zero for zero.
	Exp Int
}

// IsZero reports whether n is zero.
func (n Number) IsZero() bool { return n.Digits == "" }

// Parse reads the decimal number s: an optional '-', integer digits, an
// optional fraction ('.' and at least one digit) and an optional exponent
// ('e' or 'E', an optional sign, at least one digit). With strict, s must
// be a JSON number (RFC 8259: no leading zeros in the integer part);
// otherwise leading zeros are allowed. It reports false when s is not such
// a number. The result is in normal form (see Number); its strings share
// memory with s where they can.
//
// Parse runs in time linear in len(s) and allocates only when the
// significant digits straddle the decimal point or the exponent does not
// fit in 18 decimal digits.
func Parse(s string, strict bool) (Number, bool) {
	var n Number
	i := 0
	if i < len(s) && s[i] == '-' {
		n.Neg = true
		i++
	}
	intStart := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intPart := s[intStart:i]
	if intPart == "" || (strict && len(intPart) > 1 && intPart[0] == '0') {
		return Number{}, false
	}
	frac := ""
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		frac = s[start:i]
		if frac == "" {
			return Number{}, false
		}
	}
	expNeg, expDigits := false, ""
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			expNeg = s[i] == '-'
			i++
		}
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		expDigits = s[start:i]
		if expDigits == "" {
			return Number{}, false
		}
	}
	if i != len(s) {
		return Number{}, false
	}

	// The significant digits of intPart+frac, found without concatenating.
	lead := -1 // the first nonzero digit of intPart
	for j := 0; j < len(intPart); j++ {
		if intPart[j] != '0' {
			lead = j
			break
		}
	}
	var digits string
	var trailing int // zeros dropped at the right end, counted in intPart+frac
	switch tf := strings.TrimRight(frac, "0"); {
	case lead >= 0 && tf == "":
		// Only the integer part is significant.
		ti := strings.TrimRight(intPart[lead:], "0")
		digits = ti
		trailing = len(intPart) - lead - len(ti) + len(frac)
	case lead >= 0:
		digits = intPart[lead:] + tf // straddles the point: one allocation
		trailing = len(frac) - len(tf)
	default:
		// The integer part is all zeros: only the fraction can be significant.
		digits = strings.TrimLeft(tf, "0")
		trailing = len(frac) - len(tf)
	}
	if digits == "" {
		return Number{}, true // zero, whatever the sign and exponent
	}
	n.Digits = digits
	n.Exp = newInt(expNeg, expDigits).Add(int64(trailing) - int64(len(frac)))
	return n, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// Int is an integer of any size. Values whose magnitude is below 10^18 are
// held as an int64; larger ones as their decimal digits. The zero value is
// 0. Ints compare with == exactly when their values are equal.
type Int struct {
	small int64
	// big holds the decimal form ("-" for negative, no leading zeros) when
	// |value| ≥ 10^18; small is then 0.
	big string
}

// bigDigits is the number of decimal digits from which an Int is held in
// big: 10^18 - 1 is the largest small magnitude, so adding any int64 of at
// most 18 digits cannot overflow.
const bigDigits = 19

// smallLimit is 10^18, the smallest magnitude held in big.
const smallLimit = 1_000_000_000_000_000_000

// newInt returns the Int whose magnitude has the decimal digits d (leading
// zeros allowed; empty for zero) and whose sign is neg.
func newInt(neg bool, d string) Int {
	d = strings.TrimLeft(d, "0")
	if len(d) < bigDigits {
		var v int64
		for i := 0; i < len(d); i++ {
			v = v*10 + int64(d[i]-'0')
		}
		if neg {
			v = -v
		}
		return Int{small: v}
	}
	if neg {
		return Int{big: "-" + d}
	}
	return Int{big: d}
}

// Int64 returns x as an int64, and whether it fits: Ints below 10^18 in
// magnitude always do, larger ones never.
func (x Int) Int64() (int64, bool) {
	if x.big != "" {
		return 0, false
	}
	return x.small, true
}

// Sign returns -1, 0 or +1.
func (x Int) Sign() int {
	switch {
	case x.big != "" && x.big[0] == '-', x.big == "" && x.small < 0:
		return -1
	case x.big == "" && x.small == 0:
		return 0
	}
	return 1
}

// Append appends the decimal form of x to dst.
func (x Int) Append(dst []byte) []byte {
	if x.big != "" {
		return append(dst, x.big...)
	}
	return strconv.AppendInt(dst, x.small, 10)
}

// String returns the decimal form of x.
func (x Int) String() string { return string(x.Append(nil)) }

// Add returns x+d, in time linear in the number of digits of x.
func (x Int) Add(d int64) Int {
	if d == 0 {
		return x
	}
	if x.big == "" && d > -smallLimit && d < smallLimit {
		// |x|, |d| < 10^18: the sum cannot overflow.
		return normal(x.small + d)
	}
	xneg, xd := x.digits()
	var buf [20]byte
	dd := strconv.AppendInt(buf[:0], d, 10)
	dneg := dd[0] == '-'
	if dneg {
		dd = dd[1:]
	}
	neg, sum := addDigits(xneg, xd, dneg, string(dd))
	return newInt(neg, sum)
}

// normal returns the Int of the int64 v, which may be 10^18 or more in
// magnitude.
func normal(v int64) Int {
	if v > -smallLimit && v < smallLimit {
		return Int{small: v}
	}
	s := strconv.FormatInt(v, 10)
	return Int{big: s}
}

// digits returns the sign and decimal magnitude of x.
func (x Int) digits() (neg bool, d string) {
	if x.big != "" {
		if x.big[0] == '-' {
			return true, x.big[1:]
		}
		return false, x.big
	}
	s := strconv.FormatInt(x.small, 10)
	if s[0] == '-' {
		return true, s[1:]
	}
	return false, s
}

// addDigits adds two signed decimal magnitudes without leading zeros and
// returns the sign and magnitude of the sum (leading zeros possible). It
// runs in time linear in the longer operand.
func addDigits(aneg bool, a string, bneg bool, b string) (bool, string) {
	if aneg == bneg {
		return aneg, addMag(a, b)
	}
	switch cmpMag(a, b) {
	case 0:
		return false, ""
	case 1:
		return aneg, subMag(a, b)
	}
	return bneg, subMag(b, a)
}

// cmpMag compares two decimal magnitudes without leading zeros.
func cmpMag(a, b string) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// addMag returns a+b.
func addMag(a, b string) string {
	if len(a) < len(b) {
		a, b = b, a
	}
	out := make([]byte, len(a)+1)
	carry := byte(0)
	for i := 0; i < len(a); i++ {
		s := a[len(a)-1-i] - '0' + carry
		if i < len(b) {
			s += b[len(b)-1-i] - '0'
		}
		carry = s / 10
		out[len(out)-1-i] = '0' + s%10
	}
	out[0] = '0' + carry
	return string(out)
}

// subMag returns a-b for a ≥ b.
func subMag(a, b string) string {
	out := make([]byte, len(a))
	borrow := byte(0)
	for i := 0; i < len(a); i++ {
		s := int(a[len(a)-1-i]-'0') - int(borrow)
		if i < len(b) {
			s -= int(b[len(b)-1-i] - '0')
		}
		borrow = 0
		if s < 0 {
			s += 10
			borrow = 1
		}
		out[len(out)-1-i] = '0' + byte(s)
	}
	return string(out)
}
