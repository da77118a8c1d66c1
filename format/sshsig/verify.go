package sshsig

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"golang.org/x/crypto/ssh"
)

// VerifyOptions says what a signature must be.
type VerifyOptions struct {
	// Namespace is the namespace the signature must be made for
	// (ssh-keygen -n); required.
	Namespace string
	// Identity is the principal the key must be granted to (ssh-keygen
	// -I). Empty accepts a key granted to any principal and reports which.
	Identity string
	// Time is the moment checked against valid-after/valid-before; zero
	// means now.
	Time time.Time
}

// Result describes a verified signature.
type Result struct {
	// Key is the signing key.
	Key ssh.PublicKey
	// Fingerprint is its SHA256 fingerprint, e.g. "SHA256:…".
	Fingerprint string
	// HashAlgorithm is the message hash the signature was made over.
	HashAlgorithm string
	// Principals are the principals fields of the lines that grant the key
	// (with an Identity, only lines whose patterns match it), in file
	// order, without repeats.
	Principals []string
	// Lines are those lines' numbers.
	Lines []int
}

// Verify checks the armored signature over the exact bytes of message
// against allowed, as 'ssh-keygen -Y verify -f allowed_signers -I IDENTITY
// -n NAMESPACE -s SIG < message' does: the signature must parse, be made
// for opts.Namespace, verify over the message with the key it names (RSA
// only as rsa-sha2-512 or rsa-sha2-256), and some allowed_signers line
// must hold that key, match opts.Identity (any principal when empty), allow
// the namespace and be valid at opts.Time.
//
// Errors: *SyntaxError (malformed signature), *UnsupportedError,
// *NamespaceError, *SignatureError (bad signature), *KeyError (key not
// granted).
func Verify(armored, message []byte, allowed *AllowedSigners, opts VerifyOptions) (*Result, error) {
	if opts.Namespace == "" {
		return nil, fmt.Errorf("sshsig: no namespace to verify against")
	}
	if allowed == nil {
		return nil, fmt.Errorf("sshsig: no allowed signers")
	}
	sig, err := Parse(armored)
	if err != nil {
		return nil, err
	}
	if sig.Namespace != opts.Namespace {
		return nil, &NamespaceError{Want: opts.Namespace, Got: sig.Namespace}
	}
	if err := checkSignature(sig, message); err != nil {
		return nil, err
	}
	res := &Result{Key: sig.PublicKey, Fingerprint: ssh.FingerprintSHA256(sig.PublicKey), HashAlgorithm: sig.HashAlgorithm}
	at := opts.Time
	if at.IsZero() {
		at = time.Now()
	}
	want := sig.PublicKey.Marshal()
	var reasons []string
	for _, e := range allowed.Entries {
		nameOK := opts.Identity == "" || matchList(opts.Identity, e.Principals)
		keyOK := bytes.Equal(e.Key.Marshal(), want)
		if !nameOK || !(keyOK || e.CertAuthority) {
			continue
		}
		reason := ""
		switch {
		case e.CertAuthority:
			reason = "cert-authority (certificates are not supported)"
		case e.HasNamespaces && !matchList(opts.Namespace, e.Namespaces):
			reason = fmt.Sprintf("not permitted for namespace %q", opts.Namespace)
		case !e.ValidAfter.IsZero() && at.Unix() < e.ValidAfter.Unix():
			reason = "not valid until " + e.ValidAfter.UTC().Format(time.RFC3339)
		case !e.ValidBefore.IsZero() && at.Unix() > e.ValidBefore.Unix():
			reason = "expired " + e.ValidBefore.UTC().Format(time.RFC3339)
		}
		if reason != "" {
			reasons = append(reasons, fmt.Sprintf("line %d: %s", e.Line, reason))
			continue
		}
		res.Lines = append(res.Lines, e.Line)
		if !slices.Contains(res.Principals, e.Principals) {
			res.Principals = append(res.Principals, e.Principals)
		}
	}
	if len(res.Lines) == 0 {
		return nil, &KeyError{Fingerprint: res.Fingerprint, KeyType: sig.PublicKey.Type(), Identity: opts.Identity, Namespace: opts.Namespace, Reasons: reasons}
	}
	return res, nil
}

// checkSignature verifies sig's cryptographic signature over message.
func checkSignature(sig *Signature, message []byte) error {
	fp := ssh.FingerprintSHA256(sig.PublicKey)
	if sig.PublicKey.Type() == ssh.KeyAlgoRSA {
		// OpenSSH refuses SHA-1 RSA signatures in SSHSIG (and x/crypto's
		// RSA Verify would accept them).
		switch sig.Signature.Format {
		case ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256:
		default:
			return &SignatureError{Fingerprint: fp, Msg: fmt.Sprintf("RSA signature algorithm %q; only rsa-sha2-512 and rsa-sha2-256 are accepted", sig.Signature.Format)}
		}
		if bits := rsaBits(sig.PublicKey); bits < 1024 {
			return &UnsupportedError{Source: "signature", Feature: fmt.Sprintf("an RSA key of %d bits (OpenSSH's minimum is 1024)", bits)}
		}
	}
	data, err := SignedData(sig.Namespace, sig.HashAlgorithm, message)
	if err != nil {
		return err
	}
	if err := sig.PublicKey.Verify(data, sig.Signature); err != nil {
		return &SignatureError{Fingerprint: fp, Msg: err.Error()}
	}
	return nil
}
