package model

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/internal/cputime"
)

// BenchmarkAttendPrompt is the attention alone of a 128-row prompt chunk
// after a context of depth positions, LFM2-8B-A1B's attention shapes (32
// query heads in groups of 4 over 8 KV heads of 64), 2 threads, each KV
// format, on the tile kernels and on reduceBlock row by row ("rows"): the
// cost the agent loop's turns pay per chunk over a long conversation.
// rows and tiles run in one process, so their ratio is a same-run A/B.
func BenchmarkAttendPrompt(b *testing.B) {
	const G, Hkv, d, rows, threads = 4, 8, 64, 128, 2
	for _, depth := range []int{0, 16384} {
		for _, dt := range kv.DTypes {
			m, s, c := attnBenchModel(b, G, Hkv, d, depth+rows, threads, dt)
			qd := Hkv * G * d
			out := make([]float32, rows*qd)
			segs := []Segment{{s: s, Toks: make([]int, rows), Start: depth}}
			for _, path := range []string{"rows", "tiles"} {
				b.Run(fmt.Sprintf("depth=%d/kv=%s/%s", depth, dt, path), func(b *testing.B) {
					if path == "tiles" && !kernels.TileFast() {
						b.Skip("no SIMD tile kernels here")
					}
					saved := attnTiles
					attnTiles = path == "tiles"
					defer func() { attnTiles = saved }()
					ws := &workspace{}
					var cpu float64
					for b.Loop() {
						c0 := cputime.Process()
						m.attend(ws, 0, segs, c.q[depth*qd:], out)
						cpu += (cputime.Process() - c0).Seconds()
					}
					b.ReportMetric(float64(b.N*rows)/cpu, "rows/cpu-s")
				})
			}
			m.pool.Close()
		}
	}
}

// BenchmarkAttendDecode is the attention alone of one decode row after a
// context of 16,384 positions, 2 threads, each KV format, with LFM2's
// attention heads (32 query and 8 KV heads of 64) and LFM3-1.7B's (16 and
// 4 of 128): what deep decode adds to a step per attention layer, with the
// key and value bytes it reads per second beside it (kv_GB/s), to set
// against BenchmarkMemRead's rate on the same machine. The cache (32 MiB
// of bf16 in both) is larger than a core's L2, so each step reads it from
// L3 or memory. LFMQ_BENCH_ATTN_DEPTHS sets other depths (a comma list),
// such as 2048, whose cache fits in two cores' L2s: where the attention's
// rate no longer depends on the memory.
func BenchmarkAttendDecode(b *testing.B) {
	const threads = 2
	depths := []int{16384}
	if v := os.Getenv("LFMQ_BENCH_ATTN_DEPTHS"); v != "" {
		depths = depths[:0]
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("LFMQ_BENCH_ATTN_DEPTHS=%q: want a comma list of positive depths", v)
			}
			depths = append(depths, n)
		}
	}
	for _, depth := range depths {
		for _, sh := range []struct{ G, Hkv, d int }{{4, 8, 64}, {4, 4, 128}} {
			for _, dt := range kv.DTypes {
				attendDecodeBench(b, sh.G, sh.Hkv, sh.d, depth, threads, dt)
			}
		}
	}
}

// attendDecodeBench runs BenchmarkAttendDecode for G·Hkv query heads over
// Hkv KV heads of d after depth positions in format dt.
func attendDecodeBench(b *testing.B, G, Hkv, d, depth, threads int, dt kv.DType) {
	n := depth + 1
	m, s, c := attnBenchModel(b, G, Hkv, d, n, threads, dt)
	defer m.pool.Close()
	qd := Hkv * G * d
	out := make([]float32, qd)
	segs := []Segment{{s: s, Toks: make([]int, 1), Start: depth}}
	b.Run(fmt.Sprintf("heads=%dx%dx%d/depth=%d/kv=%s", Hkv*G, Hkv, d, depth, dt), func(b *testing.B) {
		ws := &workspace{}
		for b.Loop() {
			m.attend(ws, 0, segs, c.q[depth*qd:], out)
		}
		bytes := float64(dt.RowBytes(Hkv*d)) * 2 * float64(n)
		b.ReportMetric(bytes*float64(b.N)/b.Elapsed().Seconds()/1e9, "kv_GB/s")
	})
}

// attnBenchModel returns a one-attention-layer model of G·Hkv query heads
// over Hkv KV heads of d on threads threads, with a sequence whose cache
// in format dt holds the random keys and values of n positions of c.
func attnBenchModel(b *testing.B, G, Hkv, d, n, threads int, dt kv.DType) (*Model, *Sequence, *attnCase) {
	rng := rand.New(rand.NewPCG(1, 2))
	c := newAttnCase(rng, G, Hkv, d, n)
	cfg := &config.Config{HeadDim: d, NumHeads: Hkv * G, NumKVHeads: Hkv, NumLayers: 1, LayerKinds: []config.LayerKind{config.Attention}}
	m := &Model{Config: cfg, pool: kernels.NewPool(threads), kvDType: dt}
	m.run = cpuRunner{m}
	s := m.NewKVPool(0).NewSequence()
	if err := s.state.(*cpuState).table.Grow(0, n); err != nil {
		b.Fatal(err)
	}
	s.state.(*cpuState).table.Write(0, 0, c.k, c.v)
	return m, s, c
}
