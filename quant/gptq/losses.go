package gptq

import (
	"fmt"
	"sync/atomic"
)

// Loss returns ½·tr(ΔWᵀ H ΔW) in float64 for ΔW = W − Q in the W_tt frame,
// where w and q are [out, in] row-major (Hugging Face layout) and h is the
// in×in Hessian: the router-weighted mean squared output error that GPTQ
// minimises (docs/gptq.md §1). It is Losses with one Q.
func Loss(h []float64, w, q []float32, out, in int) (float64, error) {
	l, err := Losses(h, w, [][]float32{q}, out, in)
	if err != nil {
		return 0, err
	}
	return l[0], nil
}

// lossBlockGroups is the number of groups of four rows whose products with
// every later row are formed together: their rows (4·out values each) stay
// in the cache while each later row passes once.
const lossBlockGroups = 16

// Losses returns Loss for several Q of one W in one pass (a nil Q stands for
// Q = 0, whose loss ½·tr(Wᵀ H W) normalises the others). h must be
// symmetric: only its upper triangle is read, as
// ½·Σ_k (H_kk·‖ΔW_k‖² + 2·Σ_{l>k} H_kl·ΔW_k·ΔW_l), each sum in index order.
//
// The rows k are taken four at a time (a group). Inside a group the
// products ΔW_k·ΔW_l are dot's; with the rows after the group they are
// plain running sums over the outputs in order, which gram8 forms for a
// group against eight later rows at once (gram16 for two groups, gram32
// for two groups against sixteen rows). The bits do not depend on how the
// work is cut.
func Losses(h []float64, w []float32, qs [][]float32, out, in int) ([]float64, error) {
	return LossesThreads(h, w, qs, out, in, 1)
}

// LossesThreads is Losses on up to threads goroutines, with the same bits
// for any threads: the blocks of lossBlockGroups groups are independent
// (each forms its groups' partial sums), and the partial sums are added in
// group order on one goroutine, as Losses adds them.
func LossesThreads(h []float64, w []float32, qs [][]float32, out, in, threads int) ([]float64, error) {
	return LossesStop(h, w, qs, out, in, threads, nil)
}

// LossesStop is LossesThreads, which gives up with ErrStopped at its next
// block of rows once stop is closed.
//
// A matrix with many more outputs than inputs whose ΔWᵀ would be large
// (lossesBand) is taken in bands of outputs: every sum over the outputs
// then continues from band to band in output order (gram8, diagLanes), so
// the bits are those of one pass, and only a band of ΔWᵀ and the in×in
// sums are held instead of ΔWᵀ in float64.
func LossesStop(h []float64, w []float32, qs [][]float32, out, in, threads int, stop <-chan struct{}) ([]float64, error) {
	if len(h) != in*in || len(w) != out*in {
		return nil, &InputError{What: "Loss", Msg: fmt.Sprintf("lengths %d and %d for [%d, %d]", len(h), len(w), out, in)}
	}
	for m, q := range qs {
		if q != nil && len(q) != out*in {
			return nil, &InputError{What: "Loss", Msg: fmt.Sprintf("Q %d has %d values for [%d, %d]", m, len(q), out, in)}
		}
	}
	band := lossesBand(in, out)
	s := newLossStream(h, out, in, threads, stop, band < out)
	totals := make([]float64, len(qs))
	for m, q := range qs {
		s.reset()
		for o0 := 0; o0 < out; o0 += band {
			ob := min(band, out-o0)
			var qb []float32
			if q != nil {
				qb = q[o0*in : (o0+ob)*in]
			}
			if err := s.Add(w[o0*in:(o0+ob)*in], qb); err != nil {
				return nil, err
			}
		}
		totals[m] = s.total
	}
	return totals, nil
}

// LossStream forms Loss for a weight and one Q given band by band of
// outputs, for a caller that cannot hold the whole weight (a model's LM
// head, solved a band at a time): Add takes each band in output order, and
// Total gives the loss, with the bits of Losses on the whole matrix. Every
// sum over the outputs continues from band to band in output order, so
// only the in×in sums are kept (8·in² bytes) and a band of ΔWᵀ is held
// while Add runs (LossStreamMemory). A LossStream is used from one
// goroutine.
type LossStream struct {
	h                     []float64
	out, in, threads      int
	stop                  <-chan struct{}
	groups, pairs, blocks int
	stride, per           int
	banded                bool
	xs                    [][]float64 // one pass: each goroutine's block of groups' sums
	xAll                  []float64   // in bands: every group's sums, kept across bands
	lanes, parts          []float64
	next                  int // outputs added so far
	total                 float64
	done                  bool
}

