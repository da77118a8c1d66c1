package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/dtype"
)

// attnCase is a synthetic attention problem: one sequence's cache of n
// positions and, for rows at positions [n−rows, n), their queries.
type attnCase struct {
	G, Hkv, d, n int
	w            int       // sliding window (0: none)
	k, v, q      []float32 // [n, Hkv·d], [n, Hkv·d], [n, Hkv·G·d]
}

func newAttnCase(rng *rand.Rand, G, Hkv, d, n int) *attnCase {
	c := &attnCase{G: G, Hkv: Hkv, d: d, n: n}
	rnd := func(k int, s float32) []float32 {
		x := make([]float32, k)
		for i := range x {
			x[i] = float32(rng.NormFloat64()) * s
		}
		return x
	}
	// Scores spread over several units, as normed and rotated keys give.
	c.k, c.v, c.q = rnd(n*Hkv*d, 1), rnd(n*Hkv*d, 1), rnd(n*Hkv*G*d, 0.6)
	return c
}

// run computes attention for rows at positions [from, n) through
// Model.attend, as segments of at most chunk rows (a prompt chunked at
// that size; chunk 1 is decode), each segment seeing the cache up to its
// last row, with a pool of the given threads.
func (c *attnCase) run(from, chunk, threads int) []float32 {
	return c.runAs(kv.F32, from, chunk, threads)
}

// runAs is run with the cache stored in format dt.
func (c *attnCase) runAs(dt kv.DType, from, chunk, threads int) []float32 {
	cfg := &config.Config{HeadDim: c.d, NumHeads: c.Hkv * c.G, NumKVHeads: c.Hkv, NumLayers: 1, LayerKinds: []config.LayerKind{config.Attention}}
	if c.w > 0 {
		cfg.SlidingWindow, cfg.Sliding = c.w, []bool{true}
	}
	m := &Model{Config: cfg, pool: kernels.NewPool(threads), kvDType: dt}
	m.run = cpuRunner{m}
	defer m.pool.Close()
	ws := &workspace{}
	qd := c.Hkv * c.G * c.d
	// The whole cache is written at once: a row at position p reads
	// positions up to p only.
	s := m.NewKVPool(0).NewSequence()
	if err := s.state.(*cpuState).table.Grow(0, c.n); err != nil {
		panic(err)
	}
	s.state.(*cpuState).table.Write(0, 0, c.k, c.v)
	out := make([]float32, (c.n-from)*qd)
	for t0 := from; t0 < c.n; t0 += chunk {
		rows := min(chunk, c.n-t0)
		segs := []Segment{{s: s, Toks: make([]int, rows), Start: t0}}
		m.attend(ws, 0, segs, c.q[t0*qd:(t0+rows)*qd], out[(t0-from)*qd:])
	}
	return out
}

// reference is softmax attention in float64 for the row at position p and
// query head h, over positions max(0, p−w+1)..p with a window w.
func (c *attnCase) reference(p, h int) []float64 {
	kvd, qd, d := c.Hkv*c.d, c.Hkv*c.G*c.d, c.d
	kh := h / c.G
	q := c.q[p*qd+h*d:][:d]
	sc := make([]float64, p+1)
	lo := 0
	if c.w > 0 {
		lo = max(0, p-c.w+1)
	}
	mx := math.Inf(-1)
	for j := range sc {
		if j < lo {
			sc[j] = math.Inf(-1)
			continue
		}
		var s float64
		for i, x := range q {
			s += float64(x) * float64(c.k[j*kvd+kh*d+i])
		}
		sc[j] = s / math.Sqrt(float64(d))
		mx = math.Max(mx, sc[j])
	}
	o := make([]float64, d)
	var sum float64
	for j, s := range sc {
		e := math.Exp(s - mx)
		sum += e
		for i := range o {
			o[i] += e * float64(c.v[j*kvd+kh*d+i])
		}
	}
	for i := range o {
		o[i] /= sum
	}
	return o
}

