package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/device/cuda"
	"github.com/lfmq/lfmq/engine/device/opencl"
	"github.com/lfmq/lfmq/evidence"
)

var (
	clCheckOnce sync.Once
	clCheckErr  error
)

// needOpenCL skips a test where no OpenCL device opens, unless
// LFMQ_REQUIRE_OPENCL is set (CI sets it after installing PoCL).
func needOpenCL(t *testing.T) {
	t.Helper()
	clCheckOnce.Do(func() {
		d, err := opencl.Open(opencl.Options{})
		if err == nil {
			d.Close()
		}
		clCheckErr = err
	})
	if clCheckErr != nil {
		var de *device.Error
		if errors.As(clCheckErr, &de) && (de.Stage == device.StageLibrary || de.Stage == device.StageDevice) && os.Getenv("LFMQ_REQUIRE_OPENCL") == "" {
			t.Skipf("no OpenCL device: %v", clCheckErr)
		}
		t.Fatal(clCheckErr)
	}
}

// TestDeviceGenerate: generate on --device opencl prints the text the CPU
// engine prints, with every --kv-cache-dtype, and --stats names the device
// and the KV cache's format.
func TestDeviceGenerate(t *testing.T) {
	needOpenCL(t)
	chat := `[{"role":"user","content":"What does the ls command do?"}]`
	for _, kv := range []string{"f32", "bf16", "bfp8"} {
		var outs []string
		for _, dev := range []string{"cpu", "opencl"} {
			ios, stdout, stderr := testStreams()
			if code := run(context.Background(), []string{"generate", "--model", tinyModel, "--chat", chat, "--max-tokens", "24", "--stats", "--device", dev, "--kv-cache-dtype", kv}, ios); code != 0 {
				t.Fatalf("--device %s --kv-cache-dtype %s: exit %d: %s", dev, kv, code, stderr)
			}
			if !strings.Contains(stderr.String(), "device: "+dev) || !strings.Contains(stderr.String(), "KV cache "+kv+":") {
				t.Errorf("--device %s --kv-cache-dtype %s: --stats does not name the device and format: %s", dev, kv, stderr)
			}
			outs = append(outs, stdout.String())
		}
		if outs[0] != outs[1] || outs[0] == "" {
			t.Errorf("--kv-cache-dtype %s: cpu printed %q, opencl %q", kv, outs[0], outs[1])
		}
	}
}

// TestDeviceGenerateLFM3: generate on --device opencl prints the CPU
// engine's text for the LFM3 fixture (docs/lfm3.md): a 78-token prompt and
// 40 new tokens, well past its 32-position sliding window, with a float32
// and a bfp8 KV cache.
func TestDeviceGenerateLFM3(t *testing.T) {
	needOpenCL(t)
	chat := `[{"role":"user","content":"I keep my photos in a folder called pictures, sorted by year, and some of the older folders have files with spaces and odd characters in their names. Write a shell command that lists every file in the folder for 2019, largest first, and explain each flag you use."}]`
	for _, kv := range []string{"f32", "bfp8"} {
		var outs []string
		for _, dev := range []string{"cpu", "opencl"} {
			ios, stdout, stderr := testStreams()
			if code := run(context.Background(), []string{"generate", "--model", lfm3Model, "--chat", chat, "--max-tokens", "40", "--device", dev, "--kv-cache-dtype", kv}, ios); code != 0 {
				t.Fatalf("--device %s --kv-cache-dtype %s: exit %d: %s", dev, kv, code, stderr)
			}
			outs = append(outs, stdout.String())
		}
		if outs[0] != outs[1] || outs[0] == "" {
			t.Errorf("--kv-cache-dtype %s: cpu printed %q, opencl %q", kv, outs[0], outs[1])
		}
	}
}

