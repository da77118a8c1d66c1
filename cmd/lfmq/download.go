package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/spf13/cobra"

	"github.com/lfmq/lfmq/format/units"
	"github.com/lfmq/lfmq/hub/download"
	"github.com/lfmq/lfmq/internal/progress"
	"github.com/lfmq/lfmq/launch"
	"github.com/lfmq/lfmq/verify"
)

type downloadOptions struct {
	IO           *IOStreams
	URL          string
	Revision     string
	CacheRoot    string
	DownloadOnly bool
	Jobs         int
	JSON         bool
	// AllowedSigners and Identity require a signature, as verify's flags.
	AllowedSigners string
	Identity       string
	// Token is HF_TOKEN; HTTPClient builds the client lazily (tests inject
	// one).
	Token      string
	HTTPClient func() *http.Client
}

func newDownloadCmd(ios *IOStreams, runF func(*downloadOptions) error) *cobra.Command {
	opts := &downloadOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "download URL --revision REV --cache-root DIR [--allowed-signers FILE [--identity ID]] [--download-only]",
		Short: "Fetch a release from a hub and verify every byte",
		Long: `Download fetches a release published on a Hugging Face style hub, where files
live at {URL}/resolve/{revision}/{path}, into DIR/<owner>--<name>/<revision>/.

SHA256SUMS comes first, then SHA256SUMS.sig when the release is signed;
every file SHA256SUMS lists follows, several at a time. A partial file is resumed with an HTTP Range request; each file is checked
against its sha256 before it takes its final name, and a file the hub serves
wrong is fetched once more, then reported, never kept. When the hub names the
commit of the revision, every file is fetched at that commit. Rerunning only
fetches what is missing or wrong. The run ends with 'lfmq verify' over the
directory, and its exit status is verify's.

--allowed-signers FILE [--identity ID] requires a good signature, as in
'lfmq verify': SHA256SUMS.sig is checked against FILE as soon as it and
SHA256SUMS have arrived, and a release that is unsigned or whose signature
does not verify is refused (exit 3) before anything else is fetched or
written. Without the flag, the signature is fetched but not checked.

HF_TOKEN, when set, is sent to the URL's host only. Afterwards it prints the
'lfmq launch' command that serves the release (with the same
--allowed-signers and --identity); --download-only prints no follow-up
hint.`,
		Example: "  lfmq download https://huggingface.co/lfmq/LFM2-8B-A1B-lfmq1 --revision v1 --cache-root ~/.cache/lfmq\n" +
			"  lfmq download https://huggingface.co/lfmq/LFM2-8B-A1B-lfmq1 --revision v1 --cache-root ~/.cache/lfmq --allowed-signers allowed_signers --identity release@example.org",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL = args[0]
			if err := opts.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return downloadRun(cmd, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Revision, "revision", "", "tag, branch or commit to fetch (required)")
	cmd.Flags().StringVar(&opts.CacheRoot, "cache-root", "", "directory that holds downloads (required)")
	cmd.Flags().BoolVar(&opts.DownloadOnly, "download-only", false, "fetch and verify only")
	cmd.Flags().IntVar(&opts.Jobs, "jobs", 4, "files fetched at once")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the final verification report as JSON on stdout")
	addSignerFlags(cmd, &opts.AllowedSigners, &opts.Identity)
	cmd.MarkFlagDirname("cache-root")
	return cmd
}

// validate checks the command line (usage errors, exit 2) and reads
// HF_TOKEN into o.
func (o *downloadOptions) validate() error {
	if err := requireFlags("revision", o.Revision, "cache-root", o.CacheRoot); err != nil {
		return err
	}
	if _, err := download.Dest(o.CacheRoot, o.URL, o.Revision); err != nil {
		return &usageError{err}
	}
	if o.Jobs < 1 {
		return &usageError{fmt.Errorf("--jobs must be positive, got %d", o.Jobs)}
	}
	if err := checkSignerFlags(o.AllowedSigners, o.Identity); err != nil {
		return err
	}
	o.Token = os.Getenv("HF_TOKEN")
	return nil
}

