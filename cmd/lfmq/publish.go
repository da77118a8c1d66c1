package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lfmq/lfmq/format/units"
	"github.com/lfmq/lfmq/hub/download"
	"github.com/lfmq/lfmq/hub/publish"
	"github.com/lfmq/lfmq/internal/progress"
	"github.com/lfmq/lfmq/verify"
	"github.com/lfmq/lfmq/verify/sums"
)

type publishOptions struct {
	IO         *IOStreams
	ReleaseDir string
	Repo       string
	Revision   string
	Branch     string
	Endpoint   string
	Private    bool
	Create     bool
	Message    string
	TokenFile  string
	NoCheck    bool
	Jobs       int
	Retries    int
	// Token is read from --token-file or HF_TOKEN when the command line is
	// parsed; HTTPClient builds the client lazily (tests inject one).
	Token      string
	HTTPClient func() *http.Client
}

func newPublishCmd(ios *IOStreams, runF func(*publishOptions) error) *cobra.Command {
	opts := &publishOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "publish --release-dir DIR --repo OWNER/NAME [--revision TAG] [--create]",
		Short: "Publish a verified release to a Hugging Face-compatible hub",
		Long: `Publish puts a release on a model hub as one commit and tags it.

It verifies the release first, every byte as 'lfmq verify' does, and refuses
one with any finding (exit 3). It then asks the hub which files the branch
already has, uploads only the large-file (LFS) objects the hub does not
store, each streamed from disk under its sha256, and makes one commit that
adds or changes the release's files and deletes those no longer in it. The
commit names the branch head it was built on, so a push by someone else in
the meantime is refused rather than overwritten; run publish again.

The commit is tagged with the release's revision (runtime-release.json); an
existing tag is never moved. Publishing a release the hub already holds
makes no commit. An interrupted publish, run again, uploads only what the
hub does not have yet.

Afterwards the new commit is downloaded into a temporary directory and
verified byte for byte against the local release (--no-check skips this).

The token comes from --token-file or HF_TOKEN and is sent only to the
endpoint's host, never to the object storage the hub hands uploads to.

Exit status: 0 published (or already up to date), 3 the release or the
published copy does not verify, 1 any other failure, 2 usage.`,
		Example: `  HF_TOKEN=hf_... lfmq publish --release-dir ./release --repo me/LFM2-8B-A1B-lfmq1 --create
  lfmq publish --release-dir ./release --repo me/LFM2-8B-A1B-lfmq1 --token-file ~/.hf-token --private --create`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return publishRun(cmd, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.ReleaseDir, "release-dir", "", "release directory, as lfmq release build wrote it (required)")
	f.StringVar(&opts.Repo, "repo", "", "model repository on the hub, OWNER/NAME (required)")
	f.StringVar(&opts.Revision, "revision", "", "tag for the commit (default: the release's revision, runtime-release.json)")
	f.StringVar(&opts.Branch, "branch", "main", "branch that receives the commit")
	f.StringVar(&opts.Endpoint, "endpoint", publish.DefaultEndpoint, "hub base URL")
	f.BoolVar(&opts.Private, "private", false, "make the repository --create makes private")
	f.BoolVar(&opts.Create, "create", false, "create the repository if the hub does not have it")
	f.StringVar(&opts.Message, "message", "", "commit summary (default \"Publish <release id>\")")
	f.StringVar(&opts.TokenFile, "token-file", "", "file holding the hub token (default: $HF_TOKEN)")
	f.BoolVar(&opts.NoCheck, "no-check", false, "do not download the published commit to verify it")
	f.IntVar(&opts.Jobs, "jobs", 4, "uploads in flight")
	f.IntVar(&opts.Retries, "retries", 5, "retries of a request after a network error, a 429 or a 5xx")
	cmd.MarkFlagDirname("release-dir")
	cmd.MarkFlagFilename("token-file")
	return cmd
}

// validate checks the command line into o (usage errors, exit 2) and
// reads the hub token, from --token-file or HF_TOKEN.
func (o *publishOptions) validate(cmd *cobra.Command) error {
	if err := requireFlags("release-dir", o.ReleaseDir, "repo", o.Repo); err != nil {
		return err
	}
	if o.Jobs < 1 {
		return &usageError{fmt.Errorf("--jobs must be positive, got %d", o.Jobs)}
	}
	if o.Retries < 0 {
		return &usageError{fmt.Errorf("--retries must not be negative, got %d", o.Retries)}
	}
	if o.Private && !o.Create {
		return &usageError{errors.New("--private applies to a repository --create makes")}
	}
	po := publish.Options{Endpoint: o.Endpoint, Repo: o.Repo, Branch: o.Branch, Revision: o.Revision, Dir: o.ReleaseDir}
	if err := po.Validate(); err != nil {
		return &usageError{errors.New(strings.TrimPrefix(err.Error(), "publish: "))}
	}
	if cmd.Flags().Changed("token-file") {
		key, err := readTokenFile(o.TokenFile)
		if err != nil {
			return err
		}
		o.Token = key
	} else {
		o.Token = strings.TrimSpace(os.Getenv("HF_TOKEN"))
	}
	if o.Token == "" {
		return &usageError{errors.New("publishing needs a hub token with write access: set HF_TOKEN or give --token-file FILE")}
	}
	return nil
}

