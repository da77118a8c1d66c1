//go:build !unix

package quant

// syncDir does nothing where directories cannot be opened for syncing
// (Windows, Plan 9, js); the rename itself is still atomic there.
func syncDir(string) error { return nil }
