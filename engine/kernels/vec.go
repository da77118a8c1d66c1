package kernels

import (
	"fmt"
	"math"
)

// Vector kernels of the LFM2-MoE forward pass (docs/model.md §4). All work
// in float32 with one fixed order of operations, so their results do not
// depend on the batch, the thread count or the platform's SIMD support.
// Lengths are the caller's contract: a mismatch is a programming error and
// panics, like an out-of-range index.

func checkLen(name string, n int, lens ...int) {
	for _, l := range lens {
		if l != n {
			panic(fmt.Sprintf("kernels: %s: vector lengths differ (%d and %d)", name, n, l))
		}
	}
}

// Dot returns Σ x[i]·y[i] in the canonical order of every dot product in this
// package (16 fused lanes, a fixed pairwise tree, then the tail; see ref.go).
// It panics if the lengths differ.
func Dot(x, y []float32) float32 {
	checkLen("Dot", len(x), len(y))
	return dotF32(x, y)
}

// Axpy sets y[i] = a·x[i] + y[i], each element with a single rounding (a
// fused multiply-add), which is the same on every path. Attention sums
// p_t·v_t over positions with it, and MoE adds g·expert(z) into the output.
// It panics if the lengths differ.
func Axpy(a float32, x, y []float32) {
	checkLen("Axpy", len(x), len(y))
	if useSIMD {
		axpyAVX(a, x, y)
		return
	}
	fmaAxpy(y, a, x)
}

// Scale sets x[i] = a·x[i].
func Scale(a float32, x []float32) {
	for i := range x {
		x[i] *= a
	}
}

// RMSNorm sets y = w ⊙ x / sqrt(mean(x²) + eps) (docs/model.md §4.2), with
// the weight used as is (not 1 + w). The mean and the reciprocal square root
// are float32: sumsq is Dot(x, x), mean = sumsq / n, r = 1 / sqrt(mean +
// eps) with a correctly rounded square root, and y[i] = w[i]·(x[i]·r) as two
// rounded products, the order of the Hugging Face code. y may alias x. It
// panics if the lengths differ.
func RMSNorm(y, x, w []float32, eps float32) {
	checkLen("RMSNorm", len(x), len(y), len(w))
	r := rmsScale(x, eps)
	for i, xi := range x {
		y[i] = w[i] * float32(xi*r)
	}
}

// RMSNormBF16 is RMSNorm with a BF16 weight, widened exactly.
func RMSNormBF16(y, x []float32, w []uint16, eps float32) {
	checkLen("RMSNormBF16", len(x), len(y), len(w))
	r := rmsScale(x, eps)
	for i, xi := range x {
		y[i] = bf16(w[i]) * float32(xi*r)
	}
}

func rmsScale(x []float32, eps float32) float32 {
	if len(x) == 0 {
		return 0
	}
	mean := dotF32(x, x) / float32(len(x))
	// The float64 square root of a float32 rounds correctly to float32
	// (53 ≥ 2·24 + 2), so this is IEEE float32 sqrt on every platform.
	return 1 / float32(math.Sqrt(float64(mean+eps)))
}

// Argmax returns the index of x's largest value, the lowest index on ties
// (greedy decoding's token, as torch.argmax picks it).
func Argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// Exp returns e^x rounded to float32. It is computed in float64 with basic
// operations only (no library call, no fused multiply-add), so it gives the
// same bits on every platform: math.Exp does not, its amd64 assembly takes a
// different path with FMA. The float64 result is within about 2^-52 of e^x,
// so the float32 rounding is the correct one except when e^x lies within
// that distance of a rounding midpoint.
func Exp(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > 89: // e^89 > MaxFloat32
		return float32(math.Inf(1))
	case x < -104: // e^-104 < 2^-150, rounds to 0
		return 0
	}
	return float32(exp64(float64(x)))
}

// exp64 computes e^t for |t| ≤ 104 by e^t = 2^k · e^r, k = round(t/ln2) (ties
// to even), r = t − k·ln2 with ln2 split in two so that k·ln2hi is exact,
// and a degree-12 Taylor polynomial for e^r, |r| ≤ 0.3466, whose truncation
// error is below 2^-51 relative: a few float64 ulps, far below float32
// resolution. Each float64() conversion pins a rounding that the compiler
// could otherwise fuse away.
func exp64(t float64) float64 {
	k := math.RoundToEven(float64(t * exp64Log2e))
	r := float64(t - float64(k*exp64Ln2hi))
	r = float64(r - float64(k*exp64Ln2lo))
	p := exp64Poly[0]
	for _, c := range exp64Poly[1:] {
		p = float64(float64(p*r) + c)
	}
	return math.Ldexp(p, int(k))
}

const (
	exp64Log2e = 1.44269504088896338700e+00
	exp64Ln2hi = 6.93147180369123816490e-01 // 32 significant bits: k·ln2hi is exact
	exp64Ln2lo = 1.90821492927058770002e-10
)

