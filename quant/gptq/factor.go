package gptq

import (
	"math"
	"sync/atomic"
)

// panelRows is the number of rows of the Cholesky factor finished together
// before the rows below them take their entries in those columns; a
// multiple of four, so that the groups of four rows never straddle panels.
// It changes no bit.
const panelRows = 32

// factorInverse computes into u (k×k, row-major, its strict lower triangle
// zero) the upper triangular U with h⁻¹ = UᵀU, h symmetric positive
// definite; h is overwritten. It returns −1 on success, else the failing
// row and the reason. threads goroutines share the work; the result does
// not depend on their number.
//
// First h = R·Rᵀ with R upper triangular (Cholesky from the last index
// down), then U = R⁻¹. Every entry is the value of the plain algorithm —
// one dot product per entry, each dot summed in dot's order — but four
// independent dot products run together (dotLanes4): four rows of the
// factor against one earlier row, and four columns of the inverse against
// one row of the factor.
//
// Since each entry is its own dot product, only the order in which entries
// become available matters, never who computes them: the factor is formed
// a panel of panelRows rows at a time (the panel's own entries right of
// the panel start in row order, then, in parallel by groups of four rows,
// every later row's entries in the panel's columns), and the inverse's
// columns, which are independent, in parallel by groups of four.
func factorInverse(h, u []float64, k, threads int) (int, string) {
	return factorInverseStop(h, u, k, threads, nil)
}

// stoppedIndex is factorInverseStop's index when stop was closed.
const stoppedIndex = -2

