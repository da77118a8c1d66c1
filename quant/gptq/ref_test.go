package gptq

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/lfmq/lfmq/format/bfp"
)

// This file keeps the solver's kernels as they were before they were
// rewritten for speed (issue 12), as the independent reference the new ones
// must match bit for bit, and as the same-run baseline of the benchmarks.

// factorInverseRef is the original factorInverse: a row-oriented Cholesky
// of J·h·J with one dot product per entry, then L⁻¹ column by column.
func factorInverseRef(h, u []float64, k int) (int, string) {
	l := h
	reverseBoth(l, k)
	for i := range k {
		li := l[i*k : i*k+k]
		for j := 0; j <= i; j++ {
			lj := l[j*k : j*k+k]
			s := li[j] - dot(li[:j], lj[:j])
			if i == j {
				if !(s > 0) || math.IsInf(s, 0) {
					return k - 1 - i, "non-positive pivot"
				}
				li[i] = math.Sqrt(s)
			} else {
				li[j] = s / lj[j]
			}
		}
		if v := li[i]; math.IsNaN(v) || math.IsInf(v, 0) {
			return k - 1 - i, "non-finite factor"
		}
	}
	clear(u)
	col := make([]float64, k)
	for b := range k {
		clear(col)
		col[b] = 1 / l[b*k+b]
		for a := b + 1; a < k; a++ {
			la := l[a*k : a*k+a]
			col[a] = -dot(la[b:a], col[b:a]) / l[a*k+a]
		}
		for a := b; a < k; a++ {
			v := col[a]
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return k - 1 - a, "non-finite inverse"
			}
			u[(k-1-a)*k+(k-1-b)] = v
		}
	}
	return -1, ""
}

// deferredRef is the original deferred block feedback of Quantize: every
// later row j takes the block's errors one row i at a time, in order,
// skipping zero multipliers.
func deferredRef(wp, u, errs []float64, k, out, b0, b1 int) {
	for j := b1; j < k; j++ {
		dst := wp[j*out : (j+1)*out]
		for i := b0; i < b1; i++ {
			if uij := u[i*k+j]; uij != 0 {
				subScaled(dst, uij, errs[(i-b0)*out:(i-b0+1)*out])
			}
		}
	}
}

// quantizeRef is Quantize with the original deferred feedback, for the
// benchmarks' baseline.
func quantizeRef(f *Factor, fm bfp.Format, w []float32, out int) (*Result, error) {
	k := f.k
	b, err := bfp.NewBuilder(fm, out, k)
	if err != nil {
		return nil, err
	}
	wp := make([]float64, k*out)
	for i, oi := range f.perm {
		if f.dead[oi] {
			continue
		}
		row := wp[i*out : (i+1)*out]
		for n := range row {
			row[n] = float64(w[n*k+oi])
		}
	}
	bs := min(f.blockSize, k)
	errs := make([]float64, bs*out)
	r32 := make([]float32, out)
	q32 := make([]float32, out)
	exps := make([]uint8, bfp.RowGroups(out))
	codes := make([]uint8, bfp.PaddedDim(out))
	q := make([]float32, out*k)
	var loss float64
	for b0 := 0; b0 < k; b0 += bs {
		b1 := min(b0+bs, k)
		for i := b0; i < b1; i++ {
			row := wp[i*out : (i+1)*out]
			for n, v := range row {
				r32[n] = float32(v)
			}
			if err := bfp.EncodeRow(fm, r32, exps, codes); err != nil {
				return nil, err
			}
			if err := bfp.DecodeRow(fm, exps, codes, q32); err != nil {
				return nil, err
			}
			oi := f.perm[i]
			if err := b.SetRow(oi, exps, codes); err != nil {
				return nil, err
			}
			uii := f.u[i*k+i]
			e := errs[(i-b0)*out : (i-b0+1)*out]
			var sq float64
			for n, v := range row {
				d := v - float64(q32[n])
				sq += float64(d * d)
				e[n] = d / uii
				q[n*k+oi] = q32[n]
			}
			loss += sq / float64(2*uii*uii)
			urow := f.u[i*k : (i+1)*k]
			for j := i + 1; j < b1; j++ {
				if uij := urow[j]; uij != 0 {
					subScaled(wp[j*out:(j+1)*out], uij, e)
				}
			}
		}
		deferredRef(wp, f.u, errs, k, out, b0, b1)
	}
	return &Result{Packed: b.Bytes(), Q: q, Loss: loss}, nil
}

