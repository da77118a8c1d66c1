package bfp_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfmq/lfmq/format/bfp"
)

var shapes = []struct{ out, in int }{
	{16, 128}, {33, 65}, {1, 1}, {32, 32}, {64, 32}, {32, 64}, {100, 3}, {3, 100}, {96, 160},
}

func randomWeights(rng *rand.Rand, n int) []float32 {
	w := make([]float32, n)
	for k := range w {
		w[k] = float32(rng.NormFloat64() * 0.02)
	}
	return w
}

// tilizeRef is the layout of docs/lfmq-1.md, "How a BFP tensor is stored"
// written out step by step: transpose W [out, in] to W_tt [in, out],
// zero-pad to multiples of 32, cut into 32×32 row-major tiles, list them
// in row-major tile order.
func tilizeRef(w []float32, out, in int) [][1024]float32 {
	kp, np := (in+31)/32*32, (out+31)/32*32
	wtt := make([][]float32, kp)
	for k := range wtt {
		wtt[k] = make([]float32, np)
	}
	for o := range out {
		for i := range in {
			wtt[i][o] = w[o*in+i]
		}
	}
	var tiles [][1024]float32
	for kt := range kp / 32 {
		for nt := range np / 32 {
			var tile [1024]float32
			for r := range 32 {
				for c := range 32 {
					tile[r*32+c] = wtt[kt*32+r][nt*32+c]
				}
			}
			tiles = append(tiles, tile)
		}
	}
	return tiles
}

func TestPackMatrixEqualsTilizeThenPack(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, f := range formats {
		for _, s := range shapes {
			t.Run(fmt.Sprintf("%s/%dx%d", f, s.out, s.in), func(t *testing.T) {
				w := randomWeights(rng, s.out*s.in)
				got, err := bfp.PackMatrix(f, w, s.out, s.in)
				if err != nil {
					t.Fatal(err)
				}
				tiles := tilizeRef(w, s.out, s.in)
				if len(tiles) != bfp.NumTiles(s.out, s.in) || len(got) != bfp.PackedSize(f, s.out, s.in) ||
					len(got) != len(tiles)*f.TileBytes() {
					t.Fatalf("sizes: %d tiles, NumTiles %d, %d bytes, PackedSize %d",
						len(tiles), bfp.NumTiles(s.out, s.in), len(got), bfp.PackedSize(f, s.out, s.in))
				}
				var want []byte
				for k := range tiles {
					b := make([]byte, f.TileBytes())
					if err := bfp.EncodeTile(f, &tiles[k], b); err != nil {
						t.Fatal(err)
					}
					want = append(want, b...)
				}
				if !bytes.Equal(got, want) {
					t.Fatal("PackMatrix differs from tilize-then-pack")
				}

				// Round trip: UnpackMatrix equals decoding the reference
				// tiles and reading W[o][i] from tile row i, column o.
				back, err := bfp.UnpackMatrix(f, got, s.out, s.in)
				if err != nil {
					t.Fatal(err)
				}
				np := (s.out + 31) / 32
				for o := range s.out {
					for i := range s.in {
						var dec [1024]float32
						tb := f.TileBytes()
						tile := (i/32)*np + o/32
						if err := bfp.DecodeTile(f, got[tile*tb:(tile+1)*tb], &dec); err != nil {
							t.Fatal(err)
						}
						if want := dec[(i%32)*32+o%32]; !sameBits(back[o*s.in+i], want) {
							t.Fatalf("W[%d][%d] = %v, want %v", o, i, back[o*s.in+i], want)
						}
					}
				}
				// The decoded weights are canonical: packing them again gives
				// the same bytes.
				again, err := bfp.PackMatrix(f, back, s.out, s.in)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(again, got) {
					t.Fatal("PackMatrix(UnpackMatrix(p)) != p")
				}
				if err := bfp.Canonical(f, got, s.out, s.in); err != nil {
					t.Fatal(err)
				}

				// BF16 path: widen exactly and compare.
				w16 := make([]uint16, len(w))
				w32 := make([]float32, len(w))
				for k, v := range w {
					w16[k] = uint16(math.Float32bits(v) >> 16)
					w32[k] = math.Float32frombits(uint32(w16[k]) << 16)
				}
				p16, err := bfp.PackMatrixBF16(f, w16, s.out, s.in)
				if err != nil {
					t.Fatal(err)
				}
				p32, err := bfp.PackMatrix(f, w32, s.out, s.in)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(p16, p32) {
					t.Fatal("PackMatrixBF16 differs from PackMatrix of the widened values")
				}
			})
		}
	}
}