func downloadRun(cmd *cobra.Command, opts *downloadOptions) error {
	dopts, err := downloadInputs(opts)
	if err != nil {
		return err
	}
	var bar *progress.Bytes
	if opts.IO.ErrTTY && !opts.JSON {
		bar = progress.NewBytes(opts.IO.ErrOut, "verifying")
		dopts.Verify.Progress = bar
	}
	res, err := download.Download(cmd.Context(), dopts)
	bar.Finish()
	return downloadReport(cmd.Context(), opts, res, err)
}

// downloadInputs checks the cache root and reads the allowed signers into
// the download's options: an unreadable allowed_signers file stops the
// run before the network.
func downloadInputs(opts *downloadOptions) (download.Options, error) {
	if err := requireOutDir("--cache-root "+opts.CacheRoot, opts.CacheRoot); err != nil {
		return download.Options{}, err
	}
	dopts := download.Options{
		URL: opts.URL, Revision: opts.Revision, CacheRoot: opts.CacheRoot,
		Token: opts.Token, Jobs: opts.Jobs, Log: opts.IO.ErrOut,
	}
	if opts.HTTPClient != nil {
		dopts.Client = opts.HTTPClient()
	}
	if err := loadSigners(opts.AllowedSigners, opts.Identity, &dopts.Verify); err != nil {
		return download.Options{}, err
	}
	return dopts, nil
}

// downloadReport writes the verification's report, what was fetched and
// the commands that follow, for the download's result and error, and
// returns the run's error.
func downloadReport(ctx context.Context, opts *downloadOptions, res *download.Result, err error) error {
	if res != nil && res.Report != nil {
		if perr := printReport(opts.IO, res.Report, opts.JSON); perr != nil && err == nil {
			err = perr
		}
	}
	// A run that failed before it had the file list (a revision the hub
	// does not have, a network error, a refused signature) has nothing to
	// sum up: its error says what happened.
	if res != nil && !opts.JSON && (err == nil || res.Report != nil || len(res.Fetched)+len(res.Skipped) > 0) {
		w := opts.IO.Out
		fmt.Fprintf(w, "%s: %d fetched, %d already present, %s received", res.Dir, len(res.Fetched), len(res.Skipped), units.Bytes(res.BytesReceived))
		if res.Commit != "" {
			fmt.Fprintf(w, ", commit %s", res.Commit)
		}
		fmt.Fprintln(w)
		if err == nil && !opts.DownloadOnly {
			signers := signerArgs(opts.AllowedSigners, opts.Identity)
			fmt.Fprintf(w, "check it again at any time with: lfmq verify --release-dir %s%s\n", launch.ShellQuote(res.Dir), signers)
			if repo, rerr := download.Repo(opts.URL); rerr == nil {
				fmt.Fprintf(w, "serve it with: lfmq launch --cache-root %s --repo %s --revision %s%s\n", launch.ShellQuote(opts.CacheRoot), repo, opts.Revision, signers)
			}
		}
	}
	// A signature refused before any file was fetched has no report to
	// show it: say what to do after run's message.
	var me *verify.MismatchError
	if (res == nil || res.Report == nil) && errors.As(err, &me) && me.Kind == verify.KindSignature {
		if opts.JSON {
			// Scripts reading --json get a report either way: this one
			// holds the signature finding alone.
			dir, _ := download.Dest(opts.CacheRoot, opts.URL, opts.Revision)
			rep := &verify.Report{Dir: dir, List: "SHA256SUMS", Findings: []*verify.MismatchError{me}, Refetch: []string{}}
			if perr := printReport(opts.IO, rep, true); perr != nil {
				return perr
			}
		}
		opts.IO.Errorf("lfmq: %s; refused before fetching the files SHA256SUMS lists\n", message(ctx, err))
		opts.IO.Errorf("%s\n", signatureAdvice(me))
		return &reportedError{err}
	}
	return err
}
