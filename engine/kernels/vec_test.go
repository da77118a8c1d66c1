package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

func TestDotAxpy(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, n := range dotSizes {
		x, y := randVec(rng, n), randVec(rng, n)
		got := Dot(x, y)
		var want float32
		withGo(func() { want = Dot(x, y) })
		checkSame(t, fmt.Sprintf("Dot n=%d", n), []float32{got}, []float32{want})

		a := float32(rng.NormFloat64())
		y1, y2 := append([]float32(nil), y...), append([]float32(nil), y...)
		Axpy(a, x, y1)
		withGo(func() { Axpy(a, x, y2) })
		checkSame(t, fmt.Sprintf("Axpy n=%d", n), y1, y2)
		for i := range y2 {
			if w := fma32(a, x[i], y[i]); y2[i] != w {
				t.Fatalf("Axpy n=%d: y[%d] = %g, want fma %g", n, i, y2[i], w)
			}
		}
	}
}

// ulps returns the distance between two finite float32 values in units in
// the last place.
func ulps(a, b float32) int64 {
	ia, ib := int64(int32(math.Float32bits(a))), int64(int32(math.Float32bits(b)))
	if ia < 0 {
		ia = math.MinInt32 - ia
	}
	if ib < 0 {
		ib = math.MinInt32 - ib
	}
	d := ia - ib
	if d < 0 {
		d = -d
	}
	return d
}

// TestExp compares Exp with math.Exp rounded to float32: both are float64
// evaluations a few ulps from e^x, so they round to the same float32 except
// within a few float64 ulps of a float32 midpoint, where they may differ by
// one float32 ulp. The test allows that at a rate far below 1e-4.
func TestExp(t *testing.T) {
	for _, tc := range []struct{ x, want float32 }{
		{0, 1}, {float32(math.Inf(-1)), 0}, {float32(math.Inf(1)), float32(math.Inf(1))},
		{-200, 0}, {100, float32(math.Inf(1))}, {1, float32(math.E)},
	} {
		if got := Exp(tc.x); got != tc.want {
			t.Errorf("Exp(%g) = %g, want %g", tc.x, got, tc.want)
		}
	}
	if got := Exp(float32(math.NaN())); got == got {
		t.Errorf("Exp(NaN) = %g", got)
	}
	rng := rand.New(rand.NewPCG(23, 24))
	off := 0
	const n = 1 << 20
	for i := range n {
		x := float32(rng.Float64()*193 - 104)
		if i%4 == 0 {
			x = float32(rng.NormFloat64())
		}
		got, want := Exp(x), float32(math.Exp(float64(x)))
		if got != want {
			off++
			if ulps(got, want) > 1 {
				t.Fatalf("Exp(%g) = %g, math.Exp gives %g", x, got, want)
			}
		}
	}
	if off > n/10000 {
		t.Errorf("Exp differs from math.Exp by one ulp on %d of %d inputs", off, n)
	}
}

func TestActivations(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	x := randVec(rng, 1000)
	for i := range x {
		x[i] *= 8
	}
	x = append(x, 0, -90, 90, -1e30, 1e30)
	gate, up := x, randVec(rng, len(x))
	sig, silu, sw := make([]float32, len(x)), make([]float32, len(x)), make([]float32, len(x))
	SigmoidVec(sig, x)
	SiLUVec(silu, x)
	SwiGLU(sw, gate, up)
	for i, v := range x {
		s64 := 1 / (1 + math.Exp(-float64(v)))
		if d := math.Abs(float64(sig[i]) - s64); d > 2e-7*s64+1e-38 {
			t.Errorf("Sigmoid(%g) = %g, want %g", v, sig[i], s64)
		}
		l64 := float64(v) * s64
		if d := math.Abs(float64(silu[i]) - l64); d > 3e-7*math.Abs(l64)+1e-36 {
			t.Errorf("SiLU(%g) = %g, want %g", v, silu[i], l64)
		}
		if sw[i] != silu[i]*up[i] {
			t.Errorf("SwiGLU[%d] = %g, want %g", i, sw[i], silu[i]*up[i])
		}
	}
}

func TestSoftmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	for _, n := range dotSizes {
		x := randVec(rng, n)
		for i := range x {
			x[i] *= 5
			if i%7 == 3 {
				x[i] = float32(math.Inf(-1)) // masked
			}
		}
		if n > 0 {
			x[0] = 3 // at least one unmasked entry
		}
		want := make([]float64, n)
		var m, s float64 = math.Inf(-1), 0
		for _, v := range x {
			m = math.Max(m, float64(v))
		}
		for i, v := range x {
			want[i] = math.Exp(float64(v) - m)
			s += want[i]
		}
		Softmax(x)
		var sum float64
		for i, v := range x {
			sum += float64(v)
			if w := want[i] / s; math.Abs(float64(v)-w) > 1e-6*w+1e-12 {
				t.Fatalf("n=%d: p[%d] = %g, want %g", n, i, v, w)
			}
		}
		if n > 0 && math.Abs(sum-1) > 1e-5 {
			t.Errorf("n=%d: probabilities sum to %g", n, sum)
		}
	}
}

func TestRMSNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 30))
	for _, n := range []int{1, 17, 64, 2048} {
		x := randVec(rng, n)
		wb := randBF16(rng, n)
		w := make([]float32, n)
		for i := range w {
			w[i] = bf16(wb[i])
		}
		const eps = 1e-5
		y, yb := make([]float32, n), make([]float32, n)
		RMSNorm(y, x, w, eps)
		RMSNormBF16(yb, x, wb, eps)
		checkSame(t, "RMSNormBF16", yb, y)
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		r := 1 / math.Sqrt(ss/float64(n)+eps)
		for i := range y {
			want := float64(w[i]) * float64(x[i]) * r
			if d := math.Abs(float64(y[i]) - want); d > 1e-6*math.Abs(want)+1e-30 {
				t.Fatalf("n=%d: y[%d] = %g, want %g", n, i, y[i], want)
			}
		}
		// In place gives the same bits.
		RMSNorm(x, x, w, eps)
		checkSame(t, "RMSNorm in place", x, y)
	}
}

func TestRoPE(t *testing.T) {
	if _, err := NewRoPE(63, 1e6, 10); err == nil {
		t.Error("odd head size accepted")
	}
	const d, theta = 64, 1e6
	r, err := NewRoPE(d, theta, 100)
	if err != nil {
		t.Fatal(err)
	}
	onTheFly, _ := NewRoPE(d, theta, 0)
	for j, f := range r.invFreq {
		want := float32(math.Pow(theta, -float64(2*j)/d))
		if ulps(f, want) > 1 {
			t.Errorf("inv_freq[%d] = %g, want %g", j, f, want)
		}
	}
	rng := rand.New(rand.NewPCG(31, 32))
	for _, pos := range []int{0, 1, 99, 100, 32767} {
		z := randVec(rng, 2*d)
		z2 := append([]float32(nil), z...)
		orig := append([]float32(nil), z...)
		r.ApplyHeads(z, 2, pos)
		onTheFly.ApplyHeads(z2, 2, pos)
		checkSame(t, fmt.Sprintf("table vs on the fly pos %d", pos), z, z2)
		for h := range 2 {
			for j := range d / 2 {
				phi := float64(float32(float32(pos) * r.invFreq[j]))
				c, s := math.Cos(phi), math.Sin(phi)
				a, b := float64(orig[h*d+j]), float64(orig[h*d+j+d/2])
				wl, wh := a*c-b*s, b*c+a*s
				if math.Abs(float64(z[h*d+j])-wl) > 1e-6 || math.Abs(float64(z[h*d+j+d/2])-wh) > 1e-6 {
					t.Fatalf("pos %d head %d j %d: got (%g, %g), want (%g, %g)", pos, h, j, z[h*d+j], z[h*d+j+d/2], wl, wh)
				}
			}
		}
	}
}

