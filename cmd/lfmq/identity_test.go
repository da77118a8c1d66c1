package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/format/lfmq1"
)

// manifestSum is the "manifest sha256" line of quantize's summary.
var manifestSum = regexp.MustCompile(`(?m)^  manifest sha256 ([0-9a-f]{64})$`)

// TestQuantizeIdentityIgnoresSpelling: the checkpoint's identity (the sha256
// of its manifest) is a function of the effective settings that shape the
// bytes. The same settings spelled three ways (flags left out; defaults
// typed, other flag order, --block-size 16, --workers 1, --resume on a
// fresh run; --block-size 128, --workers 2, --solve-memory 1 (one solve at
// a time, on both workers)) give one manifest and the same
// files; another --chat-date is another identity, recorded in the
// calibration settings.
func TestQuantizeIdentityIgnoresSpelling(t *testing.T) {
	fixture := filepath.Dir(tinyModel)
	common := []string{"--model", tinyModel, "--calib", fixture + "/calibration/calibration.jsonl", "--calib-seqs", "2"}
	code, book := "code="+fixture+"/corpora/code.jsonl", "book="+fixture+"/corpora/book.jsonl"
	spellings := []struct {
		name string
		args []string
		// date is the chat_date the manifest must record; same says
		// whether the identity must equal the first spelling's.
		date string
		same bool
	}{
		{"flags left out", []string{"--eval-corpus", code, "--eval-corpus", book}, "2025-01-01", true},
		{"defaults typed, block 16, one worker, resume", []string{"--eval-corpus", book, "--eval-corpus", code,
			"--method", "gptq", "--experts", "quantize", "--calib-len", "512", "--seed", "0", "--chat-date", "2025-01-01",
			"--damp-w13", "0.010", "--damp-w2", "0.010", "--act-order", "--shrink", "128.0", "--w2-weight", "g", "--sequential=true",
			"--block-size", "16", "--workers", "1", "--resume", "--dense-method", "gptq", "--damp-dense", "0.01"}, "2025-01-01", true},
		{"block 128, two workers, one solve at a time, strict", []string{"--eval-corpus", code, "--eval-corpus", book,
			"--block-size", "128", "--workers", "2", "--solve-memory", "1", "--strict"}, "2025-01-01", true},
		{"another chat date", []string{"--eval-corpus", code, "--eval-corpus", book, "--chat-date", "2031-07-15"}, "2031-07-15", false},
	}
	var firstSum string
	for i, sp := range spellings {
		out := filepath.Join(t.TempDir(), "q")
		args := append(append([]string{"quantize", "--out", out}, common...), sp.args...)
		ios, stdout, stderr := testStreams()
		if c := run(context.Background(), args, ios); c != 0 {
			t.Fatalf("%s: quantize exit %d: %s", sp.name, c, stderr)
		}
		m := manifestSum.FindStringSubmatch(stdout.String())
		if m == nil {
			t.Fatalf("%s: no manifest sha256 in\n%s", sp.name, stdout)
		}
		sum, _, err := lfmq1.HashFile(filepath.Join(out, "manifest.json"))
		if err != nil || sum != m[1] {
			t.Fatalf("%s: manifest.json has sha256 %s (%v), the summary says %s", sp.name, sum, err, m[1])
		}
		man, _, err := lfmq1.ReadManifest(out)
		if err != nil {
			t.Fatal(err)
		}
		if want := "lfmq quantize --method gptq --calib-seqs 2"; !strings.HasPrefix(man.CreatedBy, want) {
			t.Errorf("%s: created_by %q", sp.name, man.CreatedBy)
		}
		var settings map[string]any
		if err := json.Unmarshal(man.Quantization.Settings, &settings); err != nil {
			t.Fatal(err)
		}
		if _, ok := settings["block_size"]; ok {
			t.Errorf("%s: the settings record the block size, which changes no byte", sp.name)
		}
		if cal, _ := settings["calibration"].(map[string]any); cal["chat_date"] != sp.date {
			t.Errorf("%s: calibration.chat_date %v, want %s", sp.name, cal["chat_date"], sp.date)
		}
		if i == 0 {
			firstSum = m[1]
			continue
		}
		if (m[1] == firstSum) != sp.same {
			t.Errorf("%s: manifest sha256 %s, first spelling's %s; want equal = %v", sp.name, m[1], firstSum, sp.same)
		}
	}
}
