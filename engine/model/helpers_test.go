package model_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/format/safetensors"
)

const (
	fixture = "../../testdata/tiny-lfm2-moe"
	tinyDir = fixture + "/model"
	refDir  = fixture + "/reference"
	greedyN = 32
	// logitTol bounds |Δlogit| against reference/logits.safetensors (full
	// sequence and every greedy decode step). Measured 1.24e-5 (full) and
	// 1.14e-5 (decode) on linux/amd64, with the AVX2/FMA kernels and with
	// -tags purego alike (the two give the same bits); 3e-5 is 2.4x that.
	// The 2e-3 allowance between independent float32 engines
	// (docs/model.md §4.9) is 160x the measured error and would let a
	// real regression pass.
	logitTol = 3e-5
)

var (
	tinyOnce  sync.Once
	tinyModel *model.Model
	tinyErr   error
)

// tiny returns the fixture model, loaded once per test binary and shared:
// a Model is read-only and safe for concurrent Forward calls.
func tiny(t testing.TB) *model.Model {
	t.Helper()
	tinyOnce.Do(func() { tinyModel, tinyErr = load.Load(tinyDir, load.Options{}) })
	if tinyErr != nil {
		t.Fatal(tinyErr)
	}
	return tinyModel
}

// prompt is one entry of reference/prompts.json.
type prompt struct {
	Name      string `json:"name"`
	InputIDs  []int  `json:"input_ids"`
	GreedyIDs []int  `json:"greedy_ids"`
}

func prompts(t testing.TB) []prompt { return promptsIn(t, refDir) }

// promptsIn reads the prompts.json of the reference directory dir.
func promptsIn(t testing.TB, dir string) []prompt {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "prompts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Prompts []prompt `json:"prompts"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Prompts) != 6 {
		t.Fatalf("prompts.json has %d prompts, want 6", len(p.Prompts))
	}
	return p.Prompts
}

// refTensors opens a reference safetensors file; tensors come back as
// float32 (I32 ids convert exactly).
type refTensors struct{ f *safetensors.File }

func openRef(t testing.TB, name string) refTensors { return openRefIn(t, refDir, name) }

// openRefIn opens the reference file name of the reference directory dir.
func openRefIn(t testing.TB, dir, name string) refTensors {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return refTensors{f}
}

func (r refTensors) get(t testing.TB, name string) []float32 {
	t.Helper()
	v, err := r.f.Float32(name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (r refTensors) ints(t testing.TB, name string) []int {
	v := r.get(t, name)
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// forward runs tokens through a new sequence of m and returns the sequence
// and its logits.
func forward(t testing.TB, m *model.Model, tokens []int, opts model.ForwardOptions) (*model.Sequence, []float32) {
	t.Helper()
	s := m.NewSequence()
	out, err := m.Forward(context.Background(), []*model.Sequence{s}, [][]int{tokens}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, out[0]
}

func step(t testing.TB, m *model.Model, s *model.Sequence, tokens ...int) []float32 {
	t.Helper()
	out, err := m.Forward(context.Background(), []*model.Sequence{s}, [][]int{tokens}, model.ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

func maxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("lengths %d and %d", len(a), len(b)))
	}
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

// argmax is greedy decoding's token (kernels.Argmax).
func argmax(x []float32) int { return kernels.Argmax(x) }

// sameBits reports the first index where a and b differ in bits, or -1.
func sameBits(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

func requireSame(t testing.TB, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	if i := sameBits(got, want); i >= 0 {
		t.Fatalf("%s: not bit-identical: [%d] = %g, want %g (max |Δ| %.3g)", what, i, got[i], want[i], maxAbsDiff(got, want))
	}
}
