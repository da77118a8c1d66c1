package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"github.com/lfmq/lfmq/format/sshsig"
	"github.com/lfmq/lfmq/release/bundle/bundletest"
	"github.com/lfmq/lfmq/verify"
)

func TestReleaseSignFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		agent   string
		want    releaseSignOptions
		wantErr string
	}{
		{"key file", "--release-dir r --key k", "", releaseSignOptions{ReleaseDir: "r", Key: "k"}, ""},
		{"agent key", "--release-dir r --key k.pub --identity me@x", "/tmp/agent.sock", releaseSignOptions{ReleaseDir: "r", Key: "k.pub", Identity: "me@x", AgentSocket: "/tmp/agent.sock"}, ""},
		{"no key", "--release-dir r", "", releaseSignOptions{}, "--key is required"},
		{"no release", "--key k", "", releaseSignOptions{}, "--release-dir is required"},
		{"identity with space", "--release-dir r --key k --identity a\tb", "", releaseSignOptions{}, "white space"},
		{"stray", "--release-dir r --key k x", "", releaseSignOptions{}, "takes no arguments"},
		{"unknown flag", "--release-dir r --key k --namespace x", "", releaseSignOptions{}, "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("SSH_AUTH_SOCK", tt.agent)
			ios, _, _ := testStreams()
			var got *releaseSignOptions
			release := &cobra.Command{Use: "release"}
			release.AddCommand(newReleaseSignCmd(ios, func(o *releaseSignOptions) error { got = o; return nil }))
			args := append([]string{"release", "sign"}, strings.Fields(tt.args)...)
			if tt.name == "identity with space" {
				args = []string{"release", "sign", "--release-dir", "r", "--key", "k", "--identity", "a b"}
			}
			err := executeWith(ios, release, args...)
			if tt.wantErr != "" {
				wantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got.IO = nil
			if *got != tt.want {
				t.Errorf("options %+v, want %+v", *got, tt.want)
			}
		})
	}
}

