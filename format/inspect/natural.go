package inspect

import "strings"

// naturalLess orders names as people count: runs of digits compare as
// numbers, so layers.2 comes before layers.10 and experts.9 before
// experts.10. Names equal under that rule ("01" and "1") fall back to plain
// byte order, so the order is total and the output stable.
func naturalLess(a, b string) bool {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if isDigit(ca) && isDigit(cb) {
			ei, ej := digitsEnd(a, i), digitsEnd(b, j)
			// Leading zeros do not change a number; after them, the
			// longer run is the larger number and equal lengths compare
			// digit by digit, so no run is ever too long to compare.
			na := strings.TrimLeft(a[i:ei], "0")
			nb := strings.TrimLeft(b[j:ej], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			i, j = ei, ej
			continue
		}
		if ca != cb {
			return ca < cb
		}
		i++
		j++
	}
	if len(a)-i != len(b)-j {
		return len(a)-i < len(b)-j
	}
	return a < b
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func digitsEnd(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}
