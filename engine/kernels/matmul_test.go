package kernels

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
)

// Sizes that reach every tail of the kernels: the 16-lane main loop and its
// 0..15 tail for F32/BF16 inputs, the 4-row and 4-batch groups, and for BFP
// partial tiles in both directions.
var (
	dotSizes = []int{0, 1, 15, 16, 17, 31, 32, 33, 1023, 4096}
	bfpSizes = []int{32, 64, 96, 128, 4096}
)

func TestDotKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range dotSizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			const stride = 4099 // rows of a 4-row block, not a multiple of 16
			wf := randVec(rng, 3*stride+n)
			wb := randBF16(rng, 3*stride+n)
			x := randVec(rng, 3*stride+n)
			var got, want [4]float32

			checkSame(t, "dotF32", []float32{dotF32(wf[:n], x)}, []float32{dotF32Go(wf[:n], x)})
			checkSame(t, "dotBF16", []float32{dotBF16(wb[:n], x)}, []float32{dotBF16Go(wb[:n], x)})

			dotF32x4(&got, wf, stride, x[:n])
			dotF32x4Go(&want, wf, stride, x[:n])
			checkSame(t, "dotF32x4", got[:], want[:])
			dotBF16x4(&got, wb, stride, x[:n])
			dotBF16x4Go(&want, wb, stride, x[:n])
			checkSame(t, "dotBF16x4", got[:], want[:])

			dotF32b4(&got, wf[:n], x, stride)
			dotF32b4Go(&want, wf[:n], x, stride)
			checkSame(t, "dotF32b4", got[:], want[:])
			dotBF16b4(&got, wb[:n], x, stride)
			dotBF16b4Go(&want, wb[:n], x, stride)
			checkSame(t, "dotBF16b4", got[:], want[:])

			// The 4-row kernels are four single dots, bit for bit.
			for r := range 4 {
				want[r] = dotBF16(wb[r*stride:][:n], x)
			}
			dotBF16x4(&got, wb, stride, x[:n])
			checkSame(t, "dotBF16x4 rows", got[:], want[:])

			// The 4×4 kernel is sixteen single dots of the Go reference,
			// on the AVX-512 kernel where the CPU has it and without it;
			// the rows and the inputs at different strides.
			const xStride = 4111
			xs := randVec(rng, 3*xStride+n)
			var want16 [16]float32
			for i := range want16 {
				want16[i] = dotBF16Go(wb[i/4*stride:][:n], xs[i%4*xStride:][:n])
			}
			saved := useAVX512
			for _, z := range []bool{false, saved} {
				useAVX512 = z
				var got16 [16]float32
				dotBF16r4b4(&got16, wb, stride, xs, xStride, n)
				checkSame(t, fmt.Sprintf("dotBF16r4b4 (avx512 %v)", z), got16[:], want16[:])
			}
			useAVX512 = saved
			if m := n &^ (lanes - 1); m > 0 && useSIMD && useAVX512 {
				var got, want [16][lanes]float32
				dotBF16r4b4AVX512(&got, wb, stride, xs, xStride, m)
				dotBF16r4b4LanesGo(&want, wb, stride, xs, xStride, m)
				for i := range got {
					checkSame(t, "dotBF16r4b4AVX512 lanes", got[i][:], want[i][:])
				}
			}
		})
	}
}

func TestBFPKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, f := range []Format{BFP8, BFP4} {
		t.Run(f.String(), func(t *testing.T) {
			tb := f.TileBytes()
			tiles := randTiles(rng, f, 96, 100) // 3×4 tiles
			var got, want [TileSize * TileSize]float32
			// The decoders, AVX2 and (where the CPU has it) AVX-512, on
			// the random tiles and on one whose groups take every
			// exponent 0-255 (subnormal steps, Inf/NaN groups) and every
			// code, negative zero included.
			every := make([]byte, 4*tb)
			for i := range every {
				every[i] = byte(i * 7)
			}
			saved := useAVX512
			for _, z := range []bool{false, saved} {
				useAVX512 = z
				for tile := range 16 {
					var src []byte
					if tile < 12 {
						src = tiles[tile*tb:]
					} else {
						src = every[(tile-12)*tb:]
					}
					decodeTile(f, &got, src)
					decodeTileGo(f, &want, src)
					checkSame(t, fmt.Sprintf("decodeTile avx512=%v tile %d", z, tile), got[:], want[:])
				}
			}
			useAVX512 = saved
			for _, rows := range []int{0, 1, 15, 16, 17, 31, 32} {
				for n := range 4 {
					x := randVec(rng, rows)
					acc := randVec(rng, 3*TileSize+8)
					accGo := append([]float32(nil), acc...)
					bfpRow(f, acc, tiles[(4-n)*tb:], n, x, 3*tb)
					bfpRowGo(f, accGo, tiles[(4-n)*tb:], n, x)
					checkSame(t, fmt.Sprintf("bfpRow rows=%d n=%d", rows, n), acc, accGo)
				}
			}
			decodeTileGo(f, &want, tiles)
			for _, rows := range []int{0, 1, 17, 32} {
				for nb := 1; nb <= 3; nb++ {
					acc, accGo := randVec(rng, 80+TileSize), make([]float32, 80+TileSize)
					copy(accGo, acc)
					x := randVec(rng, 100+rows)
					tileFMA(acc, 40, &want, x, 50, rows, nb)
					tileFMAGo(accGo, 40, &want, x, 50, rows, nb)
					checkSame(t, fmt.Sprintf("tileFMA rows=%d nb=%d", rows, nb), acc, accGo)
				}
				// The six-row kernel (AVX2), at odd strides, one and two
				// blocks.
				for nblk := 1; nblk <= 2; nblk++ {
					nb := 6 * nblk
					acc, accGo := randVec(rng, (nb-1)*40+TileSize), make([]float32, (nb-1)*40+TileSize)
					copy(accGo, acc)
					x := randVec(rng, (nb-1)*50+rows)
					tileFMA6(acc, 40, &want, x, 50, rows, nblk)
					tileFMAGo(accGo, 40, &want, x, 50, rows, nb)
					checkSame(t, fmt.Sprintf("tileFMA6 rows=%d nblk=%d", rows, nblk), acc, accGo)
				}
				// The packed-accumulator kernel at every width, at an odd
				// input stride.
				for nb := 1; nb <= tileFMAPackedMax; nb++ {
					acc, accGo := randVec(rng, nb*TileSize), make([]float32, nb*TileSize)
					copy(accGo, acc)
					x := randVec(rng, (nb-1)*50+rows)
					tileFMAPacked(acc, &want, x, 50, rows, nb)
					tileFMAGo(accGo, TileSize, &want, x, 50, rows, nb)
					checkSame(t, fmt.Sprintf("tileFMAPacked rows=%d nb=%d", rows, nb), acc, accGo)
				}
			}
		})
	}
}

type shape struct{ out, in int }

// matrixCases lists the formats and shapes the product tests run: every
// dotSizes input width for F32/BF16 against output counts around the 4-row
// group, every pair of bfpSizes for BFP, and BFP shapes that need padding.
func matrixCases() map[Format][]shape {
	cases := map[Format][]shape{}
	for _, f := range []Format{F32, BF16} {
		for _, in := range dotSizes {
			for _, out := range []int{1, 3, 4, 5, 17, 64} {
				cases[f] = append(cases[f], shape{out, in})
			}
		}
		cases[f] = append(cases[f], shape{4096, 33}, shape{0, 5})
	}
	for _, f := range []Format{BFP8, BFP4} {
		for _, out := range bfpSizes {
			for _, in := range bfpSizes {
				cases[f] = append(cases[f], shape{out, in})
			}
		}
		cases[f] = append(cases[f], shape{1, 1}, shape{33, 45}, shape{100, 70}, shape{5, 0}, shape{0, 5})
	}
	return cases
}

// TestProducts checks, for every format and shape, that the SIMD path, the
// Go path and the spec-literal reference agree bit for bit; that each row of
// MatMul equals MatVec of that row at every batch width; that thread counts
// do not matter; and that MatMulAdd adds the same product once.
func TestProducts(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	pool := NewPool(3)
	defer pool.Close()
	for f, shapes := range matrixCases() {
		for _, s := range shapes {
			t.Run(fmt.Sprintf("%s/%dx%d", f, s.out, s.in), func(t *testing.T) {
				big := s.out*s.in > 1<<20
				if big && testing.Short() {
					t.Skip("large shape in -short mode")
				}
				m := randMatrix(t, rng, f, s.out, s.in)
				batches := []int{1, 2, 3, 4, 5, 8, 10, 13}
				if big {
					batches = []int{1, 2}
				}
				maxB := batches[len(batches)-1]
				x := randVec(rng, maxB*s.in)

				// One MatVec per row is the yardstick for every batch width.
				rows := make([]float32, maxB*s.out)
				for b := range maxB {
					m.MatVec(rows[b*s.out:][:s.out], x[b*s.in:][:s.in])
				}
				ref := make([]float32, s.out)
				refRows := 1
				if !big {
					refRows = maxB
				}
				for b := range refRows {
					matMulRef(m, ref, x[b*s.in:], 1, false)
					checkSame(t, fmt.Sprintf("MatVec row %d vs reference", b), rows[b*s.out:][:s.out], ref)
				}

				for _, batch := range batches {
					want := rows[:batch*s.out]
					y := make([]float32, batch*s.out)
					m.MatMul(y, x, batch)
					checkSame(t, fmt.Sprintf("MatMul batch %d", batch), y, want)

					withGo(func() { m.MatMul(y, x, batch) })
					checkSame(t, fmt.Sprintf("Go MatMul batch %d", batch), y, want)

					pool.MatMul(m, y, x, batch)
					checkSame(t, fmt.Sprintf("3-thread MatMul batch %d", batch), y, want)

					base := randVec(rng, batch*s.out)
					y2 := append([]float32(nil), base...)
					pool.MatMulAdd(m, y2, x, batch)
					for i := range base {
						base[i] += want[i]
					}
					checkSame(t, fmt.Sprintf("MatMulAdd batch %d", batch), y2, base)
				}
			})
		}
	}
}

