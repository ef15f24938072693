package decimal

// The implementation of Parse before it was made linear, on math/big: kept
// as the reference of FuzzParse on short inputs (math/big is exact) and to
// measure the new one against it side by side.

import (
	"math/big"
	"strings"
)

func oldParse(s string, strict bool) (neg bool, digits string, exp *big.Int, ok bool) {
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
