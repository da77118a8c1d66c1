package sshsig

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"net"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/lfmq/lfmq/internal/bounded"
)

// MinRSABits is the smallest RSA modulus Sign accepts. OpenSSH still
// verifies 1024-bit keys; a release signature should not be made with one.
const MinRSABits = 2048

// Sign signs the exact bytes of message for namespace with signer and
// returns the armored signature, byte-identical in layout to what
// 'ssh-keygen -Y sign -n NAMESPACE' writes: the message is hashed with
// sha512, and an RSA key signs with rsa-sha2-512 (signer must then be an
// ssh.AlgorithmSigner, as the signers of ssh.ParsePrivateKey and of the
// agent package are). Ed25519 signatures are deterministic, so the output
// then equals ssh-keygen's byte for byte. The new signature is verified
// before it is returned.
func Sign(signer ssh.Signer, message []byte, namespace string) ([]byte, error) {
	if namespace == "" || len(namespace) > MaxNamespaceBytes {
		return nil, fmt.Errorf("sshsig: the namespace must be 1 to %d bytes, got %d", MaxNamespaceBytes, len(namespace))
	}
	pub := signer.PublicKey()
	if _, ok := pub.(*ssh.Certificate); ok {
		return nil, &UnsupportedError{Source: "key", Feature: "signing with a certificate (" + pub.Type() + ")"}
	}
	data, err := SignedData(namespace, HashSHA512, message)
	if err != nil {
		return nil, err
	}
	var sig *ssh.Signature
	if pub.Type() == ssh.KeyAlgoRSA {
		if bits := rsaBits(pub); bits < MinRSABits {
			return nil, fmt.Errorf("sshsig: RSA key %s has %d bits; signing needs at least %d", ssh.FingerprintSHA256(pub), bits, MinRSABits)
		}
		as, ok := signer.(ssh.AlgorithmSigner)
		if !ok {
			return nil, fmt.Errorf("sshsig: this RSA signer cannot choose rsa-sha2-512 (it is not an ssh.AlgorithmSigner)")
		}
		sig, err = as.SignWithAlgorithm(rand.Reader, data, ssh.KeyAlgoRSASHA512)
	} else {
		sig, err = signer.Sign(rand.Reader, data)
	}
	if err != nil {
		return nil, fmt.Errorf("sshsig: signing with %s: %w", ssh.FingerprintSHA256(pub), err)
	}
	s := &Signature{PublicKey: pub, Namespace: namespace, HashAlgorithm: HashSHA512, Signature: sig}
	if err := checkSignature(s, message); err != nil {
		return nil, fmt.Errorf("sshsig: the new signature does not verify: %w", err)
	}
	return s.Armor(), nil
}

func rsaBits(pub ssh.PublicKey) int {
	if cp, ok := pub.(ssh.CryptoPublicKey); ok {
		if k, ok := cp.CryptoPublicKey().(*rsa.PublicKey); ok {
			return k.N.BitLen()
		}
	}
	return 0
}

// LoadSigner returns the signer named by the key file at path: an
// unencrypted private key (OpenSSH "BEGIN OPENSSH PRIVATE KEY" format, or
// PEM PKCS#1/PKCS#8/EC), or a public key in authorized_keys format whose
// private half the ssh-agent at agentSocket holds (as 'ssh-keygen -Y sign
// -f key.pub' does). A passphrase-protected private key is an
// *EncryptedKeyError. The returned closer releases the agent connection;
// call it when done signing (it is a no-op for a key file).
func LoadSigner(path, agentSocket string) (ssh.Signer, io.Closer, error) {
	data, err := readBounded(path, MaxKeyFileBytes)
	if err != nil {
		return nil, nil, err
	}
	if bytes.Contains(data, []byte("PRIVATE KEY-----")) {
		s, err := ssh.ParsePrivateKey(data)
		var pm *ssh.PassphraseMissingError
		if errors.As(err, &pm) {
			return nil, nil, &EncryptedKeyError{Path: path}
		}
		if err != nil {
			return nil, nil, &SyntaxError{Source: path, Msg: "not a private key ssh can read: " + err.Error()}
		}
		return s, nopCloser{}, nil
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(data)
	if err != nil {
		return nil, nil, &SyntaxError{Source: path, Msg: "neither a private key nor a public key: " + err.Error()}
	}
	if agentSocket == "" {
		return nil, nil, fmt.Errorf("sshsig: %s is a public key; signing with it needs the private key in ssh-agent, and SSH_AUTH_SOCK is not set", path)
	}
	conn, err := net.Dial("unix", agentSocket)
	if err != nil {
		return nil, nil, fmt.Errorf("sshsig: connecting to ssh-agent at SSH_AUTH_SOCK: %w", err)
	}
	s, err := AgentSigner(agent.NewClient(conn), pub)
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("%w (key file %s)", err, path)
	}
	return s, conn, nil
}

// AgentSigner returns the signer of the agent's key equal to pub.
func AgentSigner(a agent.Agent, pub ssh.PublicKey) (ssh.Signer, error) {
	signers, err := a.Signers()
	if err != nil {
		return nil, fmt.Errorf("sshsig: listing the ssh-agent's keys: %w", err)
	}
	want := pub.Marshal()
	for _, s := range signers {
		if bytes.Equal(s.PublicKey().Marshal(), want) {
			return s, nil
		}
	}
	return nil, fmt.Errorf("sshsig: ssh-agent holds no key %s %s (%d keys); add it with ssh-add", pub.Type(), ssh.FingerprintSHA256(pub), len(signers))
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// readBounded reads a regular file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	data, err := bounded.ReadRegularFile(path, limit)
	switch err.(type) {
	case nil:
		return data, nil
	case *bounded.NotRegularError:
		return nil, fmt.Errorf("sshsig: %s: not a regular file", path)
	case *bounded.ReadError:
		return nil, fmt.Errorf("sshsig: reading %s: %w", path, err)
	case *bounded.TooLargeError:
		return nil, &SyntaxError{Source: path, Msg: fmt.Sprintf("larger than %d bytes", limit)}
	}
	return nil, fmt.Errorf("sshsig: %w", err)
}