// TestElementPosition puts one non-zero weight at a time into a zero matrix
// and finds it where docs/lfmq-1.md, "How a BFP tensor is stored" says:
// tile (i/32)·(Np/32) + o/32, row i%32, column o%32, with everything else
// (padding included) zero.
func TestElementPosition(t *testing.T) {
	for _, f := range formats {
		for _, s := range []struct{ out, in int }{{33, 65}, {16, 128}, {70, 40}} {
			np := (s.out + 31) / 32
			tb := f.TileBytes()
			for _, p := range [][2]int{{0, 0}, {s.out - 1, s.in - 1}, {s.out / 2, s.in / 3}, {s.out - 1, 0}, {0, s.in - 1}} {
				o, i := p[0], p[1]
				w := make([]float32, s.out*s.in)
				w[o*s.in+i] = -1
				data, err := bfp.PackMatrix(f, w, s.out, s.in)
				if err != nil {
					t.Fatal(err)
				}
				wantTile, row, col := (i/32)*np+o/32, i%32, o%32
				if tile, r, c := bfp.TileOf(o, i, s.out); tile != wantTile || r != row || c != col {
					t.Fatalf("TileOf(%d,%d,%d) = %d,%d,%d, want %d,%d,%d", o, i, s.out, tile, r, c, wantTile, row, col)
				}
				if eo, ei := bfp.Element(wantTile, row, col, s.out); eo != o || ei != i {
					t.Fatalf("Element(%d,%d,%d,%d) = %d,%d, want %d,%d", wantTile, row, col, s.out, eo, ei, o, i)
				}
				g := (row/16*2+col/16)*16 + row%16
				for k, b := range data {
					want := byte(0)
					switch {
					case k == wantTile*tb+g:
						want = 127 // exponent of −1.0
					case f == bfp.BFP8 && k == wantTile*tb+64+16*g+col%16:
						want = 0xC0 // sign | 64
					case f == bfp.BFP4 && k == wantTile*tb+64+8*g+col%16/2:
						want = 0xC << (4 * (col % 2)) // sign | 4, in its nibble
					}
					if b != want {
						t.Fatalf("%s %dx%d W[%d][%d]: byte %d (tile %d offset %d) = %#x, want %#x",
							f, s.out, s.in, o, i, k, k/tb, k%tb, b, want)
					}
				}
			}
		}
	}
}

func TestTileOfElementInverse(t *testing.T) {
	for _, out := range []int{1, 31, 32, 33, 100} {
		in := 70
		seen := map[[3]int]bool{}
		for o := range out {
			for i := range in {
				tile, r, c := bfp.TileOf(o, i, out)
				if tile < 0 || tile >= bfp.NumTiles(out, in) || seen[[3]int{tile, r, c}] {
					t.Fatalf("TileOf(%d,%d,%d) = %d,%d,%d: out of range or repeated", o, i, out, tile, r, c)
				}
				seen[[3]int{tile, r, c}] = true
				if eo, ei := bfp.Element(tile, r, c, out); eo != o || ei != i {
					t.Fatalf("Element(TileOf(%d,%d)) = %d,%d", o, i, eo, ei)
				}
			}
		}
	}
}

