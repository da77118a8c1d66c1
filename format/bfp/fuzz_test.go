package bfp_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/lfmq/lfmq/format/bfp"
)

// fuzzFormat maps a fuzzed byte to BFP8, BFP4 or (rarely) an arbitrary,
// usually invalid, Format value.
func fuzzFormat(b uint8) bfp.Format {
	switch b % 4 {
	case 0, 1:
		return bfp.BFP8
	case 2:
		return bfp.BFP4
	}
	return bfp.Format(b)
}

// sameValue compares decoded values bit for bit, except that the two zeros
// are equal (code 0x80 / 0x8 decodes to −0 and re-encodes as 0).
func sameValue(a, b float32) bool {
	if a == 0 && b == 0 {
		return true
	}
	return math.Float32bits(a) == math.Float32bits(b)
}

// FuzzDecodeTile feeds arbitrary bytes, as a tile and as a packed matrix of
// arbitrary shape, to the decoders. Nothing may panic. For a tile that
// decodes: re-encoding gives a canonical tile (a fixed point of
// encode∘decode), and every group whose exponent is at least m (all of whose
// levels are normal floats) keeps its decoded values.
func FuzzDecodeTile(f *testing.F) {
	var src [1024]float32
	copy(src[:], fullGroup[:])
	for _, ff := range formats {
		tile := make([]byte, ff.TileBytes())
		_ = bfp.EncodeTile(ff, &src, tile)
		f.Add(uint8(ff), int16(16), int16(32), tile)
	}
	f.Add(uint8(2), int16(1), int16(1), bytes.Repeat([]byte{0xFF}, 576))
	f.Add(uint8(0), int16(33), int16(65), bytes.Repeat([]byte{0x80}, 6*1088))
	f.Add(uint8(3), int16(0), int16(-1), []byte{1, 2, 3})

	f.Fuzz(func(t *testing.T, fsel uint8, out, in int16, data []byte) {
		ff := fuzzFormat(fsel)
		var dec [1024]float32
		err := bfp.DecodeTile(ff, data, &dec)

		// Matrix decoding must reject or accept without panicking.
		w, merr := bfp.UnpackMatrix(ff, data, int(out), int(in))
		if merr == nil && len(w) != int(out)*int(in) {
			t.Fatalf("UnpackMatrix returned %d values for [%d,%d]", len(w), out, in)
		}
		_ = bfp.Canonical(ff, data, int(out), int(in))

		// Exact lengths are rare in fuzzed input: also decode the data
		// repeated to fill a small matrix of a shape derived from out and
		// in, and check that re-packing it is canonical.
		if ff.Valid() && len(data) > 0 {
			o2, i2 := 1+int(uint16(out))%80, 1+int(uint16(in))%80
			buf := make([]byte, bfp.PackedSize(ff, o2, i2))
			for k := range buf {
				buf[k] = data[k%len(data)]
			}
			w, err := bfp.UnpackMatrix(ff, buf, o2, i2)
			if err != nil {
				t.Fatal(err)
			}
			re, err := bfp.PackMatrix(ff, w, o2, i2)
			if err != nil {
				t.Fatal(err)
			}
			if err := bfp.Canonical(ff, re, o2, i2); err != nil {
				t.Fatalf("re-packed data not canonical: %v", err)
			}
			// Canonical, tile by tile, agrees with its definition
			// PackMatrix(UnpackMatrix(data)) == data: the same verdict and
			// the same first differing byte.
			cerr := bfp.Canonical(ff, buf, o2, i2)
			var ne *bfp.NonCanonicalError
			switch k := firstDiff(re, buf); {
			case k < 0 && cerr != nil:
				t.Fatalf("Canonical: %v, but the round trip gives the same bytes", cerr)
			case k >= 0 && !errors.As(cerr, &ne):
				t.Fatalf("Canonical: %v, but the round trip differs at byte %d", cerr, k)
			case k >= 0 && (ne.Tile*ff.TileBytes()+ne.Offset != k || ne.Got != buf[k] || ne.Want != re[k]):
				t.Fatalf("Canonical: %v, but the round trip differs first at byte %d (%#x, want %#x)", cerr, k, buf[k], re[k])
			}
		}

		if !ff.Valid() {
			if err == nil || merr == nil {
				t.Fatal("invalid format accepted")
			}
			return
		}
		// Short or long inputs become a tile by cyclic repetition.
		tb := ff.TileBytes()
		if err != nil {
			if len(data) == 0 {
				return
			}
			tile := make([]byte, tb)
			for k := range tile {
				tile[k] = data[k%len(data)]
			}
			data = tile
			if err := bfp.DecodeTile(ff, data, &dec); err != nil {
				t.Fatal(err)
			}
		}
		t2 := make([]byte, tb)
		if err := bfp.EncodeTile(ff, &dec, t2); err != nil {
			t.Fatal(err)
		}
		var dec2 [1024]float32
		if err := bfp.DecodeTile(ff, t2, &dec2); err != nil {
			t.Fatal(err)
		}
		t3 := make([]byte, tb)
		if err := bfp.EncodeTile(ff, &dec2, t3); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(t2, t3) {
			t.Fatalf("re-encoded tile is not a fixed point:\n% x\n% x", t2, t3)
		}
		for g := range 64 {
			if int(data[g]) < ff.MagBits() {
				continue
			}
			r, c0 := bfp.GroupOrigin(g)
			for j := range 16 {
				k := r*32 + c0 + j
				if !sameValue(dec[k], dec2[k]) {
					t.Fatalf("group %d (E=%d) lane %d: %v re-encodes to %v", g, data[g], j, dec[k], dec2[k])
				}
			}
		}
	})
}

