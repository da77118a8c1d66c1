package main

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/evidence/card"
	"github.com/lfmq/lfmq/evidence/report"
	"github.com/lfmq/lfmq/evidence/task"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/format/units"
	"github.com/lfmq/lfmq/release/bundle"
	"github.com/lfmq/lfmq/version"
)

// renderQuality renders the model card's quality section from a release's
// evidence files: each evidence JSON file is parsed (evidence.Parse) and
// rendered by evidence/report as the docs/scoring.md, "Output" table,
// under a heading naming the file and a line naming the rows that are
// this release's checkpoint. SVG plots are skipped: the builder shows
// them on the card as images. It is passed to the builder as
// bundle.Options.Quality, the one place the card's quality tables come from.
//
// A file that scored no candidate with the checkpoint's manifest sha256 is
// refused: the card would present another checkpoint's figures as this
// release's. Task results (lfmq eval --out) are shown in one table whose
// rows say which checkpoint they ran (the BF16 reference's own task
// results belong on the card too), and gate files (lfmq eval compare
// --out) in another.
func renderQuality(files []bundle.EvidenceFile, manifestSHA256 string) ([]string, error) {
	var out []string
	var tasks []report.TaskFile
	var gates []report.GateFile
	for _, f := range files {
		if path.Ext(f.Path) != ".json" {
			continue
		}
		switch {
		case task.IsFile(f.Data):
			tf, err := task.Parse(f.Path, f.Data)
			if err != nil {
				return nil, err
			}
			tasks = append(tasks, report.TaskFile{Path: f.Path, File: tf})
			continue
		case task.IsGate(f.Data):
			g, err := task.ParseGate(f.Path, f.Data)
			if err != nil {
				return nil, err
			}
			gates = append(gates, report.GateFile{Path: f.Path, Gate: g})
			continue
		}
		ef, err := evidence.Parse(f.Path, f.Data)
		if err != nil {
			return nil, err
		}
		var this, others []string
		for _, c := range ef.Receipts.Candidates {
			if c.Identity == manifestSHA256 || c.ManifestSHA256 == manifestSHA256 {
				this = append(this, "`"+c.Name+"`")
			} else {
				others = append(others, fmt.Sprintf("%s (%s)", c.Name, shortSHA(c.Identity)))
			}
		}
		if len(this) == 0 {
			return nil, &bundle.InputError{Path: "--evidence " + path.Base(f.Path), Option: true,
				Msg: fmt.Sprintf("scores no candidate with this checkpoint's manifest sha256 %s (it scores %s); "+
					"score the checkpoint (lfmq score --candidate NAME=CHECKPOINT_DIR ...) or leave this file out",
					shortSHA(manifestSHA256), strings.Join(others, ", "))}
		}
		which := strings.Join(this, " and ") + " below"
		if len(ef.Receipts.Candidates) == 1 {
			which = "the one candidate below, " + this[0] // the table has no candidate column then
		}
		out = append(out, "### `"+f.Path+"`\n\nThis release's checkpoint (manifest sha256 `"+manifestSHA256+"`) is "+
			which+".\n\n"+report.Markdown(ef))
	}
	if len(tasks) > 0 {
		out = append(out, "### Tasks\n\nTask results from `lfmq eval` (docs/eval.md): accuracy with its Wilson 95 % interval; "+
			"\"this release\" marks runs of this release's checkpoint (manifest sha256 `"+manifestSHA256+"`), "+
			"other runs name the checkpoint or served model they asked.\n\n"+report.TaskTable(tasks, manifestSHA256))
	}
	if len(gates) > 0 {
		out = append(out, "### Release gates\n\nEach gate compares the texts of the same items across runs (`lfmq eval compare`): "+
			"seeded sampling must give the same bytes at any concurrency and with speculation on or off.\n\n"+report.GateTable(gates))
	}
	return out, nil
}

// shortSHA is the first 12 hex digits of a sha256, for messages.
func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12] + "…"
	}
	return s
}

