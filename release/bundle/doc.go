// Package bundle builds an lfmq release directory
// (docs/release.md, "Building a release" and "Layout"): the lfmq-1
// checkpoint, runtime binaries built reproducibly from a deterministic
// source archive, the licence and notices, the evidence files, the model
// card, runtime-release.json and SHA256SUMS.
//
// Building twice from the same inputs gives the same bytes in every file,
// whatever the output directory, the machine's core count or GOMAXPROCS. The
// build writes into a temporary sibling of the output and renames it into
// place only when complete and verified. The package assembles and builds;
// it does not quantize, score or serve.
package bundle