// TestBFPAgainstFloat64 packs Gaussian weights with the test packer and
// compares products with a float64 evaluation of the spec's decode formula.
// Decoding must be exact, so every weight the kernels use equals the float64
// value; the products may differ from the float64 sum only by float32
// accumulation error: K sequential fused steps each round once, so
// |error| ≤ K·2^-24·Σ|x_k·w_kn| (to first order; the bound has slack).
func TestBFPAgainstFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, f := range []Format{BFP8, BFP4} {
		for _, s := range []shape{{64, 96}, {100, 70}, {2048, 256}} {
			t.Run(fmt.Sprintf("%s/%dx%d", f, s.out, s.in), func(t *testing.T) {
				w := randVec(rng, s.out*s.in)
				m, err := NewBFP(f, s.out, s.in, packBFP(f, s.out, s.in, w))
				if err != nil {
					t.Fatal(err)
				}
				var rel2, norm2 float64
				for o := range s.out {
					for i := range s.in {
						v := decodeSpec64(f, m.BFP, s.out, o, i)
						if got := m.At(o, i); float64(got) != v {
							t.Fatalf("At(%d, %d) = %g, want %g", o, i, got, v)
						}
						d := v - float64(w[o*s.in+i])
						rel2 += d * d
						norm2 += float64(w[o*s.in+i]) * float64(w[o*s.in+i])
					}
				}
				// Packer sanity (docs/bfp.md, "Error bounds"): ≈0.73% (BFP8),
				// ≈11.7% (BFP4).
				rel := math.Sqrt(rel2 / norm2)
				if lim := map[Format]float64{BFP8: 0.01, BFP4: 0.13}[f]; rel > lim {
					t.Errorf("relative Frobenius error %.4f > %.2f", rel, lim)
				}

				const batch = 3
				x := randVec(rng, batch*s.in)
				y := make([]float32, batch*s.out)
				m.MatMul(y, x, batch)
				for b := range batch {
					for o := range s.out {
						var sum, abs float64
						for i := range s.in {
							p := float64(x[b*s.in+i]) * decodeSpec64(f, m.BFP, s.out, o, i)
							sum += p
							abs += math.Abs(p)
						}
						tol := float64(s.in)*0x1p-24*abs + 1e-30
						if d := math.Abs(float64(y[b*s.out+o]) - sum); d > tol {
							t.Fatalf("y[%d][%d] = %g, float64 %g, |Δ| %g > %g", b, o, y[b*s.out+o], sum, d, tol)
						}
					}
				}
			})
		}
	}
}

// TestBFPSpecVectors decodes the full-group example of
// docs/bfp.md, "Worked example: one group of 16 values" placed as group 0
// of a tile: exponent 125, the listed codes, the listed values.
func TestBFPSpecVectors(t *testing.T) {
	decoded := []float32{0.3125, -0.1875, 0.0625, 0.125, -0.3125, 0, 0.25, -0.0625,
		0.1875, -0.125, 0.375, 0, -0.4375, 0.3125, 0.0625, -0.125}
	input := []float32{0.3, -0.2, 0.05, 0.11, -0.3, 0, 0.26, -0.0625,
		0.1875, -0.15, 0.4, 0.01, -0.45, 0.33, 0.07, -0.12}
	bfp4Bytes := []byte{0xB5, 0x21, 0x0D, 0x94, 0xA3, 0x06, 0x5F, 0xA1}
	bfp8Codes := []byte{0x4D, 0xB3, 0x0D, 0x1C, 0xCD, 0x00, 0x43, 0x90, 0x30, 0xA6, 0x66, 0x03, 0xF3, 0x54, 0x12, 0x9F}

	// Group 0 is tile row 0, columns 0..15: W[o][0] for o < 16.
	w := make([]float32, 32*32)
	for o, v := range input {
		w[o*32] = v
	}
	for _, f := range []Format{BFP4, BFP8} {
		tiles := packBFP(f, 32, 32, w)
		if tiles[0] != 125 {
			t.Errorf("%s: exponent %d, want 125", f, tiles[0])
		}
		if f == BFP4 {
			checkBytes(t, "BFP4 codes", tiles[64:72], bfp4Bytes)
		} else {
			checkBytes(t, "BFP8 codes", tiles[64:80], bfp8Codes)
		}
		m, err := NewBFP(f, 32, 32, tiles)
		if err != nil {
			t.Fatal(err)
		}
		var tile [TileSize * TileSize]float32
		decodeTile(f, &tile, tiles)
		x := make([]float32, 32)
		x[0] = 1
		y := make([]float32, 32)
		m.MatVec(y, x)
		for o := range 16 {
			want := decoded[o]
			if f == BFP8 {
				want = float32(decodeSpec64(f, tiles, 32, o, 0))
			}
			if tile[o] != want || y[o] != want || m.At(o, 0) != want {
				t.Errorf("%s lane %d: tile %g, MatVec %g, At %g, want %g", f, o, tile[o], y[o], m.At(o, 0), want)
			}
		}
	}
}

func checkBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if string(got) != string(want) {
		t.Errorf("%s: % X, want % X", what, got, want)
	}
}

// TestExtremeExponents covers exponent 255 (groups that held Inf or NaN) and
// the subnormal-scale exponents 0..6: no crash, SIMD == Go.
func TestExtremeExponents(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, f := range []Format{BFP8, BFP4} {
		for _, e := range []byte{0, 1, 6, 7, 254, 255} {
			tiles := randTiles(rng, f, 64, 64)
			for tile := range 4 {
				for g := range 64 {
					tiles[tile*f.TileBytes()+g] = e
				}
			}
			m, err := NewBFP(f, 64, 64, tiles)
			if err != nil {
				t.Fatal(err)
			}
			x := randVec(rng, 2*64)
			y, yGo := make([]float32, 2*64), make([]float32, 2*64)
			m.MatMul(y, x, 2)
			withGo(func() { m.MatMul(yGo, x, 2) })
			if i := sameBitsNaN(y, yGo); i >= 0 {
				t.Fatalf("%s E=%d: y[%d] = %g, Go %g", f, e, i, y[i], yGo[i])
			}
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		m     Matrix
		field string
	}{
		{"ok f32", Matrix{Format: F32, Out: 2, In: 3, F32: make([]float32, 6)}, ""},
		{"ok empty", Matrix{Format: BF16}, ""},
		{"ok bfp8 padded", Matrix{Format: BFP8, Out: 33, In: 1, BFP: make([]byte, 2*1088)}, ""},
		{"ok bfp4", Matrix{Format: BFP4, Out: 64, In: 64, BFP: make([]byte, 4*576)}, ""},
		{"short f32", Matrix{Format: F32, Out: 2, In: 3, F32: make([]float32, 5)}, "F32"},
		{"long bf16", Matrix{Format: BF16, Out: 2, In: 3, BF16: make([]uint16, 7)}, "BF16"},
		{"bfp8 wrong tiles", Matrix{Format: BFP8, Out: 33, In: 1, BFP: make([]byte, 1088)}, "BFP"},
		{"bfp4 bfp8 bytes", Matrix{Format: BFP4, Out: 32, In: 32, BFP: make([]byte, 1088)}, "BFP"},
		{"two slices", Matrix{Format: F32, Out: 1, In: 1, F32: make([]float32, 1), BF16: make([]uint16, 1)}, "BF16"},
		{"negative", Matrix{Format: F32, Out: -1, In: 3}, "shape"},
		{"huge", Matrix{Format: BFP8, Out: 1 << 30, In: 1 << 30}, "shape"},
		{"no format", Matrix{Out: 1, In: 1}, "format"},
	}
	for _, tc := range tests {
		err := tc.m.Validate()
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var me *MatrixError
		if !errors.As(err, &me) || me.Field != tc.field || !errors.Is(err, ErrMatrix) {
			t.Errorf("%s: error %v, want a MatrixError on %s", tc.name, err, tc.field)
		}
	}
	if _, err := NewBFP(BF16, 1, 1, nil); !errors.Is(err, ErrMatrix) {
		t.Errorf("NewBFP(BF16): %v", err)
	}
	if _, err := NewBFP(BFP8, 32, 32, make([]byte, 1087)); err == nil ||
		err.Error() != "kernels: bfp8_b matrix [32, 32]: BFP has 1087 elements, want 1088" {
		t.Errorf("NewBFP short: %v", err)
	}
}

func TestProductPanicsOnShortVectors(t *testing.T) {
	m, _ := NewF32(2, 3, make([]float32, 6))
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	m.MatMul(make([]float32, 4), make([]float32, 5), 2)
}

// TestProductsDoNotAllocate checks that the serial products allocate nothing
// once warm (the batched BFP scratch comes from a sync.Pool).
func TestProductsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops sync.Pool values at random, so the batched scratch is sometimes allocated anew")
	}
	rng := rand.New(rand.NewPCG(15, 16))
	for _, f := range []Format{F32, BF16, BFP8, BFP4} {
		m := randMatrix(t, rng, f, 64, 96)
		x, y := randVec(rng, 5*96), make([]float32, 5*64)
		if n := testing.AllocsPerRun(10, func() { m.MatVec(y, x) }); n != 0 {
			t.Errorf("%s MatVec: %v allocations", f, n)
		}
		if n := testing.AllocsPerRun(10, func() { m.MatMulAdd(y, x, 5) }); n != 0 {
			t.Errorf("%s MatMulAdd: %v allocations", f, n)
		}
	}
}

