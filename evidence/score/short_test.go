//go:build !long

package score

const longTests = false
