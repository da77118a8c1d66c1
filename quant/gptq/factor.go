package gptq

import "math"

// factorInverse computes into u (k×k, row-major) the upper triangular U
// with h⁻¹ = UᵀU, h symmetric positive definite; h is overwritten. It
// returns −1 on success, else the failing row and the reason.
//
// First h = R·Rᵀ with R upper triangular (Cholesky from the last index
// down), then U = R⁻¹. Every entry is the value of the plain algorithm —
// one dot product per entry, each dot summed in dot's order — but four
// independent dot products run together (dotLanes4): four rows of the
// factor against one earlier row, and four columns of the inverse against
// one row of the factor.
func factorInverse(h, u []float64, k int) (int, string) {
	// R is found through the reversed matrix: with J the index reversal,
	// J·h·J = L·Lᵀ by the ordinary row-oriented Cholesky (whose inner
	// products run over contiguous rows of L) and R = J·L·J.
	l := h // reuse: L overwrites the lower triangle of H' in place
	reverseBoth(l, k)
	var lanes [16]float64
	var ao, bo [4]int
	for i0 := 0; i0 < k; i0 += 4 {
		rn := min(4, k-i0)
		jFirst := 0
		if rn == 4 {
			// Entries j < i0 of rows i0…i0+3 depend only on those rows'
			// earlier entries and on finished rows j: the part of each
			// dot over whole quads [0, 4q) is computed for the four rows
			// at once, then dot's combination and its tail.
			jFirst = i0
			for j := range i0 {
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
	// U = R⁻¹ = J·L⁻¹·J, and L⁻¹ is lower triangular. Compute M = L⁻¹
	// column by column (forward substitution on unit vectors), four
	// columns at a time, writing U[k−1−a][k−1−b] = M[a][b]:
	// M[a][b] = 0 for a < b; M[b][b] = 1/L[b][b];
	// M[a][b] = −(Σ_{m=b}^{a−1} L[a][m]·M[m][b]) / L[a][a].
	clear(u)
	cols := make([]float64, 4*k) // cols[c*k+a] = M[a][b0+c]
	for b0 := 0; b0 < k; b0 += 4 {
		cn := min(4, k-b0)
		clear(cols)
		for c := range cn {
			b := b0 + c
			col := cols[c*k : (c+1)*k]
			col[b] = 1 / l[b*k+b]
			// Rows a < b0+4 (the corner) one dot at a time.
			for a := b + 1; a < min(b0+4, k); a++ {
				la := l[a*k : a*k+a]
				col[a] = -dot(la[b:a], col[b:a]) / l[a*k+a]
			}
		}
		if cn == 4 {
			for a := b0 + 4; a < k; a++ {
				// Column b's dot runs over m in [b, a): (a−b)/4 whole quads
				// from b. The quads all four columns have go through
				// dotLanes4; column b0 may have one more.
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
		}
		for c := range cn {
			b := b0 + c
			col := cols[c*k : (c+1)*k]
			for a := b; a < k; a++ {
				v := col[a]
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return k - 1 - a, "non-finite inverse"
				}
				u[(k-1-a)*k+(k-1-b)] = v
			}
		}
	}
	return -1, ""
}
