package draft_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/lfmq/lfmq/engine/device/opencl"
	"github.com/lfmq/lfmq/engine/device/opencl/opencltest"
	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
)

// openCL is the test binary's OpenCL device, or a skip (opencltest.Open).
func openCL(t testing.TB) *opencl.Device { return opencltest.Open(t) }

// loadPairOnDevice loads the fixture's target onto the OpenCL device with
// KV cache format dt and attaches the fixture's drafter, whose products
// (its context included) run on threads host threads.
func loadPairOnDevice(t testing.TB, dt kv.DType, threads int) (*model.Model, *draft.Drafter) {
	t.Helper()
	return loadPairWith(t, load.Options{KVCacheDType: dt, Threads: threads, Device: openCL(t)})
}

// TestDeviceReferenceRun runs the fixture's greedy speculative run on the
// OpenCL device and on the CPU side by side, in every KV cache format: at
// every step of every prompt the device drafts the CPU's block bit for bit
// (ids, confidence logits, hidden rows, logits), its target gives the
// CPU's greedy ids and so the same accepted count. With a float32 cache
// both are also the reference's (drafted ids, accepted counts, confidence
// within 1e-4, the 48 tokens plain greedy's), as TestReferenceRun checks
// for the CPU alone.
func TestDeviceReferenceRun(t *testing.T) {
	spec := readSpec(t)
	for _, dt := range kv.DTypes {
		t.Run(dt.String(), func(t *testing.T) {
			dm, dd := loadPairOnDevice(t, dt, 2)
			cm, cd := loadPair(t, dt)
			if _, ok := dm.DeviceInfo(); !ok {
				t.Fatal("the target is not on the device")
			}
			for _, p := range spec.Prompts {
				t.Run(p.Name, func(t *testing.T) {
					devSeq, cpuSeq := dm.NewSequence(), cm.NewSequence()
					anchor := feed(t, dm, devSeq, p.InputIDs)
					if a := feed(t, cm, cpuSeq, p.InputIDs); a != anchor {
						t.Fatalf("first token %d on the device, %d on the CPU", anchor, a)
					}
					got := []int{anchor}
					for i := 0; len(got) < spec.NewTokens; i++ {
						if devSeq.Len() != cpuSeq.Len() {
							t.Fatalf("step %d: context %d on the device, %d on the CPU", i, devSeq.Len(), cpuSeq.Len())
						}
						var ref refStep
						if dt == kv.F32 {
							if i >= len(p.Steps) {
								t.Fatalf("step %d: the reference stopped after %d steps", i, len(p.Steps))
							}
							if ref = p.Steps[i]; devSeq.Len() != ref.ContextLen || anchor != ref.Anchor {
								t.Fatalf("step %d: context %d, anchor %d; reference %d, %d", i, devSeq.Len(), anchor, ref.ContextLen, ref.Anchor)
							}
						}
						blk, g, a := step(t, dm, dd, devSeq, anchor, true)
						cblk, cg, ca := step(t, cm, cd, cpuSeq, anchor, true)
						if diff := sameBlock(blk, cblk); diff != "" {
							t.Fatalf("step %d: the device's block's %s differ from the CPU's", i, diff)
						}
						if !slices.Equal(g, cg) || a != ca {
							t.Fatalf("step %d: target %v accepted %d on the device; %v accepted %d on the CPU", i, g, a, cg, ca)
						}
						if dt == kv.F32 {
							if !slices.Equal(blk.Draft(0), ref.Drafted) || !slices.Equal(g, ref.TargetGreedy) || a != ref.Accepted {
								t.Fatalf("step %d: drafted %v target %v accepted %d; reference %v, %v, %d", i, blk.Draft(0), g, a, ref.Drafted, ref.TargetGreedy, ref.Accepted)
							}
							for k, c := range blk.Conf(0) {
								if math.Abs(float64(c-ref.Confidence[k])) > 1e-4 {
									t.Errorf("step %d: confidence %d is %g, reference %g", i, k, c, ref.Confidence[k])
								}
							}
						}
						got = append(got, g[:a+1]...)
						anchor = got[len(got)-1]
					}
					if dt == kv.F32 {
						if got = got[:spec.NewTokens]; !slices.Equal(got, p.OutputIDs) || !slices.Equal(got, p.Plain) {
							t.Fatalf("output %v\nreference %v\nplain greedy %v", got, p.OutputIDs, p.Plain)
						}
					}
				})
			}
		})
	}
}

