package quant

import (
	"fmt"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/format/lfmq1"
)

// ArchitectureError refuses an option that the checkpoint's architecture
// has no use for: --experts keep on a dense LFM2 (it has no experts),
// --ffn-format on an LFM2-MoE (its few dense FFNs are BFP8 with attention),
// GPTQ with a BFP8 FFN (nothing is left to solve).
type ArchitectureError struct {
	ModelType string
	Option    string
	Msg       string
}

func (e *ArchitectureError) Error() string {
	return fmt.Sprintf("quant: %s: the checkpoint is model_type %q: %s", e.Option, e.ModelType, e.Msg)
}

// checkArchitecture checks opts against cfg before anything is read.
func checkArchitecture(cfg *config.Config, opts *Options) error {
	bad := func(option, msg string) error {
		return &ArchitectureError{ModelType: cfg.ModelType, Option: option, Msg: msg}
	}
	switch opts.FFNFormat {
	case "", lfmq1.BFP4, lfmq1.BFP8:
	default:
		return bad("FFNFormat", fmt.Sprintf("%q is not a format for the FFN; want %s or %s", opts.FFNFormat, lfmq1.BFP4, lfmq1.BFP8))
	}
	if !cfg.Dense() {
		if opts.FFNFormat != "" {
			return bad("FFNFormat", "only dense LFM2 checkpoints have an FFN class; an LFM2-MoE's dense layers are BFP8 with attention")
		}
		return nil
	}
	if opts.KeepExperts {
		return bad("KeepExperts", "a dense LFM2 has no routed experts to keep")
	}
	if opts.FFNFormat == lfmq1.BFP8 && opts.Method == GPTQ {
		return bad("Method", "a BFP8 FFN is always packed by RTN, so GPTQ has nothing to solve; use the rtn method")
	}
	return nil
}