// TestDeviceScore: score on --device opencl, with one candidate served by
// a server on --device opencl and one in process, gives the CPU's
// evidence rows digit for digit; the receipts and /v1/models name the
// device.
func TestDeviceScore(t *testing.T) {
	needOpenCL(t)
	if testing.Short() {
		t.Skip("scores the fixture three times")
	}
	dir := t.TempDir()
	rtn := filepath.Join(dir, "rtn")
	ios, _, stderr := testStreams()
	if code := run(context.Background(), []string{"quantize", "--model", tinyModel, "--out", rtn, "--method", "rtn"}, ios); code != 0 {
		t.Fatalf("quantize: exit %d: %s", code, stderr)
	}
	base, _ := startServe(t, "--model", rtn, "--device", "opencl", "--prefill-chunk", "64")
	resp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct {
			Lfmq struct {
				Device device.Info `json:"device"`
			} `json:"lfmq"`
		} `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if len(models.Data) != 1 || models.Data[0].Lfmq.Device.Kind != device.OpenCL || models.Data[0].Lfmq.Device.Kernel != device.SourceDigest() {
		t.Errorf("/v1/models device: %+v", models.Data)
	}
	rows := map[string]map[string]string{}
	var receipts []evidence.Receipts
	for _, dev := range []string{"cpu", "opencl"} {
		out := filepath.Join(dir, dev+".json")
		args := []string{"score", "--reference", tinyModel, "--candidate", "dir=" + rtn, "--candidate", "served=" + base,
			"--corpus", "chat=" + filepath.Join(tinyCorpora, "chat.jsonl"), "--max-records", "2", "--ctx", "128", "--out", out, "--device", dev}
		ios, _, stderr := testStreams()
		if code := run(context.Background(), args, ios); code != 0 {
			t.Fatalf("score --device %s: exit %d: %s", dev, code, stderr)
		}
		f, err := evidence.Read(out)
		if err != nil {
			t.Fatal(err)
		}
		receipts = append(receipts, f.Receipts)
		for _, r := range f.Results {
			name := r.Candidate
			r.Candidate = ""
			j, _ := json.Marshal(r)
			if rows[name] == nil {
				rows[name] = map[string]string{}
			}
			rows[name][dev+"/"+r.Corpus] = string(j)
		}
	}
	for _, corpus := range []string{"chat"} {
		want := rows["dir"]["cpu/"+corpus]
		for _, got := range []string{rows["dir"]["opencl/"+corpus], rows["served"]["cpu/"+corpus], rows["served"]["opencl/"+corpus]} {
			if got != want || want == "" {
				t.Errorf("%s: a row differs from the CPU's in-process row\n got %s\nwant %s", corpus, got, want)
			}
		}
	}
	if receipts[0].Machine.Device != nil || receipts[1].Machine.Device == nil || receipts[1].Machine.Device.Kind != device.OpenCL {
		t.Errorf("receipts' devices: cpu %+v, opencl %+v", receipts[0].Machine.Device, receipts[1].Machine.Device)
	}
}

// TestDeviceFlag: a --device that is not a choice is exit 2 before
// anything loads; an explicit CUDA without a driver is exit 1 naming the
// library; auto without a GPU runs on the CPU and says so in one line.
func TestDeviceFlag(t *testing.T) {
	for _, cmd := range [][]string{
		{"generate", "--model", tinyModel, "--prompt", "hi"},
		{"serve", "--model", tinyModel},
		{"score", "--reference", tinyModel, "--candidate", "a=" + tinyModel, "--corpus", "chat=" + filepath.Join(tinyCorpora, "chat.jsonl")},
	} {
		ios, _, stderr := testStreams()
		if code := run(context.Background(), append(cmd, "--device", "gpu"), ios); code != exitUsage || !strings.Contains(stderr.String(), "auto, cpu, opencl, cuda") {
			t.Errorf("%s --device gpu: exit %d: %s", cmd[0], code, stderr)
		}
	}
	if d, err := cuda.Open(cuda.Options{}); err == nil {
		d.Close()
		t.Skip("a CUDA GPU is present; the no-driver paths cannot be seen here")
	}
	ios, _, stderr := testStreams()
	if code := run(context.Background(), []string{"generate", "--model", tinyModel, "--prompt", "hi", "--max-tokens", "1", "--device", "cuda"}, ios); code != exitFailure || !strings.Contains(stderr.String(), cuda.Library) {
		t.Errorf("--device cuda without a driver: exit %d: %s", code, stderr)
	}
	ios, _, stderr = testStreams()
	if code := run(context.Background(), []string{"generate", "--model", tinyModel, "--prompt", "hi", "--max-tokens", "1", "--stats"}, ios); code != 0 ||
		strings.Count(stderr.String(), "device: cpu (auto: no libcuda.so.1; ") != 1 {
		t.Errorf("--device auto: exit %d: %s", code, stderr)
	}
}
