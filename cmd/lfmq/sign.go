package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"github.com/lfmq/lfmq/format/durable"
	"github.com/lfmq/lfmq/format/sshsig"
	"github.com/lfmq/lfmq/internal/progress"
	"github.com/lfmq/lfmq/launch"
	"github.com/lfmq/lfmq/verify"
	"github.com/lfmq/lfmq/verify/sums"
)

type releaseSignOptions struct {
	IO         *IOStreams
	ReleaseDir string
	Key        string
	// Identity only fills in the verification commands printed at the end.
	Identity string
	// AgentSocket is SSH_AUTH_SOCK, read when the command line is parsed.
	AgentSocket string
}

func newReleaseSignCmd(ios *IOStreams, runF func(*releaseSignOptions) error) *cobra.Command {
	opts := &releaseSignOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "sign --release-dir DIR --key FILE [--identity ID]",
		Short: "Sign a release's SHA256SUMS with an SSH key (SHA256SUMS.sig)",
		Long: `Sign verifies the release first (every byte, as 'lfmq verify' does) and
refuses to sign one with any finding. It then signs the exact bytes of
DIR/SHA256SUMS in OpenSSH's SSHSIG format, namespace "lfmq-release", hash
sha512, and writes DIR/SHA256SUMS.sig: the same signature 'ssh-keygen -Y sign
-n lfmq-release -f FILE SHA256SUMS' makes. The signature is not part of the
reproducible bytes of the release, and SHA256SUMS does not list it.

--key is an unencrypted OpenSSH private key (ed25519, ECDSA, or RSA, signed as
rsa-sha2-512), or a public key file whose private key ssh-agent holds
(SSH_AUTH_SOCK). A passphrase-protected key is refused: load it with ssh-add
and pass its .pub file.

Anyone can then check the release with an allowed_signers file holding the
key (ssh-keygen(1), ALLOWED SIGNERS), with ssh-keygen alone or with lfmq:

  ssh-keygen -Y verify -f allowed_signers -I ID -n lfmq-release -s SHA256SUMS.sig < SHA256SUMS
  lfmq verify --release-dir DIR --allowed-signers allowed_signers --identity ID

Exit status: 0 signed, 3 the release has findings, 1 any other failure, 2 usage.`,
		Example: `  lfmq release sign --release-dir ./release --key ~/.ssh/id_ed25519
  lfmq release sign --release-dir ./release --key ~/.ssh/id_ed25519.pub --identity release@example.org`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return releaseSignRun(cmd, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.ReleaseDir, "release-dir", "", "release directory to sign (required)")
	f.StringVar(&opts.Key, "key", "", "OpenSSH private key, or a public key held by ssh-agent (required)")
	f.StringVar(&opts.Identity, "identity", "", "the signer's principal in allowed_signers, for the printed commands")
	cmd.MarkFlagDirname("release-dir")
	cmd.MarkFlagFilename("key")
	return cmd
}

// validate checks the command line (usage errors, exit 2) and reads
// SSH_AUTH_SOCK into o.
func (o *releaseSignOptions) validate() error {
	if err := requireFlags("release-dir", o.ReleaseDir, "key", o.Key); err != nil {
		return err
	}
	if strings.ContainsAny(o.Identity, " \t\r\n") {
		return &usageError{fmt.Errorf("--identity %q contains white space", o.Identity)}
	}
	o.AgentSocket = os.Getenv("SSH_AUTH_SOCK")
	return nil
}

func releaseSignRun(cmd *cobra.Command, opts *releaseSignOptions) error {
	if err := releaseSignInputs(opts); err != nil {
		return err
	}
	rep, sigPath, pub, err := releaseSignWork(cmd.Context(), opts)
	if err != nil {
		return err
	}
	releaseSignReport(opts, rep, sigPath, pub)
	return nil
}

// releaseSignInputs checks the release directory and the key file.
func releaseSignInputs(opts *releaseSignOptions) error {
	if err := requireReleaseDir(opts.ReleaseDir); err != nil {
		return err
	}
	// Before the release is hashed: a key file that is not there is the
	// command line's fault, and saying so should not wait for the hash.
	return requireFiles("--key "+opts.Key, opts.Key)
}

