// Package sums reads and writes the two hash lists of an lfmq release
// (docs/release.md, "runtime-release.json" and "SHA256SUMS"):
// SHA256SUMS, in GNU sha256sum text format, and runtime-release.json,
// the canonical JSON record of the release's files, runtime binaries and pins.
//
// Both readers take untrusted bytes: they are bounded, strict and never
// panic; every violation is an error naming the line or the field. The
// package checks the lists' syntax and the safety of every path in them; it
// does not open the files they list (package verify does).
package sums
