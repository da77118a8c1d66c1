package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lfmq/lfmq/format/sshsig"
	"github.com/lfmq/lfmq/format/units"
	"github.com/lfmq/lfmq/internal/progress"
	"github.com/lfmq/lfmq/launch"
	"github.com/lfmq/lfmq/verify"
)

type verifyOptions struct {
	IO             *IOStreams
	ReleaseDir     string
	Sums           string
	Deep           bool
	JSON           bool
	Workers        int
	AllowedSigners string
	Identity       string
}

func newVerifyCmd(ios *IOStreams, runF func(*verifyOptions) error) *cobra.Command {
	opts := &verifyOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "verify (--release-dir DIR [--deep] [--allowed-signers FILE [--identity ID]] | --sums FILE) [--json]",
		Short: "Check every byte of a release, or any sha256sum list",
		Long: `Verify re-hashes every file of a release directory and checks it against
SHA256SUMS and runtime-release.json, checks that the two lists agree, that
checkpoint/manifest.json has the pinned sha256 and lists exactly the
checkpoint's files (--deep: also every tensor's sha256), the same of a
release's drafter and drafter/manifest.json, and that nothing is missing,
extra, a link or outside the directory.

Each finding gives the path, what the list expects and what is on disk. The
files to download again are listed at the end. --json prints the whole report
on stdout.

--allowed-signers FILE also checks the release signature: SHA256SUMS.sig must
be an SSH signature (namespace "lfmq-release") over the exact bytes of
SHA256SUMS by a key that FILE, in ssh-keygen's allowed_signers format, grants
to --identity (without --identity, to any principal; the report names them).
A missing or bad signature is then a finding; without --allowed-signers the
signature is not read. It is the check of
'ssh-keygen -Y verify -f FILE -I ID -n lfmq-release -s SHA256SUMS.sig < SHA256SUMS'.

--sums FILE checks a sha256sum-style list (paths relative to its directory),
like 'sha256sum -c FILE' with a strict reader.

Exit status: 0 clean, 3 any finding, 1 an operational failure, 2 usage.`,
		Example: "  lfmq verify --release-dir ./LFM2-8B-A1B-lfmq1\n" +
			"  lfmq verify --release-dir ./LFM2-8B-A1B-lfmq1 --allowed-signers allowed_signers --identity release@example.org\n" +
			"  lfmq verify --sums SHA256SUMS",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return verifyRun(cmd, opts)
		},
	}
	cmd.Flags().StringVar(&opts.ReleaseDir, "release-dir", "", "release directory to verify")
	cmd.Flags().StringVar(&opts.Sums, "sums", "", "sha256sum-style list to check")
	cmd.Flags().BoolVar(&opts.Deep, "deep", false, "also check every checkpoint tensor's sha256")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the report as JSON on stdout")
	cmd.Flags().IntVar(&opts.Workers, "workers", 0, "files hashed in parallel (0 = all cores)")
	addSignerFlags(cmd, &opts.AllowedSigners, &opts.Identity)
	cmd.MarkFlagDirname("release-dir")
	return cmd
}

// validate checks the command line's combinations (usage errors, exit 2).
func (o *verifyOptions) validate() error {
	switch {
	case o.ReleaseDir == "" && o.Sums == "":
		return &usageError{fmt.Errorf("--release-dir or --sums is required")}
	case o.ReleaseDir != "" && o.Sums != "":
		return &usageError{fmt.Errorf("--release-dir and --sums cannot be combined")}
	case o.Deep && o.Sums != "":
		return &usageError{fmt.Errorf("--deep applies to --release-dir only")}
	case o.AllowedSigners != "" && o.Sums != "":
		return &usageError{fmt.Errorf("--allowed-signers applies to --release-dir only")}
	case o.Workers < 0:
		return &usageError{fmt.Errorf("--workers must be 0 (all cores) or positive, got %d", o.Workers)}
	}
	return checkSignerFlags(o.AllowedSigners, o.Identity)
}

