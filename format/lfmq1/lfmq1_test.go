package lfmq1

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/format/canonjson"
	"github.com/lfmq/lfmq/format/dtype"
)

// writeSample writes a two-file checkpoint and returns its directory.
func writeSample(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ckpt")
	w, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	bfpData := bytes.Repeat([]byte{0x7f}, 576)
	if err := w.WriteFile(GlobalFile, []Tensor{
		{Name: "model.embedding_norm.weight", Format: BF16, Shape: []int64{4}, DType: dtype.BF16, StoredShape: []int64{4}, Data: []byte{0, 0x3f, 0, 0x3f, 0, 0x3f, 0, 0x3f}},
		{Name: "lm_head.weight", Format: BFP4, Shape: []int64{32, 32}, DType: dtype.U8, StoredShape: []int64{1, 576}, Data: bfpData},
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(LayerFile(0, 2), []Tensor{
		{Name: "model.layers.0.feed_forward.expert_bias", Format: F32, Shape: []int64{2}, DType: dtype.F32, StoredShape: []int64{2}, Data: make([]byte, 8)},
	}); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(cfg, []byte(`{"model_type":"lfm2_moe"}`), 0o644)
	if err := w.CopyFile(cfg, "config.json"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(&Manifest{LfmqVersion: "test", CreatedBy: "test"}, map[string]any{"x": 1.5}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRoundTrip(t *testing.T) {
	dir := writeSample(t)
	c, err := Open(dir, CheckTensors)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.Manifest.Tensors) != 3 || len(c.Manifest.Files) != 3 {
		t.Fatalf("manifest: %d tensors, %d files", len(c.Manifest.Tensors), len(c.Manifest.Files))
	}
	head, err := c.Tensor("lm_head.weight")
	if err != nil {
		t.Fatal(err)
	}
	if head.Format != BFP4 || len(head.Data) != 576 || head.File != GlobalFile {
		t.Errorf("lm_head: %+v", head.TensorEntry)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, ManifestFile))
	if !canonjson.IsCanonical(raw) {
		t.Error("manifest.json is not canonical JSON")
	}
	if _, err := c.Tensor("nope"); err == nil {
		t.Error("Tensor(nope) succeeded")
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	if len(entries) != 1 {
		t.Errorf("temporary directories left beside the checkpoint: %v", entries)
	}
}

func TestLayerFileNames(t *testing.T) {
	cases := []struct {
		i, n int
		want string
	}{{0, 8, "layer-00.safetensors"}, {23, 24, "layer-23.safetensors"}, {5, 100, "layer-05.safetensors"}, {5, 101, "layer-005.safetensors"}}
	for _, c := range cases {
		if got := LayerFile(c.i, c.n); got != c.want {
			t.Errorf("LayerFile(%d, %d) = %s, want %s", c.i, c.n, got, c.want)
		}
	}
	if got := ExpertsFile(7, 24); got != "experts-07.safetensors" {
		t.Errorf("ExpertsFile = %s", got)
	}
}

// TestDamage damages a checkpoint in one way at a time and checks that Open
// reports exactly that damage.
func TestDamage(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
		check  Check
		kind   string // expected MismatchError kind; "" = another error
		want   string // substring of the error
	}{
		{"flipped tensor byte", func(t *testing.T, dir string) {
			flipLast(t, filepath.Join(dir, GlobalFile))
		}, CheckTensors, "hash", `tensor "model.embedding_norm.weight"`},
		{"flipped byte, files only", func(t *testing.T, dir string) {
			flipLast(t, filepath.Join(dir, GlobalFile))
		}, CheckFiles, "hash", "global.safetensors: hash mismatch"},
		{"truncated file", func(t *testing.T, dir string) {
			p := filepath.Join(dir, LayerFile(0, 2))
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-3], 0o644)
		}, CheckStructure, "size", "layer-00.safetensors: size mismatch"},
		{"corrupted header", func(t *testing.T, dir string) {
			p := filepath.Join(dir, LayerFile(0, 2))
			b, _ := os.ReadFile(p)
			b[9] = '!'
			os.WriteFile(p, b, 0o644)
		}, CheckStructure, "", "layer-00.safetensors"},
		{"manifest tensor digest edited", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *Manifest) { m.Tensors[0].SHA256 = strings.Repeat("0", 64) })
		}, CheckTensors, "hash", `tensor "lm_head.weight"`},
		{"manifest file size edited", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *Manifest) { m.Files[0].Size++ })
		}, CheckStructure, "size", "config.json"},
		{"manifest shape edited", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *Manifest) { m.Tensors[0].Shape = []int64{32, 64} })
		}, CheckStructure, "metadata", "bfp4_b;[32,64]"},
		{"missing file", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "config.json"))
		}, CheckStructure, "missing", "config.json"},
		{"extra file", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hi"), 0o644)
		}, CheckStructure, "extra", "notes.txt"},
		{"header damaged, size kept", func(t *testing.T, dir string) {
			p := filepath.Join(dir, GlobalFile)
			data, _ := os.ReadFile(p)
			data[10] = '!' // inside the JSON header
			os.WriteFile(p, data, 0o644)
		}, CheckStructure, "header", GlobalFile},
		{"manifest not JSON", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, ManifestFile), []byte("{"), 0o644)
		}, CheckStructure, "", "invalid JSON"},
		{"manifest with a stray brace after it", func(t *testing.T, dir string) {
			p := filepath.Join(dir, ManifestFile)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, append(b, '}'), 0o644)
		}, CheckStructure, "", "data after the JSON value"},
		{"metrics edited", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *Manifest) { m.Metrics = []byte(`{"x": 2}`) })
		}, CheckStructure, "", "metrics_sha256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeSample(t)
			tt.damage(t, dir)
			_, err := Open(dir, tt.check)
			if err == nil {
				t.Fatal("Open succeeded on a damaged checkpoint")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v\nwant it to mention %q", err, tt.want)
			}
			var mm *MismatchError
			if tt.kind != "" && (!errors.As(err, &mm) || mm.Kind != tt.kind) {
				t.Errorf("err = %v, want a MismatchError of kind %q", err, tt.kind)
			}
		})
	}
}

