//go:build long

package score

const longTests = true
