package safetensors

import (
	"os"
	"sync"
	"unsafe"
)

// openMappings are the mapped Files not yet closed, so that Write can tell
// a tensor whose bytes alias a mapping (Bytes of an open File, written
// again unchanged, as quantize does with the tensors it keeps) and give its
// pages back as it copies them: otherwise writing a checkpoint's embedding
// (268 MB at LFM2-8B-A1B's, twice that at a 128K vocabulary) from the
// mapping leaves all of it in the process's resident set.
var openMappings struct {
	mu    sync.Mutex
	files map[*File]struct{}
}

func registerMapping(f *File) {
	openMappings.mu.Lock()
	defer openMappings.mu.Unlock()
	if openMappings.files == nil {
		openMappings.files = map[*File]struct{}{}
	}
	openMappings.files[f] = struct{}{}
}

// unregisterMapping is called by Close before the mapping goes, so that
// every buf in openMappings is mapped.
func unregisterMapping(f *File) {
	openMappings.mu.Lock()
	defer openMappings.mu.Unlock()
	delete(openMappings.files, f)
}

// inMapping reports whether b lies wholly inside the mapping of an open File.
func inMapping(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	openMappings.mu.Lock()
	defer openMappings.mu.Unlock()
	for f := range openMappings.files {
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(f.buf)))
		if p >= lo && p+uintptr(len(b)) <= lo+uintptr(len(f.buf)) {
			return true
		}
	}
	return false
}

// dropInterior drops the pages that lie wholly inside b, a part of an
// open File's mapping (inMapping), from the process's resident memory. The
// pages at its ends, which it may share with bytes around it, stay.
// Dropping is an optimisation: a failure leaves the pages resident, and
// the bytes are the file's either way, so it is not reported.
func dropInterior(b []byte) {
	if len(b) == 0 {
		return
	}
	page := uintptr(os.Getpagesize())
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (p+page-1)&^(page-1) - p
	hi := (p+uintptr(len(b)))&^(page-1) - p
	if hi > lo {
		_ = dropPages(b[lo:hi])
	}
}