func TestMatrixErrors(t *testing.T) {
	w := make([]float32, 6)
	tests := []struct {
		name     string
		f        bfp.Format
		w        []float32
		out, in  int
		sentinel error
	}{
		{"zero out", bfp.BFP8, nil, 0, 3, bfp.ErrShape},
		{"zero in", bfp.BFP8, nil, 3, 0, bfp.ErrShape},
		{"negative", bfp.BFP4, w, -2, -3, bfp.ErrShape},
		{"overflow", bfp.BFP4, w, math.MaxInt, math.MaxInt, bfp.ErrShape},
		{"overflow tiles", bfp.BFP8, w, 1 << 40, 1 << 40, bfp.ErrShape},
		{"short", bfp.BFP8, w[:5], 2, 3, bfp.ErrLength},
		{"long", bfp.BFP8, w, 1, 5, bfp.ErrLength},
		{"format", bfp.Format(3), w, 2, 3, bfp.ErrFormat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := bfp.PackMatrix(tt.f, tt.w, tt.out, tt.in); !errors.Is(err, tt.sentinel) {
				t.Errorf("PackMatrix: %v, want %v", err, tt.sentinel)
			}
			w16 := make([]uint16, len(tt.w))
			if _, err := bfp.PackMatrixBF16(tt.f, w16, tt.out, tt.in); !errors.Is(err, tt.sentinel) {
				t.Errorf("PackMatrixBF16: %v, want %v", err, tt.sentinel)
			}
			if tt.sentinel == bfp.ErrShape {
				if _, err := bfp.UnpackMatrix(tt.f, nil, tt.out, tt.in); !errors.Is(err, bfp.ErrShape) {
					t.Errorf("UnpackMatrix: %v", err)
				}
				if _, err := bfp.NewBuilder(tt.f, tt.out, tt.in); !errors.Is(err, bfp.ErrShape) {
					t.Errorf("NewBuilder: %v", err)
				}
				if bfp.NumTiles(tt.out, tt.in) != 0 || bfp.PackedSize(tt.f, tt.out, tt.in) != 0 || bfp.CheckShape(tt.out, tt.in) == nil {
					t.Error("invalid shape should give 0 tiles, 0 bytes and a CheckShape error")
				}
			}
		})
	}
	var se *bfp.ShapeError
	if _, err := bfp.PackMatrix(bfp.BFP8, nil, 0, 7); !errors.As(err, &se) || se.Out != 0 || se.In != 7 {
		t.Errorf("ShapeError = %v", err)
	}
	for _, f := range formats {
		for _, n := range []int{0, f.TileBytes() - 1, f.TileBytes() + 1, 2 * f.TileBytes()} {
			var le *bfp.LengthError
			if _, err := bfp.UnpackMatrix(f, make([]byte, n), 3, 2); !errors.As(err, &le) || le.Got != n || le.Want != f.TileBytes() {
				t.Errorf("%s UnpackMatrix(len %d): %v", f, n, err)
			}
		}
	}
	if bfp.NumTiles(33, 65) != 6 || bfp.PackedSize(bfp.BFP4, 16, 128) != 4*576 || bfp.PackedSize(bfp.BFP8, 2048, 7168) != 64*224*1088 {
		t.Error("NumTiles/PackedSize")
	}
	if bfp.PaddedDim(1) != 32 || bfp.PaddedDim(32) != 32 || bfp.PaddedDim(33) != 64 || bfp.PaddedDim(0) != 0 || bfp.RowGroups(33) != 4 {
		t.Error("PaddedDim/RowGroups")
	}
}

