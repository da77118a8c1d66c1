// Package bundletest builds small releases for tests: the tiny fixture
// model quantized with RTN, a minimal module source, and stand-in runtime
// binaries, so a test gets a complete, verifiable release in about a second
// without compiling lfmq. Release contents other than the binaries are
// built by the real builder (package bundle).
package bundletest