// readTokenFile reads a token file: one token, surrounding space ignored.
func readTokenFile(path string) (string, error) {
	// A file that is not there is the command line's mistake (exit 2),
	// named as every other input file is.
	if err := requireFiles("--token-file "+path, path); err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("--token-file %s: want one token on one line", path)
	}
	return tok, nil
}

func publishRun(cmd *cobra.Command, opts *publishOptions) error {
	ctx := cmd.Context()
	rep, hashed, err := publishInputs(ctx, opts)
	if err != nil {
		return err
	}
	res, took, err := publishWork(ctx, opts)
	if err != nil {
		return err
	}
	publishReport(opts, res, rep, hashed, took)
	// Check what the hub now serves.
	if !opts.NoCheck {
		if err := checkPublished(cmd, opts, res, rep); err != nil {
			return err
		}
	}
	publishNext(opts, res, rep)
	return nil
}

// publishInputs checks the release: it must verify, every byte, before
// anything is sent. A release with findings has its report printed and
// is refused. It returns the report and the time the hashing took.
func publishInputs(ctx context.Context, opts *publishOptions) (*verify.Report, time.Duration, error) {
	if err := requireReleaseDir(opts.ReleaseDir); err != nil {
		return nil, 0, err
	}
	vo := verify.Options{}
	var bar *progress.Bytes
	if opts.IO.ErrTTY {
		bar = progress.NewBytes(opts.IO.ErrOut, "verifying")
		vo.Progress = bar
	}
	start := time.Now()
	rep, err := verify.Release(ctx, opts.ReleaseDir, vo)
	bar.Finish()
	if err != nil {
		return nil, 0, err
	}
	if !rep.OK {
		if err := printReport(opts.IO, rep, false); err != nil {
			return nil, 0, err
		}
		return nil, 0, fmt.Errorf("%s does not verify: nothing was published: %w", opts.ReleaseDir, rep.Err())
	}
	hashed := time.Since(start)
	fmt.Fprintf(opts.IO.Out, "verified %s: %d files, %s\n", opts.ReleaseDir, rep.Files, units.Bytes(rep.Bytes))
	return rep, hashed, nil
}

// publishWork publishes the verified release under its revision, showing
// the uploads on the error stream, and returns the hub's result and the
// time it took.
func publishWork(ctx context.Context, opts *publishOptions) (*publish.Result, time.Duration, error) {
	revision, err := releaseRevision(opts.ReleaseDir, opts.Revision)
	if err != nil {
		return nil, 0, err
	}
	prog := progress.NewUploads(opts.IO.ErrOut, opts.IO.ErrTTY)
	po := publish.Options{
		Endpoint: opts.Endpoint, Repo: opts.Repo, Branch: opts.Branch, Revision: revision, Dir: opts.ReleaseDir,
		Create: opts.Create, Private: opts.Private, Message: opts.Message, Token: opts.Token, Jobs: opts.Jobs,
		Retries: cmp.Or(opts.Retries, -1), Progress: uploadProgress(prog), // --retries 0: none, not the library's default
	}
	if opts.HTTPClient != nil {
		po.Client = opts.HTTPClient()
	}
	start := time.Now()
	res, err := publish.Publish(ctx, po)
	prog.Finish()
	if err != nil {
		var stale *publish.StaleError
		if errors.As(err, &stale) {
			return nil, 0, fmt.Errorf("%w\nnothing was committed and the uploaded objects stay on the hub: run lfmq publish again to publish on top of the new head", err)
		}
		return nil, 0, err
	}
	return res, time.Since(start), nil
}

// uploadProgress is publish's progress callbacks drawn by p.
func uploadProgress(p *progress.Uploads) publish.Progress {
	return publish.Progress{
		Started: p.Started,
		Bytes:   func(_ string, n int64) { p.Add(n) },
		Done:    func(path string, o publish.Outcome) { p.Done(path, o) },
	}
}

