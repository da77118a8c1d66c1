//go:build !long

package bundle_test

import "github.com/lfmq/lfmq/release/bundle"

// reproPlatforms keeps the default test run to one real build per release.
var reproPlatforms = []bundle.Platform{{GOOS: "linux", GOARCH: "amd64"}}
