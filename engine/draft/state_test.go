package draft_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
)

// sameBlock reports how two blocks differ, bit for bit: drafted ids,
// confidence logits, hidden rows and logits ("" when they are the same).
func sameBlock(a, b *draft.Block) string {
	bits := func(x, y []float32) bool {
		return slices.EqualFunc(x, y, func(p, q float32) bool { return math.Float32bits(p) == math.Float32bits(q) })
	}
	switch {
	case !slices.Equal(a.Tokens, b.Tokens):
		return "drafted ids"
	case !bits(a.Confidence, b.Confidence):
		return "confidence logits"
	case !bits(a.Hidden, b.Hidden):
		return "hidden rows"
	case !bits(a.Logits, b.Logits) || len(a.Logits) == 0:
		return "logits"
	}
	return ""
}

// feed runs toks through seq and returns the target's argmax after the
// last, with conv snapshots after each token so that seq can be rewound
// into them.
func feed(t *testing.T, m *model.Model, seq *model.Sequence, toks []int) int {
	t.Helper()
	var snaps []int
	for i := range toks {
		snaps = append(snaps, seq.Len()+i+1)
	}
	out, err := m.Forward(context.Background(), []*model.Sequence{seq}, [][]int{toks}, model.ForwardOptions{ConvSnapshots: [][]int{snaps}})
	if err != nil {
		t.Fatal(err)
	}
	return kernels.Argmax(out[0])
}

// TestStateDraftsTheSame: the drafter's context travels with a
// sequence's state. A clone, a sequence extended from a span (shared,
// copied or marshalled) and a sequence rewound past rejected tokens draft
// bit for bit the block the original drafts, and keep doing so after the
// same tokens are fed to both; a clone that goes its own way leaves the
// original's block as it was (copy on write of the drafter's slots).
func TestStateDraftsTheSame(t *testing.T) {
	m, d := loadPair(t, kv.F32)
	stateDraftsTheSame(t, m, d, nil, nil)
}

