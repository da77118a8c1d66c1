package score

import (
	"context"
	"runtime"
	"testing"

	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
)

// BenchmarkScore compares scoring throughput with the engine's plain
// prefill on the same windows (the first ~2,000 window positions of the
// fixture's book corpus at ctx 512, in batches of up to 512 rows as Run
// makes them):
//
//   - prefill: Forward with LastLogits, the engine's prompt processing;
//   - prefill-all-logits: Forward returning every position's logits (the
//     head over all rows), what one model pass of scoring costs;
//   - score/1-candidate: the reference and one candidate (RTN) run, plus
//     the float64 full-vocabulary statistics (log-softmax, KL, argmax) of
//     every scored position;
//   - stats/1-candidate: those statistics alone, on logits computed once.
//
// Every case reports tokens/s as window positions per second of wall time;
// score also reports targets/s (scored tokens: window overlap makes a
// position count for less than a target).
func BenchmarkScore(b *testing.B) {
	m := tiny(b)
	_, rtnDir := candidates(b)
	rtn, err := load.Load(rtnDir, load.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer rtn.Close()
	c := loadCorpus(b, "book", 2)
	var wins []Window
	positions, targets := 0, 0
	for ri, r := range c.Records {
		ws, _ := Split(r.Tokens, DefaultCtx, 1)
		for _, w := range ws {
			if positions >= 2000 {
				break
			}
			w.Record = ri
			wins = append(wins, w)
			positions += len(w.Tokens)
			targets += w.Targets()
		}
	}
	var batches [][]Window
	for rest := wins; len(rest) > 0; {
		n, rows := 0, 0
		for n < len(rest) && (n == 0 || rows+len(rest[n].Tokens) <= batchRows) {
			rows += len(rest[n].Tokens)
			n++
		}
		batches = append(batches, rest[:n])
		rest = rest[n:]
	}
	report := func(b *testing.B) {
		b.ReportMetric(float64(b.N*positions)/b.Elapsed().Seconds(), "tokens/s")
	}
	ctx := context.Background()
	b.Run("prefill", func(b *testing.B) {
		for b.Loop() {
			for _, batch := range batches {
				seqs := make([]*model.Sequence, len(batch))
				toks := make([][]int, len(batch))
				for i, w := range batch {
					seqs[i], toks[i] = m.NewSequence(), w.Tokens
				}
				if _, err := m.Forward(ctx, seqs, toks, model.ForwardOptions{ChunkSize: batchRows}); err != nil {
					b.Fatal(err)
				}
			}
		}
		report(b)
	})
	b.Run("prefill-all-logits", func(b *testing.B) {
		r := &runner{vocab: fixVocab}
		for b.Loop() {
			for _, batch := range batches {
				if _, err := r.forward(ctx, m, batch, 0); err != nil {
					b.Fatal(err)
				}
			}
		}
		report(b)
	})
	b.Run("score/1-candidate", func(b *testing.B) {
		r := &runner{vocab: fixVocab, threads: runtime.GOMAXPROCS(0), ref: m}
		v := &variant{name: "rtn", m: rtn}
		r.cands = []*variant{v}
		for b.Loop() {
			v.toks = make([][]Token, 1)
			for _, batch := range batches {
				if err := r.batch(ctx, 0, c, batch); err != nil {
					b.Fatal(err)
				}
			}
		}
		report(b)
		b.ReportMetric(float64(b.N*targets)/b.Elapsed().Seconds(), "targets/s")
	})
	b.Run("stats/1-candidate", func(b *testing.B) {
		r := &runner{vocab: fixVocab, threads: runtime.GOMAXPROCS(0), ref: m}
		v := &variant{name: "rtn", m: rtn}
		r.cands = []*variant{v}
		ins := make([]*batchInputs, len(batches))
		for i, batch := range batches {
			var err error
			if ins[i], err = r.inputs(ctx, c, batch); err != nil {
				b.Fatal(err)
			}
		}
		for b.Loop() {
			v.toks = make([][]Token, 1)
			for i, batch := range batches {
				if err := r.stats(0, c, batch, ins[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.N*targets)/b.Elapsed().Seconds(), "targets/s")
		b.ReportMetric(b.Elapsed().Seconds()*1e6/float64(b.N*targets), "µs/target")
	})
}
