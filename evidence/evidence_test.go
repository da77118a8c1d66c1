package evidence_test

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/format/canonjson"
	"github.com/lfmq/lfmq/format/durable"
)

func sample() *evidence.File {
	return &evidence.File{
		Format: evidence.Format, Kind: evidence.KindScore,
		Settings: evidence.Settings{Ctx: 512, WindowRule: evidence.WindowRule},
		Receipts: evidence.Receipts{LfmqVersion: "v", Command: "lfmq score --ctx 512", Reference: evidence.Checkpoint{Name: "BF16"}},
		Results: []evidence.Result{{Candidate: "rtn", Kind: evidence.KindCandidate, Corpus: "chat", Stats: evidence.Stats{
			Tokens: 12, PPLRef: 50.42578712708553, PPLCand: 1500000, KLMean: 1e-7, KLMeanSE: evidence.Ptr(5.7755082736083404e-05), KLP99: 0.1,
		}}},
	}
}

func TestFloatFormatting(t *testing.T) {
	data, err := evidence.Marshal(sample())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"ppl_ref": 50.42578712708553`, `"ppl_cand": 1.5e+06`, `"kl_mean": 1e-07`, `"kl_mean_se": 5.7755082736083404e-05`, `"top1_se": null`, `"kl_p99": 0.1`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("output lacks %s", want)
		}
	}
	if !canonjson.IsCanonical(data) {
		t.Error("not canonical JSON")
	}
	back, err := evidence.Parse("x", data)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := evidence.Marshal(back)
	if !bytes.Equal(again, data) {
		t.Errorf("round trip differs:\n%s\n%s", again, data)
	}
	f := sample()
	f.Results[0].KLMax = evidence.Float(math.NaN())
	if _, err := evidence.Marshal(f); err == nil {
		t.Error("NaN written")
	}
}

func TestParseErrors(t *testing.T) {
	good, _ := evidence.Marshal(sample())
	tests := []struct{ data, want string }{
		{"", "EOF"},
		{"{} {}", "data after"},
		{string(good) + "}", "data after"}, // json.Decoder.More misses a stray brace
		{`{"format": "x"}`, `format: "x"`},
		{strings.Replace(string(good), `"kind": "score"`, `"kind": "other"`, 1), "kind"},
		{strings.Replace(string(good), `"candidate": "rtn"`, `"candidate": ""`, 1), "results[0].candidate"},
		{strings.Replace(string(good), `"kind": "candidate"`, `"kind": "x"`, 1), "results[0].kind"},
		{strings.Replace(string(good), `"tokens": 12`, `"tokens": -1`, 1), "results[0].tokens"},
		{strings.Replace(string(good), `"ppl_ref"`, `"ppl_reff"`, 1), "unknown field"},
		{strings.Replace(string(good), `50.42578712708553`, `"50"`, 1), "not a number"},
	}
	for _, tt := range tests {
		_, err := evidence.Parse("e.json", []byte(tt.data))
		var pe *evidence.ParseError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%.40q: %v, want a ParseError with %q", tt.data, err, tt.want)
		}
	}
}

func TestWriteRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "e.json")
	if err := evidence.Write(path, sample()); err != nil {
		t.Fatal(err)
	}
	f, err := evidence.Read(path)
	if err != nil || f.Results[0].PPLRef != 50.42578712708553 {
		t.Fatalf("%v %+v", err, f)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	a, _ := durable.Create(filepath.Join(dir, "gone"))
	a.Write([]byte("x"))
	a.Abort()
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("an aborted file was left: %v", entries)
	}
}

func TestIdentifyCheckpoint(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"a": 1}`), 0o644)
	os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("weights"), 0o644)
	os.WriteFile(filepath.Join(dir, ".hidden"), []byte("ignored"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	a, err := evidence.IdentifyCheckpoint("BF16", dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.Format != "hf" || len(a.Files) != 2 || a.ConfigSHA256 != evidence.HashBytes([]byte(`{"a": 1}`)) || len(a.Identity) != 64 {
		t.Fatalf("%+v", a)
	}
	os.WriteFile(filepath.Join(dir, ".hidden"), []byte("changed"), 0o644)
	if b, _ := evidence.IdentifyCheckpoint("BF16", dir); b.Identity != a.Identity {
		t.Error("a hidden file changed the identity")
	}
	os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("weightz"), 0o644)
	if b, _ := evidence.IdentifyCheckpoint("BF16", dir); b.Identity == a.Identity {
		t.Error("a changed weight byte kept the identity")
	}
	if _, err := evidence.IdentifyCheckpoint("x", t.TempDir()); err == nil {
		t.Error("a directory without config.json was identified")
	}
	m := evidence.CurrentMachine()
	if m.OS == "" || m.Cores < 1 || m.CPU == "" {
		t.Errorf("machine %+v", m)
	}
}

// servedSample is sample() with a served candidate in the receipts.
func servedSample() *evidence.File {
	f := sample()
	f.Receipts.Candidates = []evidence.Checkpoint{{
		Name: "rtn", URL: "http://127.0.0.1:8000", ServedModel: "lfm2-rtn", BinarySHA256: strings.Repeat("b", 64), LfmqVersion: "v1",
		Format: "lfmq-1", Identity: strings.Repeat("a", 64), ManifestSHA256: strings.Repeat("a", 64), ConfigSHA256: strings.Repeat("c", 64),
	}}
	return f
}

// TestServedReceipts: the receipt fields of a served candidate are written
// and read back, and a file without them (every file written before they
// existed) still renders byte for byte as it did.
func TestServedReceipts(t *testing.T) {
	data, err := evidence.Marshal(servedSample())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"url": "http://127.0.0.1:8000"`, `"served_model": "lfm2-rtn"`, `"binary_sha256": "bbbb`, `"lfmq_version": "v1"`, `"dir": ""`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("output lacks %s:\n%s", want, data)
		}
	}
	back, err := evidence.Parse("x", data)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := evidence.Marshal(back); !bytes.Equal(again, data) || back.Receipts.Candidates[0].ServedModel != "lfm2-rtn" {
		t.Errorf("round trip differs:\n%s\n%s", again, data)
	}

	f := sample()
	f.Receipts.Candidates = []evidence.Checkpoint{{Name: "rtn", Dir: "out", Format: "hf", Identity: "i", ConfigSHA256: "c"}}
	old, _ := evidence.Marshal(f)
	const receipt = `"candidates": [
      {
        "config_sha256": "c",
        "dir": "out",
        "format": "hf",
        "identity": "i",
        "name": "rtn"
      }
    ],`
	if !strings.Contains(string(old), receipt) {
		t.Errorf("a directory candidate's receipt is not as before:\n%s", old)
	}
}

// FuzzParse: arbitrary bytes give a file or a ParseError, never a panic;
// a parsed file marshals again.
func FuzzParse(f *testing.F) {
	good, _ := evidence.Marshal(sample())
	f.Add(good)
	served, _ := evidence.Marshal(servedSample())
	f.Add(served)
	f.Add([]byte(`{"format": "lfmq-evidence-1", "kind": "score", "results": [{}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := evidence.Parse("fuzz", data)
		if err != nil {
			var pe *evidence.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if _, err := evidence.Marshal(file); err != nil {
			t.Fatalf("parsed file does not marshal: %v", err)
		}
	})
}
