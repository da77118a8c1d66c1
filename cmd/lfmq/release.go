package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lfmq/lfmq/evidence/card"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/format/units"
	"github.com/lfmq/lfmq/release/bundle"
	"github.com/lfmq/lfmq/version"
)

type releaseBuildOptions struct {
	IO         *IOStreams
	Checkpoint string
	// Drafter is --drafter: a quantized drafter's directory, "off", or
	// empty for the checkpoint's own drafter/ when it has one; drafterDir
	// is the directory the release takes ("" for none).
	Drafter      string
	drafterDir   string
	Out          string
	Evidence     string
	Revision     string
	License      string
	Notices      []string
	Platforms    []bundle.Platform
	BaseModel    string
	BaseRevision string
	HubRepo      string
	SourceCard   string
	LicenseID    string
	LicenseName  string
	LicenseLink  string
	Language     []string
	Source       string
	AllowDirty   bool
}

func newReleaseCmd(ios *IOStreams, runF func(*releaseBuildOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "release",
		Short: "Build and sign release bundles",
		Args:  unknownCommand,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newReleaseBuildCmd(ios, runF), newReleaseSignCmd(ios, nil))
	return cmd
}

func newReleaseBuildCmd(ios *IOStreams, runF func(*releaseBuildOptions) error) *cobra.Command {
	opts := &releaseBuildOptions{IO: ios}
	var platforms string
	cmd := &cobra.Command{
		Use:   "build --checkpoint DIR --out DIR --license FILE --hub-repo OWNER/NAME [--drafter DIR|off] [--evidence DIR] [--revision TAG]",
		Short: "Assemble a verifiable release directory from an lfmq-1 checkpoint",
		Long: `Build assembles a release (docs/release.md): the lfmq-1 checkpoint, lfmq runtime
binaries for each platform built reproducibly (CGO_ENABLED=0, -trimpath, vendored
dependencies, no dates or paths) from runtime/lfmq-src.tar.gz, the exact source
archive, the source model's LICENSE and NOTICE files, the evidence files, the
model card README.md, runtime-release.json and SHA256SUMS.

A checkpoint made by lfmq quantize --drafter holds its drafter in drafter/;
the release carries it under drafter/ (its files in SHA256SUMS, its manifest
pinned in runtime-release.json, the card naming it with its acceptance) and
lfmq launch serves with it. --drafter DIR takes a drafter from elsewhere (one
quantized for this checkpoint: its acceptance must have been measured on it);
--drafter off leaves the checkpoint's out.

Building twice from the same inputs gives the same bytes in every file. The
release directory appears only when complete and verified. The release digest
printed at the end is the sha256 of SHA256SUMS: put it in the hub tag message.

The runtime is built from the lfmq module source in --source (default: the
module containing the current directory) with the go command on PATH; if
go.mod has a toolchain line, the go command must be that version. A source
tree in a git work tree whose archived files differ from the commit checked
out (modified, untracked or deleted Go files, go.mod, go.sum, …) is refused,
as goreleaser refuses a dirty tree, unless --allow-dirty: then the files are
listed in runtime-release.json (lfmq.source_dirty) and the model card says
the release was built from uncommitted changes. A tree outside git (an
extracted source archive) has no commit to differ from.`,
		Example: `  lfmq release build --checkpoint ./LFM2-8B-A1B-lfmq1 --out ./release \
    --base-model LiquidAI/LFM2-8B-A1B --hub-repo lfmq/LFM2-8B-A1B-lfmq1 \
    --license ./LFM2-8B-A1B/LICENSE --source-card ./LFM2-8B-A1B/README.md \
    --evidence ./evidence --revision v1`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(platforms); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return releaseBuildRun(cmd, opts)
		},
	}
	var defaultPlatforms []string
	for _, p := range bundle.DefaultPlatforms {
		defaultPlatforms = append(defaultPlatforms, p.String())
	}
	f := cmd.Flags()
	f.StringVar(&opts.Checkpoint, "checkpoint", "", "lfmq-1 checkpoint directory (required)")
	f.StringVar(&opts.Out, "out", "", "release directory to create (required; must not exist or be empty)")
	f.StringVar(&opts.Drafter, "drafter", "", "quantized DSpark drafter for the model (lfmq quantize --drafter), or off (default: the checkpoint's drafter/, when it has one)")
	f.StringVar(&opts.Evidence, "evidence", "", "directory of evidence JSON files (and SVG plots) to publish")
	f.StringVar(&opts.Revision, "revision", "v1", "release tag on the hub")
	f.StringVar(&opts.License, "license", "", "the source model's licence file, copied as LICENSE (required)")
	f.StringArrayVar(&opts.Notices, "notice", nil, "a NOTICE file of the source model, copied under its name (repeatable)")
	f.StringVar(&platforms, "platforms", strings.Join(defaultPlatforms, ","), "comma-separated os/arch list of runtime binaries")
	f.StringVar(&opts.BaseModel, "base-model", "", "source model repo id, e.g. LiquidAI/LFM2-8B-A1B (default: the repository the manifest records of the source, else config.json's _name_or_path)")
	f.StringVar(&opts.BaseRevision, "base-revision", "", "source model commit (40 hex), when known (default: the commit the manifest records of the source, for that repository)")
	f.StringVar(&opts.HubRepo, "hub-repo", "", "hub repo id OWNER/NAME the release is published under, named by the card's download commands (required)")
	f.StringVar(&opts.SourceCard, "source-card", "", "the source model's README.md: licence and languages are carried over")
	f.StringVar(&opts.LicenseID, "license-id", "", "hub licence id for the card, e.g. apache-2.0, or other (default: from --source-card or the licence text)")
	f.StringVar(&opts.LicenseName, "license-name", "", "licence name for the card (with --license-id other)")
	f.StringVar(&opts.LicenseLink, "license-link", "", "licence link for the card (with --license-id other)")
	f.StringArrayVar(&opts.Language, "language", nil, "card language (repeatable; default: from --source-card)")
	f.StringVar(&opts.Source, "source", "", "lfmq module source to build the runtime from (default: the module containing the current directory)")
	f.BoolVar(&opts.AllowDirty, "allow-dirty", false, "build from a --source with uncommitted changes (listed in runtime-release.json and the card)")
	cmd.MarkFlagDirname("checkpoint")
	cmd.MarkFlagDirname("out")
	cmd.MarkFlagDirname("evidence")
	cmd.MarkFlagDirname("source")
	return cmd
}

