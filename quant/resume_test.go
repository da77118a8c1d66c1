package quant

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/format/lfmq1"
)

// copyTree copies the directory tree src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// damage rewrites the file at path with edit applied to its bytes.
func damage(t *testing.T, path string, edit func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, edit(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

func truncateHalf(b []byte) []byte { return b[:len(b)/2] }

// flipNear flips one bit of the byte n bytes before the end.
func flipNear(n int) func([]byte) []byte {
	return func(b []byte) []byte {
		b[len(b)-n] ^= 0x01
		return b
	}
}

// TestGPTQResumeDamaged resumes copies of one interrupted run (MoE layers
// 2 to 6 of 2 to 7 done; the damage is to late layers, to keep the
// recomputation short) after damaging a file of its partial directory. A
// truncated or corrupted layer file is recovered: the layer and the ones
// after it are computed again, a warning names the file and what is wrong,
// and the checkpoint is byte-identical to an uninterrupted run's. A
// damaged progress record, which every stored layer is trusted through, is
// refused with an error naming it, and the partial run is left as it was.
func TestGPTQResumeDamaged(t *testing.T) {
	base, _ := tinyGPTQ(t, fastSeqs)
	master := filepath.Join(t.TempDir(), "interrupted")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := Quantize(ctx, Options{ModelDir: tinyModel, OutDir: master, Method: GPTQ, CreatedBy: "test", GPTQ: gptqOptions(fastSeqs),
		Progress: &cancelAfter{layer: 6, cancel: cancel}})
	if pe := new(PartialError); !errors.As(err, &pe) || pe.Layers != 5 {
		t.Fatalf("interrupted run: err = %v, want a PartialError with 5 layers", err)
	}

	tests := []struct {
		name string
		file string // in the partial directory
		edit func([]byte) []byte
		// speed changes a setting that changes no byte, which must not
		// stand in the way of the resume.
		speed func(*GPTQOptions)
		// For a recovery: the layers taken from the partial run and the
		// warning's text. For a refusal: the problem's text.
		resumed []int
		want    string
	}{
		{"truncated experts file", "experts-05.safetensors", truncateHalf, func(g *GPTQOptions) { g.BlockSize = 16 },
			[]int{2, 3, 4}, "experts-05.safetensors has 225700 bytes, the interrupted run wrote 451400"},
		{"flipped byte in experts file", "experts-06.safetensors", flipNear(100), nil,
			[]int{2, 3, 4, 5}, "experts-06.safetensors has sha256 "},
		{"flipped byte in layer record", ".resume/layer-06.json", flipNear(20), nil,
			[]int{2, 3, 4, 5}, "layer-06.json has sha256 "},
		{"truncated progress record", ".resume/progress.json", truncateHalf, nil,
			nil, "not a progress record"},
		{"flipped layer number in progress record", ".resume/progress.json", func(b []byte) []byte {
			i := bytes.Index(b, []byte(`"layer": 3,`))
			if i < 0 {
				t.Fatalf("no layer 3 in the progress record:\n%s", b)
			}
			b[i+len(`"layer": `)] ^= 0x01 // 3 → 2: still valid JSON
			return b
		}, nil, nil, "its content has sha256 "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "resumed")
			partial := lfmq1.PartialDir(out)
			copyTree(t, lfmq1.PartialDir(master), partial)
			path := filepath.Join(partial, tt.file)
			damage(t, path, tt.edit)
			g := gptqOptions(fastSeqs)
			g.Resume = true
			if tt.speed != nil {
				tt.speed(&g)
			}
			rec := &progressLog{}
			res, err := Quantize(context.Background(), Options{ModelDir: tinyModel, OutDir: out, Method: GPTQ, CreatedBy: "test", GPTQ: g, Progress: rec})
			if strings.HasSuffix(tt.file, progressFile) {
				var de *ResumeDamagedError
				if !errors.As(err, &de) || de.File != path || !strings.Contains(de.Problem, tt.want) {
					t.Fatalf("err = %v, want a ResumeDamagedError naming %s: %q", err, path, tt.want)
				}
				t.Log(err)
				if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "run again without --resume") {
					t.Errorf("message %q does not name the file and the way out", msg)
				}
				if _, err := os.Stat(filepath.Join(partial, "experts-02.safetensors")); err != nil {
					t.Errorf("the refused partial run was not left alone: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Log(res.GPTQ.Warnings)
			var resumed []int
			for _, l := range res.GPTQ.Layers {
				if l.Resumed {
					resumed = append(resumed, l.Layer)
				}
			}
			if !slices.Equal(resumed, tt.resumed) {
				t.Errorf("resumed layers %v, want %v", resumed, tt.resumed)
			}
			if len(res.GPTQ.Warnings) != 1 || !strings.Contains(res.GPTQ.Warnings[0], path) || !strings.Contains(res.GPTQ.Warnings[0], tt.want) {
				t.Errorf("warnings %q, want one naming %s: %q", res.GPTQ.Warnings, path, tt.want)
			}
			// The damage is told when it is found, before the layer it
			// hit is computed again, not only in the report at the end.
			warned := slices.IndexFunc(rec.events, func(ev string) bool { return strings.HasPrefix(ev, "warn ") && strings.Contains(ev, path) })
			redo := slices.IndexFunc(rec.events, func(ev string) bool {
				return strings.HasPrefix(ev, fmt.Sprintf("stage %d ", tt.resumed[len(tt.resumed)-1]+1)) && !strings.HasSuffix(ev, "resumed")
			})
			if warned < 0 || redo < 0 || warned > redo {
				t.Errorf("the warning came at event %d, the damaged layer's recomputation at %d: %q", warned, redo, rec.events)
			}
			sameFiles(t, base, out)
		})
	}
}
