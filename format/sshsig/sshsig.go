package sshsig

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
)

// The fixed parts of the format (PROTOCOL.sshsig).
const (
	// Magic opens every signature blob and every signed message.
	Magic = "SSHSIG"
	// Version is the blob version written and the highest one read.
	Version = 1
	// HashSHA512 is the hash algorithm Sign uses (ssh-keygen's default).
	HashSHA512 = "sha512"
	// HashSHA256 is the other hash algorithm a verifier accepts.
	HashSHA256 = "sha256"

	armorBegin = "-----BEGIN SSH SIGNATURE-----\n"
	armorEnd   = "-----END SSH SIGNATURE-----"
	// armorWidth is ssh-keygen's base64 line width (sshbuf_dtob64 wraps
	// at 70 columns, not the 76 PROTOCOL.sshsig suggests).
	armorWidth = 70
)

// Bounds on untrusted input.
const (
	// MaxSignatureBytes bounds an armored signature. An RSA-16384
	// signature, the largest ssh-keygen makes, armors to about 6 KiB.
	MaxSignatureBytes = 64 << 10
	// MaxAllowedSignersBytes bounds an allowed_signers file.
	MaxAllowedSignersBytes = 1 << 20
	// MaxLineBytes bounds one allowed_signers line (an RSA-16384 public
	// key is under 3 KiB of text).
	MaxLineBytes = 32 << 10
	// MaxAllowedSigners bounds the lines of an allowed_signers file.
	MaxAllowedSigners = 1 << 14
	// MaxKeyFileBytes bounds a private or public key file.
	MaxKeyFileBytes = 64 << 10
	// MaxNamespaceBytes bounds a namespace.
	MaxNamespaceBytes = 1024
)

// Signature is a parsed SSHSIG blob.
type Signature struct {
	// PublicKey is the key that made the signature, as the blob claims.
	PublicKey ssh.PublicKey
	// Namespace is the interpretation domain, e.g. "lfmq-release".
	Namespace string
	// Reserved is carried for future use; verifiers ignore it and sign
	// over an empty value.
	Reserved []byte
	// HashAlgorithm is "sha512" or "sha256": the hash of the message that
	// was signed.
	HashAlgorithm string
	// Signature is the key's signature over SignedData.
	Signature *ssh.Signature
}

// Blob returns the binary SSHSIG blob.
func (s *Signature) Blob() []byte {
	b := []byte(Magic)
	b = binary.BigEndian.AppendUint32(b, Version)
	b = appendString(b, s.PublicKey.Marshal())
	b = appendString(b, []byte(s.Namespace))
	b = appendString(b, s.Reserved)
	b = appendString(b, []byte(s.HashAlgorithm))
	b = appendString(b, ssh.Marshal(s.Signature))
	return b
}

// Armor returns the armored signature exactly as ssh-keygen writes it: the
// BEGIN line, the blob in base64 wrapped at 70 columns, the END line, each
// ending in a newline.
func (s *Signature) Armor() []byte {
	b64 := base64.StdEncoding.EncodeToString(s.Blob())
	var out bytes.Buffer
	out.WriteString(armorBegin)
	for len(b64) > armorWidth {
		out.WriteString(b64[:armorWidth])
		out.WriteByte('\n')
		b64 = b64[armorWidth:]
	}
	out.WriteString(b64)
	out.WriteString("\n" + armorEnd + "\n")
	return out.Bytes()
}

// Parse reads an armored signature: the BEGIN line, base64 (any line
// width; spaces, tabs, CR and LF are skipped) and the END line, followed
// by nothing but white space. The blob is then read by ParseBlob.
func Parse(armored []byte) (*Signature, error) {
	bad := func(format string, args ...any) error {
		return &SyntaxError{Source: "signature", Msg: fmt.Sprintf(format, args...)}
	}
	if len(armored) > MaxSignatureBytes {
		return nil, bad("larger than %d bytes", MaxSignatureBytes)
	}
	rest, ok := bytes.CutPrefix(armored, []byte(armorBegin))
	if !ok {
		return nil, bad("does not start with %q", armorBegin[:len(armorBegin)-1])
	}
	i := bytes.Index(rest, []byte("\n"+armorEnd))
	if i < 0 {
		return nil, bad("no %q line", armorEnd)
	}
	body, tail := rest[:i], rest[i+1+len(armorEnd):]
	if len(bytes.TrimLeft(tail, " \t\r\n")) != 0 {
		return nil, bad("data after the %q line", armorEnd)
	}
	b64 := make([]byte, 0, len(body))
	for _, c := range body {
		switch c {
		case ' ', '\t', '\r', '\n':
		default:
			b64 = append(b64, c)
		}
	}
	blob, err := base64.StdEncoding.Strict().DecodeString(string(b64))
	if err != nil {
		return nil, bad("bad base64: %v", err)
	}
	return ParseBlob(blob)
}

