package publish

import (
	"fmt"
	"strings"
)

// StaleError reports that the branch moved between the start of the
// publish (Parent, the head it read) and its commit (Head, the head the
// hub reported afterwards, "" if unknown). The hub refused the commit
// (HTTP 412); nothing was committed. LFS objects already uploaded stay
// on the hub and are not sent again by the next run.
type StaleError struct {
	Branch, Parent, Head string
	Err                  error
}

func (e *StaleError) Error() string {
	from := e.Parent
	if from == "" {
		from = "no commit"
	}
	to := e.Head
	if to == "" {
		to = "a newer commit"
	}
	return fmt.Sprintf("publish: the branch %s moved from %s to %s since the publish started; nothing was changed; run publish again", e.Branch, from, to)
}

func (e *StaleError) Unwrap() error { return e.Err }

// TagError reports a release tag that already names another commit. A
// published tag is never moved: choose a new revision, or delete the tag
// on the hub deliberately.
type TagError struct {
	Tag string
	// Target is the commit the tag names on the hub; Commit the commit the
	// publish wanted to tag ("" when the tag was found before committing,
	// its files differing from the release).
	Target, Commit string
}

func (e *TagError) Error() string {
	if e.Commit == "" {
		return fmt.Sprintf("publish: tag %s already names commit %s, whose files differ from this release; a published tag is never moved; publish under another revision", e.Tag, e.Target)
	}
	return fmt.Sprintf("publish: tag %s already names commit %s, not %s; a published tag is never moved", e.Tag, e.Target, e.Commit)
}

// IgnoredError reports release files that the hub's .gitignore rules
// would leave out of the commit (preupload's shouldIgnore). Nothing is
// uploaded: a release published without them would not verify.
type IgnoredError struct {
	Paths []string
}

func (e *IgnoredError) Error() string {
	return fmt.Sprintf("publish: the repository's .gitignore ignores %d release file(s) (%s); the published release would be incomplete; remove the rule from the repository's .gitignore", len(e.Paths), listPaths(e.Paths))
}

// RoutingError reports release files the hub wants in LFS (too large or
// binary) that the release's .gitattributes does not route there. The hub
// would append rules for them to .gitattributes, so the published
// .gitattributes would differ from the release's and the release would
// not verify. Nothing is uploaded.
type RoutingError struct {
	Paths []string
}

func (e *RoutingError) Error() string {
	return fmt.Sprintf("publish: the hub stores %d file(s) in LFS that the release's .gitattributes does not route there (%s); the hub would rewrite .gitattributes and the published release would not verify; route them in .gitattributes and rebuild the release", len(e.Paths), listPaths(e.Paths))
}

// ReleaseError reports a release directory that cannot be published as
// it is: a list missing or unreadable, a listed file missing, not a
// regular file, or with another size or content than the lists say.
type ReleaseError struct {
	Path, Msg string
}

func (e *ReleaseError) Error() string {
	return fmt.Sprintf("publish: release file %s: %s", e.Path, e.Msg)
}

// UploadError wraps the failure of one LFS object's upload; Path is the
// first release path holding the object.
type UploadError struct {
	Path, OID string
	Err       error
}

func (e *UploadError) Error() string {
	return fmt.Sprintf("publish: uploading %s (sha256 %s): %v", e.Path, e.OID, e.Err)
}

func (e *UploadError) Unwrap() error { return e.Err }

// listPaths shows at most five paths.
func listPaths(ps []string) string {
	if len(ps) <= 5 {
		return strings.Join(ps, ", ")
	}
	return strings.Join(ps[:5], ", ") + fmt.Sprintf(", and %d more", len(ps)-5)
}
