// Package decimal compares decimal numbers by value, exactly: the JSON
// canonical form of request arguments and the Mcp-Param header checks both
// need "1", "1.0" and "1e0" to be one number, and 0.1 not to equal
// 0.10000000000000001.
package decimal

import (
	"math/big"
	"strings"
)

// Parse splits the decimal number s into its sign, its significant digits
// (no leading or trailing zeros; empty for zero) and the power of ten they
// are scaled by, so that two spellings of one number compare equal exactly,
// without rounding. With strict, s must be a JSON number (no leading zeros
// in the integer part); otherwise leading zeros are allowed. It reports
// false when s is not such a number.
func Parse(s string, strict bool) (neg bool, digits string, exp *big.Int, ok bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	intPart := s[start:i]
	if intPart == "" || (strict && len(intPart) > 1 && intPart[0] == '0') {
		return false, "", nil, false
	}
	frac := ""
	if i < len(s) && s[i] == '.' {
		i++
		start = i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		frac = s[start:i]
		if frac == "" {
			return false, "", nil, false
		}
	}
	exp = new(big.Int)
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		start = i
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if _, good := exp.SetString(strings.TrimPrefix(s[start:i], "+"), 10); !good {
			return false, "", nil, false
		}
	}
	if i != len(s) {
		return false, "", nil, false
	}
	all := strings.TrimLeft(intPart+frac, "0")
	digits = strings.TrimRight(all, "0")
	exp.Add(exp, big.NewInt(int64(len(all)-len(digits)-len(frac))))
	return neg, digits, exp, true
}
