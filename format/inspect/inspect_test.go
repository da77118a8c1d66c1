package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant"
)

const tinyModel = "../../testdata/tiny-lfm2-moe/model"

// tinyLayers is the fixture's config.json: layer_types and
// num_dense_layers = 2.
var tinyLayers = []LayerSpec{
	{MixerConv, false}, {MixerConv, false}, {MixerAttention, true}, {MixerConv, true},
	{MixerConv, true}, {MixerAttention, true}, {MixerConv, true}, {MixerAttention, true},
}

// quantizeTiny writes an RTN lfmq-1 checkpoint of the fixture.
func quantizeTiny(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "q")
	if _, err := quant.Quantize(context.Background(), quant.Options{ModelDir: tinyModel, OutDir: out}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDir(t *testing.T) {
	hf, err := Dir(tinyModel, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if hf.Kind != HuggingFace || hf.All.Tensors != 357 || hf.All.Params != 6553888 || hf.All.BitsPerWeight != 16 || !hf.OK {
		t.Errorf("HF report: kind %s, %+v", hf.Kind, hf.All)
	}
	out := quantizeTiny(t)
	q, err := Dir(out, Options{Check: lfmq1.CheckTensors})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Total{
		"bfp4_b": {Format: "bfp4_b", Tensors: 288, Params: 288 * 128 * 128, Bytes: 288 * 16 * 576, BitsPerWeight: 4.5},
		"bfp8_b": {Format: "bfp8_b", Tensors: 29},
		"f32":    {Format: "f32", Tensors: 6, Params: 96, Bytes: 384, BitsPerWeight: 32},
	}
	for _, tot := range q.Totals {
		w, ok := want[tot.Format]
		if !ok {
			continue
		}
		if tot.Tensors != w.Tensors || (w.Params != 0 && tot != w) {
			t.Errorf("%s totals %+v, want %+v", tot.Format, tot, w)
		}
		if tot.Format == "bfp8_b" && tot.BitsPerWeight != 8.5 {
			t.Errorf("bfp8 bits/weight %v", tot.BitsPerWeight)
		}
	}
	if q.Kind != LFMQ1 || len(q.ManifestSHA256) != 64 || q.All.Params != hf.All.Params+8192*128 || q.Check != "tensors" {
		t.Errorf("lfmq-1 report: %s %s %s %+v", q.Kind, q.Check, q.ManifestSHA256, q.All)
	}
}

func TestNaturalLess(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"model.layers.2.x", "model.layers.10.x", true},
		{"model.layers.10.x", "model.layers.2.x", false},
		{"experts.9.w1", "experts.10.w1", true},
		{"experts.10.w1", "experts.10.w2", true},
		{"layers.2.a", "layers.2.b", true},
		{"a", "a", false},
		{"a", "ab", true},
		{"a1", "a01", false},
		{"a01", "a1", true}, // equal as numbers: byte order decides
		{"a007", "a10", true},
		{"x99999999999999999999999", "x100000000000000000000000", true}, // beyond int64
		{"lm_head.weight", "model.embed_tokens.weight", true},
		{"layer", "layer1", true},
		{"1", "a", true},
	}
	for _, tt := range tests {
		t.Run(tt.a+" < "+tt.b, func(t *testing.T) {
			if got := naturalLess(tt.a, tt.b); got != tt.want {
				t.Errorf("naturalLess(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

// TestNaturalOrderIsTotal: sorting any permutation gives the same order.
func TestNaturalOrderIsTotal(t *testing.T) {
	names := []string{"a10", "a2", "a02", "a1", "a", "b", "a2b", "a2a", "a002", "10", "9"}
	want := []string{"9", "10", "a", "a1", "a002", "a02", "a2", "a2a", "a2b", "a10", "b"}
	for shift := range names {
		got := append(append([]string(nil), names[shift:]...), names[:shift]...)
		sort.Slice(got, func(i, j int) bool { return naturalLess(got[i], got[j]) })
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("rotation %d sorts to %v, want %v", shift, got, want)
		}
	}
}

// synthRows builds the rows of an LFM2-MoE-like checkpoint: layers with
// the given mixers, the first dense ones dense, the rest with experts.
func synthRows(mixers []string, dense, experts int) []Row {
	rows := []Row{{Name: "model.embed_tokens.weight", Format: "bf16", Shape: []int64{8, 4}, Bytes: 64}}
	add := func(name, format string, bytes int64) {
		rows = append(rows, Row{Name: name, Format: format, Shape: []int64{bytes}, Bytes: bytes})
	}
	for i, m := range mixers {
		p := fmt.Sprintf("model.layers.%d.", i)
		add(p+"operator_norm.weight", "bf16", 2)
		switch m {
		case MixerConv:
			add(p+"conv.in_proj.weight", "bfp8_b", 10)
		case MixerAttention:
			add(p+"self_attn.q_proj.weight", "bfp8_b", 10)
		}
		if i < dense {
			add(p+"feed_forward.w1.weight", "bfp8_b", 20)
			continue
		}
		add(p+"feed_forward.gate.weight", "bf16", 4)
		for e := range experts {
			add(fmt.Sprintf("%sfeed_forward.experts.%d.w1.weight", p, e), "bfp4_b", 5)
		}
	}
	return rows
}

func TestLayers(t *testing.T) {
	mixers := []string{MixerConv, MixerConv, MixerAttention, MixerConv}
	specs := []LayerSpec{{MixerConv, false}, {MixerConv, false}, {MixerAttention, true}, {MixerConv, true}}
	moeLayer := Layer{Index: 2, Kind: MixerAttention, MoE: true, Experts: 3, Tensors: 6, Params: 31, Bytes: 31, Formats: []Total{
		{Format: "bf16", Tensors: 2, Params: 6, Bytes: 6, BitsPerWeight: 8},
		{Format: "bfp4_b", Tensors: 3, Params: 15, Bytes: 15, BitsPerWeight: 8},
		{Format: "bfp8_b", Tensors: 1, Params: 10, Bytes: 10, BitsPerWeight: 8},
	}}
	tests := []struct {
		name     string
		rows     []Row
		specs    []LayerSpec
		wantFrom string
		want     []string // "index kind moe experts tensors" per layer
		check    *Layer
	}{
		{"from names", synthRows(mixers, 2, 3), nil, LayersFromNames,
			[]string{"0 conv false 0 3", "1 conv false 0 3", "2 attention true 3 6", "3 conv true 3 6"}, &moeLayer},
		{"from config", synthRows(mixers, 2, 3), specs, LayersFromConfig,
			[]string{"0 conv false 0 3", "1 conv false 0 3", "2 attention true 3 6", "3 conv true 3 6"}, &moeLayer},
		{"config for other layers ignored", synthRows(mixers, 2, 3), specs[:3], LayersFromNames,
			[]string{"0 conv false 0 3", "1 conv false 0 3", "2 attention true 3 6", "3 conv true 3 6"}, nil},
		{"config decides the kind", synthRows([]string{"", ""}, 1, 2), []LayerSpec{{MixerAttention, false}, {MixerConv, true}}, LayersFromConfig,
			[]string{"0 attention false 0 2", "1 conv true 2 4"}, nil},
		{"names without a mixer", synthRows([]string{"", ""}, 1, 2), nil, LayersFromNames,
			[]string{"0 unknown false 0 2", "1 unknown true 2 4"}, nil},
		{"twelve layers, eleven experts", synthRows(make([]string, 12), 0, 11), nil, LayersFromNames,
			[]string{"0 unknown true 11 13", "1 unknown true 11 13", "2 unknown true 11 13", "3 unknown true 11 13", "4 unknown true 11 13", "5 unknown true 11 13",
				"6 unknown true 11 13", "7 unknown true 11 13", "8 unknown true 11 13", "9 unknown true 11 13", "10 unknown true 11 13", "11 unknown true 11 13"}, nil},
		{"no layers", []Row{{Name: "model.layers.x.weight"}, {Name: "model.layers.99999999999999999999.w"}, {Name: "lm_head.weight"}}, specs, "", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, from := layers(tt.rows, tt.specs)
			var lines []string
			for _, l := range got {
				lines = append(lines, fmt.Sprintf("%d %s %v %d %d", l.Index, l.Kind, l.MoE, l.Experts, l.Tensors))
			}
			if from != tt.wantFrom || !reflect.DeepEqual(lines, tt.want) {
				t.Errorf("layers from %q:\n%q\nwant from %q:\n%q", from, lines, tt.wantFrom, tt.want)
			}
			if tt.check != nil && !reflect.DeepEqual(got[tt.check.Index], *tt.check) {
				t.Errorf("layer %d = %+v\nwant %+v", tt.check.Index, got[tt.check.Index], *tt.check)
			}
		})
	}
}

// TestDirLayers: the fixture's layers read from its config and from its
// tensor names agree, and the tensors are in natural order.
func TestDirLayers(t *testing.T) {
	byConfig, err := Dir(tinyModel, Options{Layers: tinyLayers})
	if err != nil {
		t.Fatal(err)
	}
	byNames, err := Dir(tinyModel, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if byConfig.LayersFrom != LayersFromConfig || byNames.LayersFrom != LayersFromNames {
		t.Errorf("layers from %q and %q", byConfig.LayersFrom, byNames.LayersFrom)
	}
	if !reflect.DeepEqual(byConfig.Layers, byNames.Layers) {
		t.Errorf("config and names disagree:\n%+v\n%+v", byConfig.Layers, byNames.Layers)
	}
	var sum int64
	for i, l := range byNames.Layers {
		wantTensors, wantExperts := 8, 0
		if tinyLayers[i].MoE {
			wantTensors, wantExperts = 7+3*16, 16
			if tinyLayers[i].Kind == MixerAttention {
				wantTensors += 3
			}
		}
		if l.Index != i || l.Kind != tinyLayers[i].Kind || l.MoE != tinyLayers[i].MoE || l.Experts != wantExperts || l.Tensors != wantTensors {
			t.Errorf("layer %d: %+v, want %+v with %d experts, %d tensors", i, l, tinyLayers[i], wantExperts, wantTensors)
		}
		sum += l.Bytes
	}
	for _, g := range byNames.Global() {
		sum += g.Bytes
	}
	if sum != byNames.All.Bytes {
		t.Errorf("layers and global tensors hold %d bytes, the checkpoint %d", sum, byNames.All.Bytes)
	}
	pos := map[string]int{}
	for i, r := range byNames.Rows {
		pos[r.Name] = i
	}
	for _, pair := range [][2]string{
		{"model.layers.2.feed_forward.experts.2.w1.weight", "model.layers.2.feed_forward.experts.10.w1.weight"},
		{"model.layers.5.feed_forward.experts.9.w3.weight", "model.layers.5.feed_forward.experts.10.w1.weight"},
	} {
		if pos[pair[0]] >= pos[pair[1]] {
			t.Errorf("%s listed after %s", pair[0], pair[1])
		}
	}
}

// TestDirFindings: a damaged lfmq-1 checkpoint gives both the mismatch
// error and a report of its findings.
func TestDirFindings(t *testing.T) {
	out := quantizeTiny(t)
	man, sum, err := lfmq1.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	var experts04 lfmq1.FileEntry
	for _, f := range man.Files {
		if f.Path == "experts-04.safetensors" {
			experts04 = f
		}
	}
	p := filepath.Join(out, experts04.Path)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-100] ^= 0x10
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "layer-03.safetensors"), []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Dir(out, Options{Check: lfmq1.CheckTensors})
	var mm *lfmq1.MismatchError
	if !errors.As(err, &mm) {
		t.Fatalf("err = %v, want an *lfmq1.MismatchError", err)
	}
	if r == nil || r.OK || r.ManifestSHA256 != sum || r.All != nil || len(r.Rows) != 0 {
		t.Fatalf("report %+v", r)
	}
	var kinds []string
	for _, f := range r.Findings {
		kinds = append(kinds, f.Path+" "+f.Kind)
		switch {
		case f.Kind == "hash" && f.Tensor == "":
			if f.WantSHA256 != experts04.SHA256 || len(f.GotSHA256) != 64 || f.GotSHA256 == f.WantSHA256 {
				t.Errorf("file hash finding %+v", f)
			}
		case f.Kind == "size":
			if f.WantSize <= 5 || f.GotSize != 5 {
				t.Errorf("size finding %+v", f)
			}
		}
	}
	want := []string{"experts-04.safetensors hash", "experts-04.safetensors hash", "layer-03.safetensors size"}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("findings %q, want %q", kinds, want)
	}
	if !strings.HasPrefix(r.Findings[1].Tensor, "model.layers.4.feed_forward.experts.") {
		t.Errorf("tensor finding names %q", r.Findings[1].Tensor)
	}
}

func TestFindingJSON(t *testing.T) {
	sha := func(c string) string { return strings.Repeat(c, 64) }
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"file hash", &lfmq1.MismatchError{Path: "a.safetensors", Kind: "hash", Want: sha("a"), Got: sha("b")},
			`{"kind":"hash","path":"a.safetensors","expected_sha256":"` + sha("a") + `","actual_sha256":"` + sha("b") + `","expected_size":null,"actual_size":null,"authority":"manifest.json"}`},
		{"tensor hash", &lfmq1.MismatchError{Path: "a.safetensors", Tensor: "w", Kind: "hash", Want: sha("a"), Got: sha("b")},
			`{"kind":"hash","path":"a.safetensors","tensor":"w","expected_sha256":"` + sha("a") + `","actual_sha256":"` + sha("b") + `","expected_size":null,"actual_size":null,"authority":"manifest.json"}`},
		{"size", &lfmq1.MismatchError{Path: "a.safetensors", Kind: "size", Want: "100", Got: "5"},
			`{"kind":"size","path":"a.safetensors","expected_sha256":null,"actual_sha256":null,"expected_size":100,"actual_size":5,"authority":"manifest.json"}`},
		{"shape", &lfmq1.MismatchError{Path: "a.safetensors", Tensor: "w", Kind: "shape", Want: "[1 2]", Got: "[2 1]"},
			`{"kind":"shape","path":"a.safetensors","tensor":"w","expected_sha256":null,"actual_sha256":null,"expected_size":null,"actual_size":null,"authority":"manifest.json","detail":"manifest says [1 2], found [2 1]"}`},
		{"missing", &lfmq1.MismatchError{Path: "b.json", Kind: "missing"},
			`{"kind":"missing","path":"b.json","expected_sha256":null,"actual_sha256":null,"expected_size":null,"actual_size":null,"authority":"manifest.json"}`},
		{"extra", &lfmq1.MismatchError{Path: "x", Kind: "extra", Got: "not listed in the manifest"},
			`{"kind":"extra","path":"x","expected_sha256":null,"actual_sha256":null,"expected_size":null,"actual_size":null,"authority":"manifest.json","detail":"not listed in the manifest"}`},
		{"other error", errors.New("boom"),
			`{"kind":"malformed","path":"","expected_sha256":null,"actual_sha256":null,"expected_size":null,"actual_size":null,"authority":"manifest.json","detail":"boom"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(finding("dir", tt.err))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
