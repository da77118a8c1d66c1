// Package sshsig signs and verifies detached signatures in OpenSSH's SSHSIG
// format (openssh PROTOCOL.sshsig), the format of 'ssh-keygen -Y sign' and
// 'ssh-keygen -Y verify'.
//
// Both halves live here because they share the framing: package verify
// checks a release's SHA256SUMS.sig with Verify, and lfmq release sign
// writes it with Sign. It knows nothing of releases (the namespace and the
// signed file are the callers').
//
// Sign hashes a message with sha512 and signs it with an ed25519, ECDSA or
// RSA key (RSA always as rsa-sha2-512), returning the armored signature
// byte for byte as ssh-keygen writes it. LoadSigner reads an unencrypted
// OpenSSH private key file, or, given a public key file, finds the matching
// key in the ssh-agent at SSH_AUTH_SOCK.
//
// Verify checks an armored signature over a message against an
// allowed_signers file (ssh-keygen(1), ALLOWED SIGNERS): the namespace must
// be the expected one, the signature must be valid, and the signing key
// must be granted to the identity on some line whose namespaces and
// valid-after/valid-before options allow it. With no identity, any line
// holding the key will do and the result names the principals that matched
// (ssh-keygen -Y find-principals followed by -Y verify).
//
// Every input is untrusted: signatures, allowed_signers files and key files
// are bounded (MaxSignatureBytes, MaxAllowedSignersBytes, MaxLineBytes,
// MaxKeyFileBytes) and parsed strictly, and every failure is a typed error
// (*SyntaxError, *NamespaceError, *SignatureError, *KeyError,
// *UnsupportedError, *EncryptedKeyError) with a sentinel for errors.Is.
//
// Certificates (cert-authority lines, certificate keys) are not supported:
// such lines never grant a plain key, and a signature made with a
// certificate is refused. The package does not generate keys or decrypt
// passphrase-protected ones; the key primitives come from
// golang.org/x/crypto/ssh, the SSHSIG framing is written here.
package sshsig
