//go:build long

package bundle_test

import "github.com/lfmq/lfmq/release/bundle"

// reproPlatforms: with -tags long, every default platform, twice.
var reproPlatforms = bundle.DefaultPlatforms
