package sshsig_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/lfmq/lfmq/format/sshsig"
)

// seedSigner is an ed25519 signer from a fixed seed, so its signatures are
// fixed too.
func seedSigner(t testing.TB, seed byte) ssh.Signer {
	t.Helper()
	s, err := ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var (
	rsaOnce sync.Once
	rsaKey  *rsa.PrivateKey
)

func rsaSigner(t testing.TB) ssh.Signer {
	t.Helper()
	rsaOnce.Do(func() {
		var err error
		if rsaKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			t.Fatal(err)
		}
	})
	s, err := ssh.NewSignerFromKey(rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ecdsaSigner(t testing.TB) ssh.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func authorized(s ssh.Signer) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey())))
}

func mustSign(t testing.TB, s ssh.Signer, message []byte, namespace string) []byte {
	t.Helper()
	sig, err := sshsig.Sign(s, message, namespace)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

func mustAllowed(t testing.TB, text string) *sshsig.AllowedSigners {
	t.Helper()
	a, err := sshsig.ParseAllowedSigners("allowed_signers", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestSignFormat(t *testing.T) {
	message := []byte("hello\n")
	for _, c := range []struct {
		name   string
		signer ssh.Signer
		format string
	}{
		{"ed25519", seedSigner(t, 1), ssh.KeyAlgoED25519},
		{"rsa", rsaSigner(t), ssh.KeyAlgoRSASHA512},
		{"ecdsa", ecdsaSigner(t), ssh.KeyAlgoECDSA256},
	} {
		t.Run(c.name, func(t *testing.T) {
			armored := mustSign(t, c.signer, message, ns)
			lines := strings.Split(string(armored), "\n")
			if lines[0] != "-----BEGIN SSH SIGNATURE-----" || lines[len(lines)-2] != "-----END SSH SIGNATURE-----" || lines[len(lines)-1] != "" {
				t.Fatalf("armor:\n%s", armored)
			}
			for i, l := range lines[1 : len(lines)-2] {
				if len(l) != 70 && i != len(lines)-4 || len(l) == 0 || len(l) > 70 {
					t.Errorf("line %d has %d columns", i+2, len(l))
				}
			}
			s, err := sshsig.Parse(armored)
			if err != nil {
				t.Fatal(err)
			}
			if s.Namespace != ns || s.HashAlgorithm != sshsig.HashSHA512 || len(s.Reserved) != 0 || s.Signature.Format != c.format ||
				!bytes.Equal(s.PublicKey.Marshal(), c.signer.PublicKey().Marshal()) {
				t.Errorf("parsed %+v", s)
			}
			if !bytes.Equal(s.Armor(), armored) {
				t.Error("Parse then Armor changes the bytes")
			}
		})
	}
}

func TestSignRefuses(t *testing.T) {
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	smallSigner, _ := ssh.NewSignerFromKey(small)
	for _, c := range []struct {
		name      string
		signer    ssh.Signer
		namespace string
		want      string
	}{
		{"empty namespace", seedSigner(t, 1), "", "namespace"},
		{"long namespace", seedSigner(t, 1), strings.Repeat("n", sshsig.MaxNamespaceBytes+1), "namespace"},
		{"small RSA key", smallSigner, ns, "1024 bits"},
		{"RSA without algorithm choice", plainSigner{rsaSigner(t)}, ns, "rsa-sha2-512"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := sshsig.Sign(c.signer, []byte("m"), c.namespace)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
}

// plainSigner hides the AlgorithmSigner methods of a signer.
type plainSigner struct{ s ssh.Signer }

func (p plainSigner) PublicKey() ssh.PublicKey { return p.s.PublicKey() }
func (p plainSigner) Sign(r io.Reader, data []byte) (*ssh.Signature, error) {
	return p.s.Sign(r, data)
}

// blob builds an SSHSIG blob field by field.
func blob(magic string, version uint32, fields ...[]byte) []byte {
	b := []byte(magic)
	b = binary.BigEndian.AppendUint32(b, version)
	for _, f := range fields {
		b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
		b = append(b, f...)
	}
	return b
}

func armor(b []byte) []byte {
	return []byte("-----BEGIN SSH SIGNATURE-----\n" + base64.StdEncoding.EncodeToString(b) + "\n-----END SSH SIGNATURE-----\n")
}

func TestParse(t *testing.T) {
	s := seedSigner(t, 2)
	good := mustSign(t, s, []byte("m"), ns)
	parsed, err := sshsig.Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	key := s.PublicKey().Marshal()
	sigField := ssh.Marshal(parsed.Signature)
	cert := &ssh.Certificate{Key: s.PublicKey(), CertType: ssh.UserCert, ValidPrincipals: []string{"a"}, ValidBefore: ssh.CertTimeInfinity}
	if err := cert.SignCert(rand.Reader, seedSigner(t, 3)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		in   []byte
		want error
	}{
		{"good", good, nil},
		{"CRLF and 64 columns", []byte("-----BEGIN SSH SIGNATURE-----\n" + wrap(base64.StdEncoding.EncodeToString(parsed.Blob()), 64, "\r\n") + "\r\n-----END SSH SIGNATURE-----\r\n"), nil},
		{"no trailing newline", bytes.TrimSuffix(good, []byte("\n")), nil},
		{"empty", nil, sshsig.ErrMalformed},
		{"no header", good[30:], sshsig.ErrMalformed},
		{"no footer", good[:len(good)-10], sshsig.ErrMalformed},
		{"data after footer", append(bytes.Clone(good), "x\n"...), sshsig.ErrMalformed},
		{"bad base64", []byte("-----BEGIN SSH SIGNATURE-----\n!!!!\n-----END SSH SIGNATURE-----\n"), sshsig.ErrMalformed},
		{"too large", append(bytes.Clone(good[:30]), bytes.Repeat([]byte("A"), sshsig.MaxSignatureBytes)...), sshsig.ErrMalformed},
		{"wrong magic", armor(blob("SSHSIX", 1, key, []byte(ns), nil, []byte("sha512"), sigField)), sshsig.ErrMalformed},
		{"version 2", armor(blob("SSHSIG", 2, key, []byte(ns), nil, []byte("sha512"), sigField)), sshsig.ErrUnsupported},
		{"version 0 is read", armor(blob("SSHSIG", 0, key, []byte(ns), nil, []byte("sha512"), sigField)), nil},
		{"truncated", armor(blob("SSHSIG", 1, key, []byte(ns), nil, []byte("sha512"))), sshsig.ErrMalformed},
		{"trailing bytes", armor(append(blob("SSHSIG", 1, key, []byte(ns), nil, []byte("sha512"), sigField), 0)), sshsig.ErrMalformed},
		{"length past the end", armor(append(blob("SSHSIG", 1, key), 0xff, 0xff, 0xff, 0xff)), sshsig.ErrMalformed},
		{"bad key", armor(blob("SSHSIG", 1, []byte("junk"), []byte(ns), nil, []byte("sha512"), sigField)), sshsig.ErrMalformed},
		{"certificate", armor(blob("SSHSIG", 1, cert.Marshal(), []byte(ns), nil, []byte("sha512"), sigField)), sshsig.ErrUnsupported},
		{"empty namespace", armor(blob("SSHSIG", 1, key, nil, nil, []byte("sha512"), sigField)), sshsig.ErrMalformed},
		{"sha1", armor(blob("SSHSIG", 1, key, []byte(ns), nil, []byte("sha1"), sigField)), sshsig.ErrUnsupported},
		{"reserved is ignored", armor(blob("SSHSIG", 1, key, []byte(ns), []byte("future"), []byte("sha512"), sigField)), nil},
		{"bytes after the ed25519 signature", armor(blob("SSHSIG", 1, key, []byte(ns), nil, []byte("sha512"), append(bytes.Clone(sigField), 1, 0, 0, 0, 1))), sshsig.ErrMalformed},
		{"signature not a signature", armor(blob("SSHSIG", 1, key, []byte(ns), nil, []byte("sha512"), []byte("xx"))), sshsig.ErrMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := sshsig.Parse(c.in)
			if !errors.Is(err, c.want) || (err == nil) != (c.want == nil) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			var se *sshsig.SyntaxError
			var ue *sshsig.UnsupportedError
			if err != nil && !errors.As(err, &se) && !errors.As(err, &ue) {
				t.Errorf("untyped error %T", err)
			}
		})
	}
}

func wrap(s string, width int, nl string) string {
	var b strings.Builder
	for len(s) > width {
		b.WriteString(s[:width] + nl)
		s = s[width:]
	}
	b.WriteString(s)
	return b.String()
}

func TestVerify(t *testing.T) {
	alice, bob, carol := seedSigner(t, 10), rsaSigner(t), ecdsaSigner(t)
	message := []byte("0000  SHA256SUMS line\n")
	sigA := mustSign(t, alice, message, ns)
	sigB := mustSign(t, bob, message, ns)
	sigC := mustSign(t, carol, message, ns)
	sigOtherNS := mustSign(t, alice, message, "git")
	allowed := mustAllowed(t, fmt.Sprintf(`# lfmq release signers
alice@example.org,alice@lfmq.test %s alice's laptop
  bob@example.org namespaces="lfmq-release,file" %s
*@ops.example.org,!mallory@ops.example.org valid-after="20200101Z",valid-before="20300101Z" %s

dave@example.org cert-authority %s
alice@example.org %s
`, authorized(alice), authorized(bob), authorized(carol), authorized(alice), authorized(alice)))
	in2025 := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	tamperedSig := func(sig []byte) []byte {
		s, err := sshsig.Parse(sig)
		if err != nil {
			t.Fatal(err)
		}
		s.Signature.Blob = bytes.Clone(s.Signature.Blob)
		s.Signature.Blob[5] ^= 1
		return s.Armor()
	}
	swappedKey := func(sig []byte, key ssh.PublicKey) []byte {
		s, _ := sshsig.Parse(sig)
		s.PublicKey = key
		return s.Armor()
	}
	sha1RSA := func() []byte {
		data, _ := sshsig.SignedData(ns, sshsig.HashSHA512, message)
		raw, err := bob.(ssh.AlgorithmSigner).SignWithAlgorithm(rand.Reader, data, ssh.KeyAlgoRSA)
		if err != nil {
			t.Fatal(err)
		}
		return (&sshsig.Signature{PublicKey: bob.PublicKey(), Namespace: ns, HashAlgorithm: sshsig.HashSHA512, Signature: raw}).Armor()
	}
	sha256Sig := func() []byte {
		data, _ := sshsig.SignedData(ns, sshsig.HashSHA256, message)
		raw, _ := alice.Sign(rand.Reader, data)
		return (&sshsig.Signature{PublicKey: alice.PublicKey(), Namespace: ns, HashAlgorithm: sshsig.HashSHA256, Signature: raw}).Armor()
	}
	for _, c := range []struct {
		name       string
		sig        []byte
		message    []byte
		identity   string
		at         time.Time
		want       error
		principals []string
		lines      []int
	}{
		{"ed25519", sigA, message, "alice@example.org", in2025, nil, []string{"alice@example.org,alice@lfmq.test", "alice@example.org"}, []int{2, 7}},
		{"second principal", sigA, message, "alice@lfmq.test", in2025, nil, []string{"alice@example.org,alice@lfmq.test"}, []int{2}},
		{"rsa, namespaces", sigB, message, "bob@example.org", in2025, nil, []string{"bob@example.org"}, []int{3}},
		{"ecdsa, pattern, window", sigC, message, "eve@ops.example.org", in2025, nil, []string{"*@ops.example.org,!mallory@ops.example.org"}, []int{4}},
		{"any principal", sigA, message, "", in2025, nil, []string{"alice@example.org,alice@lfmq.test", "alice@example.org"}, []int{2, 7}},
		{"sha256 hash", sha256Sig(), message, "alice@example.org", in2025, nil, []string{"alice@example.org,alice@lfmq.test", "alice@example.org"}, []int{2, 7}},
		{"negated principal", sigC, message, "mallory@ops.example.org", in2025, sshsig.ErrUnknownKey, nil, nil},
		{"before valid-after", sigC, message, "eve@ops.example.org", time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC), sshsig.ErrUnknownKey, nil, nil},
		{"after valid-before", sigC, message, "eve@ops.example.org", time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC), sshsig.ErrUnknownKey, nil, nil},
		{"key of another principal", sigA, message, "bob@example.org", in2025, sshsig.ErrUnknownKey, nil, nil},
		{"cert-authority line", sigA, message, "dave@example.org", in2025, sshsig.ErrUnknownKey, nil, nil},
		{"unknown identity", sigA, message, "nobody", in2025, sshsig.ErrUnknownKey, nil, nil},
		{"unknown key", mustSign(t, seedSigner(t, 99), message, ns), message, "", in2025, sshsig.ErrUnknownKey, nil, nil},
		{"changed message", sigA, append(bytes.Clone(message), ' '), "alice@example.org", in2025, sshsig.ErrBadSignature, nil, nil},
		{"empty message", sigA, nil, "alice@example.org", in2025, sshsig.ErrBadSignature, nil, nil},
		{"changed signature", tamperedSig(sigA), message, "alice@example.org", in2025, sshsig.ErrBadSignature, nil, nil},
		{"key swapped for an allowed one", swappedKey(sigC, alice.PublicKey()), message, "alice@example.org", in2025, sshsig.ErrBadSignature, nil, nil},
		{"ssh-rsa (SHA-1)", sha1RSA(), message, "bob@example.org", in2025, sshsig.ErrBadSignature, nil, nil},
		{"other namespace", sigOtherNS, message, "alice@example.org", in2025, sshsig.ErrNamespace, nil, nil},
		{"malformed", []byte("not a signature"), message, "alice@example.org", in2025, sshsig.ErrMalformed, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := sshsig.Verify(c.sig, c.message, allowed, sshsig.VerifyOptions{Namespace: ns, Identity: c.identity, Time: c.at})
			if !errors.Is(err, c.want) || (err == nil) != (c.want == nil) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if err != nil {
				var ke *sshsig.KeyError
				var se *sshsig.SignatureError
				var ne *sshsig.NamespaceError
				var sy *sshsig.SyntaxError
				if !errors.As(err, &ke) && !errors.As(err, &se) && !errors.As(err, &ne) && !errors.As(err, &sy) {
					t.Errorf("untyped error %T", err)
				}
				return
			}
			if fmt.Sprint(res.Principals) != fmt.Sprint(c.principals) || fmt.Sprint(res.Lines) != fmt.Sprint(c.lines) {
				t.Errorf("principals %q lines %v, want %q %v", res.Principals, res.Lines, c.principals, c.lines)
			}
			if res.Fingerprint != ssh.FingerprintSHA256(res.Key) {
				t.Errorf("fingerprint %s", res.Fingerprint)
			}
		})
	}
}

func TestKeyErrorReasons(t *testing.T) {
	alice := seedSigner(t, 10)
	allowed := mustAllowed(t, "a namespaces=\"git\" "+authorized(alice)+"\na valid-before=\"20010101\" "+authorized(alice)+"\na cert-authority "+authorized(alice)+"\n")
	_, err := sshsig.Verify(mustSign(t, alice, []byte("m"), ns), []byte("m"), allowed, sshsig.VerifyOptions{Namespace: ns, Identity: "a"})
	var ke *sshsig.KeyError
	if !errors.As(err, &ke) || len(ke.Reasons) != 3 || ke.Identity != "a" || ke.KeyType != ssh.KeyAlgoED25519 ||
		!strings.HasPrefix(ke.Reasons[0], "line 1: not permitted for namespace") || !strings.HasPrefix(ke.Reasons[1], "line 2: expired") ||
		!strings.Contains(ke.Reasons[2], "line 3: cert-authority") {
		t.Fatalf("err = %#v", err)
	}
}

func TestParseAllowedSigners(t *testing.T) {
	k := authorized(seedSigner(t, 5))
	for _, c := range []struct {
		name string
		text string
		line int // of the error; 0 for success
		n    int // entries on success
	}{
		{"comments and blanks", "# c\n\n   \n\t# c2\r\n", 0, 0},
		{"plain", "a@b " + k + "\n", 0, 1},
		{"comment after key, CRLF", "a@b " + k + " laptop key\r\nc@d " + k, 0, 2},
		{"leading space", "   a@b " + k, 0, 1},
		{"options", "a@b cert-authority,namespaces=\"x,y\",valid-after=\"20200101\",valid-before=\"20300101120000Z\" " + k, 0, 1},
		{"escaped quote", "a@b namespaces=\"x\\\"y\" " + k, 0, 1},
		{"quoted principals with space", "\"a b\" " + k, 0, 1},
		{"one field", "# ok\na@b\n", 2, 0},
		{"no key", "a@b ssh-ed25519\n", 1, 0},
		{"bad base64", "a@b ssh-ed25519 !!!!\n", 1, 0},
		{"type mismatch", "a@b ssh-rsa " + strings.Fields(k)[1], 1, 0},
		{"unknown option", "\n\na@b restrict " + k, 3, 0},
		{"unquoted value", "a@b namespaces=x " + k, 1, 0},
		{"flag with value", "a@b cert-authority=\"1\" " + k, 1, 0},
		{"duplicate option", "a@b namespaces=\"x\",namespaces=\"y\" " + k, 1, 0},
		{"bad time", "a@b valid-after=\"2020\" " + k, 1, 0},
		{"bad date", "a@b valid-after=\"20201301\" " + k, 1, 0},
		{"window reversed", "a@b valid-after=\"20300101\",valid-before=\"20200101\" " + k, 1, 0},
		{"unclosed principals quote", "\"a@b " + k, 1, 0},
		{"quote inside principals", "a\"b " + k, 1, 0},
		{"empty quoted principals", "\"\" " + k, 1, 0},
		{"NUL", "a@b " + k + "\x00", 1, 0},
		{"long line", "a@b " + k + " " + strings.Repeat("c", sshsig.MaxLineBytes), 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := sshsig.ParseAllowedSigners("allowed_signers", []byte(c.text))
			if c.line == 0 {
				if err != nil || len(a.Entries) != c.n {
					t.Fatalf("err = %v, entries %d, want %d", err, len(a.Entries), c.n)
				}
				return
			}
			var se *sshsig.SyntaxError
			if !errors.As(err, &se) || se.Line != c.line || !errors.Is(err, sshsig.ErrMalformed) || se.Source != "allowed_signers" {
				t.Fatalf("err = %v, want a syntax error on line %d", err, c.line)
			}
		})
	}
	big := strings.Repeat("#\n", sshsig.MaxAllowedSignersBytes/2+1)
	if _, err := sshsig.ParseAllowedSigners("x", []byte(big)); !errors.Is(err, sshsig.ErrMalformed) {
		t.Errorf("oversized file: %v", err)
	}
}