// FuzzEncodeRoundTrip encodes arbitrary fp32 bit patterns (as a tile and as
// a matrix) and checks: every code agrees with the value-domain reference
// truncRef (finite inputs), the encoding is a fixed point of encode∘decode,
// the matrix path agrees with the tile path, and the error is within the
// bound of docs/bfp.md, "Error bounds".
func FuzzEncodeRoundTrip(f *testing.F) {
	seed := make([]byte, 64)
	for j, v := range fullGroup {
		binary.LittleEndian.PutUint32(seed[4*j:], math.Float32bits(v))
	}
	f.Add(uint8(0), seed)
	f.Add(uint8(2), seed)
	f.Add(uint8(0), []byte{0x01, 0x00, 0x20, 0x3F, 0, 0, 0x80, 0x7F, 0, 0, 0xC0, 0x7F})

	f.Fuzz(func(t *testing.T, fsel uint8, raw []byte) {
		ff := fuzzFormat(fsel)
		if !ff.Valid() {
			ff = bfp.BFP4
		}
		// The bytes fill the tile cyclically so that short inputs still
		// make full groups.
		var src [1024]uint32
		if len(raw) >= 4 {
			n := len(raw) / 4
			for k := range src {
				src[k] = binary.LittleEndian.Uint32(raw[4*(k%n):])
			}
		}
		tile := make([]byte, ff.TileBytes())
		if err := bfp.EncodeTileBits(ff, &src, tile); err != nil {
			t.Fatal(err)
		}
		var dec [1024]float32
		if err := bfp.DecodeTile(ff, tile, &dec); err != nil {
			t.Fatal(err)
		}
		again := make([]byte, ff.TileBytes())
		if err := bfp.EncodeTile(ff, &dec, again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(tile, again) {
			t.Fatalf("encode(decode(encode(x))) != encode(x)")
		}

		m := ff.MagBits()
		for g := range 64 {
			E := tile[g]
			r, c0 := bfp.GroupOrigin(g)
			step := math.Ldexp(1, int(E)-127-(m-1))
			for j := range 16 {
				k := r*32 + c0 + j
				x := src[k]
				if x>>23&0xFF == 255 {
					continue // Inf/NaN: TestRuleCases
				}
				code := codeAt(ff, tile, g, j)
				if want := truncRef(ff, x, E); code != want {
					t.Fatalf("%#08x in group E=%d: code %#x, reference %#x", x, E, code, want)
				}
				if x>>23&0xFF == 0 {
					continue // flushed
				}
				// The level in float64: beside an Inf (E = 255) a finite
				// input may round to q·Δ = 2^128, which float32 shows as Inf.
				q := code & ff.MaxMag()
				level := float64(q) * step
				if code>>m&1 == 1 {
					level = -level
				}
				if E < 255 && float64(dec[k]) != level {
					t.Fatalf("code %#x at E=%d decodes to %v, want %v", code, E, dec[k], level)
				}
				v := float64(math.Float32frombits(x))
				bound := step/2 + math.Ldexp(1, int(E)-150)
				if q == ff.MaxMag() {
					bound = step + math.Ldexp(1, int(E)-150)
				}
				if d := math.Abs(v - level); d > bound {
					t.Fatalf("%#08x (E=%d) has level %v: error %g > %g", x, E, level, d, bound)
				}
			}
		}

		// The same values as a one-tile matrix [32, 32]: W[o][i] = tile[i][o].
		w := make([]float32, 1024)
		for i := range 32 {
			for o := range 32 {
				w[o*32+i] = math.Float32frombits(src[i*32+o])
			}
		}
		packed, err := bfp.PackMatrix(ff, w, 32, 32)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(packed, tile) {
			t.Fatal("PackMatrix of the transposed tile differs from EncodeTileBits")
		}
	})
}

// firstDiff returns the first index at which a and b (of equal length)
// differ, or −1.
func firstDiff(a, b []byte) int {
	for k := range a {
		if a[k] != b[k] {
			return k
		}
	}
	return -1
}
