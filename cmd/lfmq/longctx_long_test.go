//go:build long

package main

import "testing"

// TestServe131072 serves one 131,072-token request (2,048 pages) on the
// tiny model raised to 131,073 positions, from a 1,048,576-token pool;
// see testLongRequest for what it checks (all but the in-process forward,
// which would double its cost). On the 2-core CI machine the prefill
// takes minutes (docs/kv-cache.md gives the measured figure), hence the
// build tag: make test-long runs it.
func TestServe131072(t *testing.T) {
	testLongRequest(t, 131072, 1<<20, false)
}
