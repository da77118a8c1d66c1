package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/safetensors"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// quantizeTinyRTN writes an RTN lfmq-1 checkpoint of the fixture through the
// command line and returns its directory and quantize's output.
func quantizeTinyRTN(t *testing.T, extra ...string) (string, string) {
	t.Helper()
	return quantizeRTN(t, tinyModel, extra...)
}

// quantizeRTN is quantizeTinyRTN of the checkpoint in model.
func quantizeRTN(t *testing.T, model string, extra ...string) (string, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "rtn")
	ios, stdout, stderr := testStreams()
	args := append([]string{"quantize", "--model", model, "--out", out, "--method", "rtn"}, extra...)
	if code := run(context.Background(), args, ios); code != 0 {
		t.Fatalf("quantize exit %d: %s", code, stderr)
	}
	return out, stdout.String()
}

// inspectOut runs inspect and returns the exit code, stdout and stderr.
func inspectOut(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ios, stdout, stderr := testStreams()
	code := run(context.Background(), append([]string{"inspect"}, args...), ios)
	return code, stdout.String(), stderr.String()
}

// TestInspectGolden compares the default output (a line per layer, the
// global tensors, the totals) with testdata/; -update rewrites it.
func TestInspectGolden(t *testing.T) {
	rtn, _ := quantizeTinyRTN(t)
	denseRTN, _ := quantizeRTN(t, denseModel)
	lfm3RTN, _ := quantizeRTN(t, lfm3Model)
	sha := regexp.MustCompile(`[0-9a-f]{64}`)
	tests := []struct {
		name, dir, golden string
	}{
		{"huggingface", tinyModel, "inspect-hf.golden"},
		{"lfmq-1", rtn, "inspect-lfmq1.golden"},
		// A dense LFM2 has no experts column.
		{"dense huggingface", denseModel, "inspect-dense-hf.golden"},
		{"dense lfmq-1", denseRTN, "inspect-dense-lfmq1.golden"},
		// LFM3 names its attention layers' kinds and lists their windows,
		// rotations and gates, and its post norms.
		{"lfm3 huggingface", lfm3Model, "inspect-lfm3-hf.golden"},
		{"lfm3 lfmq-1", lfm3RTN, "inspect-lfm3-lfmq1.golden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := inspectOut(t, tt.dir)
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			// The temporary directory and the manifest digest (which moves
			// with the lfmq version recorded in the manifest) are not what
			// this golden is about.
			got := strings.ReplaceAll(stdout, tt.dir, "DIR")
			got = sha.ReplaceAllString(got, "SHA256")
			path := filepath.Join("testdata", tt.golden)
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (go test -run TestInspectGolden -update to accept):\n%s", path, got)
			}
		})
	}
}

// TestInspectTensors: --tensors lists every tensor in natural order; the
// default lists no layer tensor.
func TestInspectTensors(t *testing.T) {
	code, all, _ := inspectOut(t, "--tensors", tinyModel)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(all, "\n")
	pos := map[string]int{}
	for i, l := range lines {
		if f := strings.Fields(l); len(f) == 4 && strings.HasPrefix(f[0], "model.") {
			pos[f[0]] = i
		}
	}
	if len(pos) != 357 {
		t.Errorf("--tensors lists %d tensors, want 357", len(pos))
	}
	for _, pair := range [][2]string{
		{"model.layers.2.feed_forward.experts.2.w1.weight", "model.layers.2.feed_forward.experts.10.w1.weight"},
		{"model.layers.6.feed_forward.experts.9.w3.weight", "model.layers.6.feed_forward.experts.10.w1.weight"},
		{"model.layers.1.operator_norm.weight", "model.layers.2.feed_forward.expert_bias"},
	} {
		a, aok := pos[pair[0]]
		b, bok := pos[pair[1]]
		if !aok || !bok || a >= b {
			t.Errorf("%s (line %d) should come before %s (line %d)", pair[0], a, pair[1], b)
		}
	}
	_, summary, _ := inspectOut(t, tinyModel)
	if strings.Contains(summary, "feed_forward") || !strings.Contains(summary, "model.embed_tokens.weight") {
		t.Errorf("default output lists layer tensors or misses the global ones:\n%s", summary)
	}
}

