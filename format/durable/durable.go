// Package durable makes finished writes survive a crash: the fsync of a
// directory after a rename into it. Every atomic writer of the project
// (safetensors files, lfmq-1 checkpoints, GPTQ resume state, release
// bundles) calls this one function instead of keeping its own copy.
//
// SyncDir is for writers that choose their own temporary names; File and
// WriteFile do the whole of it for a single file.
package durable

import "fmt"

// SyncDir flushes dir's entries to stable storage, so that a rename into it
// is not lost on power failure. On systems where directories cannot be
// synced it does nothing.
func SyncDir(dir string) error {
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("durable: syncing directory %s: %w", dir, err)
	}
	return nil
}
