package model_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/dtype"
)

// kvEdgeRows returns rows of kvd float32 bit patterns that reach every
// branch of the bf16 and BFP8 writers: zero and negative-zero groups,
// subnormals alone and beside the smallest normals, the largest exponent
// with saturation, Inf and NaN (quiet and signalling), exact ties of both
// parities for both codecs, bits dropped below a tie (BFP8 keeps no sticky
// bit), exponent spreads past 32 (the shift that empties a significand),
// and random patterns.
func kvEdgeRows(kvd, random int) []uint32 {
	var vals []uint32
	group := func(g ...uint32) {
		for len(g) < bfp.GroupSize {
			g = append(g, g[0])
		}
		vals = append(vals, g[:bfp.GroupSize]...)
	}
	group(0)
	group(0x80000000, 0, 0x80000000)
	group(0x00000001, 0x807fffff, 0x00400000, 0x00000003)                         // subnormals only: E = 0
	group(0x00800000, 0x00400000, 0x80000001, 0x00c00000)                         // E = 1 with subnormals
	group(0x7f7fffff, 0xff7fffff, 0x7f000000, 0x3f800000, 0x00000001)             // E = 254, saturating
	group(0x7f800000, 0xff800000, 0x3f800000, 0x7f7fffff, 0xc0000000)             // E = 255: Inf
	group(0x7fc00000, 0x7f800001, 0xffa00000, 0x7fffffff, 0x40490fdb)             // NaNs (quiet, signalling)
	group(0x3f808000, 0x3f818000, 0xbf808000, 0xbf818000, 0x00008000, 0x00018000) // bf16 ties
	// BFP8 ties at E = 127 (step 2^−6): (q + ½)·2^−6 for even and odd q,
	// and the same with a bit set below the dropped half.
	var ties, below []uint32
	for q := range bfp.GroupSize - 1 {
		v := math.Float32bits((float32(q) + 0.5) / 64)
		ties = append(ties, v)
		below = append(below, v|1)
	}
	group(append([]uint32{0x3fc00000}, ties...)...)
	group(append([]uint32{0xbfc00000}, below...)...)
	// Exponent spreads: E − e(x) from 0 to 45.
	var spread []uint32
	for k := range bfp.GroupSize {
		spread = append(spread, uint32(200-3*k)<<23|uint32(k)*0x12345)
	}
	group(spread...)
	rng := rand.New(rand.NewPCG(29, 1))
	for range random {
		var g []uint32
		hi := 1 + rng.Uint32N(254)
		for range bfp.GroupSize {
			switch rng.IntN(4) {
			case 0:
				g = append(g, rng.Uint32()) // any pattern, NaN and Inf included
			default:
				e := hi - min(hi, rng.Uint32N(40))
				g = append(g, rng.Uint32()&0x807fffff|e<<23)
			}
		}
		group(g...)
	}
	for len(vals)%kvd != 0 {
		group(0x3f800000)
	}
	return vals
}

// TestDeviceKVWriters: the device's bf16 and BFP8 cache writers
// (kv_store_bf16, kv_store_bfp8) give the bytes of the Go codecs
// (dtype.Float32ToBF16, bfp.QuantizeGroup) on every edge pattern, at a
// step-row and position offset.
func TestDeviceKVWriters(t *testing.T) {
	d := openCL(t)
	const kvd, row0, start = 64, 1, 2
	bits := kvEdgeRows(kvd, 256)
	n := len(bits) / kvd
	x := make([]byte, 4*(row0*kvd+len(bits)))
	for i, b := range bits {
		binary.LittleEndian.PutUint32(x[4*(row0*kvd+i):], b)
	}
	xb := devUpload(t, d, x)
	for _, tc := range []struct {
		kernel string
		items  int
		row    int // bytes per position
		want   func(g []uint32) []byte
	}{
		{"kv_store_bf16", n * kvd, 2 * kvd, func(r []uint32) []byte {
			var out []byte
			for _, b := range r {
				out = binary.LittleEndian.AppendUint16(out, dtype.Float32ToBF16(math.Float32frombits(b)))
			}
			return out
		}},
		{"kv_store_bfp8", n * kvd / 16, kvd / 16 * 17, func(r []uint32) []byte {
			var out []byte
			for i := 0; i < len(r); i += bfp.GroupSize {
				e, codes := bfp.QuantizeGroupBits(bfp.BFP8, (*[bfp.GroupSize]uint32)(r[i:]))
				out = append(append(out, e), codes[:]...)
			}
			return out
		}},
	} {
		cache := devUpload(t, d, make([]byte, (start+n)*tc.row))
		if err := d.Launch(tc.kernel, tc.items, 0, cache, xb, int32(kvd), int32(row0), int32(start), int32(n)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, cache.Bytes())
		if err := d.Read(cache, 0, got); err != nil {
			t.Fatal(err)
		}
		for p := range n {
			want := tc.want(bits[p*kvd : (p+1)*kvd])
			row := got[(start+p)*tc.row:][:tc.row]
			for i := range want {
				if row[i] != want[i] {
					t.Fatalf("%s: position %d byte %d = %#x, want %#x (inputs %08x)", tc.kernel, p, i, row[i], want[i], bits[p*kvd:(p+1)*kvd])
				}
			}
		}
		for i, b := range got[:start*tc.row] {
			if b != 0 {
				t.Fatalf("%s wrote byte %d, before position %d", tc.kernel, i, start)
			}
		}
	}
}