// publishReport writes what was committed and tagged, and how fast the
// upload and the verification went.
func publishReport(opts *publishOptions, res *publish.Result, rep *verify.Report, hashed, took time.Duration) {
	w := opts.IO.Out
	if res.Created {
		fmt.Fprintf(w, "created %s\n", res.URL)
	}
	if res.UpToDate {
		fmt.Fprintf(w, "up to date: %s already holds this release at commit %s", res.Repo, res.Commit)
	} else {
		fmt.Fprintf(w, "committed %s on %s: %d files uploaded (%s in %s), %d already on the hub (%s), %d deleted",
			res.Commit, res.Branch, len(res.Uploaded), units.Bytes(res.UploadedBytes), took.Round(time.Millisecond),
			len(res.Skipped), units.Bytes(res.SkippedBytes), len(res.Deleted))
	}
	if res.Tag != "" {
		state := "existing tag"
		if res.TagCreated {
			state = "tagged"
		}
		fmt.Fprintf(w, "; %s %s", state, res.Tag)
	}
	fmt.Fprintln(w)
	if hashed > 0 && took > 0 && res.UploadedBytes > 0 {
		fmt.Fprintf(w, "upload %s/s; verification hashed %s/s\n", units.Bytes(int64(float64(res.UploadedBytes)/took.Seconds())), units.Bytes(int64(float64(rep.Bytes)/hashed.Seconds())))
	}
}

// publishNext ends the run with the commit, the release digest and the
// command that downloads the release.
func publishNext(opts *publishOptions, res *publish.Result, rep *verify.Report) {
	w := opts.IO.Out
	fmt.Fprintf(w, "commit  %s\n", res.CommitURL)
	fmt.Fprintf(w, "release digest (sha256 of SHA256SUMS) %s\n", rep.Digest)
	if res.Tag != "" {
		// A signed release is worth downloading with its signature
		// checked; FILE is the checker's allowed_signers.
		var check string
		if _, err := os.Lstat(filepath.Join(opts.ReleaseDir, verify.SignatureFile)); err == nil {
			check = " --allowed-signers FILE"
		}
		fmt.Fprintf(w, "download it with: lfmq download %s --revision %s --cache-root DIR%s\n", res.URL, res.Tag, check)
	}
}

// releaseRevision is the tag to publish under: the release's own revision,
// which --revision may repeat but not contradict, since the release
// records it (runtime-release.json, the model card's download commands).
func releaseRevision(dir, flag string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, sums.RuntimeReleaseFile))
	if errors.Is(err, os.ErrNotExist) {
		return flag, nil
	}
	if err != nil {
		return "", err
	}
	rr, err := sums.ParseRuntimeRelease(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", filepath.Join(dir, sums.RuntimeReleaseFile), err)
	}
	switch {
	case flag == "":
		return rr.Revision, nil
	case rr.Revision != "" && flag != rr.Revision:
		return "", &usageError{fmt.Errorf("--revision %s: the release was built as revision %s (runtime-release.json), and its card and lists say so; rebuild it with --revision %s to publish it under that tag", flag, rr.Revision, flag)}
	}
	return flag, nil
}

// checkPublished downloads the new commit into a temporary directory and
// checks that it is the local release, byte for byte: its SHA256SUMS is
// the local one (so every file it lists is), and so is its signature.
func checkPublished(cmd *cobra.Command, opts *publishOptions, res *publish.Result, local *verify.Report) error {
	tmp, err := os.MkdirTemp("", "lfmq-publish-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	dopts := download.Options{URL: res.URL, Revision: res.Commit, CacheRoot: tmp, Token: opts.Token, Jobs: opts.Jobs}
	if opts.HTTPClient != nil {
		dopts.Client = opts.HTTPClient()
	}
	start := time.Now()
	got, err := download.Download(cmd.Context(), dopts)
	if got != nil && got.Report != nil && !got.Report.OK {
		printReport(opts.IO, got.Report, false)
	}
	if err != nil {
		return fmt.Errorf("checking the published commit %s: %w", res.Commit, err)
	}
	if got.Report.Digest != local.Digest {
		return &verify.MismatchError{Path: sums.SumsFile, Kind: verify.KindHash, WantSHA256: local.Digest, GotSHA256: got.Report.Digest,
			WantSize: verify.Unknown, GotSize: verify.Unknown, Authority: opts.ReleaseDir, Detail: "the hub serves another SHA256SUMS at commit " + res.Commit}
	}
	mine, _ := os.ReadFile(filepath.Join(opts.ReleaseDir, verify.SignatureFile))
	theirs, _ := os.ReadFile(filepath.Join(got.Dir, verify.SignatureFile))
	if !bytes.Equal(mine, theirs) {
		return &verify.MismatchError{Path: verify.SignatureFile, Kind: verify.KindHash, WantSize: int64(len(mine)), GotSize: int64(len(theirs)),
			Authority: opts.ReleaseDir, Detail: "the hub serves another signature at commit " + res.Commit}
	}
	fmt.Fprintf(opts.IO.Out, "checked: commit %s downloaded (%s) and verified in %s: %d files, identical to %s\n",
		res.Commit, units.Bytes(got.BytesReceived), time.Since(start).Round(time.Millisecond), got.Report.Files, opts.ReleaseDir)
	return nil
}