// TestPartialRoPE: LFM3's proportional partial rotation turns the first
// rotated frequency slots exactly as NewRoPE does (θ^(−2j/d) over the whole
// head) and passes the dimensions of the others through unchanged; all
// slots rotating is NewRoPE.
func TestPartialRoPE(t *testing.T) {
	const d, theta, rotated = 32, 1e6, 8
	full, _ := NewRoPE(d, theta, 50)
	part, err := NewPartialRoPE(d, theta, rotated, 50)
	if err != nil {
		t.Fatal(err)
	}
	same, _ := NewPartialRoPE(d, theta, d/2, 50)
	for _, bad := range []int{-1, d/2 + 1} {
		if _, err := NewPartialRoPE(d, theta, bad, 50); err == nil {
			t.Errorf("%d rotated pairs of %d accepted", bad, d/2)
		}
	}
	rng := rand.New(rand.NewPCG(35, 36))
	for _, pos := range []int{0, 1, 31, 49, 50, 4000} {
		z := randVec(rng, d)
		zf, zp, zs := append([]float32(nil), z...), append([]float32(nil), z...), append([]float32(nil), z...)
		full.Apply(zf, pos)
		part.Apply(zp, pos)
		same.Apply(zs, pos)
		checkSame(t, fmt.Sprintf("all pairs rotating vs NewRoPE, pos %d", pos), zs, zf)
		for j := range d / 2 {
			lo, hi := j, j+d/2
			if j < rotated {
				if zp[lo] != zf[lo] || zp[hi] != zf[hi] {
					t.Fatalf("pos %d pair %d: (%g, %g), NewRoPE's (%g, %g)", pos, j, zp[lo], zp[hi], zf[lo], zf[hi])
				}
			} else if zp[lo] != z[lo] || zp[hi] != z[hi] {
				t.Fatalf("pos %d pair %d: (%g, %g), want it unchanged (%g, %g)", pos, j, zp[lo], zp[hi], z[lo], z[hi])
			}
		}
	}
}

func TestCausalConv(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	for _, k := range []int{1, 2, 3, 4, 7} {
		const T, H = 9, 37
		u := randVec(rng, T*H)
		w := randVec(rng, H*k)
		bias := randVec(rng, H)
		state0 := randVec(rng, H*(k-1))

		whole := make([]float32, T*H)
		st := append([]float32(nil), state0...)
		CausalConv(whole, u, st, w, bias, T, H, k)

		// Independent float64 evaluation of the definition.
		for tt := range T {
			for c := range H {
				var want float64
				for j := range k {
					i := tt - (k - 1) + j
					var in float32
					if i >= 0 {
						in = u[i*H+c]
					} else {
						in = state0[c*(k-1)+(k-1)+i]
					}
					want += float64(w[c*k+j]) * float64(in)
				}
				want += float64(bias[c])
				if d := math.Abs(float64(whole[tt*H+c]) - want); d > 1e-5 {
					t.Fatalf("K=%d v[%d][%d] = %g, want %g", k, tt, c, whole[tt*H+c], want)
				}
			}
		}
		for c := range H {
			for j := range k - 1 {
				if st[c*(k-1)+j] != u[(T-(k-1)+j)*H+c] {
					t.Fatalf("K=%d: state[%d][%d] is not the last inputs", k, c, j)
				}
			}
		}

		// Chunks of any size, one token included, give the same bits.
		for _, chunks := range [][]int{{1, 1, 1, 1, 1, 1, 1, 1, 1}, {2, 1, 4, 2}, {1, 8}} {
			got := make([]float32, T*H)
			st := append([]float32(nil), state0...)
			t0 := 0
			for _, n := range chunks {
				CausalConv(got[t0*H:(t0+n)*H], u[t0*H:(t0+n)*H], st, w, bias, n, H, k)
				t0 += n
			}
			checkSame(t, fmt.Sprintf("K=%d chunks %v", k, chunks), got, whole)
		}
	}
}

