package identity_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/format/canonjson"
	"github.com/lfmq/lfmq/format/identity"
	"github.com/lfmq/lfmq/format/lfmq1"
)

const fixtureModel = "../../testdata/tiny-lfm2-moe/model"

func sha(b string) string {
	s := sha256.Sum256([]byte(b))
	return hex.EncodeToString(s[:])
}

func write(t *testing.T, dir, name, data string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOfHF checks a Hugging Face identity against the canonical JSON of
// the files' list written out by hand.
func TestOfHF(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "config.json", `{"a": 1}`)
	write(t, dir, "model.safetensors", "weights")
	write(t, dir, "tokenizer.json", "tok")
	write(t, dir, ".hidden", "ignored")
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	write(t, filepath.Join(dir, "sub"), "x", "ignored")

	c, err := identity.Of(dir)
	if err != nil {
		t.Fatal(err)
	}
	entry := func(path, data string) string {
		return fmt.Sprintf("    {\n      \"path\": %q,\n      \"sha256\": %q,\n      \"size\": %d\n    }", path, sha(data), len(data))
	}
	canon := "{\n  \"config_sha256\": \"" + sha(`{"a": 1}`) + "\",\n  \"files\": [\n" +
		entry("config.json", `{"a": 1}`) + ",\n" + entry("model.safetensors", "weights") + ",\n" + entry("tokenizer.json", "tok") + "\n  ]\n}\n"
	want := identity.Checkpoint{
		Format: identity.FormatHF, Identity: sha(canon), ConfigSHA256: sha(`{"a": 1}`), TokenizerSHA256: sha("tok"),
		Files: []lfmq1.FileEntry{{Path: "config.json", Size: 8, SHA256: sha(`{"a": 1}`)}, {Path: "model.safetensors", Size: 7, SHA256: sha("weights")}, {Path: "tokenizer.json", Size: 3, SHA256: sha("tok")}},
	}
	if !equal(c, &want) {
		t.Fatalf("got %+v\nwant %+v", *c, want)
	}

	write(t, dir, ".hidden", "changed")
	if b, _ := identity.Of(dir); b.Identity != c.Identity {
		t.Error("a hidden file changed the identity")
	}
	write(t, dir, "model.safetensors", "weightz")
	if b, _ := identity.Of(dir); b.Identity == c.Identity {
		t.Error("a changed weight byte kept the identity")
	}
	os.Remove(filepath.Join(dir, "tokenizer.json"))
	if b, err := identity.Of(dir); err != nil || b.TokenizerSHA256 != "" {
		t.Errorf("without tokenizer.json: %+v, %v", b, err)
	}
}

// TestOfFixture checks the fixture model's files and tokenizer digest
// against the repository's SHA256SUMS.
func TestOfFixture(t *testing.T) {
	sums := map[string]string{}
	f, err := os.Open("../../SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, path, ok := strings.Cut(sc.Text(), "  ")
		if rel, in := strings.CutPrefix(path, "testdata/tiny-lfm2-moe/model/"); ok && in {
			sums[rel] = sum
		}
	}
	c, err := identity.Of(fixtureModel)
	if err != nil {
		t.Fatal(err)
	}
	if c.Format != identity.FormatHF || len(c.Files) != len(sums) || c.TokenizerSHA256 != sums["tokenizer.json"] || c.ConfigSHA256 != sums["config.json"] || len(c.Identity) != 64 {
		t.Fatalf("%+v, SHA256SUMS has %v", c, sums)
	}
	for _, e := range c.Files {
		if sums[e.Path] != e.SHA256 {
			t.Errorf("%s: sha256 %s, SHA256SUMS %s", e.Path, e.SHA256, sums[e.Path])
		}
	}
}

// TestOfLfmq1 identifies a directory with a (hand-written) manifest by the
// manifest's bytes.
func TestOfLfmq1(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "config.json", `{"b": 2}`)
	metrics, _ := canonjson.Marshal(json.RawMessage(`{}`))
	m := lfmq1.Manifest{
		Format: lfmq1.FormatName, LfmqVersion: "test", CreatedBy: "test",
		Source:       lfmq1.Source{ConfigSHA256: sha(`{"a": 1}`)},
		Quantization: lfmq1.Quantization{Experts: lfmq1.ClassSpec{Method: "rtn", Formats: []lfmq1.TensorFormat{lfmq1.BFP4}}},
		Metrics:      json.RawMessage(`{}`), MetricsSHA256: sha(string(metrics)),
	}
	data, err := canonjson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, lfmq1.ManifestFile, string(data))
	c, err := identity.Of(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := identity.Checkpoint{
		Format: identity.FormatLfmq1, Identity: sha(string(data)), ManifestSHA256: sha(string(data)),
		ConfigSHA256: sha(`{"b": 2}`), SourceConfigSHA256: sha(`{"a": 1}`), Experts: "rtn bfp4_b",
	}
	if !equal(c, &want) {
		t.Fatalf("got %+v\nwant %+v", *c, want)
	}
	write(t, dir, "tokenizer.json", "tok")
	if c, err := identity.Of(dir); err != nil || c.TokenizerSHA256 != sha("tok") || c.Identity != want.Identity {
		t.Errorf("with a tokenizer: %+v, %v", c, err)
	}
	// A dense LFM2 has no experts: its FFN class stands in their place.
	m.Architecture = "lfm2"
	m.Quantization.Experts = lfmq1.ClassSpec{Method: "none", Formats: []lfmq1.TensorFormat{}}
	m.Quantization.FFN = &lfmq1.ClassSpec{Method: "gptq", Formats: []lfmq1.TensorFormat{lfmq1.BFP4}, Tensors: 24}
	if data, err = canonjson.Marshal(m); err != nil {
		t.Fatal(err)
	}
	write(t, dir, lfmq1.ManifestFile, string(data))
	if c, err := identity.Of(dir); err != nil || c.Experts != "gptq bfp4_b" {
		t.Errorf("dense: %+v, %v", c, err)
	}

	write(t, dir, lfmq1.ManifestFile, `{"format": "lfmq-2"}`)
	var me *lfmq1.ManifestError
	if _, err := identity.Of(dir); !errors.As(err, &me) || !strings.HasPrefix(err.Error(), "identity: ") {
		t.Errorf("bad manifest: %v, want an identity error wrapping a ManifestError", err)
	}
	if _, err := identity.Of(t.TempDir()); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("no config.json: %v", err)
	}
}

func equal(a, b *identity.Checkpoint) bool {
	return slices.Equal(a.Files, b.Files) && a.Format == b.Format && a.Identity == b.Identity &&
		a.ManifestSHA256 == b.ManifestSHA256 && a.ConfigSHA256 == b.ConfigSHA256 &&
		a.SourceConfigSHA256 == b.SourceConfigSHA256 && a.Experts == b.Experts && a.TokenizerSHA256 == b.TokenizerSHA256
}

// The fixture model is a Hugging Face checkpoint: its identity stands for
// every top-level file.
func ExampleOf() {
	c, err := identity.Of(fixtureModel)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Format, len(c.Files), "files")
	fmt.Println("tokenizer.json", c.TokenizerSHA256)
	// Output:
	// hf 7 files
	// tokenizer.json 0705e900c2ed4323a45b18408959c83c3f3c4cc68db046786538697bd11b77ff
}