func TestCanonical(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, f := range formats {
		out, in := 33, 40 // padding in both directions
		data, err := bfp.PackMatrix(f, randomWeights(rng, out*in), out, in)
		if err != nil {
			t.Fatal(err)
		}
		if err := bfp.Canonical(f, data, out, in); err != nil {
			t.Fatalf("%s: packer output not canonical: %v", f, err)
		}
		tb := f.TileBytes()
		// Tile 1 covers outputs 32..63: only column 0 (o = 32) is real.
		// Group 0 is row 0, columns 0..15 of that tile.
		g1 := 1 * tb
		tests := []struct {
			name   string
			modify func(d []byte)
			offset int // of the first differing byte, within its tile
		}{
			{"exponent of a zero group", func(d []byte) {
				// Zero every code of tile 0, group 5: its exponent is then
				// no longer the maximum of its (zero) values.
				for j := range 16 {
					if f == bfp.BFP8 {
						d[64+16*5+j] = 0
					} else {
						d[64+8*5+j/2] = 0
					}
				}
			}, 5},
			{"negative zero", func(d []byte) {
				// Find a zero code in tile 0, group 3, and set its sign.
				for j := range 16 {
					if codeAt(f, d[:tb], 3, j) == 0 {
						if f == bfp.BFP8 {
							d[64+16*3+j] = 0x80
						} else {
							d[64+8*3+j/2] |= 0x8 << (4 * (j % 2))
						}
						return
					}
				}
				d[64+16*3] = 0x80 // BFP8 fallback: make lane 0 a −0
			}, -1},
			{"padding code", func(d []byte) {
				// Lane 1 of group 0 of tile 1 is column o = 33 ≥ out.
				if f == bfp.BFP8 {
					d[g1+64+1] = 0x01
				} else {
					d[g1+64] |= 0x10
				}
			}, -1},
			{"padding row", func(d []byte) {
				// Tile 2 (kt = 1, nt = 0) covers inputs 32..63: row 8 and
				// below (i ≥ 40) are padding; group 8 is row 8.
				d[2*tb+8] = 100
			}, 8},
		}
		for _, tt := range tests {
			t.Run(f.String()+"/"+tt.name, func(t *testing.T) {
				d := bytes.Clone(data)
				tt.modify(d)
				err := bfp.Canonical(f, d, out, in)
				var ne *bfp.NonCanonicalError
				if !errors.Is(err, bfp.ErrNotCanonical) || !errors.As(err, &ne) {
					t.Fatalf("Canonical = %v, want a NonCanonicalError", err)
				}
				if tt.offset >= 0 && ne.Offset != tt.offset {
					t.Errorf("first difference at offset %d, want %d (%v)", ne.Offset, tt.offset, err)
				}
			})
		}
	}
}

func TestRowAPI(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, f := range formats {
		for _, s := range shapes {
			t.Run(fmt.Sprintf("%s/%dx%d", f, s.out, s.in), func(t *testing.T) {
				w := randomWeights(rng, s.out*s.in)
				want, err := bfp.PackMatrix(f, w, s.out, s.in)
				if err != nil {
					t.Fatal(err)
				}
				unpacked, err := bfp.UnpackMatrix(f, want, s.out, s.in)
				if err != nil {
					t.Fatal(err)
				}
				b1, err := bfp.NewBuilder(f, s.out, s.in)
				if err != nil {
					t.Fatal(err)
				}
				b2, _ := bfp.NewBuilder(f, s.out, s.in)
				b3, _ := bfp.NewBuilder(f, s.out, s.in)
				np := bfp.PaddedDim(s.out)
				exps := make([]uint8, bfp.RowGroups(s.out))
				codes := make([]uint8, np)
				row := make([]float32, s.out)
				dec := make([]float32, s.out)
				// GPTQ visits rows in act-order: any permutation.
				for _, k := range rng.Perm(s.in) {
					for o := range s.out {
						row[o] = w[o*s.in+k] // W_tt[k][o]
					}
					if err := bfp.EncodeRow(f, row, exps, codes); err != nil {
						t.Fatal(err)
					}
					if err := b1.SetRow(k, exps, codes); err != nil {
						t.Fatal(err)
					}
					if err := b2.EncodeRow(k, row); err != nil {
						t.Fatal(err)
					}
					// The row in bands of one tile's width, each encoded
					// on its own: exponent groups never cross a band.
					for n0 := 0; n0 < s.out; n0 += bfp.TileDim {
						part := row[n0:min(n0+bfp.TileDim, s.out)]
						pe, pc := make([]uint8, bfp.RowGroups(len(part))), make([]uint8, bfp.PaddedDim(len(part)))
						if err := bfp.EncodeRow(f, part, pe, pc); err != nil {
							t.Fatal(err)
						}
						if err := b3.SetRowPart(k, n0, pe, pc); err != nil {
							t.Fatal(err)
						}
					}
					if err := bfp.DecodeRow(f, exps, codes, dec); err != nil {
						t.Fatal(err)
					}
					for o := range s.out {
						if !sameBits(dec[o], unpacked[o*s.in+k]) {
							t.Fatalf("DecodeRow k=%d o=%d: %v, UnpackMatrix %v", k, o, dec[o], unpacked[o*s.in+k])
						}
					}
					// The bit-pattern path agrees.
					bits := make([]uint32, s.out)
					for o, v := range row {
						bits[o] = math.Float32bits(v)
					}
					e2, c2 := make([]uint8, len(exps)), make([]uint8, len(codes))
					if err := bfp.EncodeRowBits(f, bits, e2, c2); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(e2, exps) || !bytes.Equal(c2, codes) {
						t.Fatal("EncodeRowBits differs from EncodeRow")
					}
				}
				if !bytes.Equal(b1.Bytes(), want) {
					t.Error("Builder.SetRow result differs from PackMatrix")
				}
				if !bytes.Equal(b2.Bytes(), want) {
					t.Error("Builder.EncodeRow result differs from PackMatrix")
				}
				if !bytes.Equal(b3.Bytes(), want) {
					t.Error("Builder.SetRowPart result differs from PackMatrix")
				}
			})
		}
	}
}