// stateDraftsTheSame is TestStateDraftsTheSame's check of m and d. With
// cpu set (m on a device, cpu the same target on the CPU engine with its
// drafter cd), the original also drafts the block of a CPU sequence of
// the same tokens and takes as many state bytes, and copies made from a
// CPU sequence's span (as it is, and marshalled) draft the same too.
func stateDraftsTheSame(t *testing.T, m *model.Model, d *draft.Drafter, cpu *model.Model, cd *draft.Drafter) {
	spec := readSpec(t)
	for _, p := range []refPrompt{spec.Prompts[1], spec.Prompts[5]} {
		prompt := p.InputIDs
		L := len(prompt)
		t.Run(p.Name, func(t *testing.T) {
			orig := m.NewSequence()
			anchor := feed(t, m, orig, prompt)
			want, err := d.Propose([]*model.Sequence{orig}, []int{anchor}, true)
			if err != nil {
				t.Fatal(err)
			}
			conv, ok := orig.ConvAt(L)
			if !ok {
				t.Fatal("no conv state")
			}
			// rejected are tokens the target ran and then dropped: the
			// block's own drafts (what a verify rejects) and a mask id.
			rejected := append(slices.Clone(want.Draft(0)), d.Config.MaskTokenID)
			// The continuation fed to the original and each copy after
			// the first comparison: the anchor and the target's token
			// after it.
			refeed := []int{anchor, p.Steps[0].TargetGreedy[0]}

			cases := []struct {
				name string
				make func(t *testing.T) *model.Sequence
			}{
				{"clone", func(*testing.T) *model.Sequence { return orig.Clone() }},
				{"span shared", func(t *testing.T) *model.Sequence {
					sp, err := orig.CopySpan(0, L, conv)
					if err != nil {
						t.Fatal(err)
					}
					s := extendWith(t, m, sp)
					sp.Free()
					return s
				}},
				{"span after a page of its own", func(t *testing.T) *model.Sequence {
					return extendAfter(t, m, orig, prompt, min(kv.PageTokens, L-1), conv)
				}},
				{"span copied mid-page", func(t *testing.T) *model.Sequence {
					return extendAfter(t, m, orig, prompt, L/2+1, conv)
				}},
				{"span marshalled", func(t *testing.T) *model.Sequence {
					sp, err := orig.CopySpan(0, L, conv)
					if err != nil {
						t.Fatal(err)
					}
					data, err := sp.MarshalBinary()
					sp.Free()
					if err != nil {
						t.Fatal(err)
					}
					if string(data[:12]) != "lfmq-span-3\x00" {
						t.Fatalf("span magic %q: a span with the drafter's context is version 3", data[:12])
					}
					back, err := m.UnmarshalSpan(data)
					if err != nil {
						t.Fatal(err)
					}
					s := extendWith(t, m, back)
					back.Free()
					return s
				}},
				{"rewound", func(t *testing.T) *model.Sequence {
					s := m.NewSequence()
					feed(t, m, s, prompt)
					c, ok := s.ConvAt(L)
					if !ok {
						t.Fatal("no conv state")
					}
					feed(t, m, s, rejected)
					if err := s.Rewind(L, c); err != nil {
						t.Fatal(err)
					}
					return s
				}},
			}
			if cpu != nil {
				cs := cpu.NewSequence()
				if a := feed(t, cpu, cs, prompt); a != anchor {
					t.Fatalf("first token %d on the CPU, %d here", a, anchor)
				}
				if cs.StateBytes() != orig.StateBytes() {
					t.Errorf("state of %d bytes on the CPU, %d here", cs.StateBytes(), orig.StateBytes())
				}
				blk, err := cd.Propose([]*model.Sequence{cs}, []int{anchor}, true)
				if err != nil {
					t.Fatal(err)
				}
				if diff := sameBlock(blk, want); diff != "" {
					t.Errorf("the block's %s differ from a CPU sequence's", diff)
				}
				// And the other way: a CPU sequence extended with the
				// original's span.
				sp, err := orig.CopySpan(0, L, conv)
				if err != nil {
					t.Fatal(err)
				}
				ce := extendWith(t, cpu, sp)
				if blk, err = cd.Propose([]*model.Sequence{ce}, []int{anchor}, true); err != nil {
					t.Fatal(err)
				}
				if diff := sameBlock(blk, want); diff != "" {
					t.Errorf("a CPU sequence extended with the span: the block's %s differ", diff)
				}
				ce.Free()
				cspan, err := cs.CopySpan(0, L, conv)
				if err != nil {
					t.Fatal(err)
				}
				data, err := cspan.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				cases = append(cases, struct {
					name string
					make func(t *testing.T) *model.Sequence
				}{"a CPU sequence's span", func(t *testing.T) *model.Sequence {
					s := extendWith(t, m, cspan)
					return s
				}}, struct {
					name string
					make func(t *testing.T) *model.Sequence
				}{"a CPU sequence's span marshalled", func(t *testing.T) *model.Sequence {
					back, err := m.UnmarshalSpan(data)
					if err != nil {
						t.Fatal(err)
					}
					s := extendWith(t, m, back)
					return s
				}})
			}
			got := make([]*model.Sequence, len(cases))
			for i, c := range cases {
				got[i] = c.make(t)
				if got[i].Len() != L {
					t.Fatalf("%s: length %d, want %d", c.name, got[i].Len(), L)
				}
				blk, err := d.Propose([]*model.Sequence{got[i]}, []int{anchor}, true)
				if err != nil {
					t.Fatal(err)
				}
				if diff := sameBlock(blk, want); diff != "" {
					t.Errorf("%s: the block's %s differ from the original's", c.name, diff)
				}
			}

			// A clone that runs other tokens writes into the original's
			// last, shared page: it must copy it, drafter slots and all.
			other := orig.Clone()
			feed(t, m, other, rejected)
			if blk, _ := d.Propose([]*model.Sequence{orig}, []int{anchor}, true); sameBlock(blk, want) != "" {
				t.Errorf("a clone's tokens changed the original's block")
			}
			other.Free()

			// The same tokens fed to the original and every copy: the
			// rewound sequence's rejected positions are overwritten, and
			// each drafts the original's next block.
			next := feed(t, m, orig, refeed)
			want2, err := d.Propose([]*model.Sequence{orig}, []int{next}, true)
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range cases {
				if n := feed(t, m, got[i], refeed); n != next {
					t.Errorf("%s: target's next token %d, original's %d", c.name, n, next)
				}
				blk, err := d.Propose([]*model.Sequence{got[i]}, []int{next}, true)
				if err != nil {
					t.Fatal(err)
				}
				if diff := sameBlock(blk, want2); diff != "" {
					t.Errorf("%s, after %v: the block's %s differ from the original's", c.name, refeed, diff)
				}
				got[i].Free()
			}
			// Both draft the same as a sequence that never saw the
			// rejected tokens and ran the prompt and continuation as one.
			cold := m.NewSequence()
			feed(t, m, cold, append(slices.Clone(prompt), refeed...))
			blk, err := d.Propose([]*model.Sequence{cold}, []int{next}, true)
			if err != nil {
				t.Fatal(err)
			}
			if diff := sameBlock(blk, want2); diff != "" {
				t.Errorf("a cold run of prompt and continuation: the block's %s differ", diff)
			}
			cold.Free()
			orig.Free()
		})
	}
}

// extendWith returns a new sequence of m extended with sp.
func extendWith(t *testing.T, m *model.Model, sp *kv.Span) *model.Sequence {
	t.Helper()
	s := m.NewSequence()
	if err := s.Extend(sp); err != nil {
		t.Fatal(err)
	}
	return s
}

// extendAfter returns a sequence that ran prompt[:n] itself and was then
// extended with orig's span [n, len(prompt)).
func extendAfter(t *testing.T, m *model.Model, orig *model.Sequence, prompt []int, n int, conv *kv.ConvState) *model.Sequence {
	t.Helper()
	s := m.NewSequence()
	feed(t, m, s, prompt[:n])
	sp, err := orig.CopySpan(n, len(prompt), conv)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Free()
	if err := s.Extend(sp); err != nil {
		t.Fatal(err)
	}
	return s
}