func TestParseAllowedSignersFields(t *testing.T) {
	s := seedSigner(t, 5)
	a := mustAllowed(t, "\n# c\n*@x,!y@x Cert-Authority,namespaces=\"lfmq-*\",valid-after=\"20200101Z\",valid-before=\"203001021530UTC\" "+authorized(s)+" comment\n")
	if len(a.Entries) != 1 {
		t.Fatal(a.Entries)
	}
	e := a.Entries[0]
	if e.Line != 3 || e.Principals != "*@x,!y@x" || !e.CertAuthority || e.Namespaces != "lfmq-*" ||
		!e.ValidAfter.Equal(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)) || !e.ValidBefore.Equal(time.Date(2030, 1, 2, 15, 30, 0, 0, time.UTC)) ||
		!bytes.Equal(e.Key.Marshal(), s.PublicKey().Marshal()) {
		t.Errorf("%+v", e)
	}
}

func TestLoadSigner(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	plain, err := ssh.MarshalPrivateKey(priv, "k")
	if err != nil {
		t.Fatal(err)
	}
	enc, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "k", []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := ssh.NewSignerFromKey(priv)
	pubFile := write("id.pub", ssh.MarshalAuthorizedKey(signer.PublicKey()))

	// An agent holding the key, on a unix socket.
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: priv}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("no unix sockets: %v", err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { agent.ServeAgent(keyring, c); c.Close() }()
		}
	}()
	emptySock := filepath.Join(dir, "empty.sock")
	ln2, err := net.Listen("unix", emptySock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln2.Close()
	go func() {
		for {
			c, err := ln2.Accept()
			if err != nil {
				return
			}
			go func() { agent.ServeAgent(agent.NewKeyring(), c); c.Close() }()
		}
	}()

	for _, c := range []struct {
		name string
		path string
		sock string
		want error  // sentinel, or nil
		msg  string // in the error; "" for success
	}{
		{"openssh private key", write("id", pem.EncodeToMemory(plain)), "", nil, ""},
		{"encrypted", write("id_enc", pem.EncodeToMemory(enc)), "", sshsig.ErrEncryptedKey, "SSH_AUTH_SOCK"},
		{"public key through the agent", pubFile, sock, nil, ""},
		{"public key, no agent", pubFile, "", nil, "SSH_AUTH_SOCK is not set"},
		{"public key, agent lacks it", pubFile, emptySock, nil, "holds no key"},
		{"garbage", write("junk", []byte("hello\n")), "", sshsig.ErrMalformed, "neither"},
		{"bad private key", write("bad", []byte("-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n")), "", sshsig.ErrMalformed, "private key"},
		{"too large", write("big", bytes.Repeat([]byte("#"), sshsig.MaxKeyFileBytes+1)), "", sshsig.ErrMalformed, "larger"},
		{"missing", filepath.Join(dir, "nope"), "", os.ErrNotExist, "nope"},
		{"directory", dir, "", nil, "not a regular file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, closer, err := sshsig.LoadSigner(c.path, c.sock)
			if c.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
				defer closer.Close()
				sig := mustSign(t, s, []byte("m"), ns)
				if _, err := sshsig.Verify(sig, []byte("m"), mustAllowed(t, "k "+authorized(signer)), sshsig.VerifyOptions{Namespace: ns, Identity: "k"}); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.msg) || (c.want != nil && !errors.Is(err, c.want)) {
				t.Fatalf("err = %v, want %v containing %q", err, c.want, c.msg)
			}
		})
	}
}

