package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/format/gguf"
	"github.com/lfmq/lfmq/format/hf"
)

const tinyModel = "../../../testdata/tiny-lfm2-moe/model"

// ggufFile is what the test reads back: metadata values and tensor
// descriptions, parsed by the layout of GGUF v3 independently of the
// writer.
type ggufFile struct {
	meta    map[string]any
	tensors map[string]tensorInfo
	order   []string
	data    []byte // the data section
}

type tensorInfo struct {
	dims   []uint64
	typ    uint32
	offset uint64
}

func readGGUF(t *testing.T, path string) *ggufFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pos := 0
	u32 := func() uint32 { v := binary.LittleEndian.Uint32(b[pos:]); pos += 4; return v }
	u64 := func() uint64 { v := binary.LittleEndian.Uint64(b[pos:]); pos += 8; return v }
	str := func() string { n := int(u64()); s := string(b[pos : pos+n]); pos += n; return s }
	if string(b[:4]) != "GGUF" {
		t.Fatalf("magic %q", b[:4])
	}
	pos = 4
	if v := u32(); v != 3 {
		t.Fatalf("version %d", v)
	}
	nt, nkv := u64(), u64()
	f := &ggufFile{meta: map[string]any{}, tensors: map[string]tensorInfo{}}
	var scalar func(typ uint32) any
	scalar = func(typ uint32) any {
		switch typ {
		case 4:
			return u32()
		case 5:
			return int32(u32())
		case 6:
			return math.Float32frombits(u32())
		case 7:
			pos++
			return b[pos-1] == 1
		case 8:
			return str()
		case 9:
			et, n := u32(), u64()
			arr := make([]any, n)
			for i := range arr {
				arr[i] = scalar(et)
			}
			return arr
		}
		t.Fatalf("value type %d", typ)
		return nil
	}
	for range nkv {
		k := str()
		f.meta[k] = scalar(u32())
	}
	for range nt {
		name := str()
		dims := make([]uint64, u32())
		for i := range dims {
			dims[i] = u64()
		}
		typ, off := u32(), u64()
		f.tensors[name] = tensorInfo{dims, typ, off}
		f.order = append(f.order, name)
	}
	pos = (pos + 31) / 32 * 32
	f.data = b[pos:]
	return f
}

