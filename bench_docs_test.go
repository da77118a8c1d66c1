package lfmq_test

import (
	"os"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/bench"
)

// benchEvidence is the measurement docs/bench.md shows: lfmq bench --out
// of lfmq serve on the synthetic 8B-shape checkpoint.
const benchEvidence = "docs/evidence/bench-synth.json"

// TestDocsBenchMatrix: the matrix docs/bench.md shows is the table lfmq
// bench printed for the committed --out file (bench.Markdown, byte for
// byte), and the command it shows is the one the file's receipts record,
// so the figures are measured ones and cannot drift from their file.
func TestDocsBenchMatrix(t *testing.T) {
	f, err := bench.Read(benchEvidence)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("docs/bench.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	table := bench.Markdown(&f.Result)
	if !strings.Contains(doc, table) {
		t.Errorf("docs/bench.md does not show the table of %s:\n%s", benchEvidence, table)
	}
	if !strings.Contains(doc, f.Receipts.Command) {
		t.Errorf("docs/bench.md does not show the command %s recorded: %s", benchEvidence, f.Receipts.Command)
	}
	if f.Server.Kind != "lfmq" || f.Interrupted || len(f.Cells) < 2 {
		t.Errorf("%s: server %s, interrupted %v, %d cells", benchEvidence, f.Server.Kind, f.Interrupted, len(f.Cells))
	}
	for _, c := range f.Cells {
		if len(c.Failures) != 0 || c.ServerCounts == nil || c.ServerCounts.GenerationTokens == nil || *c.ServerCounts.GenerationTokens != c.Sent.CompletionTokens {
			t.Errorf("%s: cell %d × %d: failures %v, sent %+v, server %+v", benchEvidence, c.Concurrency, c.PromptTokens, c.Failures, c.Sent, c.ServerCounts)
		}
	}
}