// TestDeviceBatchDrafts: on the device, sequences prefilled together in
// small chunks and drafted in one Propose call draft, each, the block the
// CPU drafts for it alone: the device's drafter context does not depend on
// the batch, the chunk or the thread count (one host thread here, two on
// the CPU).
func TestDeviceBatchDrafts(t *testing.T) {
	dm, dd := loadPairOnDevice(t, kv.F32, 1)
	cm, cd := loadPair(t, kv.F32)
	batchDraftsAsAlone(t, dm, dd, cm, cd)
}

// TestBatchDrafts: on the CPU, the fixture's six prompts prefilled
// together in chunks of 37 on a 1-thread model draft, in one Propose over
// all six, what each prompt drafts alone on a 2-thread model, bit for bit:
// the drafter's context and block do not depend on batch, chunk or
// threads.
func TestBatchDrafts(t *testing.T) {
	m, d := loadPairWith(t, load.Options{KVCacheDType: kv.BF16, Threads: 1})
	cm, cd := loadPair(t, kv.BF16)
	batchDraftsAsAlone(t, m, d, cm, cd)
}

// batchDraftsAsAlone prefills the fixture's prompts together in chunks of
// 37 on m and drafts all their blocks in one Propose of d, then checks
// each against the block cd drafts for the prompt alone on cm.
func batchDraftsAsAlone(t *testing.T, m *model.Model, d *draft.Drafter, cm *model.Model, cd *draft.Drafter) {
	spec := readSpec(t)
	var seqs []*model.Sequence
	var toks [][]int
	for _, p := range spec.Prompts {
		seqs, toks = append(seqs, m.NewSequence()), append(toks, p.InputIDs)
	}
	if _, err := m.Forward(context.Background(), seqs, toks, model.ForwardOptions{Logits: model.NoLogits, ChunkSize: 37}); err != nil {
		t.Fatal(err)
	}
	pending := make([]int, len(seqs))
	for i, p := range spec.Prompts {
		pending[i] = p.Steps[0].Anchor
	}
	blk, err := d.Propose(seqs, pending, true)
	if err != nil {
		t.Fatal(err)
	}
	B, H, V := blk.B, d.Config.HiddenSize, d.Config.VocabSize
	for i, p := range spec.Prompts {
		alone := cm.NewSequence()
		feed(t, cm, alone, p.InputIDs)
		want, err := cd.Propose([]*model.Sequence{alone}, pending[i:i+1], true)
		if err != nil {
			t.Fatal(err)
		}
		row := &draft.Block{N: 1, B: B, Tokens: blk.Draft(i), Confidence: blk.Conf(i),
			Hidden: blk.Hidden[i*B*H : (i+1)*B*H], Logits: blk.Logits[i*B*V : (i+1)*B*V]}
		if diff := sameBlock(row, want); diff != "" {
			t.Errorf("%s: in the batch the block's %s differ from the block drafted alone", p.Name, diff)
		}
	}
}

// TestDeviceStateDraftsTheSame is TestStateDraftsTheSame on the OpenCL
// device: a clone, sequences extended from the device's spans (as they
// are and marshalled) and from a CPU sequence's, and a sequence rewound
// past rejected tokens draft bit for bit the original's block, which is
// the CPU's; the device's state takes the CPU's bytes.
func TestDeviceStateDraftsTheSame(t *testing.T) {
	m, d := loadPairOnDevice(t, kv.F32, 2)
	cm, cd := loadPair(t, kv.F32)
	stateDraftsTheSame(t, m, d, cm, cd)
}