// TestAttendMatchesReference: blocked attention agrees with float64
// softmax attention to float32 accuracy, for rows whose keys span several
// blocks and splits (positions up to 2,600: three splits of 1,024), for a
// group of four query heads (the four-at-once score path) and of two.
func TestAttendMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 82))
	for _, tc := range []struct{ G, Hkv, d, n int }{{4, 2, 64, 2600}, {2, 2, 32, 1100}, {3, 1, 40, 700}} {
		c := newAttnCase(rng, tc.G, tc.Hkv, tc.d, tc.n)
		from := tc.n - 40
		got := c.run(from, 16, 2)
		qd := c.Hkv * c.G * c.d
		var worst float64
		for p := from; p < c.n; p += 13 {
			for h := range c.Hkv * c.G {
				want := c.reference(p, h)
				for i, w := range want {
					worst = math.Max(worst, math.Abs(float64(got[(p-from)*qd+h*c.d+i])-w))
				}
			}
		}
		// Outputs are averages of unit-scale values: float32 rounding
		// over a few thousand terms stays far below 1e-5.
		if worst > 1e-5 {
			t.Errorf("G=%d d=%d n=%d: max |Δ| %.3g against float64 attention", tc.G, tc.d, tc.n, worst)
		}
	}
}

// TestAttendInvariance: the same bits for every row whatever the chunking
// (decode rows by splits, prompt chunks by row tiles, chunk boundaries off
// the block and split grid, a prompt tile whose rows straddle a split
// boundary) and the thread count.
func TestAttendInvariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(83, 84))
	for _, tc := range []struct{ G, Hkv, d, n int }{{4, 2, 64, 2200}, {2, 2, 32, 1300}, {4, 1, 64, 1080}} {
		c := newAttnCase(rng, tc.G, tc.Hkv, tc.d, tc.n)
		from := tc.n - 70
		want := c.run(from, 70, 1)
		for _, v := range []struct{ chunk, threads int }{{1, 1}, {1, 3}, {3, 2}, {9, 2}, {17, 4}, {70, 3}} {
			got := c.run(from, v.chunk, v.threads)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s: value %d is %g, whole-prompt single-thread %g", fmt.Sprintf("G=%d chunk %d threads %d", tc.G, v.chunk, v.threads), i, got[i], want[i])
				}
			}
		}
	}
}

// TestAttendKVFormats: a bf16 or bfp8 cache is the float32 cache with each
// value rounded once by the codec (dtype.Float32ToBF16; bfp.QuantizeGroup
// over 16 consecutive values of a head), then read exactly: attention over
// it gives the bits of attention over a float32 cache of those rounded
// values, at any chunking and thread count.
func TestAttendKVFormats(t *testing.T) {
	rng := rand.New(rand.NewPCG(85, 86))
	round := map[kv.DType]func(x []float32) []float32{kv.BF16: roundBF16, kv.BFP8: roundBFP8}
	for _, dt := range []kv.DType{kv.BF16, kv.BFP8} {
		c := newAttnCase(rng, 4, 2, 64, 1200)
		rounded := *c
		rounded.k, rounded.v = round[dt](c.k), round[dt](c.v)
		from := c.n - 30
		want := rounded.run(from, 30, 1)
		for _, v := range []struct{ chunk, threads int }{{30, 1}, {1, 2}, {7, 3}} {
			got := c.runAs(dt, from, v.chunk, v.threads)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s, chunk %d, %d threads: value %d is %g; float32 attention over the rounded cache gives %g", dt, v.chunk, v.threads, i, got[i], want[i])
				}
			}
		}
	}
}