func TestRowErrors(t *testing.T) {
	f := bfp.BFP4
	out, in := 20, 3 // Np = 32: columns 20..31 are padding, group 1 is partly padding
	b, err := bfp.NewBuilder(f, out, in)
	if err != nil {
		t.Fatal(err)
	}
	exps := make([]uint8, 2)
	codes := make([]uint8, 32)
	tests := []struct {
		name     string
		k        int
		exps     []uint8
		codes    []uint8
		sentinel error
	}{
		{"row -1", -1, exps, codes, bfp.ErrRange},
		{"row in", in, exps, codes, bfp.ErrRange},
		{"short codes", 0, exps, codes[:20], bfp.ErrLength},
		{"short exps", 0, exps[:1], codes, bfp.ErrLength},
		{"bfp4 code > 0xF", 0, exps, with(codes, 3, 0x10), bfp.ErrCode},
		{"padding code", 0, exps, with(codes, 20, 0x1), bfp.ErrCode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := b.SetRow(tt.k, tt.exps, tt.codes); !errors.Is(err, tt.sentinel) {
				t.Errorf("SetRow: %v, want %v", err, tt.sentinel)
			}
		})
	}
	// SetRowPart: bands must start on a tile and stay in the padded row.
	for _, tt := range []struct {
		name     string
		k, n0    int
		exps     []uint8
		codes    []uint8
		sentinel error
	}{
		{"part row in", in, 0, exps, codes, bfp.ErrRange},
		{"part off a tile", 0, 16, exps[:1], codes[:16], bfp.ErrRange},
		{"part past the row", 0, 32, exps, codes, bfp.ErrRange},
		{"part exps short", 0, 0, exps[:1], codes, bfp.ErrLength},
		{"part padding code", 0, 0, exps, with(codes, 21, 0x2), bfp.ErrCode},
	} {
		if err := b.SetRowPart(tt.k, tt.n0, tt.exps, tt.codes); !errors.Is(err, tt.sentinel) {
			t.Errorf("SetRowPart %s: %v, want %v", tt.name, err, tt.sentinel)
		}
	}
	if !bytes.Equal(b.Bytes(), make([]byte, len(b.Bytes()))) {
		t.Error("a failed SetRow changed the builder")
	}
	// A group made only of padding must keep exponent 0.
	b2, _ := bfp.NewBuilder(f, 16, 1)
	if err := b2.SetRow(0, []uint8{0, 3}, make([]uint8, 32)); !errors.Is(err, bfp.ErrCode) {
		t.Errorf("padding exponent: %v", err)
	}
	if err := b.EncodeRow(0, make([]float32, out+1)); !errors.Is(err, bfp.ErrLength) {
		t.Errorf("EncodeRow long row: %v", err)
	}
	if err := b.EncodeRow(5, make([]float32, out)); !errors.Is(err, bfp.ErrRange) {
		t.Errorf("EncodeRow row 5: %v", err)
	}
	if err := bfp.EncodeRow(f, nil, nil, nil); !errors.Is(err, bfp.ErrLength) {
		t.Errorf("EncodeRow empty: %v", err)
	}
	if err := bfp.DecodeRow(f, exps, codes[:31], make([]float32, out)); !errors.Is(err, bfp.ErrLength) {
		t.Errorf("DecodeRow short codes: %v", err)
	}
	if err := bfp.EncodeRow(0, make([]float32, 1), make([]uint8, 2), make([]uint8, 32)); !errors.Is(err, bfp.ErrFormat) {
		t.Errorf("EncodeRow bad format: %v", err)
	}
}

