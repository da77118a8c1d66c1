package hf

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/format/safetensors"
)

const tinyModel = "../../testdata/tiny-lfm2-moe/model"

// shard writes the tiny model's tensors into two shards plus an index, with
// edit applied to the weight map before it is written.
func shard(t *testing.T, edit func(weightMap map[string]string)) string {
	t.Helper()
	src, err := safetensors.Open(filepath.Join(tinyModel, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dir := t.TempDir()
	parts := [2][]safetensors.Tensor{}
	weightMap := map[string]string{}
	for i, n := range src.Names() {
		info, _ := src.Info(n)
		b, _ := src.Bytes(n)
		parts[i%2] = append(parts[i%2], safetensors.Tensor{Name: n, DType: info.DType, Shape: info.Shape, Data: b})
		weightMap[n] = []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}[i%2]
	}
	for i, p := range parts {
		name := []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}[i]
		if err := safetensors.Write(filepath.Join(dir, name), p, nil); err != nil {
			t.Fatal(err)
		}
	}
	if edit != nil {
		edit(weightMap)
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 1}, "weight_map": weightMap})
	os.WriteFile(filepath.Join(dir, IndexFile), b, 0o644)
	return dir
}

func TestSingleAndSharded(t *testing.T) {
	single, err := Open(tinyModel)
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	sharded, err := Open(shard(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer sharded.Close()
	a, b := single.Names(), sharded.Names()
	if len(a) != 357 || strings.Join(a, ",") != strings.Join(b, ",") {
		t.Fatalf("names differ: %d vs %d", len(a), len(b))
	}
	for _, n := range []string{"model.embed_tokens.weight", "model.layers.7.feed_forward.experts.3.w2.weight"} {
		x, err1 := single.Float32(n)
		y, err2 := sharded.Float32(n)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		for i := range x {
			if x[i] != y[i] {
				t.Fatalf("%s[%d] differs", n, i)
			}
		}
	}
	if _, err := single.Bytes("nope"); err == nil {
		t.Error("Bytes of a missing tensor succeeded")
	}
}

func TestShardErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(map[string]string)
		want string
	}{
		{"index lists a missing tensor", func(m map[string]string) { m["model.extra.weight"] = "model-00001-of-00002.safetensors" }, `tensor "model.extra.weight": listed in the index but absent`},
		{"index points to the wrong shard", func(m map[string]string) {
			m["model.embed_tokens.weight"] = "model-00002-of-00002.safetensors"
			if _, ok := m["model.layers.0.ffn_norm.weight"]; ok {
				m["model.layers.0.ffn_norm.weight"] = "model-00001-of-00002.safetensors"
			}
		}, "index says"},
		{"tensor not in index", func(m map[string]string) { delete(m, "model.embedding_norm.weight") }, "not listed in " + IndexFile},
		{"shard path escapes", func(m map[string]string) { m["model.embedding_norm.weight"] = "../x.safetensors" }, "not a plain file name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Open(shard(t, tt.edit))
			var he *Error
			if !errors.As(err, &he) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want an hf.Error containing %q", err, tt.want)
			}
		})
	}
	t.Run("empty directory", func(t *testing.T) {
		_, err := Open(t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "no model.safetensors") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("bad index JSON", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, IndexFile), []byte("{"), 0o644)
		if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "invalid JSON") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestCacheOrigin(t *testing.T) {
	const c = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		dir, repo string
	}{
		{"/x/hub/models--LiquidAI--LFM2-8B-A1B/snapshots/" + c, "LiquidAI/LFM2-8B-A1B"},
		{"/x/hub/models--LiquidAI--LFM2-8B-A1B/snapshots/" + c + "/", "LiquidAI/LFM2-8B-A1B"},
		{"/x/hub/models--LiquidAI--LFM2-8B-A1B/snapshots/main", ""},
		{"/x/hub/models--LiquidAI/snapshots/" + c, ""},
		{"/x/hub/datasets--a--b/snapshots/" + c, ""},
		{"/x/models--a--b/other/" + c, ""},
	}
	for _, tt := range tests {
		repo, commit, ok := CacheOrigin(filepath.FromSlash(tt.dir))
		if ok != (tt.repo != "") || repo != tt.repo || ok && commit != c {
			t.Errorf("CacheOrigin(%s) = %q, %q, %v", tt.dir, repo, commit, ok)
		}
	}
	// A link to a snapshot names the snapshot.
	root := t.TempDir()
	snap := filepath.Join(root, "models--a--b", "snapshots", c)
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "model")
	if err := os.Symlink(snap, link); err != nil {
		t.Skip(err)
	}
	if repo, commit, ok := CacheOrigin(link); !ok || repo != "a/b" || commit != c {
		t.Errorf("CacheOrigin(a link to a snapshot) = %q, %q, %v", repo, commit, ok)
	}
}
