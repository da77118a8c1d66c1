package verify

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/lfmq/lfmq/format/sshsig"
)

// The release signature (docs/release.md, "Signatures").
const (
	// SignatureFile is the detached signature of SHA256SUMS at the top of a
	// release: the one file of a release that SHA256SUMS cannot list.
	SignatureFile = "SHA256SUMS.sig"
	// SignatureNamespace is the SSHSIG namespace of release signatures
	// (ssh-keygen -n).
	SignatureNamespace = "lfmq-release"
)

// Signature describes the verified signature of a release.
type Signature struct {
	// Fingerprint is the SHA256 fingerprint of the signing key.
	Fingerprint string `json:"fingerprint"`
	// KeyType is its SSH type, e.g. "ssh-ed25519".
	KeyType string `json:"key_type"`
	// Identity is the identity asked for, or "" for any principal.
	Identity string `json:"identity,omitempty"`
	// Principals are the principals fields of the allowed_signers lines
	// that grant the key.
	Principals []string `json:"principals"`
}

// checkSignature verifies SignatureFile over the exact bytes of SHA256SUMS
// (sumsData) against opts.AllowedSigners. A finding, or nil with
// rep.Signature set.
func checkSignature(root *os.Root, present map[string]entryInfo, sumsData []byte, opts Options, rep *Report) *MismatchError {
	e, ok := present[SignatureFile]
	switch {
	case !ok:
		_, f := signatureFinding(nil, sumsData, opts)
		return f
	case !e.regular:
		return newSignatureFinding(opts, "not a regular file; not read")
	case e.size > sshsig.MaxSignatureBytes:
		return newSignatureFinding(opts, "larger than %d bytes", sshsig.MaxSignatureBytes)
	}
	f, err := root.Open(SignatureFile)
	if err != nil {
		return newSignatureFinding(opts, "%v", err)
	}
	defer f.Close()
	sig, err := io.ReadAll(io.LimitReader(f, sshsig.MaxSignatureBytes+1))
	if err != nil {
		return newSignatureFinding(opts, "%v", err)
	}
	if sig == nil {
		sig = []byte{} // an empty file is present, and malformed
	}
	s, finding := signatureFinding(sig, sumsData, opts)
	if finding != nil {
		return finding
	}
	rep.Signature = s
	return nil
}

// CheckSignature is the signature check of Release for callers that hold
// the two files in memory: sig is the content of SignatureFile, nil when
// the release has none, and sumsData the exact bytes of SHA256SUMS. It
// returns the verified signature, or a *MismatchError of KindSignature
// (errors.Is ErrSignature; ErrUnsigned too when sig is nil). Package
// download checks a release this way before it fetches the files
// SHA256SUMS lists. opts.AllowedSigners must be set.
func CheckSignature(sig, sumsData []byte, opts Options) (*Signature, error) {
	s, f := signatureFinding(sig, sumsData, opts)
	if f != nil {
		return nil, f
	}
	return s, nil
}

// signatureFinding verifies sig (nil: absent) over sumsData.
func signatureFinding(sig, sumsData []byte, opts Options) (*Signature, *MismatchError) {
	switch {
	case opts.AllowedSigners == nil:
		return nil, newSignatureFinding(opts, "no allowed signers to check it against")
	case sig == nil:
		f := newSignatureFinding(opts, "absent: the release is not signed, and allowed signers were given")
		f.unsigned = true
		return nil, f
	case len(sig) > sshsig.MaxSignatureBytes:
		return nil, newSignatureFinding(opts, "larger than %d bytes", sshsig.MaxSignatureBytes)
	}
	res, err := sshsig.Verify(sig, sumsData, opts.AllowedSigners, sshsig.VerifyOptions{Namespace: SignatureNamespace, Identity: opts.Identity})
	if err != nil {
		return nil, newSignatureFinding(opts, "%s", strings.TrimPrefix(err.Error(), "sshsig: "))
	}
	return &Signature{Fingerprint: res.Fingerprint, KeyType: res.Key.Type(), Identity: opts.Identity, Principals: res.Principals}, nil
}

// newSignatureFinding is a KindSignature finding whose authority is the
// allowed signers file.
func newSignatureFinding(opts Options, format string, args ...any) *MismatchError {
	var source string
	if opts.AllowedSigners != nil {
		source = opts.AllowedSigners.Source
	}
	return &MismatchError{Path: SignatureFile, Kind: KindSignature, WantSize: Unknown, GotSize: Unknown, Authority: source, Detail: fmt.Sprintf(format, args...)}
}