// exp64Poly holds the coefficients of exp64's polynomial, 1/12! down to
// 1/0!, in the order exp64 applies them.
var exp64Poly = [13]float64{1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320,
	1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1, 1}

// swiGLUConst is exp64's constants for swiGLUZ: log2e, ln2hi, ln2lo, the
// bounds 89 and −104 of Exp's range, then exp64Poly.
var swiGLUConst = func() (c [18]float64) {
	c[0], c[1], c[2], c[3], c[4] = exp64Log2e, exp64Ln2hi, exp64Ln2lo, 89, -104
	copy(c[5:], exp64Poly[:])
	return c
}()

// Sigmoid returns 1/(1 + e^−x) in float32 (the MoE router's σ).
func Sigmoid(x float32) float32 { return 1 / (1 + Exp(-x)) }

// SiLU returns x·σ(x), computed as x / (1 + e^−x) in float32.
func SiLU(x float32) float32 { return x / (1 + Exp(-x)) }

// SigmoidVec sets y[i] = Sigmoid(x[i]). y may alias x.
func SigmoidVec(y, x []float32) {
	checkLen("SigmoidVec", len(x), len(y))
	for i, v := range x {
		y[i] = Sigmoid(v)
	}
}

// SiLUVec sets y[i] = SiLU(x[i]). y may alias x.
func SiLUVec(y, x []float32) {
	checkLen("SiLUVec", len(x), len(y))
	for i, v := range x {
		y[i] = SiLU(v)
	}
}

// SwiGLU sets y[i] = SiLU(gate[i])·up[i], the activation of the dense and
// expert feed-forward blocks (docs/model.md §4.6). y may alias either input.
//
// With AVX-512 the elements run 64 at a time (swiGLUZ) with the same bits
// (NaN payloads aside).
func SwiGLU(y, gate, up []float32) {
	checkLen("SwiGLU", len(y), len(gate), len(up))
	i := 0
	if n := len(gate) &^ 63; n > 0 && useSIMD && useAVX512 {
		swiGLUZ(y[:n], gate[:n], up[:n], &swiGLUConst)
		i = n
	}
	for ; i < len(gate); i++ {
		y[i] = SiLU(gate[i]) * up[i]
	}
}

// Softmax replaces x by softmax(x) in float32 with max subtraction:
// e_i = Exp(x_i − max), s = Σ e_i (16 lanes, the tree of Dot, then the
// tail, plain additions), x_i = e_i / s. An empty x is left alone; −Inf
// entries (masked positions) become 0. At least one entry must be finite
// (a causal row always has its own position), else the result is NaN.
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	for i, v := range x {
		x[i] = Exp(v - m)
	}
	s := sum16(x)
	for i := range x {
		x[i] /= s
	}
}

// sum16 sums x in the lane order of the dot products, without products.
func sum16(x []float32) float32 {
	var acc [lanes]float32
	m := len(x) &^ (lanes - 1)
	for i := 0; i < m; i += lanes {
		for l, v := range (*[lanes]float32)(x[i:]) {
			acc[l] += v
		}
	}
	s := reduce16(&acc)
	for _, v := range x[m:] {
		s += v
	}
	return s
}

// CausalConv is the depthwise causal convolution of the short-conv block
// (docs/model.md §4.4 step 3) for T tokens of H channels and kernel
// length K ≥ 1:
//
//	v_t[c] = Σ_{j<K} w[c·K+j] · u_{t−K+1+j}[c]  (+ bias[c])
//
// u and v are [T, H] row-major (v may not alias u); w is the squeezed conv
// weight [H, K]; bias is nil or [H]. The inputs before the first token come
// from state, [H, K−1] with state[c·(K−1)+j] = u_{j−(K−1)}[c] (oldest first,
// zero at the start of a sequence). On return state holds the last K−1 u
// vectors, so a sequence can be fed in chunks of any size, one token at a
// time included, with identical results. Each output is a chain of fused
// multiply-adds over j = 0..K−1 starting from +0, then the bias added.
func CausalConv(v, u, state, w, bias []float32, T, H, K int) {
	checkConv(v, u, state, w, bias, T, H, K)
	causalConv(v, u, state, w, bias, T, H, K, 0, H)
}

// convChannels is how many channels make one unit of Pool.CausalConv's
// parallel work, and convParallelMin the fewest multiply-adds it splits:
// below that, handing out work costs more than it saves.
const convChannels, convParallelMin = 64, 8192

