//go:build !unix

package durable

// Windows and other non-unix systems have no directory fsync.
func syncDir(string) error { return nil }