// NewLossStream returns a LossStream for a weight [out, in] and the in×in
// Hessian h (symmetric: only its upper triangle is read), whose work runs
// on up to threads goroutines (the bits do not depend on them) and gives
// up with ErrStopped at its next block of rows once stop is closed.
func NewLossStream(h []float64, out, in, threads int, stop <-chan struct{}) (*LossStream, error) {
	if in < 1 || out < 1 || len(h) != in*in {
		return nil, &InputError{What: "Loss", Msg: fmt.Sprintf("a Hessian of %d values for [%d, %d]", len(h), out, in)}
	}
	return newLossStream(h, out, in, threads, stop, true), nil
}

// newLossStream is NewLossStream, in bands or, for Losses on a matrix
// small enough, in one pass, whose one Add holds the whole matrix and
// whose goroutines keep only their own block's sums.
func newLossStream(h []float64, out, in, threads int, stop <-chan struct{}, banded bool) *LossStream {
	if threads < 1 || in*in*out < minParallelWork {
		threads = 1
	}
	s := &LossStream{h: h, out: out, in: in, threads: threads, stop: stop, banded: banded}
	s.groups = (in + 3) / 4
	s.pairs = (s.groups + 1) / 2
	s.blocks = (s.groups + lossBlockGroups - 1) / lossBlockGroups
	// x[4l + a] of group g's sums (xOf) = Σ_o ΔW_{4g+a,o}·ΔW_{l,o} for the
	// rows l after group g.
	s.stride = 2 * s.pairs * 4 * 4
	if banded {
		s.xAll = make([]float64, s.groups*s.stride)
	} else {
		s.xs = make([][]float64, min(threads, s.blocks))
	}
	// lanes[64g + 16a + 4b + r] is lane r of the dot of rows 4g+a and
	// 4g+b (a ≤ b) over the outputs so far.
	s.lanes = make([]float64, 64*s.groups)
	// parts[4g+a] is row 4g+a's share of the total.
	s.parts = make([]float64, 4*s.groups)
	s.per = runLength(s.groups, threads)
	return s
}

// reset readies s for another Q of the same shape and Hessian.
func (s *LossStream) reset() { s.next, s.total, s.done = 0, 0, false }

// xOf returns group g's sums for goroutine wk running the block from g0.
func (s *LossStream) xOf(wk, g, g0 int) []float64 {
	if s.banded {
		return s.xAll[g*s.stride : (g+1)*s.stride]
	}
	return s.xs[wk][(g-g0)*s.stride : (g-g0+1)*s.stride]
}