// TestCausalConvDecodeKernel: a decode step (one token) on the AVX-512
// kernel, 16 channels at a time, gives the Go kernel's outputs and state
// bit for bit, with and without a bias, for widths that are and are not
// whole groups of 16 and a channel range that starts past 0 (a Pool's).
func TestCausalConvDecodeKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 38))
	for _, k := range []int{2, 3, 7} {
		for _, H := range []int{16, 53, 2048} {
			for _, withBias := range []bool{false, true} {
				u, w, state := randVec(rng, H), randVec(rng, H*k), randVec(rng, H*(k-1))
				var bias []float32
				if withBias {
					bias = randVec(rng, H)
				}
				for _, c0 := range []int{0, 3} {
					want, got := make([]float32, H), make([]float32, H)
					stWant, stGot := append([]float32(nil), state...), append([]float32(nil), state...)
					withGo(func() { causalConv(want, u, stWant, w, bias, 1, H, k, c0, H) })
					causalConv(got, u, stGot, w, bias, 1, H, k, c0, H)
					name := fmt.Sprintf("K=%d H=%d bias %v from channel %d", k, H, withBias, c0)
					checkSame(t, name+" outputs", got, want)
					checkSame(t, name+" state", stGot, stWant)
				}
			}
		}
	}
}

func TestPool(t *testing.T) {
	for _, threads := range []int{1, 2, 5} {
		p := NewPool(threads)
		for _, n := range []int{0, 1, 3, 100} {
			seen := make([]int32, n)
			p.Run(n, func(lo, hi int) {
				if lo >= hi {
					t.Errorf("empty range [%d, %d)", lo, hi)
				}
				for i := lo; i < hi; i++ {
					seen[i]++
				}
			})
			for i, s := range seen {
				if s != 1 {
					t.Fatalf("threads %d n %d: index %d covered %d times", threads, n, i, s)
				}
			}
		}
		// Nested use does not deadlock.
		var total int64
		done := make(chan struct{})
		go func() {
			p.Run(4, func(lo, hi int) {
				p.Run(3, func(lo, hi int) {})
			})
			total = 1
			close(done)
		}()
		<-done
		if total != 1 {
			t.Fatal("nested Run did not finish")
		}
		// A panic reaches the caller.
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Errorf("threads %d: recovered %v", threads, r)
				}
			}()
			p.Run(4, func(lo, hi int) {
				if lo == 0 {
					panic("boom")
				}
			})
		}()
		p.Close()
		p.Close()
		ran := false
		p.Run(2, func(lo, hi int) { ran = true })
		if !ran {
			t.Errorf("closed pool did not run")
		}
	}
	var nilPool *Pool
	if nilPool.Threads() != 1 {
		t.Error("nil pool threads")
	}
}

// TestPoolCausalConv: the convolution split over a Pool's goroutines by
// channels gives CausalConv's bits and state, for widths that are and are
// not whole 64-channel units and for one token and several; every case is
// past convParallelMin, so it is split.
func TestPoolCausalConv(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	for _, threads := range []int{2, 3} {
		p := NewPool(threads)
		for _, c := range []struct{ T, H, K int }{{1, 2048, 7}, {1, 1000, 9}, {5, 190, 10}, {3, 4100, 4}, {2, 700, 7}} {
			if c.T*c.H*c.K < convParallelMin {
				t.Fatalf("T=%d H=%d K=%d: below convParallelMin, not split", c.T, c.H, c.K)
			}
			u, w, bias := randVec(rng, c.T*c.H), randVec(rng, c.H*c.K), randVec(rng, c.H)
			state := randVec(rng, c.H*(c.K-1))
			want, got := make([]float32, c.T*c.H), make([]float32, c.T*c.H)
			stWant, stGot := append([]float32(nil), state...), append([]float32(nil), state...)
			CausalConv(want, u, stWant, w, bias, c.T, c.H, c.K)
			p.CausalConv(got, u, stGot, w, bias, c.T, c.H, c.K)
			checkSame(t, fmt.Sprintf("threads %d T=%d H=%d K=%d outputs", threads, c.T, c.H, c.K), got, want)
			checkSame(t, fmt.Sprintf("threads %d T=%d H=%d K=%d state", threads, c.T, c.H, c.K), stGot, stWant)
		}
		p.Close()
	}
}