// TestAttendTilesMatchRows: a prompt chunk's rows give the same bits on the
// tile kernels (attnTiles) as on reduceBlock's one-query kernels row by
// row, for groups of 4, 2 and 8 query heads, head widths 64 and 32, tiles
// that straddle split boundaries and start off the block grid, and every
// KV format.
func TestAttendTilesMatchRows(t *testing.T) {
	if !attnTiles {
		t.Log("the tile kernels have no SIMD path here: comparing their Go references with reduceBlock")
	}
	saved := attnTiles
	defer func() { attnTiles = saved }()
	rng := rand.New(rand.NewPCG(87, 88))
	for _, tc := range []struct{ G, Hkv, d, n, from, chunk int }{
		{4, 2, 64, 2300, 2300 - 300, 100}, {2, 2, 32, 1100, 1100 - 90, 45}, {8, 1, 64, 1060, 1060 - 80, 80}, {4, 1, 64, 70, 0, 70},
	} {
		c := newAttnCase(rng, tc.G, tc.Hkv, tc.d, tc.n)
		for _, dt := range kv.DTypes {
			attnTiles = false
			want := c.runAs(dt, tc.from, tc.chunk, 2)
			attnTiles = true
			got := c.runAs(dt, tc.from, tc.chunk, 3)
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("G=%d d=%d n=%d %s: value %d is %g on the tiles, %g row by row", tc.G, tc.d, tc.n, dt, i, got[i], want[i])
			}
		}
	}
}

