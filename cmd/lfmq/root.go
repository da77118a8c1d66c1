package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/internal/editdist"
	"github.com/lfmq/lfmq/verify/sums"
	"github.com/lfmq/lfmq/version"
)

func newRootCmd(ios *IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:   "lfmq",
		Short: "Quantize, score, serve and release LFM2 checkpoints, MoE and dense (BFP4 experts or FFN, BFP8 dense weights)",
		Long: `lfmq takes a BF16 LFM2 checkpoint in Hugging Face layout, a mixture of experts
(model_type lfm2_moe) or a dense model (model_type lfm2), from a directory or
from the hub by its id, to an lfmq-1 checkpoint: the routed experts (the dense
model's FFN) in BFP4 (Tenstorrent bfloat4_b), attention, short-conv, dense-FFN
and LM-head weights in BFP8, everything else kept, with a manifest that records
every tensor's format, shape and sha256. GPTQ is the default method, RTN the
baseline. It scores checkpoints (or a running server) against the BF16
reference, runs them from the terminal or serves them over an OpenAI-compatible
API, on the CPU or a GPU, and builds, verifies, signs, publishes and launches
reproducible releases.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// A root with sub-commands and no Args rejects unknown words with a
		// plain error; this makes them usage errors (exit 2).
		Args: unknownCommand,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	root.SetOut(ios.Out)
	root.SetErr(ios.ErrOut)
	root.SetIn(ios.In)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &usageError{fmt.Errorf("%w%s (see '%s --help')", err, flagSuggestion(cmd, err), cmd.CommandPath())}
	})
	root.AddCommand(
		newQuantizeCmd(ios, nil),
		newInspectCmd(ios, nil),
		newScoreCmd(ios, nil),
		newGenerateCmd(ios, nil),
		newServeCmd(ios, nil),
		newLaunchCmd(ios, nil),
		newVersionCmd(ios),
		newReleaseCmd(ios, nil),
		newVerifyCmd(ios, nil),
		newDownloadCmd(ios, nil),
		newPublishCmd(ios, nil),
		newBenchCmd(ios, nil),
		newEvalCmd(ios, nil),
	)
	// Cobra's own help and completion commands print help and succeed on
	// a word they do not know; here that is a usage error (exit 2), as
	// for every other command.
	// --version, which most tools take, prints what 'lfmq version' does.
	root.Version = version.Version
	root.SetVersionTemplate(versionText())
	root.Flags().BoolP("version", "v", false, "print the lfmq version, as 'lfmq version' does")
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := root.Find(args)
			if cmd == nil || err != nil || len(rest) > 0 {
				return &usageError{fmt.Errorf("unknown help topic %q; run 'lfmq help' for the commands", strings.Join(args, " "))}
			}
			return cmd.Help()
		},
	})
	root.InitDefaultCompletionCmd()
	if comp, _, err := root.Find([]string{"completion"}); err == nil && comp != root {
		comp.Args = cobra.ArbitraryArgs // the words reach RunE
		comp.RunE = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &usageError{errors.New("give a shell: lfmq completion bash|zsh|fish|powershell")}
			}
			return &usageError{fmt.Errorf("unknown shell %q: lfmq completes bash, zsh, fish and powershell", args[0])}
		}
	}
	return root
}

// unknownCommand is the Args of a command with sub-commands (lfmq,
// lfmq release): a word that names none of them is a usage error that
// suggests the one meant, as a typo usually is ("quantise", "release buld").
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	hint := fmt.Sprintf("run '%s --help'", cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default, set only when it suggests itself
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		hint = fmt.Sprintf("did you mean %q?", s[0])
	}
	return &usageError{fmt.Errorf("unknown command %q for %q; %s", args[0], cmd.CommandPath(), hint)}
}

// flagSynonyms are flags other tools name differently, each with the
// lfmq flag that does what it does.
var flagSynonyms = map[string]string{
	"dry-run":    "print-command", // launch
	"output":     "out",
	"model-dir":  "model",
	"checkpoint": "model",
	"api-key":    "api-key-file", // launch takes no key on the command line
}

// flagSuggestion is "; did you mean --NAME?" for an unknown flag within
// two edits of one of cmd's flags ("--modle", "--max-token"), or one that
// other tools use for one of them ("--dry-run" for launch's
// --print-command), else "".
func flagSuggestion(cmd *cobra.Command, err error) string {
	typed, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return ""
	}
	if s, ok := flagSynonyms[typed]; ok && cmd.Flags().Lookup(s) != nil {
		return "; did you mean --" + s + "?"
	}
	best, bestDist := "", 3
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if d := editdist.Levenshtein(typed, f.Name); d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	if best == "" {
		return ""
	}
	return "; did you mean --" + best + "?"
}

// noArgs is cobra.NoArgs as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return &usageError{fmt.Errorf("%s takes no arguments, got %q", cmd.CommandPath(), args)}
	}
	return nil
}

// exactArgs is cobra.ExactArgs as a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return &usageError{fmt.Errorf("%s takes %d argument(s), got %d (see '%s --help')", cmd.CommandPath(), n, len(args), cmd.CommandPath())}
		}
		return nil
	}
}

// requireFlags returns a usage error naming the first empty required value.
func requireFlags(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			return &usageError{errors.New("--" + pairs[i] + " is required")}
		}
	}
	return nil
}

// requireCheckpoint is requireDirs for a flag that names a model: the
// directory dir, given on the command line as value, must also hold
// config.json, which a Hugging Face checkpoint and an lfmq-1 checkpoint
// both have, so that a wrong directory is refused by the flag's name rather
// than by the file a loader failed to open.
func requireCheckpoint(flag, value, dir string) error {
	label := flag + " " + value
	if err := requireDir(label, dir); err != nil {
		return err
	}
	if st, err := os.Stat(filepath.Join(dir, "config.json")); err != nil || !st.Mode().IsRegular() {
		if hint := releaseHint(dir); hint != "" {
			return &usageError{fmt.Errorf("%s: %s", label, hint)}
		}
		return &usageError{fmt.Errorf("%s: not a checkpoint directory (no config.json): give a Hugging Face checkpoint or one made by lfmq quantize", label)}
	}
	if lfmq1.LostManifest(dir) {
		// Loaded as a Hugging Face checkpoint it would only fail for want
		// of model.safetensors (exit 1); unverifiable, it fails as a
		// checkpoint that differs from its manifest does.
		_, _, err := lfmq1.ReadManifest(dir)
		return err
	}
	return nil
}

// releaseHint says, for a directory that is a release rather than a
// checkpoint (it has checkpoint/config.json), where its checkpoint is;
// "" for any other directory.
func releaseHint(dir string) string {
	ckpt := filepath.Join(dir, "checkpoint")
	if _, err := os.Stat(filepath.Join(ckpt, "config.json")); err != nil {
		return ""
	}
	return fmt.Sprintf("a release, not a checkpoint: give its checkpoint, %s, or serve the release with lfmq launch --release-dir %s", ckpt, dir)
}

// lfmq1Has names the file that makes dir an lfmq-1 checkpoint:
// manifest.json, or global.safetensors for one that lost its manifest;
// "" for any other directory.
func lfmq1Has(dir string) string {
	switch {
	case lfmq1.IsCheckpoint(dir):
		return lfmq1.ManifestFile
	case lfmq1.LostManifest(dir):
		return lfmq1.GlobalFile
	}
	return ""
}

// requireReleaseDir is requireDirs for --release-dir: a directory with
// neither SHA256SUMS nor runtime-release.json is no release at all (an
// lfmq-1 checkpoint, a model, an empty or wrong directory), a mix-up
// refused as a usage error rather than verified as a release that lost
// both of its lists (exit 3). A release that lost one of them still has
// the other, and verifies as damaged, the lost list missing.
func requireReleaseDir(dir string) error {
	if err := requireDirs("--release-dir", dir); err != nil {
		return err
	}
	for _, name := range []string{sums.SumsFile, sums.RuntimeReleaseFile} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return nil
		}
	}
	if lfmq1.IsCheckpoint(dir) || lfmq1.LostManifest(dir) {
		return &usageError{fmt.Errorf("--release-dir %s: an lfmq-1 checkpoint, not a release (no %s or %s): check it with lfmq inspect, or make a release of it with lfmq release build --checkpoint %s", dir, sums.SumsFile, sums.RuntimeReleaseFile, dir)}
	}
	return &usageError{fmt.Errorf("--release-dir %s: not a release: it has neither %s nor %s (lfmq release build makes a release, lfmq download fetches one)", dir, sums.RuntimeReleaseFile, sums.SumsFile)}
}

// requireFiles refuses, as usage errors, inputs (label, path pairs; the
// label is the flag as typed, e.g. "--corpus chat=x.jsonl") whose path
// names no regular file, before any work starts.
func requireFiles(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		label, path := pairs[i], pairs[i+1]
		st, err := os.Stat(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return &usageError{fmt.Errorf("%s: no such file", label)}
		case err != nil:
			return &usageError{fmt.Errorf("%s: %w", label, err)}
		case st.IsDir():
			return &usageError{fmt.Errorf("%s: a directory, not a file", label)}
		}
	}
	return nil
}

// requireDirs refuses, as usage errors, flags (name, path pairs) whose
// path names no directory: the command line cannot work as given.
func requireDirs(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := requireDir(pairs[i]+" "+pairs[i+1], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// requireDir refuses, as a usage error, a path that names no directory;
// label is how the command line gave it ("--model DIR").
func requireDir(label, path string) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return &usageError{fmt.Errorf("%s: no such directory", label)}
	case err != nil:
		return &usageError{fmt.Errorf("%s: %w", label, err)}
	case !st.IsDir():
		return &usageError{fmt.Errorf("%s: not a directory", label)}
	}
	return nil
}

// requireOutDir refuses, as a usage error, an output directory that cannot
// be made or used: a path that exists and is not a directory, or one below
// a file. It runs before any work, so that such a path fails at once with
// the flag's name rather than after a long run with the writer's error.
func requireOutDir(label, path string) error {
	st, err := os.Stat(path)
	if err == nil {
		if !st.IsDir() {
			return &usageError{fmt.Errorf("%s: exists and is not a directory", label)}
		}
		return nil
	}
	return requireOutParent(label, path, err)
}

// requireOutFile is requireOutDir for an output file: an existing file is
// replaced, but a directory of that name, or a file where a directory
// above it should be, is refused.
func requireOutFile(label, path string) error {
	st, err := os.Stat(path)
	if err == nil {
		if st.IsDir() {
			return &usageError{fmt.Errorf("%s: a directory; give the name of a file", label)}
		}
		return nil
	}
	return requireOutParent(label, path, err)
}

// requireOutParent checks, for an output path that os.Stat failed on with
// err, that the nearest existing directory above it is one, so that the
// missing directories can be made.
func requireOutParent(label, path string, err error) error {
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return &usageError{fmt.Errorf("%s: %w", label, err)}
	}
	for p := filepath.Dir(filepath.Clean(path)); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		switch {
		case err == nil && !st.IsDir():
			return &usageError{fmt.Errorf("%s: %s is a file, not a directory", label, p)}
		case err == nil:
			return nil
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return &usageError{fmt.Errorf("%s: %w", label, err)}
		case p == filepath.Dir(p):
			return nil
		}
	}
}