// validate checks the command line into o (usage errors, exit 2): the
// required flags given, the platforms parsed; then defaults fills in the
// rest.
func (o *releaseBuildOptions) validate(platforms string) error {
	if err := requireFlags("checkpoint", o.Checkpoint, "out", o.Out, "license", o.License); err != nil {
		return err
	}
	if o.HubRepo == "" {
		return &usageError{errors.New("--hub-repo OWNER/NAME is required: the model card's download commands name the hub repo the release is published under")}
	}
	p, err := bundle.ParsePlatforms(platforms)
	if err != nil {
		return &usageError{err}
	}
	o.Platforms = p
	return o.defaults()
}

// defaults fills in what the command line left out from the inputs: the
// base model and its revision from the checkpoint's manifest (else its
// config.json), the source from the module containing the current
// directory. A default that cannot be found is a usage error.
func (o *releaseBuildOptions) defaults() error {
	if o.BaseModel == "" {
		// The default comes from the checkpoint: check it is one
		// first, so that a wrong directory is named as such.
		if err := requireLFMQ1("--checkpoint", o.Checkpoint); err != nil {
			return err
		}
		bm, ok := "", false
		if m, _, err := lfmq1.ReadManifest(o.Checkpoint); err == nil && m.Source.Repo != "" {
			bm, ok = m.Source.Repo, true
		} else {
			bm, ok = bundle.BaseModelFromConfig(o.Checkpoint)
		}
		if !ok {
			return &usageError{fmt.Errorf("--base-model is required: the checkpoint's manifest records no source repository and its config.json has no hub repo id in _name_or_path")}
		}
		o.BaseModel = bm
	}
	if o.BaseRevision == "" {
		// The commit the manifest records of its source, when it is
		// a commit of the base model named.
		if m, _, err := lfmq1.ReadManifest(o.Checkpoint); err == nil && m.Source.Repo == o.BaseModel {
			o.BaseRevision = m.Source.Commit
		}
	}
	if o.Source == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		root, err := bundle.FindModuleRoot(wd)
		if err != nil {
			return &usageError{err}
		}
		o.Source = root
	}
	return nil
}