// lossesRef is the original Losses.
func lossesRef(h []float64, w []float32, qs [][]float32, out, in int) ([]float64, error) {
	if len(h) != in*in || len(w) != out*in {
		return nil, fmt.Errorf("lengths")
	}
	totals := make([]float64, len(qs))
	d := make([]float64, in*out)
	for m, q := range qs {
		for o := range out {
			for k := range in {
				v := float64(w[o*in+k])
				if q != nil {
					v -= float64(q[o*in+k])
				}
				d[k*out+o] = v
			}
		}
		row := func(k int) []float64 { return d[k*out : (k+1)*out] }
		var total float64
		for k0 := 0; k0 < in; k0 += 4 {
			kn := min(4, in-k0)
			var part [4]float64
			for a := range kn {
				k := k0 + a
				part[a] = float64(h[k*in+k] * dot(row(k), row(k)))
				for l := k + 1; l < k0+kn; l++ {
					part[a] += float64(2 * float64(h[k*in+l]*dot(row(k), row(l))))
				}
			}
			if kn == 4 {
				r0, r1, r2, r3 := row(k0), row(k0+1), row(k0+2), row(k0+3)
				for l := k0 + 4; l < in; l++ {
					x0, x1, x2, x3 := dot4Ref(r0, r1, r2, r3, row(l))
					part[0] += float64(2 * float64(h[k0*in+l]*x0))
					part[1] += float64(2 * float64(h[(k0+1)*in+l]*x1))
					part[2] += float64(2 * float64(h[(k0+2)*in+l]*x2))
					part[3] += float64(2 * float64(h[(k0+3)*in+l]*x3))
				}
			}
			for a := range kn {
				total += part[a]
			}
		}
		totals[m] = total / 2
	}
	return totals, nil
}

func dot4Ref(a0, a1, a2, a3, b []float64) (s0, s1, s2, s3 float64) {
	n := len(b)
	a0, a1, a2, a3 = a0[:n], a1[:n], a2[:n], a3[:n]
	for i, y := range b {
		s0 += float64(a0[i] * y)
		s1 += float64(a1[i] * y)
		s2 += float64(a2[i] * y)
		s3 += float64(a3[i] * y)
	}
	return s0, s1, s2, s3
}

// lowRankHessian returns a K×K symmetric positive semi-definite
// H = 2·Σ_r s_r·v_r·v_rᵀ/rank over rank random vectors with heavy-tailed
// per-coordinate scales, plus dead indices: cheap to build at K = 2048,
// and as ill-conditioned as a real routed Hessian.
func lowRankHessian(r *rand.Rand, k, rank int, dead []int) []float64 {
	scale := make([]float64, k)
	for i := range scale {
		scale[i] = math.Exp(r.NormFloat64())
	}
	for _, d := range dead {
		scale[d] = 0
	}
	h := make([]float64, k*k)
	v := make([]float64, k)
	for range rank {
		for i := range v {
			v[i] = r.NormFloat64() * scale[i]
		}
		for i := range k {
			a := 2 * v[i] / float64(rank)
			row := h[i*k : (i+1)*k]
			for j, x := range v {
				row[j] += a * x
			}
		}
	}
	return h
}

// newFactorRef is NewFactor on factorInverseRef, without input checks.
func newFactorRef(h []float64, k int, opts Options) (*Factor, error) {
	return newFactorWith(h, k, opts, factorInverseRef)
}