// TestAttendSplitRows: decode rows give the same bits when their split
// tasks run splitRows (all the row's query heads at once) as when each
// head runs reduceBlock, in every KV format and, for a bfloat16 cache,
// read in place or widened block by block first; for groups of 4 and 8
// query heads, head widths 64 and 128, 8 to 32 query heads in all (the
// column kernels' SIMD part, its Go tail, and both), rows one and three at
// a time across split boundaries, with the last block cut anywhere.
func TestAttendSplitRows(t *testing.T) {
	savedRows, savedBF16 := attnSplitRows, attnBF16InPlace
	defer func() { attnSplitRows, attnBF16InPlace = savedRows, savedBF16 }()
	on := func(int) bool { return true }
	off := func(int) bool { return false }
	rng := rand.New(rand.NewPCG(89, 90))
	for _, tc := range []struct{ G, Hkv, d, n int }{{4, 2, 64, 2100}, {8, 1, 128, 1090}, {4, 3, 64, 1030}, {4, 8, 64, 2100}, {8, 4, 64, 1100}, {4, 5, 128, 1070}} {
		c := newAttnCase(rng, tc.G, tc.Hkv, tc.d, tc.n)
		from := tc.n - 21
		for _, dt := range kv.DTypes {
			attnSplitRows, attnBF16InPlace = off, off
			want := c.runAs(dt, from, 1, 2)
			for _, inPlace := range []bool{true, false} {
				attnSplitRows, attnBF16InPlace = on, off
				if inPlace {
					attnBF16InPlace = on
				}
				for _, chunk := range []int{1, 3} {
					got := c.runAs(dt, from, chunk, 3)
					if i := firstDiff(got, want); i >= 0 {
						t.Fatalf("G=%d d=%d n=%d %s (bf16 in place %v) chunk %d: value %d is %g by splitRows, %g by reduceBlock", tc.G, tc.d, tc.n, dt, inPlace, chunk, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// firstDiff is the first index where a and b differ bitwise, or −1.
func firstDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// windowCases are sliding windows against the block (64) and split (1,024)
// grids: shorter than a block, a block exactly, across several blocks, and
// across split boundaries (one and two of them).
var windowCases = []struct{ G, Hkv, d, n, w int }{
	{4, 2, 64, 2200, 1}, {4, 2, 64, 2200, 37}, {2, 2, 32, 1100, 64}, {4, 1, 64, 1100, 100},
	{4, 2, 64, 2200, 700}, {2, 2, 32, 2200, 1500}, {4, 2, 64, 2200, 2100},
}

// TestAttendWindowMatchesReference: a sliding layer's rows attend over
// their window alone, within float32 accuracy of float64 attention over it.
func TestAttendWindowMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(95, 96))
	for _, tc := range windowCases {
		c := newAttnCase(rng, tc.G, tc.Hkv, tc.d, tc.n)
		c.w = tc.w
		from := tc.n - 70
		got := c.run(from, 23, 2)
		qd := c.Hkv * c.G * c.d
		var worst float64
		for p := from; p < c.n; p += 3 {
			for h := range c.Hkv * c.G {
				want := c.reference(p, h)
				for i, w := range want {
					worst = math.Max(worst, math.Abs(float64(got[(p-from)*qd+h*c.d+i])-w))
				}
			}
		}
		if worst > 1e-5 {
			t.Errorf("window %d, G=%d d=%d n=%d: max |Δ| %.3g against float64 attention over the window", tc.w, tc.G, tc.d, tc.n, worst)
		}
	}
}

// TestAttendWindowInvariance: with a sliding window, the same bits for every
// row at any chunking (decode rows by splits, prompt chunks by row tiles
// and by the tile kernels) and thread count, and, in every KV format, the
// bits of float32 attention over the rounded cache, whether a decode row's
// splits run all its query heads at once (splitRows, a bfloat16 cache read
// in place) or head by head (reduceBlock, on widened rows).
func TestAttendWindowInvariance(t *testing.T) {
	savedTiles, savedRows, savedBF16 := attnTiles, attnSplitRows, attnBF16InPlace
	defer func() { attnTiles, attnSplitRows, attnBF16InPlace = savedTiles, savedRows, savedBF16 }()
	rng := rand.New(rand.NewPCG(97, 98))
	round := map[kv.DType]func(x []float32) []float32{
		kv.F32:  func(x []float32) []float32 { return x },
		kv.BF16: roundBF16,
		kv.BFP8: roundBFP8,
	}
	for _, tc := range windowCases {
		c := newAttnCase(rng, tc.G, tc.Hkv, tc.d, tc.n)
		c.w = tc.w
		from := tc.n - 90
		attnTiles = false
		want := c.run(from, 90, 1)
		for _, dt := range kv.DTypes {
			rounded := *c
			rounded.k, rounded.v = round[dt](c.k), round[dt](c.v)
			attnTiles = false
			ref := rounded.run(from, 90, 1)
			if dt == kv.F32 {
				ref = want
			}
			for _, v := range []struct {
				chunk, threads int
				tiles, inPlace bool
			}{{1, 1, false, false}, {1, 3, false, true}, {3, 2, false, true}, {7, 2, true, false}, {17, 4, true, true}, {90, 3, true, true}, {45, 2, false, false}} {
				attnTiles = v.tiles
				attnSplitRows = func(int) bool { return v.inPlace }
				attnBF16InPlace = func(int) bool { return v.inPlace }
				got := c.runAs(dt, from, v.chunk, v.threads)
				if i := firstDiff(got, ref); i >= 0 {
					t.Fatalf("window %d, G=%d d=%d n=%d, %s, chunk %d, %d threads, tiles %v, bf16 in place %v: value %d is %g, float32 attention over the rounded cache whole and single-threaded %g",
						tc.w, tc.G, tc.d, tc.n, dt, v.chunk, v.threads, v.tiles, v.inPlace, i, got[i], ref[i])
				}
			}
		}
	}
}

// roundBF16 is what a bfloat16 cache keeps of x: each value rounded once
// by the codec.
func roundBF16(x []float32) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = dtype.BF16ToFloat32(dtype.Float32ToBF16(v))
	}
	return y
}

// roundBFP8 is what a bfp8 cache keeps of x: each group of bfp.GroupSize
// consecutive values quantized once.
func roundBFP8(x []float32) []float32 {
	y := make([]float32, len(x))
	for i := 0; i < len(x); i += bfp.GroupSize {
		var g [bfp.GroupSize]float32
		copy(g[:], x[i:])
		e, codes := bfp.QuantizeGroup(bfp.BFP8, &g)
		bfp.DequantizeGroup(bfp.BFP8, e, &codes, (*[bfp.GroupSize]float32)(y[i:]))
	}
	return y
}