// TestConvertTiny converts the fixture and checks the file against
// llama.cpp's expectations, written out here from its sources
// (src/models/lfm2moe.cpp, gguf-py's constants and its converter's
// LFM2-MoE class): names, shapes, types and the keys it reads.
func TestConvertTiny(t *testing.T) {
	out := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := run([]string{"--model", tinyModel, "--out", out}); err != nil {
		t.Fatal(err)
	}
	f := readGGUF(t, out)

	const q8, f32 = 8, 0
	want := map[string]tensorInfo{
		"token_embd.weight":                {dims: []uint64{128, 8192}, typ: q8},
		"token_embd_norm.weight":           {dims: []uint64{128}, typ: f32},
		"blk.0.attn_norm.weight":           {dims: []uint64{128}, typ: f32},
		"blk.0.ffn_norm.weight":            {dims: []uint64{128}, typ: f32},
		"blk.0.shortconv.conv.weight":      {dims: []uint64{3, 128}, typ: f32},
		"blk.0.shortconv.in_proj.weight":   {dims: []uint64{128, 384}, typ: q8},
		"blk.0.shortconv.out_proj.weight":  {dims: []uint64{128, 128}, typ: q8},
		"blk.0.ffn_gate.weight":            {dims: []uint64{128, 384}, typ: q8},
		"blk.0.ffn_up.weight":              {dims: []uint64{128, 384}, typ: q8},
		"blk.0.ffn_down.weight":            {dims: []uint64{384, 128}, typ: q8},
		"blk.2.attn_q_norm.weight":         {dims: []uint64{32}, typ: f32},
		"blk.2.attn_k_norm.weight":         {dims: []uint64{32}, typ: f32},
		"blk.2.attn_q.weight":              {dims: []uint64{128, 128}, typ: q8},
		"blk.2.attn_k.weight":              {dims: []uint64{128, 64}, typ: q8},
		"blk.2.attn_v.weight":              {dims: []uint64{128, 64}, typ: q8},
		"blk.2.attn_output.weight":         {dims: []uint64{128, 128}, typ: q8},
		"blk.2.ffn_gate_inp.weight":        {dims: []uint64{128, 16}, typ: f32},
		"blk.2.exp_probs_b.bias":           {dims: []uint64{16}, typ: f32},
		"blk.2.ffn_gate_exps.weight":       {dims: []uint64{128, 128, 16}, typ: q8},
		"blk.2.ffn_up_exps.weight":         {dims: []uint64{128, 128, 16}, typ: q8},
		"blk.2.ffn_down_exps.weight":       {dims: []uint64{128, 128, 16}, typ: q8},
		"blk.7.shortconv.in_proj.weight":   {}, // layer 7 is attention: must be absent
		"blk.6.ffn_gate.weight":            {}, // layer 6 is MoE: no dense FFN
		"output.weight":                    {}, // tied to token_embd
		"blk.6.shortconv.out_proj.weight":  {dims: []uint64{128, 128}, typ: q8},
		"blk.7.attn_output.weight":         {dims: []uint64{128, 128}, typ: q8},
		"blk.7.ffn_down_exps.weight":       {dims: []uint64{128, 128, 16}, typ: q8},
		"blk.1.shortconv.in_proj.weight":   {dims: []uint64{128, 384}, typ: q8},
		"blk.1.ffn_down.weight":            {dims: []uint64{384, 128}, typ: q8},
		"blk.3.shortconv.conv.weight":      {dims: []uint64{3, 128}, typ: f32},
		"blk.5.attn_k_norm.weight":         {dims: []uint64{32}, typ: f32},
		"blk.4.exp_probs_b.bias":           {dims: []uint64{16}, typ: f32},
		"blk.4.ffn_gate_inp.weight":        {dims: []uint64{128, 16}, typ: f32},
		"blk.5.ffn_norm.weight":            {dims: []uint64{128}, typ: f32},
		"blk.3.shortconv.out_proj.weight":  {dims: []uint64{128, 128}, typ: q8},
		"blk.5.attn_q.weight":              {dims: []uint64{128, 128}, typ: q8},
		"blk.4.ffn_up_exps.weight":         {dims: []uint64{128, 128, 16}, typ: q8},
		"blk.7.attn_norm.weight":           {dims: []uint64{128}, typ: f32},
		"blk.3.ffn_gate_exps.weight":       {dims: []uint64{128, 128, 16}, typ: q8},
		"blk.0.shortconv.conv.weight.bias": {},
	}
	for name, w := range want {
		got, ok := f.tensors[name]
		if w.dims == nil {
			if ok {
				t.Errorf("%s: present, want absent", name)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: missing", name)
			continue
		}
		if fmt.Sprint(got.dims) != fmt.Sprint(w.dims) || got.typ != w.typ {
			t.Errorf("%s: dims %v type %d, want %v type %d", name, got.dims, got.typ, w.dims, w.typ)
		}
	}
	// 2 global; per layer 2 norms + conv 3 or attention 6; dense FFN 3 or MoE 5.
	if n := len(f.tensors); n != 2+5*(2+3)+3*(2+6)+2*3+6*5 {
		t.Errorf("%d tensors", n)
	}

	wantMeta := map[string]any{
		"general.architecture":                     "lfm2moe",
		"general.file_type":                        uint32(7),
		"lfm2moe.block_count":                      uint32(8),
		"lfm2moe.context_length":                   uint32(4096),
		"lfm2moe.embedding_length":                 uint32(128),
		"lfm2moe.feed_forward_length":              uint32(384),
		"lfm2moe.attention.head_count":             uint32(4),
		"lfm2moe.attention.head_count_kv":          []any{int32(0), int32(0), int32(2), int32(0), int32(0), int32(2), int32(0), int32(2)},
		"lfm2moe.rope.freq_base":                   float32(1e6),
		"lfm2moe.attention.layer_norm_rms_epsilon": float32(1e-5),
		"lfm2moe.expert_count":                     uint32(16),
		"lfm2moe.expert_used_count":                uint32(4),
		"lfm2moe.expert_feed_forward_length":       uint32(128),
		"lfm2moe.leading_dense_block_count":        uint32(2),
		"lfm2moe.expert_gating_func":               uint32(2),
		"lfm2moe.vocab_size":                       uint32(8192),
		"lfm2moe.shortconv.l_cache":                uint32(3),
		"tokenizer.ggml.model":                     "gpt2",
		"tokenizer.ggml.pre":                       "lfm2",
		"tokenizer.ggml.bos_token_id":              uint32(1),
		"tokenizer.ggml.eos_token_id":              uint32(7),
		"tokenizer.ggml.padding_token_id":          uint32(0),
		"tokenizer.ggml.add_bos_token":             true,
	}
	for k, w := range wantMeta {
		if got := f.meta[k]; fmt.Sprintf("%T %v", got, got) != fmt.Sprintf("%T %v", w, w) {
			t.Errorf("%s = %T %v, want %T %v", k, got, got, w, w)
		}
	}
	tokens := f.meta["tokenizer.ggml.tokens"].([]any)
	types := f.meta["tokenizer.ggml.token_type"].([]any)
	if len(tokens) != 8192 || len(types) != 8192 {
		t.Fatalf("%d tokens, %d types", len(tokens), len(types))
	}
	// Ids 0–13 are LFM2's special tokens (the fixture's README).
	for id, w := range map[int]struct {
		tok string
		typ int32
	}{0: {"<|pad|>", 3}, 1: {"<|startoftext|>", 3}, 7: {"<|im_end|>", 3}} {
		if tokens[id] != w.tok || types[id] != w.typ {
			t.Errorf("token %d = %v type %v, want %q type %d", id, tokens[id], types[id], w.tok, w.typ)
		}
	}
	if merges := f.meta["tokenizer.ggml.merges"].([]any); len(merges) != 7920 || strings.Count(merges[0].(string), " ") != 1 {
		t.Errorf("%d merges, first %q", len(merges), merges[0])
	}

	// The first Q8_0 block of blk.2.attn_k.weight is the first 32 values of
	// the checkpoint's k_proj row 0, at the offset the header gives.
	ck, err := hf.Open(tinyModel)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for _, c := range []struct{ tensor, source string }{
		{"blk.2.attn_k.weight", "model.layers.2.self_attn.k_proj.weight"},
		{"blk.3.ffn_down_exps.weight", "model.layers.3.feed_forward.experts.0.w2.weight"},
	} {
		src, err := ck.Float32(c.source)
		if err != nil {
			t.Fatal(err)
		}
		var block [34]byte
		gguf.QuantizeQ8_0Block((*[32]float32)(src), &block)
		off := f.tensors[c.tensor].offset
		if got := f.data[off : off+34]; string(got) != string(block[:]) {
			t.Errorf("%s: first block %x, want %x", c.tensor, got, block)
		}
	}
	// The last expert's down projection ends the tensor: expert 15's last row.
	src, _ := ck.Float32("model.layers.3.feed_forward.experts.15.w2.weight")
	var block [34]byte
	gguf.QuantizeQ8_0Block((*[32]float32)(src[len(src)-32:]), &block)
	ti := f.tensors["blk.3.ffn_down_exps.weight"]
	end := ti.offset + 128*128*16/32*34
	if got := f.data[end-34 : end]; string(got) != string(block[:]) {
		t.Errorf("last block %x, want %x", got, block)
	}
}

// TestConvertTypes checks that --type f32 stores every tensor as float32
// and that bf16 keeps the norms in float32.
func TestConvertTypes(t *testing.T) {
	dir := t.TempDir()
	for typ, want := range map[string]map[string]uint32{
		"f32":  {"token_embd.weight": 0, "blk.2.attn_q.weight": 0, "blk.2.attn_q_norm.weight": 0},
		"bf16": {"token_embd.weight": 30, "blk.2.ffn_up_exps.weight": 30, "blk.2.attn_q_norm.weight": 0, "blk.2.ffn_gate_inp.weight": 0},
	} {
		out := filepath.Join(dir, typ+".gguf")
		if err := run([]string{"--model", tinyModel, "--type", typ, "--out", out}); err != nil {
			t.Fatal(err)
		}
		f := readGGUF(t, out)
		for name, w := range want {
			if got := f.tensors[name].typ; got != w {
				t.Errorf("--type %s: %s type %d, want %d", typ, name, got, w)
			}
		}
	}
}

// TestConvertErrors checks that bad input names what is wrong and leaves
// no output behind.
func TestConvertErrors(t *testing.T) {
	dir := t.TempDir()
	// The fixture's weights under a config.json that each case edits.
	bad := filepath.Join(dir, "bad")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
		abs, _ := filepath.Abs(filepath.Join(tinyModel, name))
		if err := os.Symlink(abs, filepath.Join(bad, name)); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := os.ReadFile(filepath.Join(tinyModel, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(old, new string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(bad, "config.json"), []byte(strings.Replace(string(cfg), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, old, new, want string
		args                 []string
	}{
		{"expert count", `"num_experts": 16`, `"num_experts": 17`, "model.layers.2.feed_forward.gate.weight: BF16 [16 128], want 2176 values (for blk.2.ffn_gate_inp.weight, llama.cpp shape [128 17])", nil},
		{"wrong width", `"moe_intermediate_size": 128`, `"moe_intermediate_size": 96`, "experts.0.w1.weight: BF16 [128 128], want 12288 values", nil},
		{"dense model", `"model_type": "lfm2_moe"`, `"model_type": "lfm2"`, "", nil},
		{"bad type", "", "", "--type: gguf: unknown tensor type \"q4_k\"", []string{"--type", "q4_k"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			write(tc.old, tc.new)
			out := filepath.Join(dir, "out.gguf")
			err := run(append([]string{"--model", bad, "--out", out}, tc.args...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
			if _, serr := os.Stat(out); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("%s written after an error", out)
			}
			left, _ := filepath.Glob(filepath.Join(dir, ".out.gguf*"))
			if len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}