// Example signs a message with a fixed ed25519 key (its signatures are
// deterministic) and verifies it against an allowed_signers line.
func Example() {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{42}, ed25519.SeedSize))
	signer, _ := ssh.NewSignerFromKey(key)
	message := []byte("the exact bytes of SHA256SUMS\n")

	armored, err := sshsig.Sign(signer, message, "lfmq-release")
	if err != nil {
		panic(err)
	}
	fmt.Print(string(armored))

	line := "release@example.org namespaces=\"lfmq-release\" " + string(ssh.MarshalAuthorizedKey(signer.PublicKey()))
	allowed, _ := sshsig.ParseAllowedSigners("allowed_signers", []byte(line))
	res, err := sshsig.Verify(armored, message, allowed, sshsig.VerifyOptions{Namespace: "lfmq-release", Identity: "release@example.org"})
	if err != nil {
		panic(err)
	}
	fmt.Println("good signature by", res.Principals[0])
	// Output:
	// -----BEGIN SSH SIGNATURE-----
	// U1NIU0lHAAAAAQAAADMAAAALc3NoLWVkMjU1MTkAAAAgGX9rI+FshTLGq8g4+s1ep4m+DH
	// aykgM0A5v6iz02jWEAAAAMbGZtcS1yZWxlYXNlAAAAAAAAAAZzaGE1MTIAAABTAAAAC3Nz
	// aC1lZDI1NTE5AAAAQOC4TRiJhvzUs8eN9TMxDDszFAqAfKj6Sp36k82tYmjPpI4vfOiL/p
	// 1RtZ2Vl6WfdZ4JQFk9+lwSAecMeOHcjQo=
	// -----END SSH SIGNATURE-----
	// good signature by release@example.org
}

