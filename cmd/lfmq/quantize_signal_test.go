package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/model/synth"
	"github.com/lfmq/lfmq/format/lfmq1"
)

// signalShape is a synthetic checkpoint of two MoE layers of two experts
// (top-1) at the given widths: the smallest in which a run can be stopped
// in its second layer's solves with the first layer kept for --resume.
func signalShape(hidden, moe int) synth.Shape {
	return synth.Shape{
		VocabSize: 512, HiddenSize: hidden, IntermediateSize: moe, MoEIntermediateSize: moe,
		LayerTypes: []string{"conv", "conv"}, NumHeads: hidden / 64, NumKVHeads: hidden / 256, HeadDim: 64,
		NumDenseLayers: 0, NumExperts: 2, NumExpertsPerTok: 1, MaxPositions: 4096,
	}
}

// testQuantizeSIGTERM quantizes a synthetic checkpoint with GPTQ, sends the
// process SIGTERM (through the signal.NotifyContext main uses) as soon as
// the second MoE layer's w1/w3 solves have started, and checks that the
// command returns within 2 seconds, interrupted, keeping the first layer
// for --resume; that the resumed run completes; and that its files are
// byte for byte those of an uninterrupted run.
func testQuantizeSIGTERM(t *testing.T, shape synth.Shape) {
	if runtime.GOOS == "windows" {
		t.Skip("SIGTERM is a unix signal")
	}
	tmp := t.TempDir()
	model := filepath.Join(tmp, "model")
	if _, err := synth.Write(context.Background(), model, synth.Options{Shape: shape, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	var calib strings.Builder
	for r := range 4 {
		ids := make([]string, 32)
		for i := range ids {
			ids[i] = fmt.Sprint(2 + (r*37+i*11)%(shape.VocabSize-2))
		}
		fmt.Fprintf(&calib, "{\"input_ids\": [%s]}\n", strings.Join(ids, ", "))
	}
	calibFile := filepath.Join(tmp, "calib.jsonl")
	if err := os.WriteFile(calibFile, []byte(calib.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	args := func(out string) []string {
		return []string{"quantize", "--model", model, "--out", out, "--calib", calibFile, "--calib-seqs", "4", "--workers", "2"}
	}
	prev := statusEvery
	statusEvery = 10 * time.Millisecond
	defer func() { statusEvery = prev }()

	// The interrupted run.
	out := filepath.Join(tmp, "gptq")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	var stderr syncBuffer
	ios := &IOStreams{In: &bytes.Buffer{}, Out: &bytes.Buffer{}, ErrOut: &stderr}
	done := make(chan int, 1)
	var returned time.Time
	go func() {
		code := run(ctx, args(out), ios)
		returned = time.Now()
		done <- code
	}()
	var sent time.Time
	for sent.IsZero() {
		select {
		case code := <-done:
			t.Fatalf("the run ended (exit %d) before its second layer's solves:\n%s", code, stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
		if strings.Contains(stderr.String(), "(layer 1: solve w1/w3)") {
			sent = time.Now()
			if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}
	}
	var code int
	select {
	case code = <-done:
	case <-time.After(time.Minute):
		t.Fatal("no return within a minute of SIGTERM")
	}
	stop()
	t.Logf("quantize returned %v after SIGTERM", returned.Sub(sent).Round(time.Millisecond))
	if d := returned.Sub(sent); d > 2*time.Second {
		t.Errorf("quantize returned %v after SIGTERM; want at most 2s", d.Round(time.Millisecond))
	}
	if code != exitFailure || !strings.Contains(stderr.String(), "interrupted") || !strings.Contains(stderr.String(), "--resume") {
		t.Fatalf("exit %d after SIGTERM; want %d, interrupted, resumable:\n%s", code, exitFailure, stderr.String())
	}
	partial := lfmq1.PartialDir(out)
	if _, err := os.Stat(filepath.Join(partial, lfmq1.ExpertsFile(0, 2))); err != nil {
		t.Fatalf("the partial run lost its finished layer: %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("the interrupted run left an output directory")
	}

	// Resumed, and uninterrupted: the same bytes.
	ios, _, errBuf := testStreams()
	if code := run(context.Background(), append(args(out), "--resume"), ios); code != 0 {
		t.Fatalf("--resume: exit %d: %s", code, errBuf)
	}
	whole := filepath.Join(tmp, "whole")
	ios, _, errBuf = testStreams()
	if code := run(context.Background(), args(whole), ios); code != 0 {
		t.Fatalf("uninterrupted run: exit %d: %s", code, errBuf)
	}
	entries, err := os.ReadDir(whole)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		want, err := os.ReadFile(filepath.Join(whole, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(out, e.Name()))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s of the resumed run differs from the uninterrupted run's (%v)", e.Name(), err)
		}
	}
	if got, _ := os.ReadDir(out); len(got) != len(entries) {
		t.Errorf("the resumed run wrote %d files, the uninterrupted one %d", len(got), len(entries))
	}
}

// TestQuantizeSIGTERM runs testQuantizeSIGTERM at a width small enough for
// make test (768 wide, experts 512); TestQuantizeSIGTERM8B (-tags long)
// runs it at LFM2-8B-A1B's widths, where one solve takes seconds.
func TestQuantizeSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("three GPTQ runs")
	}
	testQuantizeSIGTERM(t, signalShape(768, 512))
}
