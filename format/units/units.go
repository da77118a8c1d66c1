// Package units formats quantities for people: byte counts in decimal
// units, as commands print them and the model card shows them.
//
// One formatter keeps the CLI and the card in agreement; it parses nothing.
package units

import "fmt"

// Bytes formats n with decimal prefixes and two decimals ("6.72 MB"); below
// 1000 it prints the exact count ("512 B").
func Bytes(n int64) string {
	const unit = 1000
	if n < 0 {
		return "-" + Bytes(-n)
	}
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