// CausalConv is kernels.CausalConv with the channels split over the Pool's
// goroutines: each channel's outputs and state are its own, so the bits
// are CausalConv's. A decode step of a convolution layer of LFM3-1.7B
// (2,048 channels, K = 7) otherwise runs on one goroutine while the others
// wait for the next product.
func (p *Pool) CausalConv(v, u, state, w, bias []float32, T, H, K int) {
	checkConv(v, u, state, w, bias, T, H, K)
	if p.Threads() == 1 || T*H*K < convParallelMin {
		causalConv(v, u, state, w, bias, T, H, K, 0, H)
		return
	}
	p.Run((H+convChannels-1)/convChannels, func(lo, hi int) {
		causalConv(v, u, state, w, bias, T, H, K, lo*convChannels, min(hi*convChannels, H))
	})
}

// checkConv panics unless the lengths fit CausalConv's shapes.
func checkConv(v, u, state, w, bias []float32, T, H, K int) {
	if T < 0 || H < 0 || K < 1 || len(v) != T*H || len(u) != T*H || len(w) != H*K ||
		len(state) != H*(K-1) || (bias != nil && len(bias) != H) {
		panic(fmt.Sprintf("kernels: CausalConv: lengths v %d, u %d, state %d, w %d, bias %d do not fit T=%d H=%d K=%d",
			len(v), len(u), len(state), len(w), len(bias), T, H, K))
	}
}

// causalConv is CausalConv for channels [c0, c1). A decode step (one
// token) runs 16 channels at a time on the AVX-512 kernel, whose fused
// multiply-adds round as fma32 does (NaN payloads aside), and the rest on
// causalConvGo.
func causalConv(v, u, state, w, bias []float32, T, H, K, c0, c1 int) {
	if n := (c1 - c0) &^ 15; T == 1 && K >= 2 && n > 0 && useSIMD && useAVX512 {
		var b *float32
		if bias != nil {
			b = &bias[c0]
		}
		_, _, _, _ = v[c0+n-1], u[c0+n-1], state[(c0+n)*(K-1)-1], w[(c0+n)*K-1]
		if bias != nil {
			_ = bias[c0+n-1]
		}
		causalConv1Z(&v[c0], &u[c0], &state[c0*(K-1)], &w[c0*K], b, n, K)
		c0 += n
	}
	causalConvGo(v, u, state, w, bias, T, H, K, c0, c1)
}

// causalConvGo is causalConv in Go.
func causalConvGo(v, u, state, w, bias []float32, T, H, K, c0, c1 int) {
	h := K - 1
	for c := c0; c < c1; c++ {
		st := state[c*h : (c+1)*h]
		wc := w[c*K : (c+1)*K]
		for t := range T {
			var acc float32
			for j, wj := range wc {
				// Input u_{t−h+j}: from state while the index is negative.
				var in float32
				if i := t - h + j; i >= 0 {
					in = u[i*H+c]
				} else {
					in = st[h+i]
				}
				acc = fma32(wj, in, acc)
			}
			if bias != nil {
				acc += bias[c]
			}
			v[t*H+c] = acc
		}
		// New state: the last h inputs of the window ending at token T−1.
		if T >= h {
			for j := range h {
				st[j] = u[(T-h+j)*H+c]
			}
		} else {
			copy(st, st[T:])
			for j := range T {
				st[h-T+j] = u[j*H+c]
			}
		}
	}
}

// RoPE holds the rotary position embedding of one head size (NeoX
// half-split, docs/model.md §4.5 step 3) and a table of its cos/sin
// values for positions below MaxPos. Positions beyond the table are
// computed on the fly, with the same result.
type RoPE struct {
	HeadDim int       // values per head vector, even
	MaxPos  int       // positions [0, MaxPos) come from the table
	invFreq []float32 // HeadDim/2 inverse frequencies
	cos     []float32 // [MaxPos, HeadDim/2]
	sin     []float32
}

// NewRoPE precomputes the rotation for heads of headDim (even, positive)
// with base theta for positions [0, maxPos). It follows the Hugging Face
// rounding: the exponent 2j/d in float32, inv_freq_j = 1/θ^(2j/d) with the
// power and the quotient rounded to float32, φ = fl32(pos·inv_freq_j) and
// cos φ, sin φ evaluated in float64 and rounded to float32.
func NewRoPE(headDim int, theta float64, maxPos int) (*RoPE, error) {
	return NewPartialRoPE(headDim, theta, headDim/2, maxPos)
}

