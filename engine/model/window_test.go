package model_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
)

// run feeds tokens[i] to seqs[i] in one Forward of chunk rows (0: the
// default) and returns every position's logits.
func run(t *testing.T, m *model.Model, seqs []*model.Sequence, tokens [][]int, chunk int, snaps [][]int) [][]float32 {
	t.Helper()
	out, err := m.Forward(context.Background(), seqs, tokens, model.ForwardOptions{Logits: model.AllLogits, ChunkSize: chunk, ConvSnapshots: snaps})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// keepAll returns the logits of every position of ids on a sequence that
// keeps every page (model.KeepWindowPool), in one forward.
func keepAll(t *testing.T, m *model.Model, ids []int) []float32 {
	t.Helper()
	return run(t, m, []*model.Sequence{model.KeepWindowPool(m).NewSequence()}, [][]int{ids}, 0, nil)[0]
}

// TestLFM3WindowPagesConstant: on tiny-lfm3 (window 32), a sequence
// prefilled and then decoding holds the same window pages, and the same
// sliding-layer bytes, at 1,024 and 3,008 tokens, within
// Shape.WindowPages; its full pages are one per 64 tokens, and its state
// grows by the full layers' bytes per token alone.
func TestLFM3WindowPagesConstant(t *testing.T) {
	m := lfm3(t)
	sh := m.KVPool().Shape()
	ids := randomTokens(rand.New(rand.NewPCG(44, 2)), 3008, m.Config.VocabSize)
	s := m.NewSequence()
	type held struct{ n, full, window, bytes int }
	var at []held
	for _, n := range []int{1024, 3008} {
		// Prefill in chunks, then one decode step to n.
		if _, err := m.Forward(context.Background(), []*model.Sequence{s}, [][]int{ids[s.Len() : n-1]}, model.ForwardOptions{Logits: model.NoLogits, ChunkSize: 100}); err != nil {
			t.Fatal(err)
		}
		step(t, m, s, ids[n-1])
		full, window := model.HeldPages(s)
		at = append(at, held{n, full, window, s.StateBytes()})
		if full != (n+kv.PageTokens-1)/kv.PageTokens {
			t.Errorf("%d tokens: %d full pages, want one per %d tokens", n, full, kv.PageTokens)
		}
		if window == 0 || window > sh.WindowPages(1) {
			t.Errorf("%d tokens: %d window pages, want 1 to WindowPages(1) = %d", n, window, sh.WindowPages(1))
		}
	}
	t.Logf("window pages: %d at %d tokens, %d at %d; full pages %d and %d", at[0].window, at[0].n, at[1].window, at[1].n, at[0].full, at[1].full)
	if at[0].window != at[1].window {
		t.Errorf("window pages: %d at %d tokens, %d at %d", at[0].window, at[0].n, at[1].window, at[1].n)
	}
	if got, want := at[1].bytes-at[0].bytes, (at[1].n-at[0].n)*sh.FullBytesPerToken(); got != want {
		t.Errorf("state bytes grew by %d from %d to %d tokens; want %d (the full layers' %d bytes per token)", got, at[0].n, at[1].n, want, sh.FullBytesPerToken())
	}
	s.Free()
}

// TestLFM3WindowExact: sequences that give back their window pages give
// the bits of sequences that keep every page, over prompts up to ten
// windows long and 40 decode steps after them, prefilled whole or in chunks,
// alone or in a batch (where a page given back by one sequence is taken
// by another at once).
func TestLFM3WindowExact(t *testing.T) {
	m := lfm3(t)
	ps := lfm3Prompts(t)
	long := []prompt{ps[5], ps[3], ps[4]} // 314, 143 and 66 tokens; the window is 32
	// Decode steps that cross page boundaries: a page given back is
	// taken again by the next one a sequence of the batch opens.
	const decode = 40
	scratch := randomTokens(rand.New(rand.NewPCG(44, 3)), 2*kv.PageTokens, m.Config.VocabSize)
	cases := []struct {
		name  string
		chunk int
		batch bool
	}{
		{"whole, batch", 0, true},
		{"chunks of 7, batch", 7, true},
		{"chunks of 64, alone", 64, false},
		{"chunks of 1, alone", 1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			groups := [][]prompt{long}
			if !c.batch {
				groups = [][]prompt{{long[0]}}
			}
			for _, g := range groups {
				pools := []*model.KVPool{m.KVPool(), model.KeepWindowPool(m)}
				var got, dec [2][][]float32
				var seqs [2][]*model.Sequence
				for k, p := range pools {
					for range g {
						seqs[k] = append(seqs[k], p.NewSequence())
					}
					toks := make([][]int, len(g))
					for i, pr := range g {
						toks[i] = pr.InputIDs
					}
					got[k] = run(t, m, seqs[k], toks, c.chunk, nil)
					dec[k] = make([][]float32, len(g))
					for d := range decode {
						for i, pr := range g {
							toks[i] = []int{pr.InputIDs[d%len(pr.InputIDs)]}
						}
						out := run(t, m, seqs[k], toks, 0, nil)
						for i := range g {
							dec[k][i] = append(dec[k][i], out[i]...)
						}
						if k == 0 {
							// A scratch sequence takes the pages last given
							// back and writes over them: one given back while
							// still read would change the next step's bits.
							x := m.NewSequence()
							if _, err := m.Forward(context.Background(), []*model.Sequence{x}, [][]int{scratch}, model.ForwardOptions{Logits: model.NoLogits}); err != nil {
								t.Fatal(err)
							}
							x.Free()
						}
					}
				}
				for i, pr := range g {
					requireSame(t, pr.Name+", prompt", got[0][i], got[1][i])
					requireSame(t, pr.Name+", decode", dec[0][i], dec[1][i])
					full, window := model.HeldPages(seqs[0][i])
					if seqs[0][i].Len() > 200 && window >= full {
						t.Fatalf("%s: %d tokens hold %d window pages of %d: none given back", pr.Name, seqs[0][i].Len(), window, full)
					}
				}
			}
		})
	}
}

