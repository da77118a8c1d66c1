package draft_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/engine/draft"
)

// FuzzParseConfig: ParseConfig never panics, and returns either a config
// within the bounds the loader relies on or a *ConfigError naming the
// file.
func FuzzParseConfig(f *testing.F) {
	b, err := os.ReadFile(filepath.Join(drafterDir, "config.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"architectures":["DSparkDraftModel"],"hidden_size":8,"intermediate_size":8,"num_hidden_layers":1,` +
		`"num_attention_heads":2,"num_key_value_heads":1,"block_size":2,"vocab_size":16,"markov_rank":2,` +
		`"mask_token_id":3,"target_layer_ids":[0]}`))
	f.Add([]byte(`{"architectures":["DSparkDraftModel"],"dflash_config":{"mask_token_id":null},"head_dim":0}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := draft.ParseConfig("d/config.json", data)
		if err != nil {
			var ce *draft.ConfigError
			if c != nil || !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), "drafter d/config.json: ") {
				t.Fatalf("config %v, error %T %v", c, err, err)
			}
			return
		}
		in := func(v, lo, hi int) bool { return v >= lo && v <= hi }
		ok := in(c.HiddenSize, 1, 1<<20) && in(c.IntermediateSize, 1, 1<<20) && in(c.NumLayers, 1, 1<<20) &&
			in(c.NumHeads, 1, 1<<20) && in(c.NumKVHeads, 1, c.NumHeads) && c.NumHeads%c.NumKVHeads == 0 &&
			in(c.HeadDim, 2, 1<<20) && c.HeadDim%2 == 0 && in(c.BlockSize, 1, draft.MaxBlockSize) &&
			in(c.VocabSize, 1, 1<<20) && in(c.MaskTokenID, 0, c.VocabSize-1) && in(c.MarkovRank, 1, 1<<20) &&
			in(c.TargetHiddenSize, 1, 1<<20) && in(c.NumTargetLayers, 0, 1<<20) && len(c.TargetLayerIDs) > 0 &&
			c.NormEps > 0 && c.RopeTheta > 1
		for _, id := range c.TargetLayerIDs {
			ok = ok && in(id, 0, 1<<20)
		}
		if !ok {
			t.Fatalf("accepted %+v", c)
		}
	})
}