// NewPartialRoPE is NewRoPE where only the first rotated of the HeadDim/2
// frequency slots turn (LFM3's "proportional" partial rotation,
// docs/lfm3.md): slot j < rotated keeps NewRoPE's 1/θ^(2j/d), over the
// whole head size d, and the others get frequency 0, whose angle is 0 at
// every position (cos 1, sin 0), so Apply passes dimensions j and j+d/2
// through unchanged. rotated = HeadDim/2 is NewRoPE.
func NewPartialRoPE(headDim int, theta float64, rotated, maxPos int) (*RoPE, error) {
	if headDim <= 0 || headDim%2 != 0 || !(theta > 1) || math.IsInf(theta, 0) || maxPos < 0 || maxPos > 1<<24 || rotated < 0 || rotated > headDim/2 {
		return nil, fmt.Errorf("kernels: RoPE head size %d, theta %g, rotated pairs %d, positions %d: need an even positive head size, 1 < theta < Inf, 0 ≤ rotated pairs ≤ head size/2 and 0 ≤ positions ≤ 2^24", headDim, theta, rotated, maxPos)
	}
	half := headDim / 2
	r := &RoPE{HeadDim: headDim, MaxPos: maxPos, invFreq: make([]float32, half)}
	base := float64(float32(theta))
	for j := range rotated {
		e := float32(2*j) / float32(headDim)
		r.invFreq[j] = 1 / float32(math.Pow(base, float64(e)))
	}
	r.cos = make([]float32, maxPos*half)
	r.sin = make([]float32, maxPos*half)
	for p := range maxPos {
		r.angles(r.cos[p*half:(p+1)*half], r.sin[p*half:(p+1)*half], p)
	}
	return r, nil
}

func (r *RoPE) angles(cos, sin []float32, pos int) {
	for j, f := range r.invFreq {
		phi := float64(float32(float32(pos) * f))
		cos[j] = float32(math.Cos(phi))
		sin[j] = float32(math.Sin(phi))
	}
}

// Apply rotates one head vector z (HeadDim values) in place for position
// pos ≥ 0: z'_j = z_j cos φ_j − z_{j+d/2} sin φ_j and z'_{j+d/2} = z_{j+d/2}
// cos φ_j + z_j sin φ_j, each product rounded before the sum as in the
// Hugging Face code (no fusion).
func (r *RoPE) Apply(z []float32, pos int) {
	half := r.HeadDim / 2
	checkLen("RoPE.Apply", r.HeadDim, len(z))
	var cb, sb [256]float32
	cos, sin := r.at(pos, cb[:], sb[:])
	lo, hi := z[:half], z[half:]
	for j, c := range cos {
		s := sin[j]
		a, b := lo[j], hi[j]
		lo[j] = float32(a*c) - float32(b*s)
		hi[j] = float32(b*c) + float32(a*s)
	}
}

// at returns the cos and sin values of position pos: the table's, or,
// past it, computed into cb and sb (or new slices when the head is wider
// than they hold).
func (r *RoPE) at(pos int, cb, sb []float32) (cos, sin []float32) {
	half := r.HeadDim / 2
	if pos < r.MaxPos {
		return r.cos[pos*half : (pos+1)*half], r.sin[pos*half : (pos+1)*half]
	}
	if half <= len(cb) {
		cos, sin = cb[:half], sb[:half]
	} else {
		cos, sin = make([]float32, half), make([]float32, half)
	}
	r.angles(cos, sin, pos)
	return cos, sin
}

// ApplyPairs rotates one head vector z in place for position pos by the
// same angles as Apply, but over interleaved pairs (GPT-J style, a DSpark
// drafter's rope_is_neox_style false): z'_{2j} = z_{2j} cos φ_j −
// z_{2j+1} sin φ_j and z'_{2j+1} = z_{2j+1} cos φ_j + z_{2j} sin φ_j.
func (r *RoPE) ApplyPairs(z []float32, pos int) {
	checkLen("RoPE.ApplyPairs", r.HeadDim, len(z))
	var cb, sb [256]float32
	cos, sin := r.at(pos, cb[:], sb[:])
	for j, c := range cos {
		s := sin[j]
		a, b := z[2*j], z[2*j+1]
		z[2*j] = float32(a*c) - float32(b*s)
		z[2*j+1] = float32(b*c) + float32(a*s)
	}
}

// ApplyHeads rotates heads consecutive head vectors of z for position pos.
func (r *RoPE) ApplyHeads(z []float32, heads, pos int) {
	checkLen("RoPE.ApplyHeads", heads*r.HeadDim, len(z))
	for h := range heads {
		r.Apply(z[h*r.HeadDim:(h+1)*r.HeadDim], pos)
	}
}

// Table returns the cos and sin values of positions [0, n), [n, HeadDim/2]
// row-major, with the bits Apply uses: a device applying RoPE uploads
// them instead of evaluating cos and sin itself.
func (r *RoPE) Table(n int) (cos, sin []float32) {
	half := r.HeadDim / 2
	cos, sin = make([]float32, n*half), make([]float32, n*half)
	for p := range n {
		if p < r.MaxPos {
			copy(cos[p*half:(p+1)*half], r.cos[p*half:])
			copy(sin[p*half:(p+1)*half], r.sin[p*half:])
			continue
		}
		r.angles(cos[p*half:(p+1)*half], sin[p*half:(p+1)*half], p)
	}
	return cos, sin
}
