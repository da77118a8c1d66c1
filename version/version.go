// Package version holds the lfmq version and the digest of the source it was
// built from. Release builds set both with -ldflags "-X"; a development build
// reports "dev" and an empty digest.
//
// It is a package of its own so that every command, the manifest writer and
// the release builder read one value instead of each keeping a copy.
package version

// Version is the lfmq version string. Release builds override it with
// -ldflags "-X github.com/lfmq/lfmq/version.Version=v…".
var Version = "0.1.0-dev"

// SourceDigest is the sha256 of the source archive the binary was built from
// (docs/release.md, "Reproducibility"). Empty for builds outside a release.
var SourceDigest = ""