// TestBFPRowRoutes drives the row kernels across the conditions of the fast
// route the AVX2 kernels take for full tiles (bfp_amd64.s: the weight step
// s is folded into x, which is exact only when x·s is a normal float or x
// is 0, and s must be normal): tiles whose groups all have exponent E, and
// inputs whose exponent fields put x·s just inside and just outside the
// normal range, with zeros, subnormals, infinities and NaNs among them.
// Whichever route a tile takes, SIMD and Go must agree bit for bit (up to
// NaN payloads).
func TestBFPRowRoutes(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	pool := NewPool(2)
	defer pool.Close()

	for _, f := range []Format{BFP8, BFP4} {
		bias, minE := 133, 7 // the step is 2^(E−bias); normal for E ≥ minE
		if f == BFP4 {
			bias, minE = 129, 3
		}
		tb := f.TileBytes()
		wide := parallelMinBytes/(2*tb) + 8 // tiles: a product the Pool splits
		for _, E := range []int{0, 1, minE - 1, minE, minE + 1, 60, 127, 200, 254, 255} {
			const n = 9 // two quads of tiles and one more (the AVX-512 kernel runs quads)
			tiles := make([]byte, n*tb)
			for j := range n {
				tile := tiles[j*tb:][:tb]
				for g := range 64 {
					tile[g] = byte(E)
				}
				for i := 64; i < tb; i++ {
					tile[i] = byte(rng.Uint32())
				}
				// Zero codes, so that x·s overflowing to Inf would show as
				// Inf·0 = NaN where the exact route gives a finite sum.
				tile[64+rng.IntN(tb-64)] = 0
				tile[64+rng.IntN(tb-64)] = 0
			}
			if E == 127 { // one group apart: the tile's range decides
				tiles[tb+5] = byte(minE - 1)
			}
			// Exponent fields of x for which x·s is normal: [lo, hi].
			lo, hi := max(1, bias+1-E), min(254, bias+254-E)
			mid := (lo + hi) / 2
			var specials []int
			for _, d := range []int{-2, -1, 0, 1} {
				specials = append(specials, lo+d, hi-d+1)
			}
			specials = append(specials, 0, 255)
			for _, ex := range specials {
				if ex < 0 || ex > 255 {
					continue
				}
				// Modes: 0 random other inputs and accumulators; 1 the same
				// with two zero inputs; 2 the special input alone, from zero
				// accumulators, over a zero code in its row, so that a
				// rounded or overflowed x·s cannot hide in a larger sum.
				for mode := range 3 {
					x := make([]float32, TileSize)
					for i := range x {
						e := mid
						if lo > hi { // no x·s is normal: any inputs
							e = 100 + rng.IntN(50)
						}
						if mode < 2 {
							x[i] = math.Float32frombits(rng.Uint32()&0x807fffff | uint32(e)<<23)
						}
					}
					if mode == 1 {
						x[3], x[17] = 0, float32(math.Copysign(0, -1))
					}
					// An odd mantissa: a rounded x·s would lose its last bit.
					r := rng.IntN(TileSize)
					x[r] = math.Float32frombits(rng.Uint32()&0x807ffffe | 1 | uint32(ex)<<23)
					acc := randVec(rng, n*TileSize)
					tl := tiles
					if mode == 2 {
						clear(acc)
						tl = append([]byte(nil), tiles...)
						g := r + r&16 // the group of row r's columns 0-15
						for j := range n {
							if f == BFP8 {
								tl[j*tb+64+16*g] = 0
							} else {
								tl[j*tb+64+8*g] &^= 0xf
							}
						}
					}
					accGo := append([]float32(nil), acc...)
					bfpRow(f, acc, tl, n, x, n*tb)
					bfpRowGo(f, accGo, tl, n, x)
					if i := sameBitsNaN(acc, accGo); i >= 0 {
						t.Errorf("%s E=%d x[%d] exponent %d mode %d: element %d is %v (%#08x), want %v (%#08x)",
							f, E, r, ex, mode, i, acc[i], math.Float32bits(acc[i]), accGo[i], math.Float32bits(accGo[i]))
					}
					// The same row as the second tile row of a product
					// whose first has zero inputs, for which every
					// exponent takes the fast route: the product must run
					// each tile row on its own route, never the second on
					// the first's. On its own (n tiles) and split over a
					// Pool (the row repeated to wide tiles, past
					// parallelMinBytes), alone, beside a second job with
					// the same inputs, as attention's projections run, and
					// after a job with zero inputs, whose routes come
					// first in MatMulAll's buffer.
					x2 := append(make([]float32, TileSize), x...)
					for _, cols := range []int{n, wide} {
						row1 := make([]byte, 0, cols*tb)
						for len(row1) < cols*tb {
							row1 = append(row1, tl[:min(len(tl), cols*tb-len(row1))]...)
						}
						m, err := NewBFP(f, cols*TileSize, 2*TileSize, append(randTiles(rng, f, cols*TileSize, TileSize), row1...))
						if err != nil {
							t.Fatal(err)
						}
						yGo := make([]float32, cols*TileSize)
						withGo(func() { m.MatVec(yGo, x2) })
						y := make([]float32, cols*TileSize)
						outs := [][]float32{y}
						if cols == n {
							m.MatVec(y, x2)
						} else {
							pool.MatVec(m, y, x2)
							y2, y3, y4 := make([]float32, cols*TileSize), make([]float32, cols*TileSize), make([]float32, cols*TileSize)
							pool.MatMulAll([]MulJob{{M: m, Y: y2, X: x2, Batch: 1}, {M: m, Y: y3, X: x2, Batch: 1}})
							pool.MatMulAll([]MulJob{{M: m, Y: make([]float32, cols*TileSize), X: make([]float32, 2*TileSize), Batch: 1}, {M: m, Y: y4, X: x2, Batch: 1}})
							outs = append(outs, y2, y3, y4)
						}
						for _, got := range outs {
							if i := sameBitsNaN(got, yGo); i >= 0 {
								t.Errorf("%s E=%d x[%d] exponent %d mode %d, second tile row of a product of %d tiles: y[%d] is %v (%#08x), want %v (%#08x)",
									f, E, r, ex, mode, cols, i, got[i], math.Float32bits(got[i]), yGo[i], math.Float32bits(yGo[i]))
							}
						}
					}
				}
			}
		}
	}
}

