package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lfmq/lfmq/internal/progress"
	"github.com/lfmq/lfmq/launch"
)

type launchOptions struct {
	IO           *IOStreams
	ReleaseDir   string
	CacheRoot    string
	Repo         string
	Revision     string
	CacheDir     string
	PrintCommand bool
	// AllowedSigners and Identity require a signature, as verify's flags.
	AllowedSigners string
	Identity       string
	// Serve holds the serve flags passed through (validated as serve
	// validates them); Forward their command-line form.
	Serve   serveOptions
	Forward []string
	// NoDrafter is --drafter off: the release's drafter is not used.
	NoDrafter bool
	// Exec runs the plan (launch.Exec; tests capture it).
	Exec func(*launch.Plan) error
}

func newLaunchCmd(ios *IOStreams, runF func(*launchOptions) error) *cobra.Command {
	return newLaunchCmdWith(ios, runF, launch.Exec)
}

// newLaunchCmdWith is newLaunchCmd with the function that runs the plan
// (tests capture it instead of replacing their process).
func newLaunchCmdWith(ios *IOStreams, runF func(*launchOptions) error, execF func(*launch.Plan) error) *cobra.Command {
	opts := &launchOptions{IO: ios, Exec: execF}
	cmd := &cobra.Command{
		Use:   "launch (--release-dir DIR | --cache-root DIR --repo OWNER/NAME --revision REV) [--allowed-signers FILE [--identity ID]] [serve flags]",
		Short: "Verify a release and start its bundled runtime as an OpenAI-compatible server",
		Long: `Launch starts the server a release bundles, pinned to the bytes that were
verified. It checks every byte of the release (as 'lfmq verify'; any finding
exits 3 and nothing starts), picks runtime/lfmq-<os>-<arch> for this platform
and checks it against the digest runtime-release.json pins, gives it back its
execute bit if a download dropped it, binds the server's cache directory to
the release (an identity file naming the release, the checkpoint manifest and
the runtime; a directory labelled for something else, or not empty and not
labelled, is refused), then replaces itself with

  runtime/lfmq-<os>-<arch> serve --model <release>/checkpoint \
      --served-model-name <release id> --cache-dir <cache> \
      [--drafter <release>/drafter] [serve flags]

exactly as --print-command prints it. A release that carries a drafter
(lfmq release build took one) is served with it: drafted decoding, the same
tokens as without it; --drafter off serves without it, --drafter DIR with
another. The serve flags are checked here first,
by serve's own rules. A release fetched with 'lfmq download' is named by
--cache-root, --repo and --revision. The API key comes from --api-key-file or
LFMQ_API_KEY (never from the command line, where other users could read it).

--allowed-signers FILE [--identity ID] also requires the release signature,
exactly as 'lfmq verify' checks it: SHA256SUMS.sig must be a good signature
over SHA256SUMS by a key FILE grants (to ID). An unsigned release, or one
whose signature does not verify, exits 3 and nothing starts. Without the
flag the signature is not read.`,
		Example: `  lfmq launch --release-dir ./LFM2-8B-A1B-lfmq1 --sampling-preset agentic
  lfmq launch --cache-root ~/.cache/lfmq --repo lfmq/LFM2-8B-A1B-lfmq1 --revision v1 --port 8080
  lfmq launch --release-dir ./release --allowed-signers allowed_signers --identity release@example.org
  lfmq launch --release-dir ./release --print-command`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(cmd.Flags()); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return launchRun(cmd, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.ReleaseDir, "release-dir", "", "release directory to launch")
	f.StringVar(&opts.CacheRoot, "cache-root", "", "where lfmq download keeps releases (with --repo and --revision)")
	f.StringVar(&opts.Repo, "repo", "", "OWNER/NAME of the downloaded release")
	f.StringVar(&opts.Revision, "revision", "", "revision of the downloaded release")
	f.StringVar(&opts.CacheDir, "cache-dir", "", "the server's cache directory (default: .cache/lfmq/serve in the release)")
	f.BoolVar(&opts.PrintCommand, "print-command", false, "check everything, print the runtime command and exit")
	addSignerFlags(cmd, &opts.AllowedSigners, &opts.Identity)
	addServeFlags(f, &opts.Serve)
	// The runtime is told the release's id unless the flag is given.
	f.Lookup("served-model-name").Usage = "model id clients send (default: the release id)"
	f.Lookup("drafter").Usage = "DSpark drafter to serve with (default: the release's drafter/, when it has one), or off"
	completeServeFlags(cmd)
	cmd.MarkFlagDirname("release-dir")
	cmd.MarkFlagDirname("cache-root")
	return cmd
}

// launchOwn are launch's own flags; every other changed flag is a serve
// flag passed through.
var launchOwn = map[string]bool{"release-dir": true, "cache-root": true, "repo": true, "revision": true, "cache-dir": true, "print-command": true,
	"allowed-signers": true, "identity": true, "help": true}

func (o *launchOptions) validate(f *pflag.FlagSet) error {
	lo := launch.Options{ReleaseDir: o.ReleaseDir, CacheRoot: o.CacheRoot, Repo: o.Repo, Revision: o.Revision}
	if _, err := lo.Dir(); err != nil {
		return &usageError{errors.New(strings.TrimPrefix(err.Error(), "launch: ") + " (--release-dir, or --cache-root with --repo and --revision)")}
	}
	if err := checkSignerFlags(o.AllowedSigners, o.Identity); err != nil {
		return err
	}
	if o.Serve.PrefixCaching == "off" && o.CacheDir != "" {
		return &usageError{errors.New("--cache-dir keeps the prefix cache, which --prefix-caching off turns off")}
	}
	// --drafter off is launch's: serve the release without its drafter.
	// Drafting flags without --drafter may use the release's drafter,
	// which only Prepare sees; serve's rule is checked against a stand-in.
	drafter := o.Serve.Drafter
	o.NoDrafter = drafter == "off"
	if o.NoDrafter {
		if o.Serve.DraftDepth != 0 || o.Serve.DraftCosts != "" {
			return &usageError{errors.New("--draft-depth and --draft-costs set how the drafter runs; --drafter off serves without one")}
		}
		o.Serve.Drafter = ""
	} else if drafter == "" && (o.Serve.DraftDepth != 0 || o.Serve.DraftCosts != "") {
		o.Serve.Drafter = "<release>/drafter"
	}
	err := o.Serve.validateServe()
	o.Serve.Drafter = drafter
	if err != nil {
		return err
	}
	o.Forward = nil
	f.VisitAll(func(fl *pflag.Flag) {
		if !fl.Changed || launchOwn[fl.Name] || fl.Name == "drafter" && o.NoDrafter {
			return
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				o.Forward = append(o.Forward, "--"+fl.Name, v)
			}
			return
		}
		o.Forward = append(o.Forward, "--"+fl.Name, fl.Value.String())
	})
	return nil
}

