package sshsig

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinels for errors.Is; every typed error of the package unwraps to one
// of them.
var (
	// ErrMalformed: a signature or allowed_signers line that breaks the
	// format.
	ErrMalformed = errors.New("sshsig: malformed input")
	// ErrNamespace: the signature was made for another namespace.
	ErrNamespace = errors.New("sshsig: wrong namespace")
	// ErrBadSignature: the signature does not verify over the message.
	ErrBadSignature = errors.New("sshsig: bad signature")
	// ErrUnknownKey: no allowed_signers line grants the signing key to the
	// identity for the namespace at the time of verification.
	ErrUnknownKey = errors.New("sshsig: key not allowed")
	// ErrUnsupported: a valid feature of the format that this package does
	// not implement (certificates, a newer signature version, another hash
	// algorithm or key type).
	ErrUnsupported = errors.New("sshsig: unsupported")
	// ErrEncryptedKey: a passphrase-protected private key.
	ErrEncryptedKey = errors.New("sshsig: encrypted private key")
)

// SyntaxError reports a signature, allowed_signers line or key file that
// breaks its format.
type SyntaxError struct {
	// Source names the input in messages: the file name, or "signature".
	Source string
	// Line is the 1-based line of an allowed_signers file; 0 when the
	// problem is not tied to a line.
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("sshsig: %s line %d: %s", e.Source, e.Line, e.Msg)
	}
	return fmt.Sprintf("sshsig: %s: %s", e.Source, e.Msg)
}

// Unwrap returns ErrMalformed.
func (e *SyntaxError) Unwrap() error { return ErrMalformed }

// NamespaceError reports a signature made for another namespace than the
// one the verifier expects.
type NamespaceError struct {
	Want, Got string
}

func (e *NamespaceError) Error() string {
	return fmt.Sprintf("sshsig: the signature is for namespace %q, not %q", e.Got, e.Want)
}

// Unwrap returns ErrNamespace.
func (e *NamespaceError) Unwrap() error { return ErrNamespace }

// SignatureError reports a signature that does not verify: the message or
// the signature was changed, or the signature algorithm is refused.
type SignatureError struct {
	// Fingerprint is the SHA256 fingerprint of the key the signature
	// claims, e.g. "SHA256:…".
	Fingerprint string
	Msg         string
}

func (e *SignatureError) Error() string {
	return fmt.Sprintf("sshsig: signature by %s does not verify: %s", e.Fingerprint, e.Msg)
}

// Unwrap returns ErrBadSignature.
func (e *SignatureError) Unwrap() error { return ErrBadSignature }

// KeyError reports a valid signature whose key the allowed_signers file
// does not grant to the identity for the namespace: an unknown key, a key
// of another principal, a key restricted to other namespaces or outside its
// validity period.
type KeyError struct {
	// Fingerprint is the SHA256 fingerprint of the signing key.
	Fingerprint string
	// KeyType is the signing key's SSH type, e.g. "ssh-ed25519".
	KeyType string
	// Identity is the identity asked for; empty for any principal.
	Identity  string
	Namespace string
	// Reasons says, per line that held the key or named the identity, why
	// it did not grant the key, e.g. "line 3: not permitted for namespace
	// \"lfmq-release\"".
	Reasons []string
}

func (e *KeyError) Error() string {
	who := "any principal"
	if e.Identity != "" {
		who = fmt.Sprintf("identity %q", e.Identity)
	}
	s := fmt.Sprintf("sshsig: %s key %s is not allowed for %s in namespace %q", e.KeyType, e.Fingerprint, who, e.Namespace)
	if len(e.Reasons) > 0 {
		s += " (" + strings.Join(e.Reasons, "; ") + ")"
	}
	return s
}

// Unwrap returns ErrUnknownKey.
func (e *KeyError) Unwrap() error { return ErrUnknownKey }

// UnsupportedError reports a feature of the format this package does not
// implement.
type UnsupportedError struct {
	// Source names the input ("signature", a file name).
	Source string
	// Line is the 1-based line of an allowed_signers file, or 0.
	Line    int
	Feature string
}

func (e *UnsupportedError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("sshsig: %s line %d: %s is not supported", e.Source, e.Line, e.Feature)
	}
	return fmt.Sprintf("sshsig: %s: %s is not supported", e.Source, e.Feature)
}

// Unwrap returns ErrUnsupported.
func (e *UnsupportedError) Unwrap() error { return ErrUnsupported }

// EncryptedKeyError reports a passphrase-protected private key file. lfmq
// never asks for passphrases: load the key into ssh-agent and name its
// public key file instead, or remove the passphrase.
type EncryptedKeyError struct {
	Path string
}

func (e *EncryptedKeyError) Error() string {
	return fmt.Sprintf("sshsig: %s is passphrase-protected; add it to ssh-agent (ssh-add %s) and pass its public key file %s.pub with SSH_AUTH_SOCK set, or remove the passphrase (ssh-keygen -p -f %s)", e.Path, e.Path, e.Path, e.Path)
}

// Unwrap returns ErrEncryptedKey.
func (e *EncryptedKeyError) Unwrap() error { return ErrEncryptedKey }
