package gptq

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfmq/lfmq/format/bfp"
)

// randomHessian returns H = 2·XᵀX/n for n random inputs whose coordinates
// are correlated (x = z·A with a random mixing A), the shape of a real
// activation Hessian; dead lists input indices that are never non-zero.
func randomHessian(r *rand.Rand, k, n int, dead []int) []float64 {
	a := make([]float64, k*k)
	for i := range a {
		a[i] = r.NormFloat64() / math.Sqrt(float64(k))
	}
	for i := range k {
		a[i*k+i] += 1
	}
	isDead := map[int]bool{}
	for _, d := range dead {
		isDead[d] = true
	}
	h := make([]float64, k*k)
	z := make([]float64, k)
	x := make([]float64, k)
	for range n {
		for i := range z {
			z[i] = r.NormFloat64() * math.Exp(r.NormFloat64())
		}
		for j := range k {
			var s float64
			for i := range k {
				s += z[i] * a[i*k+j]
			}
			if isDead[j] {
				s = 0
			}
			x[j] = s
		}
		for i := range k {
			for j := range k {
				h[i*k+j] += 2 * x[i] * x[j] / float64(n)
			}
		}
	}
	return h
}

// randomWeight returns a weight [out, in] of BF16-representable values.
func randomWeight(r *rand.Rand, out, in int) []float32 {
	w := make([]float32, out*in)
	for i := range w {
		v := float32(r.NormFloat64() * 0.05)
		w[i] = math.Float32frombits(math.Float32bits(v) &^ 0xFFFF)
	}
	return w
}

