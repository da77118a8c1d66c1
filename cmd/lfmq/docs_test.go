package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/engine/prefix"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

const repoRoot = "../.."

// mdMention is a Markdown file named in prose: "docs/scoring.md", "bfp.md".
var mdMention = regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]+\.md\b`)

// mdLink is the target of a Markdown link.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// pointer reports whether a mention points at lfmq's documentation
// rather than naming a file of the user's (a model card README.md).
func pointer(m string) bool { return filepath.Base(m) != "README.md" }

// TestHelpPointersResolve: every documentation file a help text names
// exists in the repository, so that "see docs/scoring.md" leads somewhere.
func TestHelpPointersResolve(t *testing.T) {
	ios, _, _ := testStreams()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		texts := []string{c.Short, c.Long, c.Example}
		c.Flags().VisitAll(func(f *pflag.Flag) { texts = append(texts, f.Usage) })
		for _, text := range texts {
			for _, m := range mdMention.FindAllString(text, -1) {
				if !pointer(m) {
					continue
				}
				if _, err := os.Stat(filepath.Join(repoRoot, m)); err != nil {
					t.Errorf("%s: help names %q, which is not a file of the repository (write docs/NAME.md)", c.CommandPath(), m)
				}
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd(ios))
}

// TestDocLinksResolve: the README's and docs/'s links and file mentions
// resolve to files of the repository.
func TestDocLinksResolve(t *testing.T) {
	files := []string{filepath.Join(repoRoot, "README.md")}
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	files = append(files, docs...)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		var targets []string
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
		for _, m := range mdMention.FindAllString(text, -1) {
			if pointer(m) && !strings.Contains(m, "://") {
				targets = append(targets, m)
			}
		}
		for _, target := range targets {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, _, _ := strings.Cut(target, "#")
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), path)); err != nil {
				// A bare name in prose may mean a file beside the README's docs.
				if _, err2 := os.Stat(filepath.Join(repoRoot, "docs", filepath.Base(path))); err2 == nil && !strings.Contains(path, "/") {
					continue
				}
				t.Errorf("%s: %q does not resolve to a file of the repository", f, target)
			}
		}
	}
}

// commandDocs returns the README and the command reference, docs/cli.md,
// one after the other: the pages whose statements of commands and flags
// the tests below hold to the commands.
func commandDocs(t *testing.T) string {
	t.Helper()
	var all strings.Builder
	for _, f := range []string{"README.md", filepath.Join("docs", "cli.md")} {
		data, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		all.Write(data)
		all.WriteString("\n")
	}
	return all.String()
}

// TestREADMEFlagDefaults: every flag default the README or docs/cli.md states (as
// "`--flag` (default V)" or "`--flag` (V)") is the default the command
// has, and the prefix cache's block is the size it states, so a changed
// default cannot leave the README behind.
func TestREADMEFlagDefaults(t *testing.T) {
	readme := strings.Join(strings.Fields(commandDocs(t)), " ")
	tests := []struct {
		cmd, flag, phrase, value string
	}{
		{"serve", "host", "`--host` (default `127.0.0.1`)", "127.0.0.1"},
		{"serve", "port", "`--port` (default 8000)", "8000"},
		{"serve", "prefill-chunk", "`--prefill-chunk` (512)", "512"},
		{"serve", "max-num-seqs", "`--max-num-seqs` (16)", "16"},
		{"serve", "max-queue", "`--max-queue` (64)", "64"},
		{"serve", "shutdown-timeout", "`--shutdown-timeout` (30s)", "30s"},
		{"serve", "speculate", "(`--speculate on`, the default)", "on"},
		{"serve", "spec-tokens", "`--spec-tokens` (4)", "4"},
		{"serve", "lookup-max", "`--lookup-max`…`--lookup-min` (5…3)", "5"},
		{"serve", "lookup-min", "`--lookup-max`…`--lookup-min` (5…3)", "3"},
		{"serve", "sampling-preset", "`liquid` (default;", "liquid"},
		{"score", "ctx", "(`--ctx`, default 512)", "512"},
		{"release build", "platforms", "(`--platforms`, default linux/amd64, linux/arm64, darwin/arm64)", "darwin/arm64,linux/amd64,linux/arm64"},
	}
	if phrase := fmt.Sprintf("every %d-token block", prefix.BlockSize); !strings.Contains(readme, phrase) {
		t.Errorf("README.md and docs/cli.md do not say %q, the prefix cache's block size", phrase)
	}
	ios, _, _ := testStreams()
	root := newRootCmd(ios)
	for _, tt := range tests {
		t.Run(tt.cmd+" --"+tt.flag, func(t *testing.T) {
			if !strings.Contains(readme, tt.phrase) {
				t.Fatalf("README.md and docs/cli.md no longer say %q", tt.phrase)
			}
			c, _, err := root.Find(strings.Fields(tt.cmd))
			if err != nil || c.Name() != strings.Fields(tt.cmd)[len(strings.Fields(tt.cmd))-1] {
				t.Fatalf("no command %q: %v", tt.cmd, err)
			}
			f := c.Flags().Lookup(tt.flag)
			if f == nil {
				t.Fatalf("%s has no flag --%s", tt.cmd, tt.flag)
			}
			if f.DefValue != tt.value {
				t.Errorf("%s --%s defaults to %q; the docs say %q", tt.cmd, tt.flag, f.DefValue, tt.phrase)
			}
		})
	}
}

// TestREADMEPresetTable: the table of sampling presets (docs/cli.md) is what
// sample.Preset gives, field by field ("–" for a field the preset leaves
// unset), and names every preset.
func TestREADMEPresetTable(t *testing.T) {
	data := commandDocs(t)
	row := regexp.MustCompile("(?m)^\\| `([a-z]+)`[^|]* \\| ([^|]+) \\| ([^|]+) \\| ([^|]+) \\| ([^|]+) \\|$")
	cell := func(p any) string {
		switch v := p.(type) {
		case *float64:
			if v != nil {
				return strconv.FormatFloat(*v, 'g', -1, 64)
			}
		case *int:
			if v != nil {
				return strconv.Itoa(*v)
			}
		}
		return "–"
	}
	seen := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(data, -1) {
		d, err := sample.Preset(m[1])
		if err != nil {
			continue // another table's row
		}
		seen[m[1]] = true
		want := []string{cell(d.Temperature), cell(d.TopK), cell(d.TopP), cell(d.RepetitionPenalty)}
		for i, w := range want {
			if got := strings.TrimSpace(m[2+i]); got != w {
				t.Errorf("README preset %s, column %d: %q, the preset has %q", m[1], i+1, got, w)
			}
		}
		if d.MinP != nil || d.MaxNewTokens != nil {
			t.Errorf("preset %s sets a field the README table has no column for", m[1])
		}
	}
	for _, name := range sample.PresetNames() {
		if !seen[name] {
			t.Errorf("the README's preset table has no row for %s", name)
		}
	}
}

// readmeHeading is a command's heading in docs/cli.md: ### `lfmq CMD …`.
var readmeHeading = regexp.MustCompile("(?m)^### `lfmq ([^`]*)`")

// TestREADMESynopsisRequired: a flag that a command heading of docs/cli.md shows
// outside brackets and parentheses (as one a user must give) is one the
// command requires, and the command's required flags are all shown, so a
// user who follows the heading neither types flags that have defaults nor
// misses one that has none.
func TestREADMESynopsisRequired(t *testing.T) {
	data := commandDocs(t)
	// Flags a command needs unless another one is given: not marked
	// required in the help, but shown bare in the heading.
	needed := map[string]bool{"score --candidate": true} // or --noise-floor
	ios, _, _ := testStreams()
	root := newRootCmd(ios)
	headings := readmeHeading.FindAllStringSubmatch(data, -1)
	if len(headings) < 10 {
		t.Fatalf("found %d command headings in the README", len(headings))
	}
	for _, h := range headings {
		words := strings.Fields(h[1])
		c, _, err := root.Find(words)
		if err != nil || c == root {
			continue // lfmq version, completion: no flags
		}
		path := strings.TrimPrefix(c.CommandPath(), "lfmq ")
		bare := map[string]bool{}
		depth := 0
		for _, w := range words {
			if depth == 0 && strings.HasPrefix(w, "--") {
				bare[strings.TrimSuffix(w, "]")] = true
			}
			depth += strings.Count(w, "[") + strings.Count(w, "(") - strings.Count(w, "]") - strings.Count(w, ")")
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			name := "--" + f.Name
			required := strings.Contains(f.Usage, "required")
			switch {
			case bare[name] && !required && !needed[path+" "+name]:
				t.Errorf("README heading `lfmq %s` shows %s as one to give; the command does not require it (put it in brackets)", h[1], name)
			case required && !bare[name] && !strings.Contains(h[1], name+" "):
				t.Errorf("README heading `lfmq %s` does not show %s, which the command requires", h[1], name)
			}
		})
	}
}

// TestLFMQ1DocExitCodes: the exit status docs/lfmq-1.md gives for each
// way a checkpoint can fail its checks is the one exitCode gives.
func TestLFMQ1DocExitCodes(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "docs", "lfmq-1.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\nExit codes:\n")
	if !ok {
		t.Fatal(`docs/lfmq-1.md has no "Exit codes:" list`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var bullets []string
	for _, b := range strings.Split(section, "\n- ")[1:] {
		bullets = append(bullets, strings.Join(strings.Fields(b), " "))
	}
	status := regexp.MustCompile(`status \**(\d)\**`)
	tests := []struct {
		phrase string
		err    error
	}{
		{"A mismatch between the checkpoint and its manifest", &lfmq1.MismatchError{Kind: "hash"}},
		{"A `manifest.json` that cannot be used", &lfmq1.ManifestError{}},
		{"A missing `manifest.json`", &lfmq1.ManifestError{Missing: true}},
		{"A safetensors file whose header cannot be parsed", &lfmq1.MismatchError{Kind: "header"}},
	}
	for _, tt := range tests {
		found := false
		for _, b := range bullets {
			if !strings.HasPrefix(b, tt.phrase) {
				continue
			}
			found = true
			for _, m := range status.FindAllStringSubmatch(b, -1) {
				if want := strconv.Itoa(exitCode(tt.err)); m[1] != want {
					t.Errorf("docs/lfmq-1.md says %q exits with status %s; it exits %s", tt.phrase, m[1], want)
				}
			}
		}
		if !found {
			t.Errorf("docs/lfmq-1.md's exit codes no longer cover %q", tt.phrase)
		}
	}
}
