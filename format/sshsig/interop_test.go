package sshsig_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/lfmq/lfmq/format/sshsig"
)

// The interop tests check lfmq against OpenSSH itself: what one signs, the
// other verifies, and both refuse the same forgeries. They skip only where
// ssh-keygen is absent (.ci/run installs it).

const ns = "lfmq-release"

func sshKeygen(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Skip("ssh-keygen not installed (apt-get install openssh-client)")
	}
	return p
}

// keygen makes an unencrypted key pair with ssh-keygen and returns the
// private key's path.
func keygen(t *testing.T, bin, dir, typ string) string {
	t.Helper()
	key := filepath.Join(dir, "id_"+typ)
	args := []string{"-q", "-t", typ, "-N", "", "-C", typ + "@lfmq.test", "-f", key}
	if typ == "rsa" {
		args = append(args, "-b", "3072")
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen %v: %v\n%s", args, err, out)
	}
	return key
}

// keygenVerify runs ssh-keygen -Y verify and reports whether it accepted.
func keygenVerify(t *testing.T, bin, allowed, identity, namespace, sigFile string, message []byte) (bool, string) {
	t.Helper()
	cmd := exec.Command(bin, "-Y", "verify", "-f", allowed, "-I", identity, "-n", namespace, "-s", sigFile)
	cmd.Stdin = bytes.NewReader(message)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("ssh-keygen -Y verify: %v", err)
	}
	return err == nil, string(out)
}

func TestInteropSSHKeygen(t *testing.T) {
	bin := sshKeygen(t)
	message := []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef  README.md\n")
	changed := append(bytes.Clone(message[:len(message)-1]), 'x', '\n')
	for _, typ := range []string{"ed25519", "rsa", "ecdsa"} {
		t.Run(typ, func(t *testing.T) {
			dir := t.TempDir()
			key := keygen(t, bin, dir, typ)
			pubText, err := os.ReadFile(key + ".pub")
			if err != nil {
				t.Fatal(err)
			}
			pub, _, _, _, err := ssh.ParseAuthorizedKey(pubText)
			if err != nil {
				t.Fatal(err)
			}
			// An unrelated key of another principal, to show that lines
			// of others do not get in the way.
			other := keygen(t, bin, t.TempDir(), "ed25519")
			otherPub, _ := os.ReadFile(other + ".pub")
			allowedText := "# release signers\n\nother@lfmq.test " + string(otherPub) +
				"release@lfmq.test namespaces=\"" + ns + "\" " + string(pubText)
			allowed := filepath.Join(dir, "allowed_signers")
			if err := os.WriteFile(allowed, []byte(allowedText), 0o644); err != nil {
				t.Fatal(err)
			}
			signers, err := sshsig.ParseAllowedSigners(allowed, []byte(allowedText))
			if err != nil {
				t.Fatal(err)
			}
			msgFile := filepath.Join(dir, "SHA256SUMS")
			if err := os.WriteFile(msgFile, message, 0o644); err != nil {
				t.Fatal(err)
			}

			// (b) ssh-keygen signs.
			if out, err := exec.Command(bin, "-Y", "sign", "-n", ns, "-f", key, msgFile).CombinedOutput(); err != nil {
				t.Fatalf("ssh-keygen -Y sign: %v\n%s", err, out)
			}
			theirs, err := os.ReadFile(msgFile + ".sig")
			if err != nil {
				t.Fatal(err)
			}
			// (a) lfmq signs.
			signer, closer, err := sshsig.LoadSigner(key, "")
			if err != nil {
				t.Fatal(err)
			}
			defer closer.Close()
			ours, err := sshsig.Sign(signer, message, ns)
			if err != nil {
				t.Fatal(err)
			}
			oursFile := filepath.Join(dir, "ours.sig")
			if err := os.WriteFile(oursFile, ours, 0o644); err != nil {
				t.Fatal(err)
			}
			if typ == "ed25519" && !bytes.Equal(ours, theirs) {
				// Ed25519 is deterministic: the files must be identical.
				t.Errorf("lfmq's signature differs from ssh-keygen's:\n%s\n%s", ours, theirs)
			}
			if typ != "ecdsa" && !sameLayout(ours, theirs) {
				// (ECDSA signatures vary in length with their integers.)
				t.Errorf("armor layout differs from ssh-keygen's:\n%s\n%s", ours, theirs)
			}
			if typ == "rsa" {
				s, err := sshsig.Parse(ours)
				if err != nil || s.Signature.Format != ssh.KeyAlgoRSASHA512 || s.HashAlgorithm != sshsig.HashSHA512 {
					t.Errorf("RSA signature %v, %v; want rsa-sha2-512 over sha512", s, err)
				}
			}

			for _, sig := range []struct {
				name string
				file string
				data []byte
			}{{"lfmq-signed", oursFile, ours}, {"ssh-keygen-signed", msgFile + ".sig", theirs}} {
				for _, c := range []struct {
					name      string
					message   []byte
					identity  string
					namespace string
					want      error
				}{
					{"good", message, "release@lfmq.test", ns, nil},
					{"changed message", changed, "release@lfmq.test", ns, sshsig.ErrBadSignature},
					{"wrong namespace", message, "release@lfmq.test", "file", sshsig.ErrNamespace},
					{"wrong identity", message, "other@lfmq.test", ns, sshsig.ErrUnknownKey},
					{"unknown identity", message, "nobody@lfmq.test", ns, sshsig.ErrUnknownKey},
				} {
					t.Run(sig.name+"/"+c.name, func(t *testing.T) {
						ok, out := keygenVerify(t, bin, allowed, c.identity, c.namespace, sig.file, c.message)
						if ok != (c.want == nil) {
							t.Errorf("ssh-keygen -Y verify accepted=%v, want %v:\n%s", ok, c.want == nil, out)
						}
						res, err := sshsig.Verify(sig.data, c.message, signers, sshsig.VerifyOptions{Namespace: c.namespace, Identity: c.identity})
						if !errors.Is(err, c.want) || (err == nil) != (c.want == nil) {
							t.Fatalf("lfmq: err = %v, want %v", err, c.want)
						}
						if err == nil && (res.Fingerprint != ssh.FingerprintSHA256(pub) || len(res.Lines) != 1 || res.Lines[0] != 4) {
							t.Errorf("result %+v", res)
						}
					})
				}
			}

			// No identity: like find-principals, then verify.
			out, err := exec.Command(bin, "-Y", "find-principals", "-f", allowed, "-s", oursFile).Output()
			if err != nil || strings.TrimSpace(string(out)) != "release@lfmq.test" {
				t.Errorf("ssh-keygen -Y find-principals on lfmq's signature: %v: %s", err, out)
			}
			res, err := sshsig.Verify(theirs, message, signers, sshsig.VerifyOptions{Namespace: ns})
			if err != nil || len(res.Principals) != 1 || res.Principals[0] != "release@lfmq.test" {
				t.Errorf("no identity: %+v, %v", res, err)
			}
		})
	}
}

