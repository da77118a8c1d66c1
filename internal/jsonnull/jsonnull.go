// Package jsonnull turns "not known" values into JSON null: reports write
// an unknown size or digest as null rather than as -1 or "".
package jsonnull

// Size returns nil for a negative (unknown) size, else a pointer to n.
func Size(n int64) *int64 {
	if n < 0 {
		return nil
	}
	return &n
}

// String returns nil for an empty (unknown) string, else a pointer to s.
func String(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
