package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/gguf"
	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/internal/bounded"
)

// arch is llama.cpp's name of the LFM2-MoE architecture; every model key
// is prefixed with it.
const arch = "lfm2moe"

// ggufTensor is one output tensor: its GGUF name, its llama.cpp shape
// (innermost first) and the checkpoint tensors whose rows it stacks (the
// experts of a layer, or one tensor).
type ggufTensor struct {
	name    string
	dims    []uint64
	sources []string
	// keepF32 marks the tensors llama.cpp's converter always stores in
	// float32: vectors, norms, the router, the short-conv kernel.
	keepF32 bool
}

// plan lists the GGUF tensors of an LFM2-MoE checkpoint in llama.cpp's
// names and shapes (src/models/lfm2moe.cpp's load_arch_tensors): the
// output head is tied to the embedding, so there is no output.weight.
func plan(c *config.Config) ([]ggufTensor, error) {
	if c.ModelType != config.ModelTypeMoE {
		return nil, fmt.Errorf("model_type %q: this converter writes %s (model_type %q) only", c.ModelType, arch, config.ModelTypeMoE)
	}
	if !c.TieWordEmbeddings {
		return nil, fmt.Errorf("tie_word_embeddings false: llama.cpp's %s has no separate output head here", arch)
	}
	if !c.UseExpertBias && c.NumMoELayers() > 0 {
		return nil, fmt.Errorf("use_expert_bias false: llama.cpp's %s requires the experts' bias (exp_probs_b)", arch)
	}
	if c.ConvBias {
		return nil, fmt.Errorf("conv_bias true: llama.cpp's %s has no short-conv biases", arch)
	}
	h := uint64(c.HiddenSize)
	v := uint64(c.VocabSize)
	kv := uint64(c.NumKVHeads * c.HeadDim)
	one := func(name string, src string, f32 bool, dims ...uint64) ggufTensor {
		return ggufTensor{name: name, dims: dims, sources: []string{src}, keepF32: f32}
	}
	out := []ggufTensor{
		one("token_embd.weight", "model.embed_tokens.weight", false, h, v),
		// llama.cpp names LFM2's final norm token_embd_norm.
		one("token_embd_norm.weight", "model.embedding_norm.weight", true, h),
	}
	for i := range c.NumLayers {
		blk := "blk." + strconv.Itoa(i) + "."
		hf := "model.layers." + strconv.Itoa(i) + "."
		out = append(out,
			one(blk+"attn_norm.weight", hf+"operator_norm.weight", true, h),
			one(blk+"ffn_norm.weight", hf+"ffn_norm.weight", true, h))
		if c.LayerKinds[i] == config.Attention {
			out = append(out,
				one(blk+"attn_q_norm.weight", hf+"self_attn.q_layernorm.weight", true, uint64(c.HeadDim)),
				one(blk+"attn_k_norm.weight", hf+"self_attn.k_layernorm.weight", true, uint64(c.HeadDim)),
				one(blk+"attn_q.weight", hf+"self_attn.q_proj.weight", false, h, uint64(c.NumHeads*c.HeadDim)),
				one(blk+"attn_k.weight", hf+"self_attn.k_proj.weight", false, h, kv),
				one(blk+"attn_v.weight", hf+"self_attn.v_proj.weight", false, h, kv),
				one(blk+"attn_output.weight", hf+"self_attn.out_proj.weight", false, uint64(c.NumHeads*c.HeadDim), h))
		} else {
			out = append(out,
				// [hidden, 1, L] in the checkpoint; llama.cpp's conv wants it 2-D.
				one(blk+"shortconv.conv.weight", hf+"conv.conv.weight", true, uint64(c.ConvLCache), h),
				one(blk+"shortconv.in_proj.weight", hf+"conv.in_proj.weight", false, h, 3*h),
				one(blk+"shortconv.out_proj.weight", hf+"conv.out_proj.weight", false, h, h))
		}
		if !c.IsMoE(i) {
			ff := uint64(c.IntermediateSize)
			out = append(out,
				one(blk+"ffn_gate.weight", hf+"feed_forward.w1.weight", false, h, ff),
				one(blk+"ffn_up.weight", hf+"feed_forward.w3.weight", false, h, ff),
				one(blk+"ffn_down.weight", hf+"feed_forward.w2.weight", false, ff, h))
			continue
		}
		e := uint64(c.NumExperts)
		ff := uint64(c.MoEIntermediateSize)
		experts := func(w string) []string {
			s := make([]string, c.NumExperts)
			for x := range s {
				s[x] = hf + "feed_forward.experts." + strconv.Itoa(x) + "." + w + ".weight"
			}
			return s
		}
		out = append(out,
			one(blk+"ffn_gate_inp.weight", hf+"feed_forward.gate.weight", true, h, e),
			one(blk+"exp_probs_b.bias", hf+"feed_forward.expert_bias", true, e),
			ggufTensor{name: blk + "ffn_gate_exps.weight", dims: []uint64{h, ff, e}, sources: experts("w1")},
			ggufTensor{name: blk + "ffn_up_exps.weight", dims: []uint64{h, ff, e}, sources: experts("w3")},
			ggufTensor{name: blk + "ffn_down_exps.weight", dims: []uint64{ff, h, e}, sources: experts("w2")})
	}
	return out, nil
}