// TestDeviceKVReaders: the attention kernels widen every bf16 pattern and
// every BFP8 (exponent, code) pair as the Go decoders do. One cached
// position per head makes attention the identity on the values (weight
// Exp(0) = 1, o = fma(1, v, 0)/1), so the output is the decoded value,
// but for what fma(1, v, +0) cannot carry: a −0 comes out +0 and a NaN
// only as a NaN, on the CPU engine alike.
func TestDeviceKVReaders(t *testing.T) {
	d := openCL(t)
	const dh, heads = 64, 64
	const kvd = dh * heads
	// bf16: all 65,536 patterns; BFP8: every code under every exponent
	// (256 groups of 16 codes per exponent), 17 bytes per group.
	var bf16Rows, bfp8Rows [][]byte
	var bf16Want, bfp8Want [][]float32
	for p := 0; p < 1<<16; p += kvd {
		raw, want := make([]byte, 2*kvd), make([]float32, kvd)
		for i := range kvd {
			binary.LittleEndian.PutUint16(raw[2*i:], uint16(p+i))
			want[i] = math.Float32frombits(uint32(p+i) << 16)
		}
		bf16Rows, bf16Want = append(bf16Rows, raw), append(bf16Want, want)
	}
	var raw []byte
	var want []float32
	for e := range 256 {
		for c0 := 0; c0 < 256; c0 += bfp.GroupSize {
			var codes [bfp.GroupSize]uint8
			for j := range codes {
				codes[j] = uint8(c0 + j)
			}
			var dec [bfp.GroupSize]float32
			bfp.DequantizeGroup(bfp.BFP8, uint8(e), &codes, &dec)
			raw = append(append(raw, uint8(e)), codes[:]...)
			want = append(want, dec[:]...)
			if len(want) == kvd {
				bfp8Rows, bfp8Want = append(bfp8Rows, raw), append(bfp8Want, want)
				raw, want = nil, nil
			}
		}
	}
	q := devUpload(t, d, make([]byte, 4*kvd))
	sc := devUpload(t, d, make([]byte, 4*heads))
	bm := devUpload(t, d, make([]byte, 4*heads))
	o := devUpload(t, d, make([]byte, 4*kvd))
	for _, tc := range []struct {
		name string
		fmt  int32
		rows [][]byte
		want [][]float32
	}{{"bf16", 1, bf16Rows, bf16Want}, {"bfp8", 2, bfp8Rows, bfp8Want}} {
		kc := devUpload(t, d, make([]byte, len(tc.rows[0]))) // zero keys: every score 0
		vc := devUpload(t, d, make([]byte, len(tc.rows[0])))
		for r, row := range tc.rows {
			err := d.Write(vc, 0, row)
			args := []any{int32(dh), int32(heads), int32(1), int32(kvd), int32(0), int32(0), int32(0), int32(1)}
			if err == nil {
				err = d.Launch("attn_scores", heads, 0, append([]any{sc, q, kc, tc.fmt}, append(args, float32(0.125))...)...)
			}
			if err == nil {
				err = d.Launch("attn_block_max", heads, 0, sc, bm, int32(heads), int32(0), int32(0), int32(1))
			}
			if err == nil {
				err = d.Launch("attn_split_out", kvd, 0, append([]any{o, sc, bm, vc, tc.fmt}, args...)...)
			}
			got := make([]byte, 4*kvd)
			if err == nil {
				err = d.Read(o, 0, got)
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range tc.want[r] {
				g := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:]))
				if w == 0 {
					w = 0 // fma(1, −0, +0) is +0
				}
				if math.Float32bits(g) != math.Float32bits(w) && !(isNaN32(g) && isNaN32(w)) {
					t.Fatalf("%s: row %d value %d: %g (%08x), want %g (%08x)", tc.name, r, i, g, math.Float32bits(g), w, math.Float32bits(w))
				}
			}
		}
	}
}

func isNaN32(x float32) bool { return x != x }

// devUpload allocates a device buffer holding b, freed with the test.
func devUpload(t *testing.T, d device.Device, b []byte) device.Buffer {
	t.Helper()
	buf, err := d.Alloc(len(b))
	if err == nil {
		err = d.Write(buf, 0, b)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Free(buf) })
	return buf
}