// writeSynthetic writes a Hugging Face checkpoint shaped like LFM2-8B-A1B
// (24 layers, the first 2 dense, 32 experts) with one-element tensors and
// no config.json.
func writeSynthetic(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var tensors []safetensors.Tensor
	add := func(name string) {
		tensors = append(tensors, safetensors.Tensor{Name: name, DType: dtype.BF16, Shape: []int64{1}, Data: []byte{0, 0}})
	}
	add("model.embed_tokens.weight")
	add("model.embedding_norm.weight")
	for i := range 24 {
		p := fmt.Sprintf("model.layers.%d.", i)
		add(p + "operator_norm.weight")
		add(p + "ffn_norm.weight")
		if i%4 == 2 {
			for _, w := range []string{"q_proj", "k_proj", "v_proj", "out_proj", "q_layernorm", "k_layernorm"} {
				add(p + "self_attn." + w + ".weight")
			}
		} else {
			for _, w := range []string{"in_proj", "conv", "out_proj"} {
				add(p + "conv." + w + ".weight")
			}
		}
		if i < 2 {
			for _, w := range []string{"w1", "w2", "w3"} {
				add(p + "feed_forward." + w + ".weight")
			}
			continue
		}
		add(p + "feed_forward.gate.weight")
		add(p + "feed_forward.expert_bias")
		for e := range 32 {
			for _, w := range []string{"w1", "w2", "w3"} {
				add(fmt.Sprintf("%sfeed_forward.experts.%d.%s.weight", p, e, w))
			}
		}
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), tensors, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestInspectScreenful: an 8B-shaped checkpoint's summary fits on a screen,
// its layers in numeric order; --tensors lists layers.2 before layers.10.
func TestInspectScreenful(t *testing.T) {
	dir := writeSynthetic(t)
	code, stdout, stderr := inspectOut(t, dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if len(lines) > 40 {
		t.Errorf("summary of %d lines:\n%s", len(lines), stdout)
	}
	var layerCol []string
	for _, l := range lines[1:25] {
		layerCol = append(layerCol, strings.Fields(l)[0])
	}
	if got := strings.Join(layerCol, " "); got != "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23" {
		t.Errorf("layer lines in order %s", got)
	}
	wantLines := map[int]string{1: "0 conv dense - 8", 3: "2 attention moe 32 106", 11: "10 attention moe 32 106", 12: "11 conv moe 32 103"}
	for i, want := range wantLines {
		if got := strings.Join(strings.Fields(lines[i]), " "); !strings.HasPrefix(got, want+" ") {
			t.Errorf("line %d = %q, want %q…", i, got, want)
		}
	}
	if !strings.Contains(stdout, "2302 tensors") || !strings.Contains(stderr, "layer kinds read from tensor names") {
		t.Errorf("stdout:\n%s\nstderr: %s", stdout, stderr)
	}
	_, all, _ := inspectOut(t, "--tensors", dir)
	if a, b := strings.Index(all, "model.layers.2."), strings.Index(all, "model.layers.10."); a < 0 || b < 0 || a > b {
		t.Errorf("--tensors lists layer 10 at %d, layer 2 at %d", b, a)
	}
}

// TestInspectConfigFallback: a config.json that is missing, unusable or
// about another model does not stop inspect; the layers come from the
// tensor names and agree with the config's.
func TestInspectConfigFallback(t *testing.T) {
	cfg, err := os.ReadFile(filepath.Join(tinyModel, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	fourLayers := strings.Replace(string(cfg), `"num_hidden_layers": 8`, `"num_hidden_layers": 4`, 1)
	fourLayers = regexp.MustCompile(`"layer_types": \[[^\]]*\]`).ReplaceAllString(fourLayers, `"layer_types": ["conv", "conv", "full_attention", "conv"]`)
	_, want, _ := inspectOut(t, tinyModel)
	tests := []struct {
		name   string
		config string // "" for none
		note   string
	}{
		{"missing", "", "config.json"},
		{"invalid JSON", "{", "config.json"},
		{"other model", fourLayers, "config.json describes 4 layers, the tensors 8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "model")
			copyDir(t, tinyModel, dir)
			path := filepath.Join(dir, "config.json")
			err := os.Remove(path)
			if tt.config != "" {
				err = os.WriteFile(path, []byte(tt.config), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
			code, got, stderr := inspectOut(t, dir)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if strings.ReplaceAll(got, dir, "DIR") != strings.ReplaceAll(want, tinyModel, "DIR") {
				t.Errorf("output differs from the one with the fixture's config:\n%s", got)
			}
			if !strings.Contains(stderr, "note: layer kinds read from tensor names") || !strings.Contains(stderr, tt.note) {
				t.Errorf("stderr %q lacks the note about %q", stderr, tt.note)
			}
		})
	}
}

// jsonFinding is what a reader of `verify --json` reads from a finding.
type jsonFinding struct {
	Kind           string  `json:"kind"`
	Path           string  `json:"path"`
	Tensor         string  `json:"tensor"`
	ExpectedSHA256 *string `json:"expected_sha256"`
	ActualSHA256   *string `json:"actual_sha256"`
	ExpectedSize   *int64  `json:"expected_size"`
	ActualSize     *int64  `json:"actual_size"`
	Authority      string  `json:"authority"`
	Detail         string  `json:"detail"`
}

// TestInspectJSONFindings: --json on a damaged lfmq-1 checkpoint prints its
// findings as JSON on stdout and exits 3.
func TestInspectJSONFindings(t *testing.T) {
	out, _ := quantizeTinyRTN(t)
	rewrite := func(t *testing.T, path string, f func([]byte) []byte) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, f(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		do    func(t *testing.T, dir string)
		check func(f jsonFinding) bool // true for a finding the damage must cause
	}{
		{"flipped tensor byte", func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "experts-04.safetensors"), func(b []byte) []byte { b[len(b)-100] ^= 0x10; return b })
		}, func(f jsonFinding) bool {
			return f.Kind == "hash" && f.Path == "experts-04.safetensors" && f.Tensor == "" &&
				f.ExpectedSHA256 != nil && f.ActualSHA256 != nil && *f.ExpectedSHA256 != *f.ActualSHA256
		}},
		{"flipped byte, its tensor", func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "experts-04.safetensors"), func(b []byte) []byte { b[len(b)-100] ^= 0x10; return b })
		}, func(f jsonFinding) bool {
			return f.Kind == "hash" && strings.HasPrefix(f.Tensor, "model.layers.4.feed_forward.experts.") && f.ExpectedSHA256 != nil
		}},
		{"truncated file", func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "layer-03.safetensors"), func(b []byte) []byte { return b[:len(b)/2] })
		}, func(f jsonFinding) bool {
			return f.Kind == "size" && f.Path == "layer-03.safetensors" && f.ExpectedSize != nil && f.ActualSize != nil && *f.ActualSize*2 == *f.ExpectedSize-(*f.ExpectedSize%2)
		}},
		{"manifest entry", func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "manifest.json"), func(b []byte) []byte {
				return []byte(strings.Replace(string(b), `"format": "bfp8_b"`, `"format": "bfp4_b"`, 1))
			})
		}, func(f jsonFinding) bool {
			return f.Kind == "metadata" && f.Tensor != "" && strings.Contains(f.Detail, "manifest says bfp4_b")
		}},
		{"manifest file digest", func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "manifest.json"), func(b []byte) []byte {
				// The first entry is the checkpoint's file list; the
				// source's list repeats the name.
				loc := regexp.MustCompile(`"path": "tokenizer.json",\s*"sha256": "([0-9a-f]{64})`).FindSubmatchIndex(b)
				copy(b[loc[2]:loc[3]], strings.Repeat("0", 64))
				return b
			})
		}, func(f jsonFinding) bool {
			return f.Kind == "hash" && f.Path == "tokenizer.json" && f.Authority == "manifest.json"
		}},
		{"manifest not JSON", func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "manifest.json"), func(b []byte) []byte { return []byte("{") })
		}, func(f jsonFinding) bool {
			return f.Kind == "malformed" && f.Path == "manifest.json" && strings.Contains(f.Detail, "invalid JSON")
		}},
		{"manifest deleted", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "manifest.json"))
		}, func(f jsonFinding) bool {
			return f.Kind == "missing" && f.Path == "manifest.json"
		}},
		{"manifest of another format", func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "manifest.json"), func(b []byte) []byte {
				return []byte(strings.Replace(string(b), `"format": "lfmq-1"`, `"format": "lfmq-0"`, 1))
			})
		}, func(f jsonFinding) bool {
			return f.Kind == "malformed" && f.Path == "manifest.json" && strings.Contains(f.Detail, `format is "lfmq-0"`)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "copy")
			copyDir(t, out, dir)
			tt.do(t, dir)
			code, stdout, stderr := inspectOut(t, "--json", dir)
			if code != exitMismatch {
				t.Errorf("exit %d, want %d (%s)", code, exitMismatch, stderr)
			}
			var rep struct {
				Dir      string        `json:"dir"`
				OK       *bool         `json:"ok"`
				Findings []jsonFinding `json:"findings"`
			}
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("stdout is not a JSON report: %v\n%s", err, stdout)
			}
			if rep.OK == nil || *rep.OK || rep.Dir != dir || len(rep.Findings) == 0 {
				t.Fatalf("report %s", stdout)
			}
			found := false
			for _, f := range rep.Findings {
				found = found || tt.check(f)
				if f.Authority != "manifest.json" || f.Path == "" {
					t.Errorf("finding %+v", f)
				}
			}
			if !found {
				t.Errorf("no expected finding in\n%s", stdout)
			}
		})
	}
	code, stdout, _ := inspectOut(t, "--json", out)
	var clean struct {
		OK      bool              `json:"ok"`
		Tensors []json.RawMessage `json:"tensors"`
		Layers  []json.RawMessage `json:"layers"`
	}
	if err := json.Unmarshal([]byte(stdout), &clean); code != 0 || err != nil || !clean.OK || len(clean.Tensors) != 358 || len(clean.Layers) != 8 {
		t.Errorf("clean --json: exit %d, %v, ok %v, %d tensors, %d layers", code, err, clean.OK, len(clean.Tensors), len(clean.Layers))
	}
}