// sameLayout reports whether two armored signatures have the same line
// lengths and the same first and last lines.
func sameLayout(a, b []byte) bool {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	if len(la) != len(lb) || la[0] != lb[0] || la[len(la)-2] != lb[len(lb)-2] {
		return false
	}
	for i := range la {
		if len(la[i]) != len(lb[i]) {
			return false
		}
	}
	return true
}

// TestInteropAllowedSigners checks that lfmq reads allowed_signers options
// and patterns as ssh-keygen does: each file is checked by both.
func TestInteropAllowedSigners(t *testing.T) {
	bin := sshKeygen(t)
	dir := t.TempDir()
	key := keygen(t, bin, dir, "ed25519")
	pubText, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	pub := strings.TrimSpace(string(pubText))
	message := []byte("signed bytes\n")
	msgFile := filepath.Join(dir, "msg")
	if err := os.WriteFile(msgFile, message, 0o644); err != nil {
		t.Fatal(err)
	}
	signer, _, err := sshsig.LoadSigner(key, "")
	if err != nil {
		t.Fatal(err)
	}
	sig, err := sshsig.Sign(signer, message, ns)
	if err != nil {
		t.Fatal(err)
	}
	sigFile := filepath.Join(dir, "msg.sig")
	if err := os.WriteFile(sigFile, sig, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		line     string
		identity string
		want     error
	}{
		{"wildcard", "*@lfmq.test " + pub, "release@lfmq.test", nil},
		{"question mark", "releas?@lfmq.test " + pub, "release@lfmq.test", nil},
		{"list", "a@x,release@lfmq.test " + pub, "release@lfmq.test", nil},
		{"negated", "*@lfmq.test,!bad@lfmq.test " + pub, "bad@lfmq.test", sshsig.ErrUnknownKey},
		{"quoted principals", "\"release@lfmq.test\" " + pub, "release@lfmq.test", nil},
		{"namespace pattern", "release@lfmq.test namespaces=\"git,lfmq-*\" " + pub, "release@lfmq.test", nil},
		{"other namespace", "release@lfmq.test namespaces=\"git\" " + pub, "release@lfmq.test", sshsig.ErrUnknownKey},
		{"empty namespaces", "release@lfmq.test namespaces=\"\" " + pub, "release@lfmq.test", sshsig.ErrUnknownKey},
		{"trailing comma", "release@lfmq.test, " + pub, "release@lfmq.test", nil},
		{"option case", "release@lfmq.test NAMESPACES=\"lfmq-release\" " + pub, "release@lfmq.test", nil},
		{"valid after the past", "release@lfmq.test valid-after=\"20000101\" " + pub, "release@lfmq.test", nil},
		{"valid after the future", "release@lfmq.test valid-after=\"29990101Z\" " + pub, "release@lfmq.test", sshsig.ErrUnknownKey},
		{"expired", "release@lfmq.test valid-before=\"200001010000Z\" " + pub, "release@lfmq.test", sshsig.ErrUnknownKey},
		{"window", "release@lfmq.test valid-after=\"20000101\",valid-before=\"29990101000000Z\" " + pub, "release@lfmq.test", nil},
		{"cert-authority", "release@lfmq.test cert-authority " + pub, "release@lfmq.test", sshsig.ErrUnknownKey},
		{"granted twice", "release@lfmq.test namespaces=\"git\" " + pub + "\nrelease@lfmq.test " + pub, "release@lfmq.test", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			allowed := filepath.Join(t.TempDir(), "allowed_signers")
			if err := os.WriteFile(allowed, []byte(c.line+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			ok, out := keygenVerify(t, bin, allowed, c.identity, ns, sigFile, message)
			if ok != (c.want == nil) {
				t.Errorf("ssh-keygen -Y verify accepted=%v, want %v:\n%s", ok, c.want == nil, out)
			}
			signers, err := sshsig.ReadAllowedSigners(allowed)
			if err != nil {
				t.Fatal(err)
			}
			_, err = sshsig.Verify(sig, message, signers, sshsig.VerifyOptions{Namespace: ns, Identity: c.identity})
			if !errors.Is(err, c.want) || (err == nil) != (c.want == nil) {
				t.Errorf("lfmq: err = %v, want %v", err, c.want)
			}
		})
	}
}