// tensorType is the type a tensor is stored in when the file's type is
// want, following llama.cpp's converter: float32 for vectors, norms, the
// router and the conv kernel; float16 for a matrix whose rows do not split
// into Q8_0 blocks.
func (t ggufTensor) tensorType(want gguf.TensorType) gguf.TensorType {
	if t.keepF32 || len(t.dims) == 1 {
		return gguf.F32
	}
	if want == gguf.Q8_0 && t.dims[0]%uint64(gguf.Q8_0.BlockSize()) != 0 {
		return gguf.F16
	}
	return want
}

// fileType is llama.cpp's general.file_type code of a file whose
// matrices are stored as t (LLAMA_FTYPE_*).
func fileType(t gguf.TensorType) uint32 {
	switch t {
	case gguf.F16:
		return 1
	case gguf.Q8_0:
		return 7
	case gguf.BF16:
		return 32
	}
	return 0
}

// tensors returns the GGUF tensors of the plan, reading their values
// from ck row block by row block, and checks every source's shape first so
// that a mismatch is reported before anything is written.
func tensors(ck *hf.Checkpoint, p []ggufTensor, want gguf.TensorType) ([]gguf.Tensor, error) {
	out := make([]gguf.Tensor, 0, len(p))
	for _, t := range p {
		per := uint64(1)
		for _, d := range t.dims {
			per *= d
		}
		per /= uint64(len(t.sources))
		for _, s := range t.sources {
			info, ok := ck.Info(s)
			if !ok {
				return nil, fmt.Errorf("%s: tensor %s (for %s) is missing", ck.Dir(), s, t.name)
			}
			if uint64(info.NumElements()) != per || !info.DType.Convertible() {
				return nil, fmt.Errorf("%s: tensor %s: %s %v, want %d values (for %s, llama.cpp shape %v)",
					ck.Dir(), s, info.DType, info.Shape, per, t.name, t.dims)
			}
		}
		out = append(out, gguf.Tensor{
			Name: t.name, Dims: t.dims, Type: t.tensorType(want),
			Values: rowBlocks(ck, t.sources, t.dims[0]),
		})
	}
	return out, nil
}

