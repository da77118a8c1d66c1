package score

import (
	"fmt"
	"slices"
	"time"

	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/evidence/corpus"
	"github.com/lfmq/lfmq/version"
)

// result writes the evidence file of a run started at start: its settings
// and receipts, every variant's statistics (statistics), the paired
// comparisons of the candidates, the notes and the timing.
func (r *runner) result(opts Options, start time.Time, ref *reference, ws *windowSet, candReceipts []evidence.Checkpoint, cacheReceipt *evidence.Cache) (*Output, error) {
	f := &evidence.File{
		Format: evidence.Format,
		Kind:   evidence.KindScore,
		Settings: evidence.Settings{
			Ctx: ref.ctx, WindowRule: evidence.WindowRule, NoiseFloor: opts.NoiseFloor, MaxRecords: opts.MaxRecords,
		},
		Receipts: evidence.Receipts{
			LfmqVersion: version.Version, SourceDigest: version.SourceDigest,
			Command: opts.Command, Started: start.UTC().Format(time.RFC3339),
			Machine: machineOn(opts.Device), Reference: ref.id, Candidates: candReceipts,
			TokenizerSHA256: ref.tokSHA, Corpora: ws.receipts, ReferenceCache: cacheReceipt,
		},
	}
	if opts.NoiseFloor {
		f.Settings.Chunk = r.chunk
	}
	f.Receipts.BinarySHA256 = ref.binSHA
	out := &Output{File: f}
	if err := r.statistics(out, ws.corpora); err != nil {
		return nil, err
	}
	var err error
	if f.Comparisons, err = compare(r.cands, ws.corpora); err != nil {
		return nil, err
	}
	notes := ref.notes
	if r.noise != nil && exactlyEqual(r.noise.toks) {
		notes = append(notes, fmt.Sprintf("The %s is exactly zero: chunked evaluation is bit-identical to one prefill pass on every scored token (the engine's prefill is chunk-invariant), so the %s is the relevant floor.", r.noise.name, storageName))
	}
	f.Notes = notes
	secs := time.Since(start).Seconds()
	f.Timing = evidence.Timing{Seconds: evidence.Float(secs), Tokens: r.passes, TokensPerSecond: evidence.Float(float64(r.passes) / secs)}
	return out, nil
}

// statistics adds every variant's statistics on each corpus, and pooled
// over them when there are several, to out's file, with its per-token KL
// series.
func (r *runner) statistics(out *Output, corpora []*corpus.Corpus) error {
	f := out.File
	for _, v := range r.variants() {
		for ci, c := range corpora {
			st, err := Summarize(v.toks[ci])
			if err != nil {
				return err
			}
			f.Results = append(f.Results, evidence.Result{Candidate: v.name, Kind: v.kind, Corpus: c.Name, Stats: st})
			kl := make([]float64, len(v.toks[ci]))
			for t, k := range v.toks[ci] {
				kl[t] = k.KL
			}
			out.Series = append(out.Series, Series{Variant: v.name, Kind: v.kind, Corpus: c.Name, KL: kl})
		}
		if len(corpora) > 1 {
			st, err := Summarize(slices.Concat(v.toks...))
			if err != nil {
				return err
			}
			f.Results = append(f.Results, evidence.Result{Candidate: v.name, Kind: v.kind, Corpus: evidence.AllCorpora, Stats: st})
		}
	}
	return nil
}

// exactlyEqual reports whether every token of a floor is identical to the
// reference: KL 0, same NLL and argmax.
func exactlyEqual(toks [][]Token) bool {
	for _, ts := range toks {
		for _, t := range ts {
			if t.KL != 0 || t.NLLCand != t.NLLRef || !t.Same {
				return false
			}
		}
	}
	return true
}

// compare returns the paired differences between every pair of candidates,
// per corpus and pooled.
func compare(cands []*variant, corpora []*corpus.Corpus) ([]evidence.Comparison, error) {
	var out []evidence.Comparison
	for i := range cands {
		for j := i + 1; j < len(cands); j++ {
			a, b := cands[i], cands[j]
			add := func(name string, ta, tb []Token) error {
				klA, klB, nA, nB := make([]float64, len(ta)), make([]float64, len(tb)), make([]float64, len(ta)), make([]float64, len(tb))
				for t := range ta {
					klA[t], nA[t] = ta[t].KL, ta[t].NLLCand
				}
				for t := range tb {
					klB[t], nB[t] = tb[t].KL, tb[t].NLLCand
				}
				kd, kse, err := Paired(klA, klB)
				if err != nil {
					return err
				}
				nd, nse, err := Paired(nA, nB)
				if err != nil {
					return err
				}
				c := evidence.Comparison{Corpus: name, A: a.name, B: b.name, Tokens: len(ta), KLDiff: evidence.Float(kd), NLLDiff: evidence.Float(nd)}
				if kse != nil {
					c.KLDiffSE, c.NLLDiffSE = evidence.Ptr(*kse), evidence.Ptr(*nse)
				}
				out = append(out, c)
				return nil
			}
			for ci, c := range corpora {
				if err := add(c.Name, a.toks[ci], b.toks[ci]); err != nil {
					return nil, err
				}
			}
			if len(corpora) > 1 {
				if err := add(evidence.AllCorpora, slices.Concat(a.toks...), slices.Concat(b.toks...)); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}
