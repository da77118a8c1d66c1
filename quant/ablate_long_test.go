//go:build long

package quant

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/lfmq/lfmq/quant/gptq"
)

// ablateOut is where TestAblateHessianLookahead writes its checkpoint for
// scripts/ablate-exponent.sh to score.
var ablateOut = flag.String("ablate.out", "", "directory for the hessian-lookahead ablation checkpoint (TestAblateHessianLookahead)")

// TestAblateHessianLookahead writes the one ablation checkpoint the command
// line cannot make: the hessian exponent rule with the lookahead cost
// (gptq.CostLookahead) instead of the greedy cost, with the settings of
// `lfmq quantize --calib … --calib-seqs 128` and the four fixture eval
// corpora. It runs only when -ablate.out names the output directory; it
// checks what every GPTQ checkpoint must satisfy (quality bar, no
// fallback) and logs the loss ratio and the solve time.
func TestAblateHessianLookahead(t *testing.T) {
	if *ablateOut == "" {
		t.Skip("no -ablate.out directory")
	}
	g := DefaultGPTQOptions()
	g.Calib, g.CalibSeqs = tinyCalib, fullSeqs
	for _, c := range evalCorpora {
		g.EvalCorpora = append(g.EvalCorpora, EvalCorpus{Name: c, Path: tinyFixture + "/corpora/" + c + ".jsonl"})
	}
	g.hessianCost = gptq.CostLookahead
	start := time.Now()
	res, err := Quantize(context.Background(), Options{ModelDir: tinyModel, OutDir: *ablateOut, Method: GPTQ,
		CreatedBy: "scripts/ablate-exponent.sh: hessian exponent rule, lookahead cost", GPTQ: g, ExponentRule: ExponentHessian})
	if err != nil {
		t.Fatal(err)
	}
	var solve time.Duration
	var sum float64
	for _, l := range res.GPTQ.Layers {
		solve += l.SolveW13 + l.SolveW2
		sum += l.Metrics.MeanRatio
		t.Logf("layer %d: mean ratio w1 %.3f w3 %.3f w2 %.3f all %.3f max %.3f", l.Layer,
			l.Metrics.MeanRatioW1, l.Metrics.MeanRatioW3, l.Metrics.MeanRatioW2, l.Metrics.MeanRatio, l.Metrics.MaxRatio)
	}
	t.Logf("hessian-lookahead: mean ratio %.3f, solves %.1fs, wall %.1fs", sum/float64(len(res.GPTQ.Layers)), solve.Seconds(), time.Since(start).Seconds())
	checkQuality(t, *ablateOut)
}