func flipLast(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The last tensor in name order is model.embedding_norm.weight.
	b[len(b)-1] ^= 0x01
	os.WriteFile(path, b, 0o644)
}

func editManifest(t *testing.T, dir string, edit func(*Manifest)) {
	t.Helper()
	m, _, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, err := canonjson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, ManifestFile), b, 0o644)
}

func TestCreateRefusesNonEmpty(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x"), nil, 0o644)
	if _, err := Create(dir); err == nil {
		t.Fatal("Create accepted a non-empty directory")
	}
	w, err := Create(filepath.Join(dir, "new"))
	if err != nil {
		t.Fatal(err)
	}
	w.Abort()
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("Abort left %d entries", len(entries))
	}
}

func FuzzParseManifest(f *testing.F) {
	dir := writeSample(f)
	if b, err := os.ReadFile(filepath.Join(dir, ManifestFile)); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"format":"lfmq-1","tensors":[],"files":[],"metrics":{},"metrics_sha256":""}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest("manifest.json", data)
		if err != nil {
			return
		}
		if m.Format != FormatName {
			t.Fatalf("accepted format %q", m.Format)
		}
		for _, e := range m.Tensors {
			if !ValidSHA256(e.SHA256) || !safeFileName(e.File) {
				t.Fatalf("accepted entry %+v", e)
			}
		}
	})
}

func TestFindings(t *testing.T) {
	a, b, c := errors.New("a"), errors.New("b"), errors.New("c")
	got := Findings(errors.Join(a, errors.Join(b, c)))
	if len(got) != 3 || got[0] != a || got[1] != b || got[2] != c {
		t.Errorf("Findings = %v", got)
	}
	if Findings(nil) != nil || len(Findings(a)) != 1 {
		t.Error("nil or a single error")
	}
}

// TestDrafterDir: a checkpoint may hold a drafter directory, a checkpoint
// of its own that Open leaves to its own Open; any other sub-directory,
// or a file named drafter, is an entry the manifest does not list.
func TestDrafterDir(t *testing.T) {
	for _, c := range []struct {
		name  string
		add   func(dir string) error
		extra string // the extra entry Open reports; "" for none
	}{
		{"drafter directory", func(dir string) error {
			sub := writeSample(t)
			return os.Rename(sub, filepath.Join(dir, DrafterDir))
		}, ""},
		{"empty drafter directory", func(dir string) error { return os.Mkdir(filepath.Join(dir, DrafterDir), 0o755) }, ""},
		{"other directory", func(dir string) error { return os.Mkdir(filepath.Join(dir, "drafts"), 0o755) }, "drafts"},
		{"file named drafter", func(dir string) error { return os.WriteFile(filepath.Join(dir, DrafterDir), nil, 0o644) }, DrafterDir},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeSample(t)
			if err := c.add(dir); err != nil {
				t.Fatal(err)
			}
			ck, err := Open(dir, CheckTensors)
			if c.extra == "" {
				if err != nil {
					t.Fatal(err)
				}
				ck.Close()
				return
			}
			var me *MismatchError
			if !errors.As(err, &me) || me.Kind != "extra" || me.Path != c.extra {
				t.Fatalf("error %v, want an extra %s", err, c.extra)
			}
		})
	}
}