// releaseSignWork verifies the release, every byte, and signs the
// SHA256SUMS that was verified, writing SHA256SUMS.sig. A release with
// findings has its report printed and is not signed. It returns the
// verification's report, the signature's path and the signer's key.
func releaseSignWork(ctx context.Context, opts *releaseSignOptions) (*verify.Report, string, ssh.PublicKey, error) {
	dir := opts.ReleaseDir
	vo := verify.Options{}
	var bar *progress.Bytes
	if opts.IO.ErrTTY {
		bar = progress.NewBytes(opts.IO.ErrOut, "verifying")
		vo.Progress = bar
	}
	rep, err := verify.Release(ctx, dir, vo)
	bar.Finish()
	if err != nil {
		return nil, "", nil, err
	}
	if !rep.OK {
		if err := printReport(opts.IO, rep, false); err != nil {
			return nil, "", nil, err
		}
		opts.IO.Errorf("lfmq: not signing a release that does not verify\n")
		return nil, "", nil, rep.Err()
	}

	// Sign the bytes that were verified: re-read them and compare with the
	// digest the verification computed.
	data, err := readSums(filepath.Join(dir, sums.SumsFile))
	if err != nil {
		return nil, "", nil, err
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != rep.Digest {
		return nil, "", nil, fmt.Errorf("%s changed while the release was being verified; not signed", filepath.Join(dir, sums.SumsFile))
	}
	signer, closer, err := sshsig.LoadSigner(opts.Key, opts.AgentSocket)
	if err != nil {
		return nil, "", nil, err
	}
	defer closer.Close()
	sig, err := sshsig.Sign(signer, data, verify.SignatureNamespace)
	if err != nil {
		return nil, "", nil, err
	}
	sigPath := filepath.Join(dir, verify.SignatureFile)
	if err := durable.WriteFile(sigPath, sig); err != nil {
		return nil, "", nil, err
	}
	return rep, sigPath, signer.PublicKey(), nil
}

// releaseSignReport writes what was signed, the allowed_signers line for
// verifiers and the commands that check the signature.
func releaseSignReport(opts *releaseSignOptions, rep *verify.Report, sigPath string, pub ssh.PublicKey) {
	dir := opts.ReleaseDir
	id := opts.Identity
	if id == "" {
		id = "ID"
	}
	w := opts.IO.Out
	fmt.Fprintf(w, "signed release %s (%s)\n", rep.ReleaseID, dir)
	fmt.Fprintf(w, "  release digest  %s (sha256 of SHA256SUMS)\n", rep.Digest)
	fmt.Fprintf(w, "  key             %s %s\n", pub.Type(), ssh.FingerprintSHA256(pub))
	fmt.Fprintf(w, "  signature       %s (namespace %s)\n", sigPath, verify.SignatureNamespace)
	fmt.Fprintln(w, "allowed_signers line for verifiers:")
	fmt.Fprintf(w, "  %s namespaces=\"%s\" %s\n", id, verify.SignatureNamespace, bytes.TrimSpace(ssh.MarshalAuthorizedKey(pub)))
	fmt.Fprintln(w, "check the signature with either of:")
	fmt.Fprintf(w, "  ssh-keygen -Y verify -f allowed_signers -I %s -n %s -s %s < %s\n",
		launch.ShellQuote(id), verify.SignatureNamespace, launch.ShellQuote(sigPath), launch.ShellQuote(filepath.Join(dir, sums.SumsFile)))
	fmt.Fprintf(w, "  lfmq verify --release-dir %s --allowed-signers allowed_signers --identity %s\n", launch.ShellQuote(dir), launch.ShellQuote(id))
	if opts.Identity == "" {
		fmt.Fprintln(w, "(ID: the signer's principal in allowed_signers, e.g. an e-mail address; --identity fills it in)")
	}
}

// readSums reads a SHA256SUMS file, bounded like every reader of it.
func readSums(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := sums.ReadList(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, nil
}
