package main

import (
	"errors"

	"github.com/lfmq/lfmq/evidence/refcache"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/launch"
	"github.com/lfmq/lfmq/verify"
)

// Exit codes (docs/cli.md has the rule and its examples).
const (
	exitOK       = 0
	exitFailure  = 1
	exitUsage    = 2
	exitMismatch = 3
)

// usageError marks a bad command line: exit code 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// exitCode maps an error to the process exit code in one place.
func exitCode(err error) int {
	var ue *usageError
	var mm *lfmq1.MismatchError
	var me *lfmq1.ManifestError
	var vm *verify.MismatchError
	var rm *refcache.MismatchError
	var oe *lfmq1.OutputExistsError
	var ce *launch.CacheError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue), errors.As(err, &oe), errors.As(err, &ce):
		// An output or cache directory that is not empty (or another
		// release's) is the command line's fault: the same command with
		// another directory works.
		return exitUsage
	case errors.As(err, &mm), errors.As(err, &vm), errors.As(err, &rm), errors.As(err, &me):
		// A checkpoint whose manifest.json is unreadable fails
		// verification like one whose files differ from it.
		return exitMismatch
	}
	return exitFailure
}