// TestFastRange holds fastRange, and routes' AVX-512 tileBitsZ, to the
// rule as bfp_amd64.s states it, worked out with a branch an input, on
// tiles of zeros of either sign, subnormals, infinities, NaNs and inputs
// of every exponent field, one product's tile rows at a time.
func TestFastRange(t *testing.T) {
	ref := func(f Format, x []float32) rowRoute {
		bias, minE := 129, 3
		if f == BFP8 {
			bias, minE = 133, 7
		}
		emin, emax := 256, 0
		for _, v := range x {
			b := math.Float32bits(v)
			e := int(b >> 23 & 0xff)
			emax = max(emax, e)
			if b&0x7fffffff != 0 {
				emin = min(emin, e)
			}
		}
		lo, hi := max(minE, bias+1-emin), min(254, bias+254-emax)
		return rowRoute{int16(lo), int16(hi - lo), lo <= hi}
	}
	rng := rand.New(rand.NewPCG(51, 52))
	const tiles = 37
	for range 400 {
		x := make([]float32, tiles*TileSize+5)
		for i := range x {
			switch rng.IntN(8) {
			case 0:
				x[i] = 0
			case 1:
				x[i] = float32(math.Copysign(0, -1))
			case 2:
				x[i] = math.Float32frombits(rng.Uint32()) // NaNs and infinities too
			case 3:
				x[i] = math.Float32frombits(rng.Uint32() & 0x807fffff) // subnormal or zero
			default:
				e := uint32(100 + rng.IntN(60))
				if rng.IntN(4) == 0 {
					e = uint32(rng.IntN(256))
				}
				x[i] = math.Float32frombits(rng.Uint32()&0x807fffff | e<<23)
			}
		}
		for k := range tiles {
			switch rng.IntN(6) {
			case 0: // no non-zero input
				for i := range TileSize {
					x[k*TileSize+i] = float32(math.Copysign(0, float64(rng.IntN(2)*2-1)))
				}
			case 1: // one non-zero input, at either end of the magnitudes
				clear(x[k*TileSize:][:TileSize])
				x[k*TileSize+rng.IntN(TileSize)] = math.Float32frombits([]uint32{1, 0x00800000, 0x7f7fffff, 0x7f800000, 0xffc00000}[rng.IntN(5)])
			}
		}
		for _, f := range []Format{BFP8, BFP4} {
			m := &Matrix{Format: f, In: len(x), Out: 32}
			b := m.routes(x, 1, nil)
			if useSIMD && useAVX512 && len(b.get()) != tiles {
				t.Fatalf("%s: %d routes for %d full tile rows", f, len(b.get()), tiles)
			}
			for k := range tiles {
				xt := x[k*TileSize:][:TileSize]
				want := ref(f, xt)
				lo, width, ok := fastRange(f, (*[TileSize]float32)(xt))
				if got := (rowRoute{int16(lo), int16(width), ok}); got != want {
					t.Fatalf("%s fastRange of %v: %+v, want %+v", f, xt, got, want)
				}
				if b != nil && b.r[k] != want {
					t.Fatalf("%s routes' tile row %d, %v: %+v, want %+v", f, k, xt, b.r[k], want)
				}
			}
			if b != nil {
				routePool.Put(b)
			}
		}
	}
}