func verifyRun(cmd *cobra.Command, opts *verifyOptions) error {
	if opts.ReleaseDir != "" {
		if err := requireReleaseDir(opts.ReleaseDir); err != nil {
			return err
		}
	}
	if opts.Sums != "" {
		if err := requireFiles("--sums "+opts.Sums, opts.Sums); err != nil {
			return err
		}
	}
	vo := verify.Options{Deep: opts.Deep, Workers: opts.Workers}
	if err := loadSigners(opts.AllowedSigners, opts.Identity, &vo); err != nil {
		return err
	}
	var bar *progress.Bytes
	if opts.IO.ErrTTY && !opts.JSON {
		bar = progress.NewBytes(opts.IO.ErrOut, "verifying")
		vo.Progress = bar
	}
	var rep *verify.Report
	var err error
	if opts.Sums != "" {
		rep, err = verify.Sums(cmd.Context(), opts.Sums, vo)
	} else {
		rep, err = verify.Release(cmd.Context(), opts.ReleaseDir, vo)
	}
	bar.Finish()
	if rep != nil {
		if perr := printReport(opts.IO, rep, opts.JSON); perr != nil && err == nil {
			err = perr
		}
	}
	if err != nil {
		return err
	}
	if ferr := rep.Err(); ferr != nil && !opts.JSON {
		// The printed report ends with the summary: run adds nothing, and
		// the exit status still comes from the findings.
		return &reportedError{ferr}
	}
	return rep.Err()
}

// reportedError is an error whose report has been printed in full: run
// prints no line of its own for it. Its exit code is the wrapped error's.
type reportedError struct{ err error }

func (e *reportedError) Error() string { return e.err.Error() }
func (e *reportedError) Unwrap() error { return e.err }

