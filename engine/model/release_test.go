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
// nothing to give back); on Linux with transparent huge pages on, loading
// it maps its checkpoint file no more times than before (it is read in),
// where the mapped load maps it once more.
func TestResidentLoad(t *testing.T) {
	prompt := []int{1, 4790, 2277, 828, 25, 465, 3617, 381}
	file, err := filepath.Abs(filepath.Join(tinyDir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	// maps counts the process's mappings of file (other tests' models may
	// hold some).
	maps := func() int {
		b, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Count(b, []byte(file+"\n"))
	}
	thp, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	checkMaps := runtime.GOOS == "linux" && (bytes.Contains(thp, []byte("[always]")) || bytes.Contains(thp, []byte("[madvise]")))
	run := func(resident bool) []float32 {
		t.Helper()
		before := 0
		if checkMaps {
			before = maps()
		}
		m, err := load.Load(tinyDir, load.Options{Threads: 2, Resident: resident})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if checkMaps {
			if after := maps(); resident && after != before {
				t.Errorf("loaded resident: %s mapped %d times, %d before", file, after, before)
			} else if !resident && after != before+1 {
				t.Errorf("loaded mapped: %s mapped %d times, %d before", file, after, before)
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