// TestMatMulAll: products run together in one parallel region give the
// bits of each product run alone, for every format, batch and thread
// count, with the work large enough to be split.
func TestMatMulAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	var jobs []MulJob
	var want [][]float32
	for i, f := range []Format{BFP4, BFP4, BFP8, BF16, F32, BFP4} {
		out, in, batch := 256+32*i, 1024, 1+i%3 // over parallelMinBytes in all
		m := randMatrix(t, rng, f, out, in)
		x := randVec(rng, batch*in)
		y := make([]float32, batch*out)
		m.MatMul(y, x, batch)
		want = append(want, y)
		jobs = append(jobs, MulJob{M: m, Y: make([]float32, batch*out), X: x, Batch: batch})
	}
	jobs = append(jobs, MulJob{M: jobs[0].M, Y: nil, X: nil, Batch: 0}) // an empty product
	for _, threads := range []int{1, 3, 8} {
		p := NewPool(threads)
		for _, j := range jobs {
			clear(j.Y)
		}
		p.MatMulAll(jobs)
		p.Close()
		for i := range want {
			if !slices.Equal(math32bits(jobs[i].Y), math32bits(want[i])) {
				t.Fatalf("threads %d: job %d differs from its own MatMul", threads, i)
			}
		}
	}
}

func math32bits(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

// TestBFPWideKernels runs BFP8 and BFP4 products of 1 to 5 batch rows on
// weights of a real model's scale (every full tile on the fast route) with
// the AVX-512 kernels (one row: quads of tiles; two to four rows: pairs of
// tiles decoded once for the batch), the AVX2 kernels alone and the Go
// kernels, and requires the same bits from all three and from the
// spec-literal reference: for every column count around the quads and
// pairs, with one tile column whose low exponents rule the fast route out
// (its quad or pair goes to the AVX2 kernels), with zero inputs, and with
// a short last tile row (which the AVX-512 kernels leave to AVX2). It
// skips where the CPU has no AVX-512 (its kernels then never run).
func TestBFPWideKernels(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512 kernels on this CPU or build")
	}
	rng := rand.New(rand.NewPCG(41, 42))
	for _, c := range []struct {
		f  Format
		in int
	}{{BFP4, 96}, {BFP4, 80}, {BFP8, 96}, {BFP8, 80}} {
		f, in := c.f, c.in
		for nt := 1; nt <= 13; nt++ {
			for _, lowTile := range []int{-1, 0, 5} {
				if lowTile >= nt {
					continue
				}
				out := nt * TileSize
				w := randVec(rng, out*in)
				for i := range w {
					w[i] *= 0.03
				}
				if lowTile >= 0 {
					// A tile column of tiny weights: their exponents are
					// below what the inputs allow on the fast route (x·s
					// would be subnormal and lose bits), and their outputs
					// are tiny, so that a lost bit shows.
					for c := range TileSize {
						for i := range in {
							w[(lowTile*TileSize+c)*in+i] *= 1e-36
						}
					}
				}
				m, err := NewBFP(f, out, in, packBFP(f, out, in, w))
				if err != nil {
					t.Fatal(err)
				}
				for batch := 1; batch <= 5; batch++ {
					x := randVec(rng, batch*in)
					x[7], x[33] = 0, float32(math.Copysign(0, -1))
					wide := make([]float32, batch*out)
					m.MatMul(wide, x, batch)
					avx2 := make([]float32, batch*out)
					useAVX512 = false
					m.MatMul(avx2, x, batch)
					useAVX512 = true
					goy := make([]float32, batch*out)
					withGo(func() { m.MatMul(goy, x, batch) })
					ref := make([]float32, batch*out)
					matMulRef(m, ref, x, batch, false)
					what := fmt.Sprintf("%s in=%d tiles=%d low tile %d batch %d", f, in, nt, lowTile, batch)
					checkSame(t, what+": avx512 vs reference", wide, ref)
					checkSame(t, what+": avx2 vs reference", avx2, ref)
					checkSame(t, what+": go vs reference", goy, ref)
				}
			}
		}
	}
}

