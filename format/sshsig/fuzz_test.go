package sshsig_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/lfmq/lfmq/format/sshsig"
)

// FuzzParse feeds arbitrary bytes to the signature reader, armored and as
// a raw blob: it must never panic, every error must be typed, and a blob
// that parses must re-encode to itself.
func FuzzParse(f *testing.F) {
	signer := seedSigner(f, 1)
	good := mustSign(f, signer, []byte("m"), ns)
	s, _ := sshsig.Parse(good)
	f.Add(good)
	f.Add(s.Blob())
	f.Add(rsaSigned(f))
	f.Add([]byte("-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n"))
	f.Add([]byte("SSHSIG\x00\x00\x00\x01\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, parse := range []func([]byte) (*sshsig.Signature, error){sshsig.Parse, sshsig.ParseBlob} {
			sig, err := parse(data)
			if err != nil {
				if !errors.Is(err, sshsig.ErrMalformed) && !errors.Is(err, sshsig.ErrUnsupported) {
					t.Fatalf("error without a sentinel: %v", err)
				}
				continue
			}
			again, err := sshsig.ParseBlob(sig.Blob())
			if err != nil || !bytes.Equal(again.Blob(), sig.Blob()) {
				t.Fatalf("re-encoding does not round-trip: %v", err)
			}
			// Verifying a parsed signature must not panic either.
			sshsig.Verify(sig.Armor(), data, &sshsig.AllowedSigners{}, sshsig.VerifyOptions{Namespace: ns})
		}
	})
}

func rsaSigned(f *testing.F) []byte {
	return mustSign(f, rsaSigner(f), []byte("m"), ns)
}

// FuzzParseAllowedSigners feeds arbitrary text to the allowed_signers
// reader: no panic, typed errors with a line number, and every entry it
// accepts has a key and principals.
func FuzzParseAllowedSigners(f *testing.F) {
	k := authorized(seedSigner(f, 5))
	f.Add([]byte("# comment\n\na@b " + k + " laptop\n"))
	f.Add([]byte("*@x,!y@x cert-authority,namespaces=\"a,b\",valid-after=\"20200101Z\",valid-before=\"203001021530\" " + k + "\n"))
	f.Add([]byte("\"a b\" namespaces=\"x\\\"y\" " + k + "\r\n"))
	f.Add([]byte("a@b namespaces=x " + k))
	f.Add([]byte("a@b ssh-ed25519 !!!!\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := sshsig.ParseAllowedSigners("allowed_signers", data)
		if err != nil {
			var se *sshsig.SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		for _, e := range a.Entries {
			if e.Key == nil || e.Principals == "" || e.Line < 1 {
				t.Fatalf("entry %+v", e)
			}
		}
	})
}