// TestPoolGrain: runGrain cuts [0, n) into the ranges its rule gives
// (at most four a goroutine; of at least grain units, a whole number a
// goroutine; never fewer than one a goroutine while n has the units), each
// index covered once.
func TestPoolGrain(t *testing.T) {
	for _, c := range []struct{ threads, n, grain, want int }{
		{2, 100, 1, 8},  // Run's: four a goroutine
		{2, 3, 1, 3},    // one a unit
		{2, 16, 8, 2},   // a 2,048-output BFP product in 32-tile ranges
		{2, 60, 8, 6},   // 7,680 outputs: 7 ranges of 8 units, cut to 6
		{2, 4, 8, 2},    // 512 outputs: fewer units than a grain
		{2, 1000, 8, 8}, // the head: four a goroutine
		{2, 1, 8, 1},
		{5, 100, 1, 20},
		{5, 30, 8, 5},
		{5, 100, 8, 10},
	} {
		p := NewPool(c.threads)
		seen := make([]int32, c.n)
		var ranges atomic.Int32
		p.runGrain(c.n, c.grain, func(lo, hi int) {
			ranges.Add(1)
			for i := lo; i < hi; i++ {
				atomic.AddInt32(&seen[i], 1)
			}
		})
		p.Close()
		if got := int(ranges.Load()); got != c.want {
			t.Errorf("threads %d n %d grain %d: %d ranges, want %d", c.threads, c.n, c.grain, got, c.want)
		}
		for i, s := range seen {
			if s != 1 {
				t.Errorf("threads %d n %d grain %d: index %d covered %d times", c.threads, c.n, c.grain, i, s)
			}
		}
	}
}

// TestSwiGLUWide: SwiGLU on the AVX-512 kernel (64 elements at a time)
// gives the bits of the Go loop, NaN payloads aside, for inputs across
// Exp's whole range and its edges: ±0, subnormals, the bounds 89 and −104
// of Exp(−g) and their neighbours, values whose exponential overflows or
// underflows float32, ±Inf, NaN; at lengths around the 64-element step and
// with y aliasing gate.
func TestSwiGLUWide(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512 kernels on this CPU or build")
	}
	rng := rand.New(rand.NewPCG(61, 62))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 1e-38, -89, 89, -104, 104,
		math.Nextafter32(-89, 0), math.Nextafter32(-89, -200), math.Nextafter32(104, 0), math.Nextafter32(104, 200),
		-88.7, 87.3, -103.9, 103.2, 200, -200, 3e38, -3e38,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	pick := func() float32 {
		switch rng.IntN(4) {
		case 0:
			return special[rng.IntN(len(special))]
		case 1:
			return float32(rng.NormFloat64() * 40)
		default:
			return float32(rng.NormFloat64() * 3)
		}
	}
	same := func(a, b float32) bool {
		return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
	}
	for _, n := range []int{0, 1, 63, 64, 65, 127, 128, 200, 4096, 1 << 20} {
		gate, up := make([]float32, n), make([]float32, n)
		for i := range gate {
			gate[i], up[i] = pick(), pick()
			if n == 1<<20 {
				// Every 4096th float32 bit pattern, times 1 (and the
				// next one), across both signs and all exponents.
				gate[i], up[i] = math.Float32frombits(uint32(i)<<12|uint32(i)&0xfff), 1
			}
		}
		want := make([]float32, n)
		saved := useAVX512
		useAVX512 = false
		SwiGLU(want, gate, up)
		useAVX512 = saved
		got := make([]float32, n)
		SwiGLU(got, gate, up)
		alias := append([]float32(nil), gate...)
		SwiGLU(alias, alias, up)
		for i := range want {
			if !same(got[i], want[i]) || !same(alias[i], want[i]) {
				t.Fatalf("n=%d: SwiGLU(%g, %g) = %g (aliased %g), want %g", n, gate[i], up[i], got[i], alias[i], want[i])
			}
		}
	}
}