// ParseBlob reads a binary SSHSIG blob strictly: magic, a version no higher
// than Version, a public key, a non-empty namespace, the reserved field, a
// hash algorithm and a signature, with nothing after it. A certificate key,
// a newer version or a hash algorithm other than sha512 and sha256 is an
// *UnsupportedError; anything else wrong is a *SyntaxError.
func ParseBlob(blob []byte) (*Signature, error) {
	bad := func(format string, args ...any) error {
		return &SyntaxError{Source: "signature", Msg: fmt.Sprintf(format, args...)}
	}
	if len(blob) > MaxSignatureBytes {
		return nil, bad("blob larger than %d bytes", MaxSignatureBytes)
	}
	r := reader{b: blob}
	if magic := r.bytes(len(Magic)); string(magic) != Magic {
		return nil, bad("does not start with %q", Magic)
	}
	version, ok := r.uint32()
	if !ok {
		return nil, bad("truncated before the version")
	}
	if version > Version {
		return nil, &UnsupportedError{Source: "signature", Feature: fmt.Sprintf("SSHSIG version %d (this reader knows version %d)", version, Version)}
	}
	fields := [5][]byte{}
	for i, name := range []string{"public key", "namespace", "reserved field", "hash algorithm", "signature"} {
		f, ok := r.string()
		if !ok {
			return nil, bad("truncated in the %s", name)
		}
		fields[i] = f
	}
	if len(r.b) != 0 {
		return nil, bad("%d bytes after the signature", len(r.b))
	}
	key, err := ssh.ParsePublicKey(fields[0])
	if err != nil {
		return nil, bad("public key: %v", err)
	}
	if _, ok := key.(*ssh.Certificate); ok {
		return nil, &UnsupportedError{Source: "signature", Feature: "a signature made with a certificate (" + key.Type() + ")"}
	}
	s := &Signature{PublicKey: key, Namespace: string(fields[1]), Reserved: fields[2], HashAlgorithm: string(fields[3])}
	if s.Namespace == "" {
		return nil, bad("empty namespace")
	}
	if len(s.Namespace) > MaxNamespaceBytes {
		return nil, bad("namespace longer than %d bytes", MaxNamespaceBytes)
	}
	if s.HashAlgorithm != HashSHA512 && s.HashAlgorithm != HashSHA256 {
		return nil, &UnsupportedError{Source: "signature", Feature: fmt.Sprintf("hash algorithm %q", s.HashAlgorithm)}
	}
	sr := reader{b: fields[4]}
	format, ok1 := sr.string()
	sigBlob, ok2 := sr.string()
	if !ok1 || !ok2 || len(format) == 0 {
		return nil, bad("the signature field is not an SSH signature (string format, string blob)")
	}
	s.Signature = &ssh.Signature{Format: string(format), Blob: sigBlob}
	if len(sr.b) != 0 {
		// Only security-key signatures carry more (flags and counter,
		// which the key's Verify reads); anything else after the blob is
		// refused, as OpenSSH does.
		if !strings.HasPrefix(key.Type(), "sk-") {
			return nil, bad("%d bytes after the %s signature", len(sr.b), format)
		}
		s.Signature.Rest = sr.b
	}
	return s, nil
}

// SignedData returns the bytes the key signs (PROTOCOL.sshsig §3): the
// magic, then as SSH strings the namespace, an empty reserved field, the
// hash algorithm and the message's hash.
func SignedData(namespace, hashAlgorithm string, message []byte) ([]byte, error) {
	var h []byte
	switch hashAlgorithm {
	case HashSHA512:
		s := sha512.Sum512(message)
		h = s[:]
	case HashSHA256:
		s := sha256.Sum256(message)
		h = s[:]
	default:
		return nil, &UnsupportedError{Source: "signature", Feature: fmt.Sprintf("hash algorithm %q", hashAlgorithm)}
	}
	b := []byte(Magic)
	b = appendString(b, []byte(namespace))
	b = appendString(b, nil)
	b = appendString(b, []byte(hashAlgorithm))
	b = appendString(b, h)
	return b, nil
}

// appendString appends an SSH string: a big-endian uint32 length, then the
// bytes (RFC 4251 §5).
func appendString(b, s []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// reader reads SSH wire types from a bounded buffer; every read checks the
// remaining length first, so no input can make it panic or allocate.
type reader struct{ b []byte }

func (r *reader) bytes(n int) []byte {
	if n > len(r.b) {
		r.b = nil
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) uint32() (uint32, bool) {
	if len(r.b) < 4 {
		return 0, false
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v, true
}

func (r *reader) string() ([]byte, bool) {
	n, ok := r.uint32()
	if !ok || uint64(n) > uint64(len(r.b)) {
		return nil, false
	}
	return r.bytes(int(n)), true
}
