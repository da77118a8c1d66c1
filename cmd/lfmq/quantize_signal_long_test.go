//go:build long

package main

import "testing"

// TestQuantizeSIGTERM8B is TestQuantizeSIGTERM on a synthetic checkpoint of
// LFM2-8B-A1B's widths (hidden 2048, experts 1792): each expert's solve
// takes seconds there, so a stop that waited for the solve to end would
// miss the 2 seconds.
func TestQuantizeSIGTERM8B(t *testing.T) {
	testQuantizeSIGTERM(t, signalShape(2048, 1792))
}