func with(b []uint8, k int, v uint8) []uint8 {
	c := bytes.Clone(b)
	c[k] = v
	return c
}

// TestSetBand: a weight packed band by band of outputs (each band packed
// on its own by PackMatrix, then placed by SetBand) has the bytes of
// PackMatrix of the whole weight, for bands of one or several tiles, an
// uneven last band and padded shapes; bands outside the matrix or of the
// wrong length are refused without a change.
func TestSetBand(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 5))
	for _, tc := range []struct {
		out, in int
		bands   []int
	}{
		{64, 64, []int{32, 32}},
		{100, 70, []int{32, 64, 4}},
		{100, 70, []int{96, 4}},
		{256, 33, []int{128, 64, 64}},
		{31, 40, []int{31}},
	} {
		for _, f := range []bfp.Format{bfp.BFP8, bfp.BFP4} {
			w := randomWeights(rng, tc.out*tc.in)
			want, err := bfp.PackMatrix(f, w, tc.out, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			b, err := bfp.NewBuilder(f, tc.out, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			n0 := 0
			for _, nb := range tc.bands {
				p, err := bfp.PackMatrix(f, w[n0*tc.in:(n0+nb)*tc.in], nb, tc.in)
				if err != nil {
					t.Fatal(err)
				}
				if err := b.SetBand(n0, nb, p); err != nil {
					t.Fatalf("%v [%d,%d] band %d+%d: %v", f, tc.out, tc.in, n0, nb, err)
				}
				n0 += nb
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("%v [%d,%d] in bands %v: bytes differ from PackMatrix", f, tc.out, tc.in, tc.bands)
			}
		}
	}

	b, err := bfp.NewBuilder(bfp.BFP8, 100, 64)
	if err != nil {
		t.Fatal(err)
	}
	band := make([]byte, bfp.PackedSize(bfp.BFP8, 32, 64))
	for _, tc := range []struct {
		n0, nb int
		data   []byte
		want   error
	}{
		{16, 32, band, bfp.ErrRange},  // not on a tile
		{0, 20, band, bfp.ErrRange},   // uneven, not the last band
		{96, 32, band, bfp.ErrRange},  // past the end
		{-32, 32, band, bfp.ErrRange}, // before the start
		{0, 0, nil, bfp.ErrRange},     // empty
		{0, 32, band[1:], bfp.ErrLength},
		{96, 4, band[:len(band)-1], bfp.ErrLength},
	} {
		if err := b.SetBand(tc.n0, tc.nb, tc.data); !errors.Is(err, tc.want) {
			t.Errorf("SetBand(%d, %d, %d bytes) = %v, want %v", tc.n0, tc.nb, len(tc.data), err, tc.want)
		}
	}
	if !bytes.Equal(b.Bytes(), make([]byte, bfp.PackedSize(bfp.BFP8, 100, 64))) {
		t.Error("a refused SetBand changed the Builder's bytes")
	}
}
