//go:build long

package gptq

import (
	"fmt"
	"testing"
)

// TestSolveMatchesReferenceRealShapes is TestSolveMatchesReference at the
// LFM2-8B-A1B expert shapes (w1/w3: K = 2048, out = 1792; w2: K = 1792,
// out = 2048), with the kernels this platform runs, serial and on four
// goroutines.
func TestSolveMatchesReferenceRealShapes(t *testing.T) {
	for _, s := range solveShapes {
		for _, threads := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/threads=%d", s.name, threads), func(t *testing.T) {
				checkSolveMatchesReference(t, s.k, s.out, threads)
			})
		}
	}
}
