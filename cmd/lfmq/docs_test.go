package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

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