// requireLFMQ1 refuses, as a usage error, a flag whose directory is not an
// lfmq-1 checkpoint (has no manifest.json).
func requireLFMQ1(flag, dir string) error {
	if err := requireDirs(flag, dir); err != nil {
		return err
	}
	if !lfmq1.IsCheckpoint(dir) {
		if hint := releaseHint(dir); hint != "" {
			return &usageError{fmt.Errorf("%s %s: %s", flag, dir, hint)}
		}
		return &usageError{fmt.Errorf("%s %s: not an lfmq-1 checkpoint (no %s): make one with lfmq quantize", flag, dir, lfmq1.ManifestFile)}
	}
	return nil
}

func releaseBuildRun(cmd *cobra.Command, opts *releaseBuildOptions) error {
	if err := releaseBuildInputs(opts); err != nil {
		return err
	}
	res, err := releaseBuildWork(cmd.Context(), opts)
	if err != nil {
		return err
	}
	releaseBuildReport(opts, res)
	return nil
}

// releaseBuildInputs checks the checkpoint and the output directory before
// anything is built.
func releaseBuildInputs(opts *releaseBuildOptions) error {
	if err := requireLFMQ1("--checkpoint", opts.Checkpoint); err != nil {
		return err
	}
	if err := opts.resolveDrafter(); err != nil {
		return err
	}
	return requireOutDir("--out "+opts.Out, opts.Out)
}

// resolveDrafter finds the drafter the release takes: --drafter's
// directory, none for --drafter off, else the checkpoint's drafter/ when
// it holds one.
func (o *releaseBuildOptions) resolveDrafter() error {
	switch o.Drafter {
	case "off":
		return nil
	case "":
		if d := filepath.Join(o.Checkpoint, lfmq1.DrafterDir); lfmq1.IsCheckpoint(d) {
			o.drafterDir = d
			o.IO.Errorf("the release takes the checkpoint's drafter %s (--drafter off leaves it out)\n", d)
		}
		return nil
	}
	if err := requireLFMQ1("--drafter", o.Drafter); err != nil {
		return err
	}
	o.drafterDir = o.Drafter
	return nil
}

// releaseBuildWork builds the release; an option the builder refuses is a
// usage error.
func releaseBuildWork(ctx context.Context, opts *releaseBuildOptions) (*bundle.Result, error) {
	res, err := bundle.Build(ctx, bundle.Options{
		CheckpointDir: opts.Checkpoint, DrafterDir: opts.drafterDir, OutDir: opts.Out, SourceDir: opts.Source,
		EvidenceDir: opts.Evidence, Revision: opts.Revision,
		BaseModel: opts.BaseModel, BaseRevision: opts.BaseRevision, HubRepo: opts.HubRepo,
		LicenseFile: opts.License, NoticeFiles: opts.Notices, SourceCard: opts.SourceCard,
		License:  card.License{ID: opts.LicenseID, Name: opts.LicenseName, Link: opts.LicenseLink},
		Language: opts.Language, Platforms: opts.Platforms, Version: version.Version,
		Quality: bundle.RenderQuality, Log: opts.IO.ErrOut, AllowDirty: opts.AllowDirty,
	})
	if err != nil {
		// An option the builder refuses (a malformed value, a missing path,
		// an output directory in use, an unknown licence id) is a bad
		// command line; refused file contents stay failures.
		var ie *bundle.InputError
		var de *bundle.DirtyError
		if errors.As(err, &ie) && ie.Option || errors.As(err, &de) {
			return nil, &usageError{err}
		}
		return nil, err
	}
	return res, nil
}

// releaseBuildReport writes what was built and the release digest to
// stdout.
func releaseBuildReport(opts *releaseBuildOptions, res *bundle.Result) {
	w := opts.IO.Out
	fmt.Fprintf(w, "wrote release %s\n", res.Dir)
	fmt.Fprintf(w, "  release id       %s\n", res.ReleaseID)
	fmt.Fprintf(w, "  files            %d listed in SHA256SUMS (%s), plus SHA256SUMS itself\n", res.Files, units.Bytes(res.Bytes))
	fmt.Fprintf(w, "  manifest sha256  %s\n", res.ManifestSHA256)
	if res.DrafterManifestSHA256 != "" {
		fmt.Fprintf(w, "  drafter sha256   %s (drafter/manifest.json)\n", res.DrafterManifestSHA256)
	}
	fmt.Fprintf(w, "  source sha256    %s\n", res.SourceSHA256)
	for _, b := range res.Runtime {
		fmt.Fprintf(w, "  %-16s %s\n", b.Platform, b.SHA256)
	}
	fmt.Fprintf(w, "  release digest   %s (sha256 of SHA256SUMS; put it in the tag message)\n", res.Digest)
}
