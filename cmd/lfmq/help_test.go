package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// helpText runs 'lfmq ARGS --help' and returns what it printed.
func helpText(t *testing.T, args ...string) string {
	t.Helper()
	ios, stdout, stderr := testStreams()
	if code := run(context.Background(), append(args, "--help"), ios); code != 0 {
		t.Fatalf("lfmq %s --help: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
	return stdout.String()
}

// TestRootHelpNamesBothModels: 'lfmq --help' says that both kinds of LFM2
// checkpoint quantize takes are welcome, by their model_type, so that the
// front page of the help cannot go back to describing the MoE model alone.
func TestRootHelpNamesBothModels(t *testing.T) {
	help := helpText(t)
	for _, modelType := range []string{"lfm2_moe", "lfm2"} {
		// \b does not split lfm2_moe, so "lfm2" must appear on its own.
		if !regexp.MustCompile(`\b` + modelType + `\b`).MatchString(help) {
			t.Errorf("lfmq --help does not name model_type %s:\n%s", modelType, help)
		}
	}
}

// TestHelpMatchesFlags: what the help says of a command agrees with the
// flags it has. A command with --device does not say it runs on the CPU
// alone; every argument that reads a source model (quantize, generate and
// serve --model, score --reference, inspect's argument) says it takes a hub
// id OWNER/NAME, in its usage line and in its flag's help, and has
// --endpoint for it.
func TestHelpMatchesFlags(t *testing.T) {
	ios, _, _ := testStreams()
	root := newRootCmd(ios)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.Flags().Lookup("device") == nil {
			return
		}
		for _, text := range []string{c.Short, c.Long} {
			if strings.Contains(text, "on the CPU") && !strings.Contains(text, "GPU") {
				t.Errorf("%s has --device but its help says it runs on the CPU: %q", c.CommandPath(), text)
			}
		}
	}
	walk(root)

	for _, tt := range []struct{ cmd, flag string }{
		{"quantize", "model"}, {"generate", "model"}, {"serve", "model"}, {"score", "reference"}, {"inspect", ""},
	} {
		c := findCmd(root, tt.cmd)
		if c == nil {
			t.Fatalf("no command %s", tt.cmd)
		}
		if !strings.Contains(c.Use, "OWNER/NAME") {
			t.Errorf("%s: the usage line %q does not show the hub id", tt.cmd, c.Use)
		}
		if c.Flags().Lookup("endpoint") == nil {
			t.Errorf("%s has no --endpoint", tt.cmd)
		}
		if tt.flag == "" {
			continue
		}
		if f := c.Flags().Lookup(tt.flag); f == nil || !strings.Contains(f.Usage, "OWNER/NAME") {
			t.Errorf("%s --%s: its help does not say it takes a hub id", tt.cmd, tt.flag)
		}
	}
}
