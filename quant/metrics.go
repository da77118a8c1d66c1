package quant

import (
	"slices"
	"time"
)

// MatrixMetrics are the GPTQ metrics of one expert matrix
// (docs/gptq.md §7). Losses are ½·tr(ΔWᵀ H ΔW) under the expert's
// weighted, shrunk Hessian H (before dead-row substitution and damping),
// ΔW = W_source − Q.
type MatrixMetrics struct {
	// Tokens is the raw number of routed tokens; WeightSum and NEff are Ω
	// and Ω²/Ω₂ of their Hessian weights; Shrink is NEff/(NEff + κ).
	Tokens    int     `json:"tokens"`
	WeightSum float64 `json:"weight_sum"`
	NEff      float64 `json:"n_eff"`
	Shrink    float64 `json:"shrink"`
	// Alpha, Lambda and Retries are the damping actually used.
	Alpha   float64 `json:"alpha"`
	Lambda  float64 `json:"lambda"`
	Retries int     `json:"retries"`
	// Method is "gptq", or "rtn" with Reason ("cholesky_failed",
	// "no_tokens").
	Method string `json:"method"`
	Reason string `json:"reason,omitempty"`
	// LossGPTQ is the loss of the stored result (the RTN loss after a
	// fallback), LossRTN that of the plain packer's result.
	LossGPTQ float64 `json:"loss_gptq"`
	LossRTN  float64 `json:"loss_rtn"`
	// Ratio is LossGPTQ/LossRTN and RelMSE is LossGPTQ/(½·tr(Wᵀ H W));
	// null where the denominator is 0.
	Ratio  *float64 `json:"ratio"`
	RelMSE *float64 `json:"rel_mse"`
}

// ExpertMetrics are one expert's matrices' metrics.
type ExpertMetrics struct {
	Expert int           `json:"expert"`
	W1     MatrixMetrics `json:"w1"`
	W3     MatrixMetrics `json:"w3"`
	W2     MatrixMetrics `json:"w2"`
}

// LayerMetrics summarise an MoE layer's GPTQ run.
type LayerMetrics struct {
	Layer   int             `json:"layer"`
	Experts []ExpertMetrics `json:"experts"`
	// MeanRatio and MaxRatio are over every matrix with a ratio; the
	// per-projection means follow.
	MeanRatio   float64 `json:"mean_ratio"`
	MaxRatio    float64 `json:"max_ratio"`
	MeanRatioW1 float64 `json:"mean_ratio_w1"`
	MeanRatioW3 float64 `json:"mean_ratio_w3"`
	MeanRatioW2 float64 `json:"mean_ratio_w2"`
	// Token histogram: routed tokens per expert.
	TokensMin    int     `json:"tokens_min"`
	TokensMedian float64 `json:"tokens_median"`
	TokensMax    int     `json:"tokens_max"`
	// PoolTokens is the number of (token, expert) pairs of the layer.
	PoolTokens int `json:"pool_tokens"`
	Fallbacks  int `json:"fallbacks"`
}

// ratioOf returns a/b, or nil when b is 0.
func ratioOf(a, b float64) *float64 {
	if b == 0 {
		return nil
	}
	r := a / b
	return &r
}

// summarise fills the layer-level fields from the experts.
func (lm *LayerMetrics) summarise() {
	var all, w1, w3, w2 []float64
	var toks []int
	lm.PoolTokens, lm.Fallbacks, lm.MaxRatio = 0, 0, 0
	for _, e := range lm.Experts {
		toks = append(toks, e.W1.Tokens)
		lm.PoolTokens += e.W1.Tokens
		for i, m := range []MatrixMetrics{e.W1, e.W3, e.W2} {
			if m.Method != "gptq" {
				lm.Fallbacks++
			}
			if m.Ratio == nil {
				continue
			}
			all = append(all, *m.Ratio)
			lm.MaxRatio = max(lm.MaxRatio, *m.Ratio)
			switch i {
			case 0:
				w1 = append(w1, *m.Ratio)
			case 1:
				w3 = append(w3, *m.Ratio)
			default:
				w2 = append(w2, *m.Ratio)
			}
		}
	}
	lm.MeanRatio, lm.MeanRatioW1, lm.MeanRatioW3, lm.MeanRatioW2 = mean(all), mean(w1), mean(w3), mean(w2)
	if len(toks) > 0 {
		slices.Sort(toks)
		lm.TokensMin, lm.TokensMax = toks[0], toks[len(toks)-1]
		n := len(toks)
		lm.TokensMedian = float64(toks[(n-1)/2]+toks[n/2]) / 2
	}
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// LayerReport is the run-time side of one MoE layer: timings and work,
// which depend on the machine and so are reported, never stored in the
// manifest.
type LayerReport struct {
	Layer int
	// Resumed is true when the layer was taken from an interrupted run.
	Resumed bool
	// Forward is the calibration forward; UpStats and DownStats the
	// Hessian accumulation (DownStats includes recomputing the w2 inputs);
	// SolveW13 and SolveW2 the factorizations, solves and loss metrics.
	Forward, UpStats, DownStats, SolveW13, SolveW2 time.Duration
	// HessianFLOP counts the accumulation's multiply-adds ×2 (upper
	// triangles), DownInputFLOP the w2-input products, SolveFLOP the
	// factorizations, row loops and loss metrics.
	UpHessianFLOP, DownHessianFLOP, DownInputFLOP, SolveFLOP float64
	Metrics                                                  LayerMetrics
}

// GPTQReport is what a GPTQ run reports besides the checkpoint.
type GPTQReport struct {
	Layers []LayerReport
	// Fallbacks counts matrices stored by RTN instead of GPTQ.
	Fallbacks int
	// Warnings are human-readable notes (fallbacks, resumed layers).
	Warnings []string
	// CalibTokens is the number of calibration tokens; Dense is the time
	// spent packing the non-expert tensors.
	CalibTokens int
	Dense       time.Duration
	// DenseGPTQ is the time of the dense GPTQ steps (their forwards,
	// statistics, solves and packing) with DenseMethod GPTQ, 0 otherwise.
	DenseGPTQ time.Duration
	// DenseStats is the part of DenseGPTQ spent in the forwards and input
	// statistics, and HeadGPTQ the part spent on the head's file (its
	// statistics and solve): where the dense pass's time goes.
	DenseStats, HeadGPTQ time.Duration
	// MemoryBudget is the run's estimate of its largest live heap, in
	// bytes, from which it sets the collector's soft limit, and
	// MappedBudget its bound on the mapped files' pages resident at once
	// (solvemem.go): the peak RSS is about their sum.
	MemoryBudget, MappedBudget int64
	// FFN is true for a dense LFM2, whose layers' FFN matrices were solved
	// (each layer's as its one expert) rather than routed experts.
	FFN bool
}