// TestLFM3WindowSequenceOps: Clone, CopySpan+Extend and Rewind of
// sequences whose window moved on continue with the bits of a sequence
// that kept every page and saw the same tokens; CopySpan and Rewind that
// need given-back window pages fail with a *kv.WindowError and leave the
// sequence as it was.
func TestLFM3WindowSequenceOps(t *testing.T) {
	m := lfm3(t)
	V := m.Config.VocabSize
	ids := lfm3Prompts(t)[5].InputIDs // 314 tokens
	tail := func(x []float32, n int) []float32 { return x[len(x)-n*V:] }

	t.Run("clone", func(t *testing.T) {
		s := m.NewSequence()
		run(t, m, []*model.Sequence{s}, [][]int{ids[:150]}, 50, nil)
		c := s.Clone()
		a, b := ids[150:190], ids[200:240]
		got := run(t, m, []*model.Sequence{s, c}, [][]int{a, b}, 7, nil)
		requireSame(t, "original", got[0], tail(keepAll(t, m, slices.Concat(ids[:150], a)), len(a)))
		requireSame(t, "clone", got[1], tail(keepAll(t, m, slices.Concat(ids[:150], b)), len(b)))
	})

	t.Run("span and extend", func(t *testing.T) {
		src := m.NewSequence()
		run(t, m, []*model.Sequence{src}, [][]int{ids[:200]}, 0, [][]int{{64, 128, 192}})
		dst := m.NewSequence()
		for b := range 3 {
			conv, ok := src.ConvAt((b + 1) * 64)
			if !ok {
				t.Fatal("no conv snapshot")
			}
			sp, err := src.CopySpan(b*64, (b+1)*64, conv)
			if err != nil {
				t.Fatal(err)
			}
			if err := dst.Extend(sp); err != nil {
				t.Fatal(err)
			}
			sp.Free()
		}
		if full, window := model.HeldPages(dst); window >= full {
			t.Errorf("extended to %d tokens: %d window pages of %d full: none given back", dst.Len(), window, full)
		}
		got := run(t, m, []*model.Sequence{dst}, [][]int{ids[192:]}, 33, nil)[0]
		requireSame(t, "extended", got, tail(keepAll(t, m, ids), len(ids)-192))
		// Once src moved on, its first block's window pages are gone.
		step(t, m, src, ids[200])
		conv := kv.NewConvState(m.KVPool().Shape(), 64)
		var we *kv.WindowError
		if _, err := src.CopySpan(0, 64, conv); !errors.As(err, &we) {
			t.Fatalf("CopySpan of a block whose window pages were given back: %v, want a *kv.WindowError", err)
		}
	})

	t.Run("rewind", func(t *testing.T) {
		for _, keep := range []int{0, 1, 3, 6} {
			t.Run(fmt.Sprint(keep), func(t *testing.T) {
				s := m.NewSequence()
				run(t, m, []*model.Sequence{s}, [][]int{ids[:250]}, 50, nil)
				draft := []int{500, 501, 502, 503, 504, 505}
				run(t, m, []*model.Sequence{s}, [][]int{draft}, 0, [][]int{{250, 251, 252, 253, 254, 255, 256}})
				n := 250 + keep
				// Far back: refused, the sequence unchanged.
				var we *kv.WindowError
				if err := s.Rewind(100, kv.NewConvState(m.KVPool().Shape(), 100)); !errors.As(err, &we) || s.Len() != 256 {
					t.Fatalf("Rewind to 100 of 256 tokens: %v (length %d), want a *kv.WindowError", err, s.Len())
				}
				conv, ok := s.ConvAt(n)
				if !ok {
					t.Fatal("no conv snapshot")
				}
				if err := s.Rewind(n, conv); err != nil {
					t.Fatal(err)
				}
				next := ids[260:300]
				got := run(t, m, []*model.Sequence{s}, [][]int{next}, 9, nil)[0]
				requireSame(t, "rewound", got, tail(keepAll(t, m, slices.Concat(ids[:250], draft[:keep], next)), len(next)))
			})
		}
	})
}
