package model_test

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
)

// TestReleasePagesKeepsLogits: after ReleasePages drops the checkpoint's
// read pages, the weights read again give the same logits, bit for bit, as
// before.
func TestReleasePagesKeepsLogits(t *testing.T) {
	m, err := load.Load(tinyDir, load.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prompt := []int{1, 4790, 2277, 828, 25, 465, 3617, 381}
	logits := func() []float32 {
		t.Helper()
		out, err := m.Forward(t.Context(), []*model.Sequence{m.NewSequence()}, [][]int{prompt}, model.ForwardOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	before := logits()
	for range 2 {
		if err := m.ReleasePages(); err != nil {
			t.Fatal(err)
		}
		after := logits()
		if len(after) != len(before) {
			t.Fatalf("%d logits after ReleasePages, %d before", len(after), len(before))
		}
		for i := range before {
			if math.Float32bits(after[i]) != math.Float32bits(before[i]) {
				t.Fatalf("logit %d is %v after ReleasePages, %v before", i, after[i], before[i])
			}
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.ReleasePages(); err != nil {
		t.Errorf("ReleasePages after Close: %v, want nothing to release", err)
	}
}

// TestResidentLoad: a model loaded with load.Options.Resident gives the
// mapped model's logits bit for bit, also after ReleasePages (which has
// nothing to give back); on Linux with transparent huge pages on, its
// checkpoint file is not mapped into the process, having been read in.
func TestResidentLoad(t *testing.T) {
	prompt := []int{1, 4790, 2277, 828, 25, 465, 3617, 381}
	run := func(resident bool) []float32 {
		t.Helper()
		m, err := load.Load(tinyDir, load.Options{Threads: 2, Resident: resident})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if resident && runtime.GOOS == "linux" {
			thp, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
			maps, err := os.ReadFile("/proc/self/maps")
			if err != nil {
				t.Fatal(err)
			}
			file, err := filepath.Abs(filepath.Join(tinyDir, "model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			if on := bytes.Contains(thp, []byte("[always]")) || bytes.Contains(thp, []byte("[madvise]")); on && bytes.Contains(maps, []byte(file)) {
				t.Errorf("%s is mapped into the process with Resident set", file)
			}
		}
		out, err := m.Forward(t.Context(), []*model.Sequence{m.NewSequence()}, [][]int{prompt}, model.ForwardOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.ReleasePages(); err != nil {
			t.Fatal(err)
		}
		again, err := m.Forward(t.Context(), []*model.Sequence{m.NewSequence()}, [][]int{prompt}, model.ForwardOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range out[0] {
			if math.Float32bits(out[0][i]) != math.Float32bits(again[0][i]) {
				t.Fatalf("resident %v: logit %d is %v after ReleasePages, %v before", resident, i, again[0][i], out[0][i])
			}
		}
		return out[0]
	}
	resident, mapped := run(true), run(false)
	for i := range mapped {
		if math.Float32bits(resident[i]) != math.Float32bits(mapped[i]) {
			t.Fatalf("logit %d is %v loaded resident, %v mapped", i, resident[i], mapped[i])
		}
	}
}