// printReport writes a report: JSON on stdout, or findings, a summary and
// the re-fetch list for people.
func printReport(ios *IOStreams, rep *verify.Report, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(ios.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	w := ios.Out
	for _, f := range rep.Findings {
		fmt.Fprintf(w, "%-9s %s\n", f.Kind, f.Path)
		// Expected is always a list's claim, actual always the file: the
		// labels say which list and that the other is on disk.
		if f.WantSHA256 != "" || f.WantSize >= 0 {
			fmt.Fprintf(w, "          expected %s (per %s)\n", shaSize(f.WantSHA256, f.WantSize), f.Authority)
		}
		if f.GotSHA256 != "" || f.GotSize >= 0 {
			where := "on disk"
			if f.Kind == verify.KindSize {
				where = "on disk, not hashed: the size differs"
			}
			fmt.Fprintf(w, "          actual   %s (%s)\n", shaSize(f.GotSHA256, f.GotSize), where)
		}
		if f.Detail != "" {
			fmt.Fprintf(w, "          %s\n", f.Detail)
		}
		if f.Kind == verify.KindSignature {
			fmt.Fprintf(w, "          %s\n", signatureAdvice(f))
		}
	}
	what := "release " + rep.Dir
	if rep.ReleaseID != "" {
		what = "release " + rep.ReleaseID + " (" + rep.Dir + ")"
	}
	// A release's count is the one its build prints: the files SHA256SUMS
	// lists, then SHA256SUMS itself, which no list can hold.
	counted := fmt.Sprintf("%d files listed in %s (%s)", rep.Files, rep.List, units.Bytes(rep.Bytes))
	if rep.List != "SHA256SUMS" || rep.ReleaseID == "" && rep.OK {
		what = filepath.Join(rep.Dir, rep.List)
	} else {
		counted += ", plus " + rep.List + " itself,"
	}
	if rep.OK {
		fmt.Fprintf(w, "OK: %s: %s verified", what, counted)
		if rep.Deep {
			fmt.Fprint(w, ", every tensor checked")
		}
		fmt.Fprintln(w)
		if rep.Digest != "" {
			fmt.Fprintf(w, "digest (sha256 of %s) %s\n", rep.List, rep.Digest)
		}
		printSignature(w, rep)
		return nil
	}
	fmt.Fprintf(w, "FAILED: %s: %d finding(s)", what, len(rep.Findings))
	sep := " ("
	for _, k := range []verify.Kind{verify.KindMissing, verify.KindSize, verify.KindHash, verify.KindExtra, verify.KindUnsafe, verify.KindMalformed, verify.KindDisagree, verify.KindPin, verify.KindTensor, verify.KindSignature} {
		if n := rep.Count(k); n > 0 {
			fmt.Fprintf(w, "%s%d %s", sep, n, k)
			sep = ", "
		}
	}
	if sep == ", " {
		fmt.Fprint(w, ")")
	}
	fmt.Fprintf(w, "; %d listed files, %s hashed\n", rep.Files, units.Bytes(rep.Bytes))
	printSignature(w, rep)
	if len(rep.Refetch) > 0 {
		fmt.Fprintln(w, "re-fetch:")
		for _, p := range rep.Refetch {
			fmt.Fprintln(w, p)
		}
	}
	return nil
}

// addSignerFlags adds --allowed-signers and --identity, which mean the
// same in verify, download and launch: check SHA256SUMS.sig as verify
// does.
func addSignerFlags(cmd *cobra.Command, allowed, identity *string) {
	cmd.Flags().StringVar(allowed, "allowed-signers", "", "ssh-keygen allowed_signers file: also verify SHA256SUMS.sig")
	cmd.Flags().StringVar(identity, "identity", "", "principal that must have signed (default: any in --allowed-signers)")
	cmd.MarkFlagFilename("allowed-signers")
}

// checkSignerFlags refuses --identity without --allowed-signers.
func checkSignerFlags(allowed, identity string) error {
	if identity != "" && allowed == "" {
		return &usageError{fmt.Errorf("--identity needs --allowed-signers")}
	}
	return nil
}

// loadSigners reads the --allowed-signers file into vo, which then makes
// the signature part of the verification; without the flag it does
// nothing.
func loadSigners(allowed, identity string, vo *verify.Options) error {
	if allowed == "" {
		return nil
	}
	if err := requireFiles("--allowed-signers "+allowed, allowed); err != nil {
		return err
	}
	signers, err := sshsig.ReadAllowedSigners(allowed)
	if err != nil {
		return err
	}
	vo.AllowedSigners, vo.Identity = signers, identity
	return nil
}

// signerArgs are the --allowed-signers and --identity arguments that
// repeat a check in a printed follow-up command, quoted for a shell.
func signerArgs(allowed, identity string) string {
	var s string
	if allowed != "" {
		s += " --allowed-signers " + launch.ShellQuote(allowed)
	}
	if identity != "" {
		s += " --identity " + launch.ShellQuote(identity)
	}
	return s
}

// signatureAdvice says what to do about a signature finding: the finding
// says what is wrong, and a person must decide whether to trust the bytes.
func signatureAdvice(f *verify.MismatchError) string {
	if errors.Is(f, verify.ErrUnsigned) {
		return "what to do: get the release with its signature (SHA256SUMS.sig beside SHA256SUMS) from its publisher, or leave out --allowed-signers to accept it unsigned"
	}
	return "what to do: do not use this release. Either it or its signature changed after signing (fetch both again from the publisher), or " +
		f.Authority + " does not grant the publisher's key to the principal asked for (check it with the publisher)"
}

// printSignature names the key and principals of a verified signature.
func printSignature(w io.Writer, rep *verify.Report) {
	if s := rep.Signature; s != nil {
		fmt.Fprintf(w, "signature %s: good, %s key %s of %s\n", verify.SignatureFile, s.KeyType, s.Fingerprint, strings.Join(s.Principals, "; "))
	}
}

// shaSize writes whichever of a digest and a size is known.
func shaSize(sha string, size int64) string {
	var parts []string
	if sha != "" {
		parts = append(parts, "sha256 "+sha)
	}
	if size >= 0 {
		parts = append(parts, fmt.Sprintf("%d bytes", size))
	}
	return strings.Join(parts, ", ")
}