// TestSecurityKey checks a signature by an sk-ssh-ed25519 (FIDO) key, made
// here by hand: its flags and counter follow the signature blob, and the
// parser must keep them for the key's Verify.
func TestSecurityKey(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, ed25519.SeedSize))
	str := func(b []byte) []byte { return binary.BigEndian.AppendUint32(nil, uint32(len(b))) }
	var pubBlob []byte
	for _, f := range [][]byte{[]byte("sk-ssh-ed25519@openssh.com"), priv.Public().(ed25519.PublicKey), []byte("ssh:")} {
		pubBlob = append(append(pubBlob, str(f)...), f...)
	}
	pub, err := ssh.ParsePublicKey(pubBlob)
	if err != nil {
		t.Fatal(err)
	}
	message := []byte("SHA256SUMS bytes\n")
	data, _ := sshsig.SignedData(ns, sshsig.HashSHA512, message)
	app, msg := sha256.Sum256([]byte("ssh:")), sha256.Sum256(data)
	flagsCounter := []byte{1, 0, 0, 0, 7} // user present, counter 7
	signed := append(append(app[:], flagsCounter...), msg[:]...)
	sig := &sshsig.Signature{PublicKey: pub, Namespace: ns, HashAlgorithm: sshsig.HashSHA512,
		Signature: &ssh.Signature{Format: pub.Type(), Blob: ed25519.Sign(priv, signed), Rest: flagsCounter}}
	allowed := mustAllowed(t, "fido@lfmq.test "+string(ssh.MarshalAuthorizedKey(pub)))
	res, err := sshsig.Verify(sig.Armor(), message, allowed, sshsig.VerifyOptions{Namespace: ns, Identity: "fido@lfmq.test"})
	if err != nil || res.Key.Type() != "sk-ssh-ed25519@openssh.com" {
		t.Fatalf("%+v, %v", res, err)
	}
	if _, err := sshsig.Verify(sig.Armor(), append(message, 'x'), allowed, sshsig.VerifyOptions{Namespace: ns, Identity: "fido@lfmq.test"}); !errors.Is(err, sshsig.ErrBadSignature) {
		t.Errorf("changed message: %v", err)
	}
}