func rtn(t *testing.T, w []float32, out, in int) []float32 {
	t.Helper()
	p, err := bfp.PackMatrix(bfp.BFP4, w, out, in)
	if err != nil {
		t.Fatal(err)
	}
	q, err := bfp.UnpackMatrix(bfp.BFP4, p, out, in)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestLossIdentity: the summed row losses of the solve equal ½·tr(ΔWᵀ
// H_damped ΔW), with W's dead rows zeroed and H after dead-row
// substitution and damping (docs/gptq.md §8), to 1e-6 relative.
func TestLossIdentity(t *testing.T) {
	cases := []struct {
		name          string
		k, out        int
		dead          []int
		alpha         float64
		actOrder      bool
		block         int
		format        bfp.Format
		wantMaxRelErr float64
	}{
		{"plain", 96, 64, nil, 0.01, true, 128, bfp.BFP4, 1e-6},
		{"dead rows", 96, 48, []int{0, 7, 50, 95}, 0.01, true, 32, bfp.BFP4, 1e-6},
		{"no act-order", 80, 40, []int{3}, 0.1, false, 16, bfp.BFP4, 1e-6},
		{"strong damping", 64, 32, nil, 1, true, 8, bfp.BFP4, 1e-6},
		{"padded shapes", 70, 50, []int{69}, 0.01, true, 128, bfp.BFP4, 1e-6},
		{"bfp8", 64, 64, nil, 0.01, true, 128, bfp.BFP8, 1e-6},
	}
	for i, c := range cases {
		for _, rule := range exponentRules {
			t.Run(c.name+"/"+rule.name, func(t *testing.T) {
				testLossIdentity(t, uint64(i), c.k, c.out, c.dead, c.format, c.wantMaxRelErr,
					Options{Alpha: c.alpha, ActOrder: c.actOrder, BlockSize: c.block, Exponent: rule.rule, HessianCost: rule.cost})
			})
		}
	}
}

// exponentRules are the exponent choices every solver property must hold
// for: the three rules, and ExponentHessian with each cost.
var exponentRules = []struct {
	name string
	rule ExponentRule
	cost HessianCost
}{
	{"max", ExponentMax, CostGreedy},
	{"search", ExponentSearch, CostGreedy},
	{"hessian", ExponentHessian, CostGreedy},
	{"hessian-lookahead", ExponentHessian, CostLookahead},
}

// testLossIdentity is one case of TestLossIdentity: K = k inputs, out
// outputs, the given dead inputs, relative tolerance maxRel.
func testLossIdentity(t *testing.T, seed uint64, k, out int, dead []int, format bfp.Format, maxRel float64, opts Options) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	h := randomHessian(r, k, 3*k, dead)
	w := randomWeight(r, out, k)
	f, err := NewFactor(h, k, opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Quantize(format, w, out)
	if err != nil {
		t.Fatal(err)
	}
	// The damped Hessian in the original frame (the trace is invariant
	// under the permutation).
	hd := append([]float64(nil), h...)
	wz := append([]float32(nil), w...)
	for i := range k {
		if f.Dead(i) {
			hd[i*k+i] = 1
			for o := range out {
				wz[o*k+i] = 0
			}
		}
	}
	for i := range k {
		hd[i*k+i] += f.Lambda()
	}
	want, err := Loss(hd, wz, res.Q, out, k)
	if err != nil {
		t.Fatal(err)
	}
	rel := math.Abs(res.Loss-want) / want
	t.Logf("row losses %.12g, trace %.12g, relative difference %.2g", res.Loss, want, rel)
	if !(rel <= maxRel) {
		t.Errorf("row losses %v ≠ ½·tr(ΔWᵀ H ΔW) %v (relative %g)", res.Loss, want, rel)
	}
	for _, i := range dead {
		for o := range out {
			if res.Q[o*k+i] != 0 {
				t.Fatalf("dead input %d: Q[%d] = %v, want 0", i, o, res.Q[o*k+i])
			}
		}
	}
}

// TestBlockInvariance: block sizes 1, 16 and 128 give identical bytes, for
// every exponent rule (the lookahead reads the next row across a block
// boundary before the block's deferred feedback reaches it).
func TestBlockInvariance(t *testing.T) {
	for _, rule := range exponentRules {
		t.Run(rule.name, func(t *testing.T) {
			testBlockInvariance(t, Options{Alpha: 0.01, ActOrder: true, Exponent: rule.rule, HessianCost: rule.cost},
				200, 96, 400, []int{5, 199}, []int{1, 16, 128, 200, 1000})
		})
	}
}

// testBlockInvariance solves one random k×out problem (a Hessian of tokens
// samples with the dead input indices) at each block size and checks that
// bytes and loss equal those of the first size.
func testBlockInvariance(t *testing.T, opts Options, k, out, tokens int, dead, sizes []int) {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 3))
	h := randomHessian(r, k, tokens, dead)
	w := randomWeight(r, out, k)
	solve := func() *Result {
		f, err := NewFactor(h, k, opts)
		if err != nil {
			t.Fatal(err)
		}
		res, err := f.Quantize(bfp.BFP4, w, out)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	var ref *Result
	for _, bs := range sizes {
		opts.BlockSize = bs
		res := solve()
		if ref == nil {
			ref = res
			continue
		}
		if !bytes.Equal(res.Packed, ref.Packed) {
			t.Errorf("block size %d: bytes differ from block size %d", bs, sizes[0])
		}
		if res.Loss != ref.Loss {
			t.Errorf("block size %d: loss %v, block size %d %v", bs, res.Loss, sizes[0], ref.Loss)
		}
	}
	// Bands of 32 outputs (quantizeBandBytes) at the last block size: the
	// same bytes, loss and decoded weights.
	prev := quantizeBandBytes
	defer func() { quantizeBandBytes = prev }()
	quantizeBandBytes = 1
	res := solve()
	if !bytes.Equal(res.Packed, ref.Packed) || res.Loss != ref.Loss {
		t.Errorf("bands of %d outputs: bytes or loss (%v) differ from one band (%v)", quantizeBand(k, out), res.Loss, ref.Loss)
	}
	for i := range res.Q {
		if math.Float32bits(res.Q[i]) != math.Float32bits(ref.Q[i]) {
			t.Fatalf("bands: Q[%d] = %v, one band %v", i, res.Q[i], ref.Q[i])
		}
	}
}

// TestRTNLimit: H = c·I with no damping gives no error feedback, hence
// exactly the packer's bytes: the plain packer's for ExponentMax, the
// exponent search's for ExponentSearch.
func TestRTNLimit(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	const k, out = 96, 64
	h := make([]float64, k*k)
	for i := range k {
		h[i*k+i] = 3.5
	}
	w := randomWeight(r, out, k)
	for _, c := range []struct {
		rule ExponentRule
		pack bfp.ExponentRule
	}{{ExponentMax, bfp.RuleMax}, {ExponentSearch, bfp.RuleSearch}} {
		want, _ := bfp.PackMatrixRule(bfp.BFP4, c.pack, w, out, k)
		for _, actOrder := range []bool{false, true} {
			f, err := NewFactor(h, k, Options{Alpha: 0, ActOrder: actOrder, BlockSize: 32, Exponent: c.rule})
			if err != nil {
				t.Fatal(err)
			}
			res, err := f.Quantize(bfp.BFP4, w, out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(res.Packed, want) {
				t.Errorf("%v, act-order %v: GPTQ with H = cI differs from RTN %v", c.rule, actOrder, c.pack)
			}
		}
	}
}

// TestCanonicalAndBetterThanRTN: for every exponent rule, every GPTQ tile
// re-encodes to itself, the decoded Q is what the tiles hold, and GPTQ's
// loss under H is below RTN's; the rules that may lower an exponent do
// lower some and reach a lower loss than ExponentMax on these weights.
func TestCanonicalAndBetterThanRTN(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	const k, out = 128, 128
	h := randomHessian(r, k, 256, nil)
	w := randomWeight(r, out, k)
	var maxLoss float64
	var maxPacked []byte
	for _, rule := range exponentRules {
		t.Run(rule.name, func(t *testing.T) {
			opts := DefaultOptions(0.01)
			opts.Exponent, opts.HessianCost = rule.rule, rule.cost
			f, err := NewFactor(h, k, opts)
			if err != nil {
				t.Fatal(err)
			}
			res := testCanonicalAndBetterThanRTN(t, f, h, w, out, k)
			if rule.rule == ExponentMax {
				maxLoss, maxPacked = res.Loss, res.Packed
				return
			}
			if bytes.Equal(res.Packed, maxPacked) || !(res.Loss < maxLoss) {
				t.Errorf("%s: loss %.6g, max rule %.6g (same bytes: %v)", rule.name, res.Loss, maxLoss, bytes.Equal(res.Packed, maxPacked))
			}
		})
	}
}

func testCanonicalAndBetterThanRTN(t *testing.T, f *Factor, h []float64, w []float32, out, k int) *Result {
	t.Helper()
	res, err := f.Quantize(bfp.BFP4, w, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := bfp.Canonical(bfp.BFP4, res.Packed, out, k); err != nil {
		t.Fatalf("GPTQ tiles are not canonical: %v", err)
	}
	dec, err := bfp.UnpackMatrix(bfp.BFP4, res.Packed, out, k)
	if err != nil {
		t.Fatal(err)
	}
	for i := range dec {
		if dec[i] != res.Q[i] {
			t.Fatalf("Q[%d] = %v, the tiles decode to %v", i, res.Q[i], dec[i])
		}
	}
	lg, _ := Loss(h, w, res.Q, out, k)
	lr, _ := Loss(h, w, rtn(t, w, out, k), out, k)
	t.Logf("loss GPTQ %.6g, RTN %.6g, ratio %.3f", lg, lr, lg/lr)
	if !(lg < 0.85*lr) {
		t.Errorf("GPTQ loss %v not below 0.85 × RTN loss %v", lg, lr)
	}
	return res
}

// TestFactorInverse: UᵀU is the inverse of the damped, permuted H.
func TestFactorInverse(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	const k = 50
	h := randomHessian(r, k, 100, nil)
	f, err := NewFactor(h, k, Options{Alpha: 0.01, ActOrder: true, BlockSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	for i := range k {
		for j := range i {
			if f.u[i*k+j] != 0 {
				t.Fatalf("U[%d][%d] = %v below the diagonal", i, j, f.u[i*k+j])
			}
		}
	}
	var worst float64
	for i := range k {
		for j := range k {
			// (H_p + λI)·UᵀU at (i, j).
			var s float64
			for m := range k {
				hm := h[f.perm[i]*k+f.perm[m]]
				if m == i {
					hm += f.lambda
				}
				var inv float64
				for p := range k {
					inv += f.u[p*k+m] * f.u[p*k+j]
				}
				s += hm * inv
			}
			want := 0.0
			if i == j {
				want = 1
			}
			worst = max(worst, math.Abs(s-want))
		}
	}
	if worst > 1e-9 {
		t.Errorf("max |(H+λI)·UᵀU − I| = %g", worst)
	}
}

// TestLossesMatchDirect compares the one-pass symmetric Losses with a
// direct ½·Σ_o d_oᵀ H d_o.
func TestLossesMatchDirect(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for _, k := range []int{1, 3, 4, 7, 33} {
		const out = 9
		h := randomHessian(r, k, 2*k, nil)
		w := randomWeight(r, out, k)
		q := rtn(t, append([]float32(nil), w...), out, k)
		got, err := Losses(h, w, [][]float32{q, nil}, out, k)
		if err != nil {
			t.Fatal(err)
		}
		for m, qq := range [][]float32{q, nil} {
			var want float64
			for o := range out {
				for i := range k {
					for j := range k {
						di, dj := float64(w[o*k+i]), float64(w[o*k+j])
						if qq != nil {
							di -= float64(qq[o*k+i])
							dj -= float64(qq[o*k+j])
						}
						want += di * h[i*k+j] * dj
					}
				}
			}
			want /= 2
			if math.Abs(got[m]-want) > 1e-12*math.Abs(want) {
				t.Errorf("K=%d, Q %d: Losses %v, direct %v", k, m, got[m], want)
			}
		}
	}
}

func TestFactorRetries(t *testing.T) {
	// Eigenvalues −2 and 4, mean diagonal 1: α = 0.01, 0.1 and 1 leave it
	// indefinite, α = 10 succeeds.
	h := []float64{1, 3, 3, 1}
	f, err := NewFactor(h, 2, DefaultOptions(0.01))
	if err != nil {
		t.Fatal(err)
	}
	if f.Retries() != 3 || math.Abs(f.Alpha()-10) > 1e-12 || math.Abs(f.Lambda()-10) > 1e-12 {
		t.Errorf("retries %d, alpha %v, lambda %v; want 3, 10, 10", f.Retries(), f.Alpha(), f.Lambda())
	}
	_, err = NewFactor([]float64{1, 100, 100, 1}, 2, DefaultOptions(0.01))
	var fe *FactorError
	if !errors.As(err, &fe) || !errors.Is(err, ErrFactor) || fe.Retries != 3 {
		t.Fatalf("err = %v, want a FactorError after 3 retries", err)
	}
}

func TestBadInput(t *testing.T) {
	good := []float64{1, 0, 0, 1}
	for _, c := range []struct {
		name string
		h    []float64
		k    int
		opts Options
	}{
		{"length", []float64{1, 2, 3}, 2, DefaultOptions(0.01)},
		{"nan", []float64{1, math.NaN(), math.NaN(), 1}, 2, DefaultOptions(0.01)},
		{"inf", []float64{math.Inf(1), 0, 0, 1}, 2, DefaultOptions(0.01)},
		{"block", good, 2, Options{Alpha: 0.01}},
		{"alpha", good, 2, Options{Alpha: -1, BlockSize: 1}},
		{"retry factor", good, 2, Options{Alpha: 0.01, BlockSize: 1, Retries: 2, RetryFactor: 0.5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ie *InputError
			if _, err := NewFactor(c.h, c.k, c.opts); !errors.As(err, &ie) {
				t.Errorf("err = %v, want an InputError", err)
			}
		})
	}
	f, _ := NewFactor(good, 2, DefaultOptions(0.01))
	var ie *InputError
	if _, err := f.Quantize(bfp.BFP4, []float32{1, 2, 3}, 2); !errors.As(err, &ie) {
		t.Errorf("short weight: err = %v", err)
	}
	if _, err := f.Quantize(bfp.BFP4, []float32{1, float32(math.Inf(1))}, 1); !errors.As(err, &ie) {
		t.Errorf("infinite weight: err = %v", err)
	}
}

func BenchmarkSolve(b *testing.B) {
	for _, k := range []int{128, 512} {
		b.Run(fmt.Sprintf("K=%d", k), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 1))
			h := randomHessian(r, k, k, nil)
			w := randomWeight(r, k, k)
			b.ResetTimer()
			for b.Loop() {
				f, err := NewFactor(h, k, DefaultOptions(0.01))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.Quantize(bfp.BFP4, w, k); err != nil {
					b.Fatal(err)
				}
			}
			// Factor ≈ K³/3, row loop ≈ K²·N multiply-adds.
			flops := float64(k*k*k)/3*2 + float64(k*k*k)*2
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
