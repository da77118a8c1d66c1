package quant

import (
	"slices"
	"strings"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/format/canonjson"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant/calib"
	"github.com/lfmq/lfmq/version"
)

// gptqPrep is what the prepare stage of a GPTQ run hands the others: the
// calibration windows, the settings as the manifest records them, and the
// run's fingerprint, which a resumed run must match.
type gptqPrep struct {
	set          *calib.Set
	settingsJSON []byte
	fingerprint  map[string]string
}

// prepareGPTQ is the first stage of a GPTQ run: it checks the settings,
// loads the calibration windows, checks the evaluation corpora's
// disjointness from them, and forms the settings and the fingerprint from
// them and source (the source checkpoint's description). The model itself
// is checked when it is loaded (openCalibration).
func prepareGPTQ(opts Options, cfg *config.Config, source lfmq1.Source) (*gptqPrep, error) {
	g := opts.GPTQ
	if err := g.validate(); err != nil {
		return nil, err
	}
	// Everything that can refuse the run is checked before any output
	// exists: calibration input, disjointness, the model itself.
	enc, err := calib.NewEncoder(opts.ModelDir, cfg.VocabSize, g.chatTime())
	if err != nil {
		return nil, err
	}
	set, err := calib.Load(g.Calib, enc, calib.Options{Seqs: g.CalibSeqs, Len: g.CalibLen, Seed: g.Seed})
	if err != nil {
		return nil, err
	}
	// The corpora are checked, and recorded, in name order: the order of
	// the flags that named them is no part of the checkpoint's identity.
	evals := slices.SortedFunc(slices.Values(g.EvalCorpora), func(a, b EvalCorpus) int { return strings.Compare(a.Name, b.Name) })
	var corpora []*calib.Corpus
	for _, c := range evals {
		cp, err := calib.LoadCorpus(c.Name, c.Path, enc)
		if err != nil {
			return nil, err
		}
		corpora = append(corpora, cp)
	}
	disj, err := calib.CheckDisjoint(set, corpora, enc.IsControl)
	if err != nil {
		return nil, err
	}
	settings := g.settings(set, disj)
	settings.ExponentRule, settings.DenseExponentRule = string(opts.ExponentRule.orMax()), string(opts.DenseExponentRule.orMax())
	if opts.DenseMethod == GPTQ {
		order := "sequential"
		if !g.Sequential {
			order = "parallel"
		}
		settings.DenseGPTQ = &DenseGPTQSettings{Damp: g.DampDense, HessianWeight: "1", Order: order}
	}
	settingsJSON, err := canonjson.Marshal(settings)
	if err != nil {
		return nil, err
	}
	fp, err := fingerprint(source, settings)
	if err != nil {
		return nil, err
	}
	fp["lfmq_version"], fp["method"] = version.Version, string(GPTQ)
	// The statistics come from the engine's float32 forward, so a binary
	// with other kernels may produce other bytes; a development build keeps
	// its version string across such changes, the executable's digest does
	// not.
	fp["binary_sha256"] = executableDigest()
	return &gptqPrep{set: set, settingsJSON: settingsJSON, fingerprint: fp}, nil
}