// writeKey writes an OpenSSH private key (encrypted with passphrase when
// given) and its .pub beside it, and returns the private key's path.
func writeKey(t *testing.T, dir string, seed byte, passphrase string) (string, ssh.PublicKey) {
	t.Helper()
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	var block *pem.Block
	var err error
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, "release@lfmq.test")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "release@lfmq.test", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := ssh.NewSignerFromKey(priv)
	p := filepath.Join(dir, "id_ed25519")
	if passphrase != "" {
		p += "_enc"
	}
	if err := os.WriteFile(p, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p+".pub", ssh.MarshalAuthorizedKey(signer.PublicKey()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, signer.PublicKey()
}

func TestReleaseSignRun(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "")
	dir := bundletest.Release(t, nil)
	keys := t.TempDir()
	key, pub := writeKey(t, keys, 1, "")
	encrypted, _ := writeKey(t, keys, 1, "secret")
	other, otherPub := writeKey(t, t.TempDir(), 2, "")
	allowed := filepath.Join(keys, "allowed_signers")
	os.WriteFile(allowed, []byte("release@lfmq.test namespaces=\"lfmq-release\" "+string(ssh.MarshalAuthorizedKey(pub))+
		"other@lfmq.test "+string(ssh.MarshalAuthorizedKey(otherPub))), 0o644)
	sigPath := filepath.Join(dir, verify.SignatureFile)
	sums := filepath.Join(dir, "SHA256SUMS")
	exec1 := func(args ...string) (int, string, string) {
		t.Helper()
		ios, stdout, stderr := testStreams()
		code := run(context.Background(), args, ios)
		return code, stdout.String(), stderr.String()
	}

	// An encrypted key is refused with a way out, before anything is written.
	code, _, stderr := exec1("release", "sign", "--release-dir", dir, "--key", encrypted)
	if code != exitFailure || !strings.Contains(stderr, "passphrase-protected") || !strings.Contains(stderr, "SSH_AUTH_SOCK") {
		t.Errorf("encrypted key: exit %d, %s", code, stderr)
	}
	// A public key without an agent.
	code, _, stderr = exec1("release", "sign", "--release-dir", dir, "--key", key+".pub")
	if code != exitFailure || !strings.Contains(stderr, "SSH_AUTH_SOCK is not set") {
		t.Errorf("public key without agent: exit %d, %s", code, stderr)
	}
	if _, err := os.Stat(sigPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed sign left %s: %v", sigPath, err)
	}

	// Unsigned: verifies without --allowed-signers, fails with it.
	if code, out, stderr := exec1("verify", "--release-dir", dir); code != exitOK {
		t.Fatalf("unsigned release: exit %d\n%s%s", code, out, stderr)
	}
	code, out, _ := exec1("verify", "--release-dir", dir, "--allowed-signers", allowed, "--identity", "release@lfmq.test")
	if code != exitMismatch || !strings.Contains(out, "signature SHA256SUMS.sig") || !strings.Contains(out, "absent") || !strings.Contains(out, "(1 signature)") {
		t.Errorf("unsigned with --allowed-signers: exit %d\n%s", code, out)
	}

	// Sign.
	code, out, stderr = exec1("release", "sign", "--release-dir", dir, "--key", key, "--identity", "release@lfmq.test")
	if code != exitOK {
		t.Fatalf("sign: exit %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{
		"signed release tiny-lfm2-moe-lfmq1-v1",
		"key             ssh-ed25519 " + ssh.FingerprintSHA256(pub),
		"release@lfmq.test namespaces=\"lfmq-release\" ssh-ed25519 AAAA",
		"ssh-keygen -Y verify -f allowed_signers -I release@lfmq.test -n lfmq-release -s " + sigPath + " < " + sums,
		"lfmq verify --release-dir " + dir + " --allowed-signers allowed_signers --identity release@lfmq.test",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("sign output lacks %q:\n%s", want, out)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	sig, err := os.ReadFile(sigPath)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(sigPath); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", st.Mode())
	}

	// Signed: verifies with and without --allowed-signers; the .sig is no
	// extra file.
	for _, args := range [][]string{
		{"verify", "--release-dir", dir},
		{"verify", "--release-dir", dir, "--allowed-signers", allowed, "--identity", "release@lfmq.test"},
		{"verify", "--release-dir", dir, "--allowed-signers", allowed},
	} {
		code, out, stderr := exec1(args...)
		if code != exitOK {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, stderr)
		}
		if len(args) > 3 && !strings.Contains(out, "signature SHA256SUMS.sig: good, ssh-ed25519 key "+ssh.FingerprintSHA256(pub)+" of release@lfmq.test") {
			t.Errorf("%v: output\n%s", args, out)
		}
	}
	code, out, _ = exec1("verify", "--release-dir", dir, "--allowed-signers", allowed, "--json")
	var rep struct {
		OK        bool
		Signature struct {
			Fingerprint string
			Principals  []string
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitOK || !rep.OK || rep.Signature.Fingerprint != ssh.FingerprintSHA256(pub) {
		t.Errorf("--json: exit %d, %v, %+v", code, err, rep)
	}
	// OpenSSH agrees, where it is installed.
	if bin, err := exec.LookPath("ssh-keygen"); err == nil {
		cmd := exec.Command(bin, "-Y", "verify", "-f", allowed, "-I", "release@lfmq.test", "-n", "lfmq-release", "-s", sigPath)
		f, _ := os.Open(sums)
		cmd.Stdin = f
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("ssh-keygen -Y verify: %v\n%s", err, out)
		}
		f.Close()
	}

	// The wrong identity, a stranger's signature, a malformed allowed_signers
	// file, a missing one.
	code, out, _ = exec1("verify", "--release-dir", dir, "--allowed-signers", allowed, "--identity", "other@lfmq.test")
	if code != exitMismatch || !strings.Contains(out, "signature SHA256SUMS.sig") {
		t.Errorf("wrong identity: exit %d\n%s", code, out)
	}
	bad := filepath.Join(keys, "bad_signers")
	os.WriteFile(bad, []byte("# ok\nrelease@lfmq.test ssh-ed25519\n"), 0o644)
	code, _, stderr = exec1("verify", "--release-dir", dir, "--allowed-signers", bad)
	if code != exitFailure || !strings.Contains(stderr, "bad_signers line 2") {
		t.Errorf("malformed allowed_signers: exit %d, %s", code, stderr)
	}
	// A file that is not there is the command line's fault (docs/cli.md).
	code, _, stderr = exec1("verify", "--release-dir", dir, "--allowed-signers", filepath.Join(keys, "nope"))
	if code != exitUsage || !strings.Contains(stderr, "--allowed-signers "+filepath.Join(keys, "nope")+": no such file") {
		t.Errorf("missing allowed_signers: exit %d, %s", code, stderr)
	}
	code, _, stderr = exec1("release", "sign", "--release-dir", dir, "--key", other)
	if code != exitOK {
		t.Fatalf("re-sign: exit %d %s", code, stderr)
	}
	code, out, _ = exec1("verify", "--release-dir", dir, "--allowed-signers", allowed, "--identity", "release@lfmq.test")
	if code != exitMismatch || !strings.Contains(out, "not allowed for identity") {
		t.Errorf("stranger's signature: exit %d\n%s", code, out)
	}
	os.WriteFile(sigPath, sig, 0o644)

	// A damaged release is not signed, and its signature is left alone.
	readme := filepath.Join(dir, "README.md")
	b, _ := os.ReadFile(readme)
	b[len(b)/2] ^= 1
	os.WriteFile(readme, b, 0o644)
	code, out, stderr = exec1("release", "sign", "--release-dir", dir, "--key", key)
	if code != exitMismatch || !strings.Contains(out, "hash      README.md") || !strings.Contains(stderr, "not signing") {
		t.Errorf("damaged release: exit %d\n%s%s", code, out, stderr)
	}
	if now, _ := os.ReadFile(sigPath); !bytes.Equal(now, sig) {
		t.Error("signing a damaged release changed SHA256SUMS.sig")
	}
	// The signature still matches SHA256SUMS: only the hash finding.
	code, out, _ = exec1("verify", "--release-dir", dir, "--allowed-signers", allowed)
	if code != exitMismatch || strings.Contains(out, "signature SHA256SUMS.sig\n") || !strings.Contains(out, "(1 hash)") ||
		!strings.Contains(out, "signature SHA256SUMS.sig: good") {
		t.Errorf("damaged, signed: exit %d\n%s", code, out)
	}
	if _, err := sshsig.Parse(sig); err != nil {
		t.Error(err)
	}
}

// signedRelease builds a test release (nil: bundletest's default), signs
// it with lfmq release sign and the ed25519 key of seed 1, and returns it
// with an allowed_signers file that grants that key to release@lfmq.test.
func signedRelease(t *testing.T, dir string) (string, string) {
	t.Helper()
	t.Setenv("SSH_AUTH_SOCK", "")
	if dir == "" {
		dir = bundletest.Release(t, nil)
	}
	keys := t.TempDir()
	key, pub := writeKey(t, keys, 1, "")
	allowed := filepath.Join(keys, "allowed_signers")
	if err := os.WriteFile(allowed, []byte("release@lfmq.test namespaces=\"lfmq-release\" "+string(ssh.MarshalAuthorizedKey(pub))), 0o644); err != nil {
		t.Fatal(err)
	}
	ios, stdout, stderr := testStreams()
	if code := run(context.Background(), []string{"release", "sign", "--release-dir", dir, "--key", key}, ios); code != exitOK {
		t.Fatalf("release sign: exit %d\n%s%s", code, stdout, stderr)
	}
	return dir, allowed
}
