package score

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/engine/chat"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/engine/tokenizer"
	"github.com/lfmq/lfmq/evidence/corpus"
	"github.com/lfmq/lfmq/quant"
)

const (
	fixture  = "../../testdata/tiny-lfm2-moe"
	tinyDir  = fixture + "/model"
	corpDir  = fixture + "/corpora"
	fixVocab = 8192
)

var corpusNames = []string{"chat", "instruct", "code", "book"}

var (
	tinyOnce sync.Once
	tinyM    *model.Model
	tinyErr  error
)

// tiny returns the fixture model, loaded once per test binary.
func tiny(t testing.TB) *model.Model {
	t.Helper()
	tinyOnce.Do(func() { tinyM, tinyErr = load.Load(tinyDir, load.Options{}) })
	if tinyErr != nil {
		t.Fatal(tinyErr)
	}
	return tinyM
}

var (
	candOnce sync.Once
	candDir  string
	candErr  error
)

// candidates quantizes the fixture once per test binary: "keep" (BF16
// experts + BFP8 dense) and "rtn" (RTN BFP4 experts + BFP8 dense). The
// directory is removed by TestMain.
func candidates(t testing.TB) (keep, rtn string) {
	t.Helper()
	candOnce.Do(func() {
		candDir, candErr = os.MkdirTemp("", "lfmq-score-test-")
		if candErr != nil {
			return
		}
		for _, c := range []struct {
			name string
			keep bool
		}{{"keep", true}, {"rtn", false}} {
			if _, candErr = quant.Quantize(context.Background(), quant.Options{
				ModelDir: tinyDir, OutDir: filepath.Join(candDir, c.name), Method: quant.RTN, KeepExperts: c.keep, CreatedBy: "test",
			}); candErr != nil {
				return
			}
		}
	})
	if candErr != nil {
		t.Fatal(candErr)
	}
	return filepath.Join(candDir, "keep"), filepath.Join(candDir, "rtn")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if candDir != "" {
		os.RemoveAll(candDir)
	}
	os.Exit(code)
}

func loadCorpus(t testing.TB, name string, maxRecords int) *corpus.Corpus {
	t.Helper()
	tok, err := tokenizer.Load(tinyDir)
	if err != nil {
		t.Fatal(err)
	}
	enc := corpus.NewEncoder(tok, fixVocab, func() (*chat.Template, error) { return chat.Load(tinyDir) })
	c, err := corpus.Load(name, filepath.Join(corpDir, name+".jsonl"), enc, maxRecords)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// evalPPL is reference/eval_ppl.json.
type evalPPL struct {
	ChunkLen int `json:"chunk_len"`
	Corpora  map[string]struct {
		NPredicted int     `json:"n_predicted"`
		NLLSum     float64 `json:"nll_sum"`
		PPL        float64 `json:"ppl"`
		PerRecord  []struct {
			ID         string  `json:"id"`
			NLLSum     float64 `json:"nll_sum"`
			NPredicted int     `json:"n_predicted"`
		} `json:"per_record"`
	} `json:"corpora"`
}

// fixtureNLL scores records by the fixture README's rule (consecutive
// non-overlapping chunks of chunkLen tokens, each from position 0, every
// token but each chunk's first predicted) with this package's per-token
// NLL on float32 log-prob rows (sample.LogProbs, as Run), and returns each
// record's NLL sum and predicted count.
func fixtureNLL(t testing.TB, m *model.Model, recs []corpus.Record, chunkLen int) (sums []float64, counts []int) {
	t.Helper()
	var wins []Window
	for ri, r := range recs {
		for off := 0; off < len(r.Tokens); off += chunkLen {
			toks := r.Tokens[off:min(off+chunkLen, len(r.Tokens))]
			if len(toks) >= 2 {
				wins = append(wins, Window{Record: ri, Tokens: toks, First: 1})
			}
		}
	}
	sums, counts = make([]float64, len(recs)), make([]int, len(recs))
	rn := &runner{vocab: fixVocab}
	ref := NewRef(fixVocab)
	var row []float32
	for len(wins) > 0 {
		n := min(len(wins), 8)
		logits, err := rn.forward(context.Background(), m, wins[:n], 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range wins[:n] {
			for p := w.First; p < len(w.Tokens); p++ {
				// The float32 log-prob row, as Run scores it.
				row = sample.LogProbs(row, logits[i][(p-1)*fixVocab:p*fixVocab])
				if !ref.SetLogits(row, w.Tokens[p]) {
					t.Fatal("non-finite logits")
				}
				sums[w.Record] += ref.NLL
				counts[w.Record]++
			}
		}
		wins = wins[n:]
	}
	return sums, counts
}

func readEvalPPL(t testing.TB) *evalPPL {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixture, "reference", "eval_ppl.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e evalPPL
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatal(err)
	}
	return &e
}

// TestFixturePPL checks this package's NLL against the fixture's
// independent float32 PyTorch reference (eval_ppl.json) under the
// fixture's own window rule, on the first records of every corpus (the
// whole corpora run with -tags long). The reference sums are rounded to
// 1e-4; float32 engines agree on logits to ~1e-4 (docs/model.md §4.9),
// so a record's sum may differ by up to ~1e-4 per token (observed:
// 6.4e-5 on instruct-0034, 4e-6 elsewhere), and a corpus PPL by ~1e-5 relative.
func TestFixturePPL(t *testing.T) {
	e := readEvalPPL(t)
	m := tiny(t)
	for _, name := range corpusNames {
		t.Run(name, func(t *testing.T) {
			want := e.Corpora[name]
			recs := loadCorpus(t, name, 0).Records
			if len(recs) != len(want.PerRecord) {
				t.Fatalf("%d records, eval_ppl.json has %d", len(recs), len(want.PerRecord))
			}
			// About a thousand tokens per corpus; every record with -tags long.
			n, budget := 0, 0
			for n < len(recs) && (budget < 1000 || longTests) {
				budget += len(recs[n].Tokens)
				n++
			}
			sums, counts := fixtureNLL(t, m, recs[:n], e.ChunkLen)
			var total float64
			var tokens int
			worst := 0.0
			for i := range n {
				w := want.PerRecord[i]
				if recs[i].ID != w.ID || counts[i] != w.NPredicted {
					t.Fatalf("record %d: %s with %d predicted, want %s with %d", i, recs[i].ID, counts[i], w.ID, w.NPredicted)
				}
				d := math.Abs(sums[i] - w.NLLSum)
				worst = max(worst, d/float64(counts[i]))
				if d > 1e-3+1e-4*float64(counts[i]) {
					t.Errorf("record %s: NLL sum %.4f, reference %.4f (Δ %.2g)", w.ID, sums[i], w.NLLSum, d)
				}
				total += sums[i]
				tokens += counts[i]
			}
			t.Logf("%d records, %d tokens: worst |ΔNLL| per token %.2g", n, tokens, worst)
			if n == len(recs) {
				ppl := math.Exp(total / float64(tokens))
				if tokens != want.NPredicted || math.Abs(ppl/want.PPL-1) > 1e-5 {
					t.Errorf("PPL %.6f over %d tokens, reference %.6f over %d", ppl, tokens, want.PPL, want.NPredicted)
				}
				t.Logf("PPL %.6f, reference %.6f", ppl, want.PPL)
			}
		})
	}
}