func TestSizeChange(t *testing.T) {
	tests := []struct {
		size, source int64
		want         string
	}{
		{6717184, 13107776, "1.95x smaller"},
		{13500160, 13107776, "1.03x larger"},
		{1000, 3520, "3.52x smaller"},
		{1020, 1000, "1.02x larger"},
		{1001, 1000, "1.00x larger"},
		{999, 1000, "1.00x smaller"},
		{5, 5, "same size"},
		{0, 10, "10.00x smaller"},
	}
	for _, tt := range tests {
		if got := sizeChange(tt.size, tt.source); got != tt.want {
			t.Errorf("sizeChange(%d, %d) = %q, want %q", tt.size, tt.source, got, tt.want)
		}
	}
}

// TestQuantizeInspectSizes: quantize and inspect print the same sizes for
// the same checkpoints (tensor data, decimal units), and the comparison
// with the source goes the right way.
func TestQuantizeInspectSizes(t *testing.T) {
	sizeLine := regexp.MustCompile(`size +(\S+ \S+) of tensor data \(source (\S+ \S+), (.*)\)`)
	inspected := regexp.MustCompile(`checkpoint .*: \d+ tensors, (\S+ \S+) of tensor data`)
	inspectSize := func(t *testing.T, dir string) string {
		code, stdout, stderr := inspectOut(t, dir)
		m := inspected.FindStringSubmatch(stdout)
		if code != 0 || m == nil {
			t.Fatalf("inspect %s: exit %d, %s\n%s", dir, code, stderr, stdout)
		}
		return m[1]
	}
	source := inspectSize(t, tinyModel)
	tests := []struct {
		name   string
		args   []string
		change string
	}{
		{"rtn", nil, "1.95x smaller"},
		{"bf16 experts", []string{"--experts", "keep"}, "1.03x larger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, printed := quantizeTinyRTN(t, tt.args...)
			m := sizeLine.FindStringSubmatch(printed)
			if m == nil {
				t.Fatalf("quantize output lacks the size line:\n%s", printed)
			}
			if m[2] != source {
				t.Errorf("quantize says the source is %s, inspect %s", m[2], source)
			}
			if got := inspectSize(t, out); m[1] != got {
				t.Errorf("quantize says the output is %s, inspect %s", m[1], got)
			}
			if m[3] != tt.change {
				t.Errorf("quantize says %q, want %q", m[3], tt.change)
			}
		})
	}
}