// rowBlocks emits the sources' values in order, about 4 MiB of float32 at
// a time, so that a 65,536-row embedding is never held whole.
func rowBlocks(ck *hf.Checkpoint, sources []string, row uint64) func(func([]float32) error) error {
	return func(emit func([]float32) error) error {
		var buf []float32
		for _, s := range sources {
			info, _ := ck.Info(s)
			raw, err := ck.Bytes(s)
			if err != nil {
				return err
			}
			size := uint64(info.DType.Size())
			rows := max(1, (1<<20)/row)
			n := uint64(info.NumElements())
			for at := uint64(0); at < n; at += rows * row {
				m := min(rows*row, n-at)
				if uint64(cap(buf)) < m {
					buf = make([]float32, m)
				}
				buf = buf[:m]
				if err := dtype.ToFloat32(info.DType, raw[at*size:(at+m)*size], buf); err != nil {
					return fmt.Errorf("%s: tensor %s: %w", ck.Dir(), s, err)
				}
				if err := emit(buf); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// modelMeta returns the lfm2moe metadata llama.cpp reads (the keys its
// converter writes for Lfm2MoeForCausalLM).
func modelMeta(c *config.Config, name string, want gguf.TensorType) []gguf.KV {
	kvHeads := make([]int32, c.NumLayers)
	for i, k := range c.LayerKinds {
		if k == config.Attention {
			kvHeads[i] = int32(c.NumKVHeads)
		}
	}
	key := func(k string) string { return arch + "." + k }
	return []gguf.KV{
		{Key: "general.architecture", Value: arch},
		{Key: "general.type", Value: "model"},
		{Key: "general.name", Value: name},
		{Key: "general.file_type", Value: fileType(want)},
		{Key: "general.quantization_version", Value: uint32(2)},
		{Key: key("block_count"), Value: uint32(c.NumLayers)},
		{Key: key("context_length"), Value: uint32(c.MaxPositionEmbeddings)},
		{Key: key("embedding_length"), Value: uint32(c.HiddenSize)},
		{Key: key("feed_forward_length"), Value: uint32(c.IntermediateSize)},
		{Key: key("attention.head_count"), Value: uint32(c.NumHeads)},
		{Key: key("attention.head_count_kv"), Value: kvHeads},
		{Key: key("rope.freq_base"), Value: float32(c.RopeTheta)},
		{Key: key("attention.layer_norm_rms_epsilon"), Value: c.NormEps},
		{Key: key("expert_count"), Value: uint32(c.NumExperts)},
		{Key: key("expert_used_count"), Value: uint32(c.NumExpertsPerTok)},
		{Key: key("expert_feed_forward_length"), Value: uint32(c.MoEIntermediateSize)},
		{Key: key("leading_dense_block_count"), Value: uint32(c.NumDenseLayers)},
		// LFM2-MoE routes by sigmoid (LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID).
		{Key: key("expert_gating_func"), Value: uint32(2)},
		{Key: key("vocab_size"), Value: uint32(c.VocabSize)},
		{Key: key("shortconv.l_cache"), Value: uint32(c.ConvLCache)},
	}
}

// The token types of tokenizer.ggml.token_type (llama.cpp's
// LLAMA_TOKEN_TYPE_*).
const (
	tokenNormal      = 1
	tokenControl     = 3
	tokenUserDefined = 4
	tokenUnused      = 5
)

// maxTokenizerBytes bounds tokenizer.json and tokenizer_config.json.
const maxTokenizerBytes = 64 << 20

// tokenizerJSON is the part of a Hugging Face tokenizer.json a byte-level
// BPE vocabulary needs.
type tokenizerJSON struct {
	Model struct {
		Type   string            `json:"type"`
		Vocab  map[string]int    `json:"vocab"`
		Merges []json.RawMessage `json:"merges"`
	} `json:"model"`
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
}

// tokenizerMeta returns the GGUF vocabulary of dir's tokenizer.json as
// llama.cpp's converter writes a GPT-2-style BPE: every id below
// vocabSize has a token (ids the tokenizer does not use become unused
// "[PADn]" tokens, as the converter pads them), added special tokens are
// control tokens, and the pre-tokenizer is named "lfm2" (llama.cpp's name
// for LFM2's split rule; it finds it by hashing the tokenizer's output,
// which this converter does not do: the caller vouches that the
// tokenizer splits as LFM2's does).
func tokenizerMeta(dir string, c *config.Config) ([]gguf.KV, error) {
	path := filepath.Join(dir, "tokenizer.json")
	raw, err := readBounded(path)
	if err != nil {
		return nil, err
	}
	var tj tokenizerJSON
	if err := json.Unmarshal(raw, &tj); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if tj.Model.Type != "BPE" {
		return nil, fmt.Errorf("%s: model.type %q, want BPE", path, tj.Model.Type)
	}
	tokens := make([]string, c.VocabSize)
	types := make([]int32, c.VocabSize)
	set := func(id int, tok string, typ int32) error {
		if id < 0 || id >= c.VocabSize {
			return fmt.Errorf("%s: token %q has id %d, outside the model's vocab_size %d", path, tok, id, c.VocabSize)
		}
		tokens[id], types[id] = tok, typ
		return nil
	}
	for tok, id := range tj.Model.Vocab {
		if err := set(id, tok, tokenNormal); err != nil {
			return nil, err
		}
	}
	ids := make(map[string]int, len(tj.AddedTokens))
	for _, a := range tj.AddedTokens {
		typ := int32(tokenUserDefined)
		if a.Special {
			typ = tokenControl
		}
		if err := set(a.ID, a.Content, typ); err != nil {
			return nil, err
		}
		ids[a.Content] = a.ID
	}
	for id, tok := range tokens {
		if types[id] == 0 && tok == "" {
			tokens[id], types[id] = "[PAD"+strconv.Itoa(id)+"]", tokenUnused
		}
	}
	merges := make([]string, len(tj.Model.Merges))
	for i, m := range tj.Model.Merges {
		// Older files write "a b", newer ones ["a", "b"].
		var s string
		var pair []string
		switch {
		case json.Unmarshal(m, &s) == nil:
			merges[i] = s
		case json.Unmarshal(m, &pair) == nil && len(pair) == 2:
			merges[i] = pair[0] + " " + pair[1]
		default:
			return nil, fmt.Errorf("%s: model.merges[%d]: want \"a b\" or [\"a\", \"b\"], got %s", path, i, m)
		}
	}
	special, err := specialTokens(dir, ids, c)
	if err != nil {
		return nil, err
	}
	meta := []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "gpt2"},
		{Key: "tokenizer.ggml.pre", Value: "lfm2"},
		{Key: "tokenizer.ggml.tokens", Value: tokens},
		{Key: "tokenizer.ggml.token_type", Value: types},
		{Key: "tokenizer.ggml.merges", Value: merges},
	}
	meta = append(meta, special...)
	if tmpl, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja")); err == nil {
		meta = append(meta, gguf.KV{Key: "tokenizer.chat_template", Value: string(tmpl)})
	}
	return meta, nil
}

// specialTokens returns the bos/eos/pad ids and add_bos/add_eos flags
// from tokenizer_config.json (the token strings looked up in the
// vocabulary), falling back to config.json's ids.
func specialTokens(dir string, ids map[string]int, c *config.Config) ([]gguf.KV, error) {
	bos, eos, pad := c.BOSTokenID, c.PadTokenID, c.PadTokenID
	if len(c.EOSTokenIDs) > 0 {
		eos = c.EOSTokenIDs[0]
	}
	addBOS, addEOS := true, false
	path := filepath.Join(dir, "tokenizer_config.json")
	raw, err := readBounded(path)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	if err == nil {
		var tc struct {
			BOS    *string `json:"bos_token"`
			EOS    *string `json:"eos_token"`
			Pad    *string `json:"pad_token"`
			AddBOS *bool   `json:"add_bos_token"`
			AddEOS *bool   `json:"add_eos_token"`
		}
		// Token fields may also be objects ({"content": ...}); those are
		// left to config.json's ids.
		_ = json.Unmarshal(raw, &tc)
		for _, f := range []struct {
			tok *string
			id  *int
		}{{tc.BOS, &bos}, {tc.EOS, &eos}, {tc.Pad, &pad}} {
			if f.tok == nil {
				continue
			}
			id, ok := ids[*f.tok]
			if !ok {
				return nil, fmt.Errorf("%s: special token %q is not an added token of tokenizer.json", path, *f.tok)
			}
			*f.id = id
		}
		if tc.AddBOS != nil {
			addBOS = *tc.AddBOS
		}
		if tc.AddEOS != nil {
			addEOS = *tc.AddEOS
		}
	}
	return []gguf.KV{
		{Key: "tokenizer.ggml.bos_token_id", Value: uint32(bos)},
		{Key: "tokenizer.ggml.eos_token_id", Value: uint32(eos)},
		{Key: "tokenizer.ggml.padding_token_id", Value: uint32(pad)},
		{Key: "tokenizer.ggml.add_bos_token", Value: addBOS},
		{Key: "tokenizer.ggml.add_eos_token", Value: addEOS},
	}, nil
}

// readBounded reads a tokenizer file of at most maxTokenizerBytes.
func readBounded(path string) ([]byte, error) {
	buf, err := bounded.ReadFile(path, maxTokenizerBytes)
	if big, ok := err.(*bounded.TooLargeError); ok {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d a tokenizer file may have", path, big.Size, maxTokenizerBytes)
	} else if _, ok := err.(*bounded.ReadError); ok {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return buf, err
}