// Add takes the next band of outputs: w their weights [ob, in] row-major
// (ob = len(w)/in) and q their Q (nil for Q = 0). A band starts where the
// last one ended, and every band but the last has a multiple of four
// outputs, so that the running sums keep their lanes.
func (s *LossStream) Add(w, q []float32) error {
	in := s.in
	ob := len(w) / in
	o0 := s.next
	switch {
	case ob < 1 || len(w) != ob*in || (q != nil && len(q) != len(w)):
		return &InputError{What: "Loss", Msg: fmt.Sprintf("a band of %d weights and %d Q values for rows of %d", len(w), len(q), in)}
	case o0+ob > s.out:
		return &InputError{What: "Loss", Msg: fmt.Sprintf("outputs [%d, %d) past the weight's %d", o0, o0+ob, s.out)}
	case o0+ob < s.out && (ob%4 != 0 || !s.banded):
		return &InputError{What: "Loss", Msg: fmt.Sprintf("a band of %d outputs at %d: not a multiple of 4 and not the last", ob, o0)}
	}
	h, threads, groups, pairs, blocks, per := s.h, s.threads, s.groups, s.pairs, s.blocks, s.per
	lanes, parts := s.lanes, s.parts
	first, last := o0 == 0, o0+ob == s.out
	// d holds the band of ΔWᵀ in groups of four rows, interleaved: element
	// o of row 4g+a is d[(g·ob+o)·4+a]. Rows past in (padding up to a
	// whole pair of groups) are zero. It goes back to the scratch when the
	// band is done, for the next band or the next stream.
	dd := getScratch(2 * pairs * 4 * ob)
	defer putScratch(dd)
	clear(dd[groups*4*ob:]) // the padding group, if any
	parallel(threads, (groups+per-1)/per, func(_, t int) {
		fillDelta(dd, w, q, ob, in, t*per, min(groups, (t+1)*per))
	})
	group := func(g int) []float64 { return dd[g*4*ob : (g+1)*4*ob] }
	xOf, stop := s.xOf, s.stop
	banded, xs, stride := s.banded, s.xs, s.stride
	var halt atomic.Bool
	parallel(threads, blocks, func(wk, b int) {
		if halt.Load() || stopped(stop) {
			halt.Store(true)
			return
		}
		if !banded && xs[wk] == nil {
			xs[wk] = make([]float64, lossBlockGroups*stride)
		}
		var tile [128]float64
		g0 := b * lossBlockGroups
		g1 := min(g0+lossBlockGroups, groups)
		// load and store move a group's sums for pair p to and from
		// quarter h of tile (zero in the first band).
		load := func(g, p, h int) {
			if first {
				clear(tile[32*h : 32*h+32])
				return
			}
			copy(tile[32*h:32*h+32], xOf(wk, g, g0)[32*p:])
		}
		store := func(g, p, h int) { copy(xOf(wk, g, g0)[32*p:], tile[32*h:32*h+32]) }
		// Pair p (groups 2p, 2p+1) is needed by group g when 2p+1 > g,
		// so by the groups [g0, gn) of the block. onePair takes the
		// groups [g, gn) with pair p, two at a time (gram16).
		onePair := func(g, gn, p int) {
			pd := dd[2*p*4*ob : (2*p+2)*4*ob]
			for ; g+2 <= gn; g += 2 {
				load(g, p, 0)
				load(g+1, p, 1)
				gram16((*[64]float64)(tile[:64]), dd[g*4*ob:(g+2)*4*ob], pd, ob)
				store(g, p, 0)
				store(g+1, p, 1)
			}
			if g < gn {
				load(g, p, 0)
				gram8((*[32]float64)(tile[:32]), group(g), pd, ob)
				store(g, p, 0)
			}
		}
		// Pairs p and p+1 together while both have groups, two
		// groups against both pairs at a time (gram32); each sum is
		// still formed by one call over the band, so the bits are
		// those of onePair.
		p := (g0 + 1) / 2
		for ; p+1 < pairs; p += 2 {
			gn := min(g1, 2*p+1)
			g := g0
			for ; g+2 <= gn; g += 2 {
				load(g, p, 0)
				load(g+1, p, 1)
				load(g, p+1, 2)
				load(g+1, p+1, 3)
				gram32(&tile, dd[g*4*ob:(g+2)*4*ob], dd[2*p*4*ob:(2*p+4)*4*ob], ob)
				store(g, p, 0)
				store(g+1, p, 1)
				store(g, p+1, 2)
				store(g+1, p+1, 3)
			}
			onePair(g, gn, p)
			onePair(g, min(g1, 2*p+3), p+1)
		}
		if p < pairs {
			onePair(g0, min(g1, 2*p+1), p)
		}
		for g := g0; g < g1; g++ {
			k0 := 4 * g
			kn := min(4, in-k0)
			gd := group(g)
			gl := lanes[64*g : 64*g+64]
			if first {
				clear(gl)
			}
			for a := range kn {
				for c := a; c < kn; c++ {
					diagLanes((*[4]float64)(gl[16*a+4*c:]), gd, a, c, ob)
				}
			}
			if !last {
				continue
			}
			// dot(a, c) = the lanes combined, then the last band's
			// odd outputs.
			dotAC := func(a, c int) float64 {
				return diagTail(combine(gl[16*a+4*c:16*a+4*c+4]), gd, a, c, ob)
			}
			var part [4]float64
			for a := range kn {
				k := k0 + a
				part[a] = float64(h[k*in+k] * dotAC(a, a))
				for l := k + 1; l < k0+kn; l++ {
					part[a] += float64(2 * float64(h[k*in+l]*dotAC(a, l-k0)))
				}
			}
			if kn == 4 {
				xg := xOf(wk, g, g0)
				for l := k0 + 4; l < in; l++ {
					xl := xg[4*l : 4*l+4]
					part[0] += float64(2 * float64(h[k0*in+l]*xl[0]))
					part[1] += float64(2 * float64(h[(k0+1)*in+l]*xl[1]))
					part[2] += float64(2 * float64(h[(k0+2)*in+l]*xl[2]))
					part[3] += float64(2 * float64(h[(k0+3)*in+l]*xl[3]))
				}
			}
			copy(parts[4*g:4*g+4], part[:])
		}
	})
	if halt.Load() {
		return ErrStopped
	}
	s.next += ob
	if last {
		var total float64
		for g := range groups {
			for a := range min(4, in-4*g) {
				total += parts[4*g+a]
			}
		}
		s.total, s.done = total/2, true
	}
	return nil
}

