package bfp_test

import (
	"crypto/sha256"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfmq/lfmq/format/bfp"
)

// Throughput is counted in float32 bytes (4 per weight) for encoding and
// decoding alike: the float32 input that is encoded, the float32 output
// that is decoded. The packed side is 8.5/32 (BFP8) or 4.5/32 (BFP4) of it.
// go test reports MB/s from SetBytes; each benchmark also reports GB/s.

func reportGBs(b *testing.B, bytesPerOp int64) {
	b.ReportMetric(float64(bytesPerOp)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}

func gaussianTile(seed uint64) *[1024]float32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	var t [1024]float32
	for k := range t {
		t[k] = float32(rng.NormFloat64() * 0.02)
	}
	return &t
}

func BenchmarkEncodeTile(b *testing.B) {
	src := gaussianTile(1)
	for _, f := range formats {
		b.Run(f.String(), func(b *testing.B) {
			dst := make([]byte, f.TileBytes())
			b.SetBytes(4 * 1024) // float32 input
			for b.Loop() {
				if err := bfp.EncodeTile(f, src, dst); err != nil {
					b.Fatal(err)
				}
			}
			reportGBs(b, 4*1024)
		})
	}
}

func BenchmarkDecodeTile(b *testing.B) {
	src := gaussianTile(2)
	for _, f := range formats {
		b.Run(f.String(), func(b *testing.B) {
			tile := make([]byte, f.TileBytes())
			if err := bfp.EncodeTile(f, src, tile); err != nil {
				b.Fatal(err)
			}
			var dst [1024]float32
			b.SetBytes(4 * 1024) // float32 output
			for b.Loop() {
				if err := bfp.DecodeTile(f, tile, &dst); err != nil {
					b.Fatal(err)
				}
			}
			reportGBs(b, 4*1024)
		})
	}
}

// BenchmarkPackMatrix packs an LFM2-8B-A1B expert w1 ([out, in] =
// [1792, 2048], 3.7 M weights, 3584 tiles), transpose included.
func BenchmarkPackMatrix(b *testing.B) {
	const out, in = 1792, 2048
	rng := rand.New(rand.NewPCG(3, 1))
	w := make([]float32, out*in)
	for k := range w {
		w[k] = float32(rng.NormFloat64() * 0.02)
	}
	for _, f := range formats {
		b.Run(f.String(), func(b *testing.B) {
			b.SetBytes(4 * out * in) // float32 input
			for b.Loop() {
				if _, err := bfp.PackMatrix(f, w, out, in); err != nil {
					b.Fatal(err)
				}
			}
			reportGBs(b, 4*out*in)
		})
	}
}

// BenchmarkUnpackMatrix is the inverse of BenchmarkPackMatrix (float32
// output bytes).
func BenchmarkUnpackMatrix(b *testing.B) {
	const out, in = 1792, 2048
	rng := rand.New(rand.NewPCG(4, 1))
	w := make([]float32, out*in)
	for k := range w {
		w[k] = float32(rng.NormFloat64() * 0.02)
	}
	for _, f := range formats {
		b.Run(f.String(), func(b *testing.B) {
			data, err := bfp.PackMatrix(f, w, out, in)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(4 * out * in) // float32 output
			for b.Loop() {
				if _, err := bfp.UnpackMatrix(f, data, out, in); err != nil {
					b.Fatal(err)
				}
			}
			reportGBs(b, 4*out*in)
		})
	}
}

// BenchmarkBaselineSHA256 hashes one tile's float32 bytes (4 KiB) with
// crypto/sha256 in the same run, as a machine-independent yardstick: the
// codec figures are reported as ratios to it, since this machine is noisy.
func BenchmarkBaselineSHA256(b *testing.B) {
	src := gaussianTile(1)
	buf := make([]byte, 4*1024)
	for i, v := range src {
		bits := math.Float32bits(v)
		buf[4*i], buf[4*i+1], buf[4*i+2], buf[4*i+3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
	}
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		sha256.Sum256(buf)
	}
	reportGBs(b, int64(len(buf)))
}