// TestMatrixRow: Row(o) is At(o, i) for every input i, in every format,
// on shapes whose inputs and outputs are not whole tiles; a row outside
// the matrix panics.
func TestMatrixRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(63, 64))
	for _, f := range []Format{F32, BF16, BFP8, BFP4} {
		const out, in = 70, 80
		m := randMatrix(t, rng, f, out, in)
		row := make([]float32, in)
		for o := range out {
			m.Row(o, row)
			for i, v := range row {
				if w := m.At(o, i); math.Float32bits(v) != math.Float32bits(w) {
					t.Fatalf("%s row %d: [%d] is %v, At gives %v", f, o, i, v, w)
				}
			}
		}
		if f == BFP8 || f == BFP4 {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: Row(%d) of %d rows did not panic", f, out, out)
					}
				}()
				m.Row(out, row)
			}()
		}
	}
}

// TestMatMulSwiGLU: the feed-forward's two products and activation in one
// region give, bit for bit, each product run alone and SwiGLU applied to
// each row, for the fused BFP formats (the same or mixed) and the others,
// batches of one to five rows, widths that are and are not whole 128-output
// units, and one to three goroutines.
func TestMatMulSwiGLU(t *testing.T) {
	rng := rand.New(rand.NewPCG(65, 66))
	for _, fs := range [][2]Format{{BFP4, BFP4}, {BFP8, BFP8}, {BFP8, BFP4}, {BF16, BF16}, {F32, BFP4}} {
		for _, out := range []int{7680, 1000, 96} {
			const in = 512
			w1, w3 := randMatrix(t, rng, fs[0], out, in), randMatrix(t, rng, fs[1], out, in)
			for _, batch := range []int{1, 2, 5} {
				x := randVec(rng, batch*in)
				wantG, wantU := make([]float32, batch*out), make([]float32, batch*out)
				w1.MatMul(wantG, x, batch)
				w3.MatMul(wantU, x, batch)
				for b := range batch {
					r := wantG[b*out:][:out]
					SwiGLU(r, r, wantU[b*out:][:out])
				}
				for _, threads := range []int{1, 2, 3} {
					p := NewPool(threads)
					g, u := make([]float32, batch*out), make([]float32, batch*out)
					p.MatMulSwiGLU(w1, w3, g, u, x, batch)
					p.Close()
					name := fmt.Sprintf("%s/%s out %d batch %d threads %d", fs[0], fs[1], out, batch, threads)
					checkSame(t, name+" g", g, wantG)
					checkSame(t, name+" u", u, wantU)
				}
			}
		}
	}
}

// TestMarkDone: the units both products have done go to the activation in
// the longest runs, whatever the other product has done so far.
func TestMarkDone(t *testing.T) {
	for _, c := range []struct {
		before []int32 // the other product's units done
		a, b   int
		want   [][2]int
	}{
		{[]int32{1, 0, 1, 1, 0, 1}, 0, 6, [][2]int{{0, 1}, {2, 4}, {5, 6}}},
		{[]int32{0, 0, 0}, 0, 3, nil},
		{[]int32{1, 1, 1, 1}, 1, 3, [][2]int{{1, 3}}},
		{[]int32{0, 1, 1, 0, 1, 1}, 1, 6, [][2]int{{1, 3}, {4, 6}}},
	} {
		done := make([]atomic.Int32, len(c.before))
		for i, v := range c.before {
			done[i].Store(v)
		}
		var got [][2]int
		markDone(done, c.a, c.b, func(r0, r1 int) { got = append(got, [2]int{r0, r1}) })
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v, units [%d, %d): runs %v, want %v", c.before, c.a, c.b, got, c.want)
		}
		for i := range done {
			want := c.before[i]
			if i >= c.a && i < c.b {
				want++
			}
			if done[i].Load() != want {
				t.Errorf("%v, units [%d, %d): unit %d counts %d, want %d", c.before, c.a, c.b, i, done[i].Load(), want)
			}
		}
	}
}
