//go:build race

package kernels

// raceEnabled reports whether the tests run under the race detector, which
// makes sync.Pool drop a random share of the values put into it: a pooled
// scratch buffer is then sometimes allocated anew, so allocation counts
// are not the product's.
const raceEnabled = true