// stopped reports whether stop is closed (never for a nil stop).
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// factorInverseStop is factorInverse, which gives up (stoppedIndex) at the
// next panel of the factor, or group of columns of the inverse, once stop
// is closed: a 2048-wide solve then ends in milliseconds, not seconds.
// The strict lower triangle of u must be zero (a new u is); the rest is
// overwritten.
func factorInverseStop(h, u []float64, k, threads int, stop <-chan struct{}) (int, string) {
	// R is found through the reversed matrix: with J the index reversal,
	// J·h·J = L·Lᵀ by the ordinary row-oriented Cholesky (whose inner
	// products run over contiguous rows of L) and R = J·L·J.
	l := h // reuse: L overwrites the lower triangle of H' in place
	reverseBoth(l, k)
	for p0 := 0; p0 < k; p0 += panelRows {
		if stopped(stop) {
			return stoppedIndex, "stopped"
		}
		p1 := min(p0+panelRows, k)
		// The panel's rows, whose entries left of p0 are done: entries
		// [p0, i] of row i, in row order, checking each pivot.
		for i0 := p0; i0 < p1; i0 += 4 {
			rn := min(4, k-i0)
			jFirst := p0
			if rn == 4 {
				choleskyQuad(l, k, i0, p0, i0)
				jFirst = i0
			}
			for i := i0; i < i0+rn; i++ {
				li := l[i*k : i*k+k]
				for j := jFirst; j <= i; j++ {
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
		}
		// Every later row's entries in the panel's columns [p0, p1): they
		// read the finished panel rows and the row's own earlier entries.
		quads := (k - p1 + 3) / 4
		th := threads
		if (k-p1)*(p1-p0)*p1 < minParallelWork {
			th = 1
		}
		per := runLength(quads, th)
		parallel(th, (quads+per-1)/per, func(_, t int) {
			for q := t * per; q < min(quads, (t+1)*per); q++ {
				i0 := p1 + 4*q
				if i0+4 <= k {
					choleskyQuad(l, k, i0, p0, p1)
					continue
				}
				// The last, partial group: one dot per entry.
				for i := i0; i < k; i++ {
					li := l[i*k : i*k+k]
					for j := p0; j < p1; j++ {
						lj := l[j*k : j*k+k]
						li[j] = (li[j] - dot(li[:j], lj[:j])) / lj[j]
					}
				}
			}
		})
	}
	// U = R⁻¹ = J·L⁻¹·J, and L⁻¹ is lower triangular. Compute M = L⁻¹
	// column by column (forward substitution on unit vectors), four
	// columns at a time, writing U[k−1−a][k−1−b] = M[a][b]:
	// M[a][b] = 0 for a < b; M[b][b] = 1/L[b][b];
	// M[a][b] = −(Σ_{m=b}^{a−1} L[a][m]·M[m][b]) / L[a][a].
	// Every entry of U's upper triangle is written below when the
	// inverse succeeds, and none of the lower one: u is not cleared, so
	// that the lower half of a new u is never touched.
	groups := (k + 3) / 4
	blocks := (groups + inverseBlockGroups - 1) / inverseBlockGroups
	th := threads
	if k*k*k/3 < minParallelWork {
		th = 1
	}
	cols := make([][]float64, min(max(1, th), blocks))
	// fail[g]: the first non-finite entry of group g's columns, in the
	// order the serial loop checks them (k when none): the lowest failing
	// group is the serial loop's failure.
	fail := make([]int, groups)
	var halt atomic.Bool
	parallel(th, blocks, func(w, b int) {
		g0, g1 := b*inverseBlockGroups, min(groups, (b+1)*inverseBlockGroups)
		if halt.Load() || stopped(stop) {
			halt.Store(true)
			for g := g0; g < g1; g++ {
				fail[g] = k
			}
			return
		}
		if cols[w] == nil {
			cols[w] = make([]float64, 4*k*inverseBlockGroups)
		}
		inverseGroups(l, u, cols[w], k, g0, g1, fail)
	})
	if halt.Load() {
		return stoppedIndex, "stopped"
	}
	for _, a := range fail {
		if a < k {
			return k - 1 - a, "non-finite inverse"
		}
	}
	return -1, ""
}

// choleskyQuad sets the entries j in [j0, j1) (j1 ≤ i0) of the four rows
// i0…i0+3 of L, whose entries left of j0 and rows j are done: the part of
// each dot over whole quads [0, 4q) is computed for the four rows at once,
// then dot's combination and its tail.
func choleskyQuad(l []float64, k, i0, j0, j1 int) {
	var lanes [16]float64
	var lanes16 [64]float64
	var ao, bo [4]int
	j := j0
	// Four entries j…j+3 (j a multiple of four) have the same whole quads
	// q = j/4: their sixteen lane sums come from one dotLanes4x4, then
	// each entry, in order, takes its combination and its tail (which
	// reads the entries just set before it).
	for ; j%4 == 0 && j+4 <= j1; j += 4 {
		q := j / 4
		for a := range 4 {
			ao[a], bo[a] = (i0+a)*k, (j+a)*k
		}
		dotLanes4x4(&lanes16, l, &ao, l, &bo, q)
		for c := range 4 {
			jc := j + c
			lj := l[jc*k : jc*k+jc+1]
			for a := range 4 {
				li := l[(i0+a)*k : (i0+a)*k+jc+1]
				s := combine(lanes16[16*a+4*c : 16*a+4*c+4])
				for m := 4 * q; m < jc; m++ {
					s += float64(li[m] * lj[m])
				}
				li[jc] = (li[jc] - s) / lj[jc]
			}
		}
	}
	for ; j < j1; j++ {
		q := j / 4
		for a := range 4 {
			ao[a], bo[a] = (i0+a)*k, j*k
		}
		dotLanes4(&lanes, l, &ao, l, &bo, q)
		lj := l[j*k : j*k+j+1]
		for a := range 4 {
			li := l[(i0+a)*k : (i0+a)*k+j+1]
			s := combine(lanes[4*a : 4*a+4])
			for m := 4 * q; m < j; m++ {
				s += float64(li[m] * lj[m])
			}
			li[j] = (li[j] - s) / lj[j]
		}
	}
}

// inverseBlockGroups is the number of groups of four columns of the
// inverse formed in one pass over the rows of L: each row is read from
// memory once for all of them instead of once per group. It changes no
// bit.
const inverseBlockGroups = 8

// inverseGroups computes the groups of columns [g0, g1) of M = L⁻¹ (group g
// is columns 4g…4g+3, fewer at the end) into cols (4k scratch per group)
// and writes them to u; fail[g] is the row of group g's first non-finite
// entry in the order column by column, row by row, or k when all are
// finite. Each column is computed exactly as alone: the groups' rows are
// only interleaved, row a of every group after row a−1 of every group.
func inverseGroups(l, u, cols []float64, k, g0, g1 int, fail []int) {
	cols = cols[:4*k*(g1-g0)]
	clear(cols)
	group := func(g int) []float64 { return cols[4*k*(g-g0) : 4*k*(g-g0+1)] }
	for g := g0; g < g1; g++ {
		inverseCorner(l, group(g), k, 4*g)
	}
	for a := 4*g0 + 4; a < k; a++ {
		for g := g0; g < g1 && 4*g+4 <= a; g++ {
			inverseRow(l, group(g), k, 4*g, a)
		}
	}
	for g := g0; g < g1; g++ {
		fail[g] = inverseStore(u, group(g), k, 4*g)
	}
}

// inverseCorner starts the columns b0…b0+3 (fewer at the end) of M = L⁻¹
// in cols (column c at cols[c·k:]): the diagonal and the rows a < b0+4,
// one dot at a time.
func inverseCorner(l, cols []float64, k, b0 int) {
	for c := range min(4, k-b0) {
		b := b0 + c
		col := cols[c*k : (c+1)*k]
		col[b] = 1 / l[b*k+b]
		for a := b + 1; a < min(b0+4, k); a++ {
			la := l[a*k : a*k+a]
			col[a] = -dot(la[b:a], col[b:a]) / l[a*k+a]
		}
	}
}

// inverseRow sets row a ≥ b0+4 of the four columns b0…b0+3 of M in cols,
// whose rows before a are done. Column b's dot runs over m in [b, a):
// (a−b)/4 whole quads from b. The quads all four columns have go through
// dotLanes4; column b0 may have one more.
func inverseRow(l, cols []float64, k, b0, a int) {
	var lanes [16]float64
	var ao, bo [4]int
	quads := (a - b0 - 3) / 4
	for c := range 4 {
		ao[c], bo[c] = a*k+b0+c, c*k+b0+c
	}
	dotLanes4(&lanes, l, &ao, cols, &bo, quads)
	la := l[a*k : a*k+a]
	for c := range 4 {
		b := b0 + c
		col := cols[c*k : (c+1)*k]
		s := lanes[4*c : 4*c+4]
		m := b + 4*quads
		if (a-b)/4 > quads {
			for r := range 4 {
				s[r] += float64(la[m+r] * col[m+r])
			}
			m += 4
		}
		v := combine(s)
		for ; m < a; m++ {
			v += float64(la[m] * col[m])
		}
		col[a] = -v / l[a*k+a]
	}
}

// inverseStore writes the columns b0…b0+3 (fewer at the end) of M from
// cols to u, U[k−1−a][k−1−b] = M[a][b], and returns the row of the first
// non-finite entry, column by column, or k when all are finite.
func inverseStore(u, cols []float64, k, b0 int) int {
	for c := range min(4, k-b0) {
		b := b0 + c
		col := cols[c*k : (c+1)*k]
		for a := b; a < k; a++ {
			v := col[a]
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return a
			}
			u[(k-1-a)*k+(k-1-b)] = v
		}
	}
	return k
}
