package lfmq_test

import (
	"os"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/bench"
)

// docsShow reads the lfmq bench --out file at path and checks that
// docs/bench.md shows the tables lfmq bench printed for it (bench.Markdown,
// byte for byte) and the command its receipts record.
func docsShow(t *testing.T, path string) *bench.File {
	t.Helper()
	f, err := bench.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("docs/bench.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	if table := bench.Markdown(&f.Result); !strings.Contains(doc, table) {
		t.Errorf("docs/bench.md does not show the tables of %s:\n%s", path, table)
	}
	if !strings.Contains(doc, f.Receipts.Command) {
		t.Errorf("docs/bench.md does not show the command %s recorded: %s", path, f.Receipts.Command)
	}
	return f
}

// benchEvidence is the measurement docs/bench.md shows: lfmq bench --out
// of lfmq serve on the synthetic 8B-shape checkpoint.
const benchEvidence = "docs/evidence/bench-synth.json"

// TestDocsBenchMatrix: the matrix docs/bench.md shows is the table lfmq
// bench printed for the committed --out file (bench.Markdown, byte for
// byte), and the command it shows is the one the file's receipts record,
// so the figures are measured ones and cannot drift from their file.
func TestDocsBenchMatrix(t *testing.T) {
	f := docsShow(t, benchEvidence)
	if f.Server.Kind != "lfmq" || f.Interrupted || len(f.Cells) < 2 {
		t.Errorf("%s: server %s, interrupted %v, %d cells", benchEvidence, f.Server.Kind, f.Interrupted, len(f.Cells))
	}
	for _, c := range f.Cells {
		if len(c.Failures) != 0 || c.ServerCounts == nil || c.ServerCounts.GenerationTokens == nil || *c.ServerCounts.GenerationTokens != c.Sent.CompletionTokens {
			t.Errorf("%s: cell %d × %d: failures %v, sent %+v, server %+v", benchEvidence, c.Concurrency, c.PromptTokens, c.Failures, c.Sent, c.ServerCounts)
		}
	}
}

// agentLoopEvidence is the agent-loop run docs/bench.md shows: lfmq bench
// --turns of lfmq serve on the synthetic 8B-shape checkpoint.
const agentLoopEvidence = "docs/evidence/bench-agent-loop.json"

// TestDocsBenchAgentLoop: the agent-loop tables docs/bench.md shows are
// what lfmq bench printed for the committed --out file, with the command
// its receipts record; every turn re-sent its conversation exactly (lfmq
// serve returns the answers' ids), the prefix cache supplied every whole
// 64-token block of the turn before's prompt and answer, and each turn
// from the second on has its fresh-prompt baseline.
func TestDocsBenchAgentLoop(t *testing.T) {
	f := docsShow(t, agentLoopEvidence)
	if f.Server.Kind != "lfmq" || len(f.Cells) != 1 || f.Settings.Turns < 2 || !f.Settings.TurnBaseline {
		t.Fatalf("%s: server %s, %d cells, %d turns, baseline %v", agentLoopEvidence, f.Server.Kind, len(f.Cells), f.Settings.Turns, f.Settings.TurnBaseline)
	}
	prev := 0
	for _, tu := range f.Cells[0].Turns {
		if tu.Requests != 1 {
			t.Fatalf("turn %d: %d requests; the evidence is one conversation", tu.Turn, tu.Requests)
		}
		fed := 0
		if tu.Turn > 1 {
			fed = prev + f.Settings.OutputTokens
		}
		if want := min(fed, int(tu.PromptTokensMean)-1) / 64 * 64; tu.StandIn != 0 || tu.CachedTokensMean != float64(want) {
			t.Errorf("turn %d: %v cached tokens, want %d (the turn before: %d prompt + %d answer)", tu.Turn, tu.CachedTokensMean, want, prev, f.Settings.OutputTokens)
		}
		if fresh := tu.FreshTTFT; (tu.Turn > 1) != (fresh != nil && fresh.N == 1 && tu.FreshRequests == 1) {
			t.Errorf("turn %d: fresh baseline %+v", tu.Turn, fresh)
		}
		prev = int(tu.PromptTokensMean)
	}
}
