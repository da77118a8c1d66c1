package verify_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/lfmq/lfmq/format/sshsig"
	"github.com/lfmq/lfmq/verify"
	"github.com/lfmq/lfmq/verify/sums"
)

func edSigner(t *testing.T, seed byte) ssh.Signer {
	t.Helper()
	s, err := ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signRelease writes dir/SHA256SUMS.sig, signed by s in namespace ns.
func signRelease(t *testing.T, dir string, s ssh.Signer, ns string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, sums.SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	sig, err := sshsig.Sign(s, data, ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, verify.SignatureFile), sig, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSignature(t *testing.T) {
	signer, stranger := edSigner(t, 1), edSigner(t, 2)
	allowed, err := sshsig.ParseAllowedSigners("allowed_signers", []byte(
		"# release keys\nrelease@lfmq.test namespaces=\"lfmq-release\" "+string(ssh.MarshalAuthorizedKey(signer.PublicKey()))+
			"other@lfmq.test "+string(ssh.MarshalAuthorizedKey(stranger.PublicKey()))))
	if err != nil {
		t.Fatal(err)
	}
	signed := func(t *testing.T, dir string) { signRelease(t, dir, signer, verify.SignatureNamespace) }
	for _, c := range []struct {
		name     string
		prepare  func(t *testing.T, dir string)
		allowed  *sshsig.AllowedSigners
		identity string
		// want is the only finding expected ("" for a clean report).
		want verify.Kind
		// on is the path of that finding.
		on     string
		detail string
	}{
		{"unsigned, no allowed signers", func(*testing.T, string) {}, nil, "", "", "", ""},
		{"signed, no allowed signers: .sig is not extra", signed, nil, "", "", "", ""},
		{"junk .sig, no allowed signers: not read", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, verify.SignatureFile), []byte("junk"), 0o644)
		}, nil, "", "", "", ""},
		{"signed", signed, allowed, "release@lfmq.test", "", "", ""},
		{"signed, any principal", signed, allowed, "", "", "", ""},
		{"unsigned", func(*testing.T, string) {}, allowed, "release@lfmq.test", verify.KindSignature, verify.SignatureFile, "absent"},
		{"tampered and relisted, not re-signed", func(t *testing.T, dir string) {
			signed(t, dir)
			os.WriteFile(filepath.Join(dir, "LICENSE"), []byte("Another licence.\n"), 0o644)
			resign(t, dir, nil)
		}, allowed, "release@lfmq.test", verify.KindSignature, verify.SignatureFile, "does not verify"},
		{"wrong identity", signed, allowed, "other@lfmq.test", verify.KindSignature, verify.SignatureFile, "not allowed"},
		{"unknown key", func(t *testing.T, dir string) {
			signRelease(t, dir, edSigner(t, 3), verify.SignatureNamespace)
		}, allowed, "", verify.KindSignature, verify.SignatureFile, "not allowed"},
		{"wrong namespace", func(t *testing.T, dir string) {
			signRelease(t, dir, signer, "file")
		}, allowed, "release@lfmq.test", verify.KindSignature, verify.SignatureFile, "namespace"},
		{"malformed .sig", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, verify.SignatureFile), []byte("-----BEGIN SSH SIGNATURE-----\nAAAA\n"), 0o644)
		}, allowed, "release@lfmq.test", verify.KindSignature, verify.SignatureFile, "signature"},
		{"oversized .sig", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, verify.SignatureFile), bytes.Repeat([]byte("A"), sshsig.MaxSignatureBytes+1), 0o644)
		}, allowed, "release@lfmq.test", verify.KindSignature, verify.SignatureFile, "larger"},
		{"SHA256SUMS lists the signature", func(t *testing.T, dir string) {
			signed(t, dir)
			p := filepath.Join(dir, sums.SumsFile)
			b, _ := os.ReadFile(p)
			entries, err := sums.Parse(sums.SumsFile, b, sums.BundlePath)
			if err != nil {
				t.Fatal(err)
			}
			sig, _ := os.ReadFile(filepath.Join(dir, verify.SignatureFile))
			sum := sha256.Sum256(sig)
			list, err := sums.Format(append(entries, sums.Entry{Path: verify.SignatureFile, SHA256: hex.EncodeToString(sum[:])}), sums.BundlePath)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(p, list, 0o644)
		}, nil, "", verify.KindMalformed, sums.SumsFile, "SHA256SUMS.sig"},
		{"a .sig below the top level is extra", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "checkpoint", verify.SignatureFile), []byte("x"), 0o644)
		}, nil, "", verify.KindExtra, "checkpoint/" + verify.SignatureFile, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := copyRelease(t)
			c.prepare(t, dir)
			rep, err := verify.Release(context.Background(), dir, verify.Options{AllowedSigners: c.allowed, Identity: c.identity})
			if err != nil {
				t.Fatal(err)
			}
			if c.want == "" {
				if !rep.OK || rep.Err() != nil {
					t.Fatalf("findings:\n%s", dump(rep))
				}
				if c.allowed != nil && (rep.Signature == nil || rep.Signature.Fingerprint != ssh.FingerprintSHA256(signer.PublicKey()) ||
					len(rep.Signature.Principals) != 1 || rep.Signature.Principals[0] != "release@lfmq.test" || rep.Signature.Identity != c.identity) {
					t.Errorf("signature %+v", rep.Signature)
				}
				if c.allowed == nil && rep.Signature != nil {
					t.Errorf("signature reported without allowed signers: %+v", rep.Signature)
				}
				if c.allowed != nil {
					list, _ := os.ReadFile(filepath.Join(dir, sums.SumsFile))
					sig, _ := os.ReadFile(filepath.Join(dir, verify.SignatureFile))
					s, err := verify.CheckSignature(sig, list, verify.Options{AllowedSigners: c.allowed, Identity: c.identity})
					if err != nil || s == nil || s.Fingerprint != rep.Signature.Fingerprint || !slices.Equal(s.Principals, rep.Signature.Principals) {
						t.Errorf("CheckSignature: %+v, %v; Release found %+v", s, err, rep.Signature)
					}
				}
				return
			}
			if len(rep.Findings) != 1 || !has(rep, c.on, c.want) || !strings.Contains(rep.Findings[0].Detail, c.detail) {
				t.Fatalf("want one %s finding on %s (%q); findings:\n%s", c.want, c.on, c.detail, dump(rep))
			}
			var me *verify.MismatchError
			if !errors.As(rep.Err(), &me) || me.Kind != c.want {
				t.Errorf("errors.As(*MismatchError) = %v", me)
			}
			if c.want == verify.KindSignature {
				if !errors.Is(rep.Err(), verify.ErrSignature) || me.Authority != "allowed_signers" || len(rep.Refetch) != 0 || rep.Signature != nil {
					t.Errorf("finding %+v, re-fetch %v, signature %+v", me, rep.Refetch, rep.Signature)
				}
				// Only an absent signature is ErrUnsigned: the two ask
				// different things of the person who reads them.
				if unsigned := errors.Is(rep.Err(), verify.ErrUnsigned); unsigned != (c.detail == "absent") {
					t.Errorf("errors.Is(ErrUnsigned) = %v for %q", unsigned, me.Detail)
				}
				// CheckSignature, the same check on bytes in memory,
				// finds the same.
				list, _ := os.ReadFile(filepath.Join(dir, sums.SumsFile))
				sig, err := os.ReadFile(filepath.Join(dir, verify.SignatureFile))
				if err != nil {
					sig = nil
				}
				s, cerr := verify.CheckSignature(sig, list, verify.Options{AllowedSigners: c.allowed, Identity: c.identity})
				var ce *verify.MismatchError
				if s != nil || !errors.As(cerr, &ce) || ce.Detail != me.Detail || errors.Is(cerr, verify.ErrUnsigned) != (c.detail == "absent") {
					t.Errorf("CheckSignature: %+v, %v; Release found %q", s, cerr, me.Detail)
				}
			}
		})
	}
}

func TestSignatureSymlink(t *testing.T) {
	dir := copyRelease(t)
	target := filepath.Join(t.TempDir(), "sig")
	signRelease(t, dir, edSigner(t, 1), verify.SignatureNamespace)
	os.Rename(filepath.Join(dir, verify.SignatureFile), target)
	if err := os.Symlink(target, filepath.Join(dir, verify.SignatureFile)); err != nil {
		t.Skip(err)
	}
	allowed, _ := sshsig.ParseAllowedSigners("a", []byte("r "+string(ssh.MarshalAuthorizedKey(edSigner(t, 1).PublicKey()))))
	rep, err := verify.Release(context.Background(), dir, verify.Options{AllowedSigners: allowed})
	if err != nil {
		t.Fatal(err)
	}
	if !has(rep, verify.SignatureFile, verify.KindUnsafe) || !has(rep, verify.SignatureFile, verify.KindSignature) || len(rep.Findings) != 2 {
		t.Errorf("a linked signature was followed:\n%s", dump(rep))
	}
}