// TestInspectLFM3JSON: inspect --json of the LFM3 fixture reports its
// attention kinds as the fixture's README gives them (layers 2 and 6 full
// with θ 1e6 rotating 16 of 32 dimensions, 4 and 8 sliding over 32
// positions with θ 1e4 rotating all 32, 4 query and 2 KV heads, every
// head's output gated) and its post norms; an LFM2 model reports neither.
func TestInspectLFM3JSON(t *testing.T) {
	for _, tc := range []struct {
		dir       string
		attention string
		postNorms bool
	}{
		{lfm3Model, `[{"kind":"full_attention","layers":[2,6],"rope_theta":1000000,"rotary_dims":16,"head_dim":32,"heads":4,"kv_heads":2,"output_gate":true},` +
			`{"kind":"sliding_attention","layers":[4,8],"window":32,"rope_theta":10000,"rotary_dims":32,"head_dim":32,"heads":4,"kv_heads":2,"output_gate":true}]`, true},
		{denseModel, "null", false},
	} {
		t.Run(filepath.Base(filepath.Dir(tc.dir)), func(t *testing.T) {
			code, stdout, stderr := inspectOut(t, "--json", tc.dir)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var r struct {
				Attention json.RawMessage `json:"attention"`
				PostNorms bool            `json:"post_norms"`
			}
			if err := json.Unmarshal([]byte(stdout), &r); err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if len(r.Attention) > 0 {
				json.Compact(&got, r.Attention)
			} else {
				got.WriteString("null")
			}
			if got.String() != tc.attention || r.PostNorms != tc.postNorms {
				t.Errorf("attention %s, post norms %v\nwant      %s, %v", got.String(), r.PostNorms, tc.attention, tc.postNorms)
			}
		})
	}
}
