package verify

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/lfmq/lfmq/internal/jsonnull"
	"github.com/lfmq/lfmq/verify/sums"
)

// Kind names what a finding is about.
type Kind string

// The kinds of finding (docs/release.md, "Findings").
const (
	// KindMissing: a listed file is absent (or is not a regular file).
	KindMissing Kind = "missing"
	// KindExtra: a regular file that no list names.
	KindExtra Kind = "extra"
	// KindSize: a listed file has another size (it is not hashed).
	KindSize Kind = "size"
	// KindHash: a listed file's sha256 differs.
	KindHash Kind = "hash"
	// KindUnsafe: a symlink, device or other non-regular entry, or a path
	// that would leave the directory.
	KindUnsafe Kind = "unsafe"
	// KindMalformed: a list that cannot be parsed.
	KindMalformed Kind = "malformed"
	// KindDisagree: two lists (SHA256SUMS, runtime-release.json, the
	// checkpoint manifest) say different things about a file.
	KindDisagree Kind = "disagree"
	// KindPin: a pin of runtime-release.json does not hold.
	KindPin Kind = "pin"
	// KindTensor: a checkpoint tensor or file fails the manifest's check
	// (--deep).
	KindTensor Kind = "tensor"
	// KindSignature: SHA256SUMS.sig is absent, unreadable or malformed, or
	// does not verify over SHA256SUMS by a key the allowed signers grant
	// (checked only when Options.AllowedSigners is set).
	KindSignature Kind = "signature"
)

// Sentinels joined into a report's error (through each finding's Unwrap), so
// callers can ask errors.Is(err, verify.ErrMissing). ErrMalformed and
// ErrUnsafePath are the same values as in package sums.
var (
	ErrMissing   = errors.New("verify: missing file")
	ErrExtra     = errors.New("verify: unlisted file")
	ErrMismatch  = errors.New("verify: mismatch")
	ErrSignature = errors.New("verify: bad release signature")
	// ErrUnsigned marks the signature finding of a release that has no
	// SHA256SUMS.sig at all (errors.Is(ErrUnsigned, ErrSignature) holds).
	ErrUnsigned   = fmt.Errorf("%w: the release is not signed", ErrSignature)
	ErrUnsafePath = sums.ErrUnsafePath
	ErrMalformed  = sums.ErrMalformed
)

// Unknown marks a size that no list gives (WantSize) or that was not
// measured (GotSize).
const Unknown int64 = -1

// MismatchError is one finding. WantSHA256/WantSize are what Authority (the
// list that made the claim) says; GotSHA256/GotSize are what is on disk,
// never another list's claim (when two lists disagree, the other list's
// claim is in Detail). Digests are empty and sizes Unknown where they do
// not apply.
type MismatchError struct {
	Path       string
	Kind       Kind
	WantSHA256 string
	GotSHA256  string
	WantSize   int64
	GotSize    int64
	// Authority is the list that made the claim: "SHA256SUMS",
	// "runtime-release.json", "checkpoint/manifest.json", the list file
	// given to Sums, or the allowed_signers file for a signature finding.
	Authority string
	// Detail is a human explanation (the parser's message for a
	// malformed list).
	Detail string
	// SameBytesAs, on an extra file, names the missing files whose
	// expected sha256 it has (a rename, or a copy in the wrong place); on
	// a missing file, the extra files that hold its bytes.
	SameBytesAs []string

	// unsigned marks the signature finding of a release without
	// SignatureFile (Unwrap gives ErrUnsigned).
	unsigned bool

	// refetch names files to download again to clear the finding besides
	// those its kind implies (Report.Refetch gathers them): the lists
	// that disagree, and the file when they disagree about its bytes.
	refetch []string
}

func (e *MismatchError) Error() string {
	s := fmt.Sprintf("verify: %s: %s", e.Path, e.Kind)
	switch e.Kind {
	case KindSize:
		s += fmt.Sprintf(" mismatch: %s says %d bytes, found %d", e.Authority, e.WantSize, e.GotSize)
	case KindHash:
		s += fmt.Sprintf(" mismatch: %s says sha256 %s, found %s", e.Authority, e.WantSHA256, e.GotSHA256)
	case KindMissing:
		if e.Authority != "" {
			s += fmt.Sprintf(" (listed in %s)", e.Authority)
		}
	case KindDisagree, KindPin:
		if e.WantSHA256 != "" {
			s += fmt.Sprintf(": %s says sha256 %s", e.Authority, e.WantSHA256)
			if e.GotSHA256 != "" {
				s += ", found " + e.GotSHA256
			}
		}
	case KindExtra:
		if e.GotSHA256 != "" {
			s += fmt.Sprintf(": sha256 %s, %d bytes", e.GotSHA256, e.GotSize)
		}
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap returns the sentinel of the finding's kind.
func (e *MismatchError) Unwrap() error {
	switch e.Kind {
	case KindMissing:
		return ErrMissing
	case KindExtra:
		return ErrExtra
	case KindUnsafe:
		return ErrUnsafePath
	case KindMalformed:
		return ErrMalformed
	case KindSignature:
		if e.unsigned {
			return ErrUnsigned
		}
		return ErrSignature
	}
	return ErrMismatch
}

// MarshalJSON writes the report form of
// docs/release.md, "Verifying a release": kind, path, expected/actual
// digest and size (null when unknown), authority, detail, and
// same_bytes_as when an extra file holds a missing file's bytes.
func (e *MismatchError) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Kind           Kind     `json:"kind"`
		Path           string   `json:"path"`
		ExpectedSHA256 *string  `json:"expected_sha256"`
		ActualSHA256   *string  `json:"actual_sha256"`
		ExpectedSize   *int64   `json:"expected_size"`
		ActualSize     *int64   `json:"actual_size"`
		Authority      string   `json:"authority"`
		Detail         string   `json:"detail,omitempty"`
		SameBytesAs    []string `json:"same_bytes_as,omitempty"`
	}{e.Kind, e.Path, jsonnull.String(e.WantSHA256), jsonnull.String(e.GotSHA256), jsonnull.Size(e.WantSize), jsonnull.Size(e.GotSize), e.Authority, e.Detail, e.SameBytesAs})
}
