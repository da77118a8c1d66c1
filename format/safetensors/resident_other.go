//go:build !linux

package safetensors

import "os"

// loadResident is Linux's only (transparent huge pages): elsewhere a
// resident open maps the file as Open does.
func loadResident(*os.File, int) (buf, region []byte, err error) { return nil, nil, nil }

func unmapRegion([]byte) error { return nil }
