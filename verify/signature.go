package verify

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/lfmq/lfmq/verify/sshsig"
)

// The release signature (release.md §3).
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
	finding := func(format string, args ...any) *MismatchError {
		return &MismatchError{Path: SignatureFile, Kind: KindSignature, WantSize: Unknown, GotSize: Unknown, Authority: opts.AllowedSigners.Source, Detail: fmt.Sprintf(format, args...)}
	}
	e, ok := present[SignatureFile]
	switch {
	case !ok:
		return finding("absent: the release is not signed, and allowed signers were given")
	case !e.regular:
		return finding("not a regular file; not read")
	case e.size > sshsig.MaxSignatureBytes:
		return finding("larger than %d bytes", sshsig.MaxSignatureBytes)
	}
	f, err := root.Open(SignatureFile)
	if err != nil {
		return finding("%v", err)
	}
	defer f.Close()
	sig, err := io.ReadAll(io.LimitReader(f, sshsig.MaxSignatureBytes+1))
	if err != nil {
		return finding("%v", err)
	}
	res, err := sshsig.Verify(sig, sumsData, opts.AllowedSigners, sshsig.VerifyOptions{Namespace: SignatureNamespace, Identity: opts.Identity})
	if err != nil {
		return finding("%s", strings.TrimPrefix(err.Error(), "sshsig: "))
	}
	rep.Signature = &Signature{Fingerprint: res.Fingerprint, KeyType: res.Key.Type(), Identity: opts.Identity, Principals: res.Principals}
	return nil
}