// requireRelease refuses, as a usage error, a release directory that is
// not there: --release-dir naming none, or a --cache-root that holds no
// download of --repo at --revision.
func (o *launchOptions) requireRelease() error {
	lo := launch.Options{ReleaseDir: o.ReleaseDir, CacheRoot: o.CacheRoot, Repo: o.Repo, Revision: o.Revision}
	dir, err := lo.Dir()
	if err != nil {
		return &usageError{err}
	}
	if o.ReleaseDir != "" {
		if err := requireReleaseDir(o.ReleaseDir); err != nil {
			return err
		}
	} else if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return &usageError{fmt.Errorf("--cache-root %s holds no release %s at revision %s (no directory %s): fetch it first with lfmq download URL --revision %s --cache-root %s",
			o.CacheRoot, o.Repo, o.Revision, dir, launch.ShellQuote(o.Revision), launch.ShellQuote(o.CacheRoot))}
	}
	return nil
}

func launchRun(cmd *cobra.Command, opts *launchOptions) error {
	if opts.CacheDir != "" {
		if err := requireOutDir("--cache-dir "+opts.CacheDir, opts.CacheDir); err != nil {
			return err
		}
	}
	if err := opts.requireRelease(); err != nil {
		return err
	}
	lo := launch.Options{ReleaseDir: opts.ReleaseDir, CacheRoot: opts.CacheRoot, Repo: opts.Repo, Revision: opts.Revision,
		CacheDir: opts.CacheDir, Serve: opts.Forward, DryRun: opts.PrintCommand, NoDrafter: opts.NoDrafter}
	if err := loadSigners(opts.AllowedSigners, opts.Identity, &lo.Verify); err != nil {
		return err
	}
	var bar *progress.Bytes
	if opts.IO.ErrTTY && !opts.PrintCommand {
		bar = progress.NewBytes(opts.IO.ErrOut, "verifying")
		lo.Verify.Progress = bar
	}
	plan, err := launch.Prepare(cmd.Context(), lo)
	bar.Finish()
	if plan != nil && plan.Report != nil && !plan.Report.OK {
		printReport(&IOStreams{Out: opts.IO.ErrOut, ErrOut: opts.IO.ErrOut}, plan.Report, false)
	}
	var de *launch.DrafterError
	if errors.As(err, &de) {
		return &usageError{err}
	}
	if err != nil {
		return err
	}
	if opts.PrintCommand {
		fmt.Fprintln(opts.IO.Out, plan.Command())
		if plan.MadeExecutable {
			// --print-command writes nothing, so the runtime is still
			// without the execute bit launch would have given it back:
			// the printed command, run as it is, would be refused.
			opts.IO.Errorf("note: %s has no execute bit (a download that keeps no file modes); lfmq launch gives it back when it runs, or run chmod +x %s before the command above\n",
				plan.Binary, launch.ShellQuote(plan.Binary))
		}
		return nil
	}
	opts.IO.Errorf("verified %s: %d files; runtime %s (sha256 %s)\n", plan.ReleaseID, plan.Report.Files, plan.Binary, plan.RuntimeSHA256)
	if plan.Drafter != "" {
		opts.IO.Errorf("serving with the release's drafter %s (drafter/manifest.json sha256 %s; --drafter off serves without it)\n", plan.Drafter, plan.Report.DrafterManifestSHA256)
	}
	printSignature(opts.IO.ErrOut, plan.Report)
	if plan.MadeExecutable {
		opts.IO.Errorf("the runtime had lost its execute bit (a download that drops file modes); it has it again\n")
	}
	opts.IO.Errorf("exec %s\n", plan.Command())
	return opts.Exec(plan)
}