// Total returns the loss once every output has been added.
func (s *LossStream) Total() (float64, error) {
	if !s.done {
		return 0, &InputError{What: "Loss", Msg: fmt.Sprintf("%d of %d outputs added", s.next, s.out)}
	}
	return s.total, nil
}

// LossStreamMemory is the most heap a LossStream holds for a weight of in
// inputs given in bands of at most band outputs, in bytes: the in×in sums
// kept across the bands and, while Add runs, a band of ΔWᵀ in float64
// (band = 0 for the sums alone).
func LossStreamMemory(in, band int) int64 {
	return int64(band)*int64(in+8)*8 + int64(in+8)*int64(in+8)*8
}

// lossesBandBytes bounds the float64 ΔWᵀ of Losses for matrices with at
// least twice as many outputs as inputs (the head; a dense layer's w1 and
// w3), whose in×in sums kept across bands are small beside it. Tests lower
// it.
var lossesBandBytes = 64 << 20

// lossesBand is the number of outputs of one band of Losses for a matrix
// [out, in]: all of them, or a multiple of 32 whose ΔWᵀ fits
// lossesBandBytes.
func lossesBand(in, out int) int {
	if out < 2*in || int64(in)*int64(out)*8 <= int64(lossesBandBytes) {
		return out
	}
	return max(32, lossesBandBytes/(8*in)&^31)
}

// LossesMemory is the most heap Losses holds at once for a matrix
// [out, in], in bytes: a band of ΔWᵀ in float64, and in bands the in×in
// sums kept across them.
func LossesMemory(out, in int) int64 {
	band := int64(lossesBand(in, out))
	m := band * int64(in+8) * 8
	if band < int64(out) {
		m += int64(in+8) * int64(in+8) * 8
	}
	return m
}

// fillDelta sets groups [g0, g1) of Losses' d to ΔW = W − Q (W for a nil
// Q), transposed and interleaved: element o of row 4g+a at
// d[(g·out+o)·4+a], and the rows past in of a last partial group to 0.
// Each row of W and Q is read in order, and each group's four values of an
// output are written together.
func fillDelta(d []float64, w, q []float32, out, in, g0, g1 int) {
	for o := range out {
		wr := w[o*in : (o+1)*in]
		var qr []float32
		if q != nil {
			qr = q[o*in : (o+1)*in]
		}
		for g := g0; g < g1; g++ {
			k0 := 4 * g
			dst := (*[4]float64)(d[(g*out+o)*4:])
			if k0+4 > in {
				for a := range in - k0 {
					v := float64(wr[k0+a])
					if qr != nil {
						v -= float64(qr[k0+a])
					}
					dst[a] = v
				}
				clear(dst[in-k0:]) // rows past in: d may be recycled
				continue
			}
			s := (*[4]float32)(wr[k0:])
			if qr == nil {
				dst[0], dst[1], dst[2], dst[3] = float64(s[0]), float64(s[1]), float64(s[2]), float64(s[3])
				continue
			}
			z := (*[4]float32)(qr[k0:])
			dst[0] = float64(s[0]) - float64(z[0])
			dst[1] = float64(s[1]) - float64(z[1])
			dst[2] = float64(s[2]) - float64(z[2])
			dst[3] = float64(s[3]) - float64(z[3])
		}
	}
}

// diagLanes adds to s the four lane sums of dot of rows a and b of a group
// of four interleaved rows of length n (element t of row r at 4t+r) over
// its whole quads of t: dot's running sums, continued from s.
func diagLanes(s *[4]float64, g []float64, a, b, n int) {
	s0, s1, s2, s3 := s[0], s[1], s[2], s[3]
	for t := 0; t+4 <= n; t += 4 {
		s0 += float64(g[4*t+a] * g[4*t+b])
		s1 += float64(g[4*(t+1)+a] * g[4*(t+1)+b])
		s2 += float64(g[4*(t+2)+a] * g[4*(t+2)+b])
		s3 += float64(g[4*(t+3)+a] * g[4*(t+3)+b])
	}
	s[0], s[1], s[2], s[3] = s0, s1, s2, s3
}

// diagTail is the end of dot for rows a and b of a group of length n after
// the lanes, combined, gave s: the products of its last n%4 elements.
func diagTail(s float64, g []float64, a, b, n int) float64 {
	for t := n &^ 3; t < n; t++ {
		s += float64(g[4*t+a] * g[4*t+b])
	}
	return s
}