type releaseBuildOptions struct {
	IO           *IOStreams
	Checkpoint   string
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
		Use:   "build --checkpoint DIR --out DIR --license FILE --hub-repo OWNER/NAME [--evidence DIR] [--revision TAG]",
		Short: "Assemble a verifiable release directory from an lfmq-1 checkpoint",
		Long: `Build assembles a release (docs/release.md): the lfmq-1 checkpoint, lfmq runtime
binaries for each platform built reproducibly (CGO_ENABLED=0, -trimpath, vendored
dependencies, no dates or paths) from runtime/lfmq-src.tar.gz, the exact source
archive, the source model's LICENSE and NOTICE files, the evidence files, the
model card README.md, runtime-release.json and SHA256SUMS.

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
			if err := requireFlags("checkpoint", opts.Checkpoint, "out", opts.Out, "license", opts.License); err != nil {
				return err
			}
			if opts.HubRepo == "" {
				return &usageError{errors.New("--hub-repo OWNER/NAME is required: the model card's download commands name the hub repo the release is published under")}
			}
			p, err := bundle.ParsePlatforms(platforms)
			if err != nil {
				return &usageError{err}
			}
			opts.Platforms = p
			if opts.BaseModel == "" {
				// The default comes from the checkpoint: check it is one
				// first, so that a wrong directory is named as such.
				if err := requireLFMQ1("--checkpoint", opts.Checkpoint); err != nil {
					return err
				}
				bm, ok := "", false
				if m, _, err := lfmq1.ReadManifest(opts.Checkpoint); err == nil && m.Source.Repo != "" {
					bm, ok = m.Source.Repo, true
				} else {
					bm, ok = bundle.BaseModelFromConfig(opts.Checkpoint)
				}
				if !ok {
					return &usageError{fmt.Errorf("--base-model is required: the checkpoint's manifest records no source repository and its config.json has no hub repo id in _name_or_path")}
				}
				opts.BaseModel = bm
			}
			if opts.BaseRevision == "" {
				// The commit the manifest records of its source, when it is
				// a commit of the base model named.
				if m, _, err := lfmq1.ReadManifest(opts.Checkpoint); err == nil && m.Source.Repo == opts.BaseModel {
					opts.BaseRevision = m.Source.Commit
				}
			}
			if opts.Source == "" {
				wd, err := os.Getwd()
				if err != nil {
					return err
				}
				root, err := bundle.FindModuleRoot(wd)
				if err != nil {
					return &usageError{err}
				}
				opts.Source = root
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
	if err := requireLFMQ1("--checkpoint", opts.Checkpoint); err != nil {
		return err
	}
	if err := requireOutDir("--out "+opts.Out, opts.Out); err != nil {
		return err
	}
	res, err := bundle.Build(cmd.Context(), bundle.Options{
		CheckpointDir: opts.Checkpoint, OutDir: opts.Out, SourceDir: opts.Source,
		EvidenceDir: opts.Evidence, Revision: opts.Revision,
		BaseModel: opts.BaseModel, BaseRevision: opts.BaseRevision, HubRepo: opts.HubRepo,
		LicenseFile: opts.License, NoticeFiles: opts.Notices, SourceCard: opts.SourceCard,
		License:  card.License{ID: opts.LicenseID, Name: opts.LicenseName, Link: opts.LicenseLink},
		Language: opts.Language, Platforms: opts.Platforms, Version: version.Version,
		Quality: renderQuality, Log: opts.IO.ErrOut, AllowDirty: opts.AllowDirty,
	})
	if err != nil {
		// An option the builder refuses (a malformed value, a missing path,
		// an output directory in use, an unknown licence id) is a bad
		// command line; refused file contents stay failures.
		var ie *bundle.InputError
		var de *bundle.DirtyError
		if errors.As(err, &ie) && ie.Option || errors.As(err, &de) {
			return &usageError{err}
		}
		return err
	}
	w := opts.IO.Out
	fmt.Fprintf(w, "wrote release %s\n", res.Dir)
	fmt.Fprintf(w, "  release id       %s\n", res.ReleaseID)
	fmt.Fprintf(w, "  files            %d listed in SHA256SUMS (%s), plus SHA256SUMS itself\n", res.Files, units.Bytes(res.Bytes))
	fmt.Fprintf(w, "  manifest sha256  %s\n", res.ManifestSHA256)
	fmt.Fprintf(w, "  source sha256    %s\n", res.SourceSHA256)
	for _, b := range res.Runtime {
		fmt.Fprintf(w, "  %-16s %s\n", b.Platform, b.SHA256)
	}
	fmt.Fprintf(w, "  release digest   %s (sha256 of SHA256SUMS; put it in the tag message)\n", res.Digest)
	return nil
}
