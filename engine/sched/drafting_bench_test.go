package sched

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/draft/drafttest"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/model/synth"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/engine/spec"
	"github.com/lfmq/lfmq/internal/cputime"
)

// The drafter's speed at real shapes (docs/drafting-speed.md):
//
//	go test -run '^$' -bench DraftedDecode -benchtime 1x -timeout 60m ./engine/sched
//
// For each of three synthetic targets (synth: all 16 layers of dense
// LFM2-1.2B; LFM2-8B-A1B's and LFM2-24B-A2B's layer shapes in the 4-layer
// arrangement of synth.RealShape, or draftLayersEnv layers), BF16, with a
// synthetic DSpark drafter of the released size (drafttest.Released: 5
// layers, hidden 2048, block 9, Markov rank 256, 295.7 M parameters), it
// measures the verify cost table (spec.Table: steps of 1 and 16
// sequences of 1 to 10 rows each, and the drafter's pass over 1 and 16
// sequences), then decodes 1 and 16 greedy requests with the drafter
// scheduled (Config.Drafter, DraftDepth 0: spec.Choose's depths and the
// guard) and plain, interleaved, and reports decode tokens/s of each and
// their ratio, in wall time and per CPU-second. The table, what it
// implies (analyseCosts) and the depths chosen are printed. A tiny target
// (synth.TinyShape) runs first, a check of the benchmark itself in
// seconds.
//
// The drafter's weights are random, so what it drafts never survives. The
// benchmark's draftHooks replace each pass's drafts (after the pass ran
// and was paid for) by the target's own greedy continuation, known from
// the plain run, for a geometric number of rows: row i survives, given
// that the rows before it did, with probability acceptRate, chosen so
// that a verify of the whole block of 9 emits publishedTokensPerStep
// tokens on average; the first row that does not survive gets another
// token. The confidence logits are set to logit(acceptRate), so that the
// depth rule sees the true acceptance. What is measured is then what the
// engine costs and what the scheduler chooses at a published acceptance,
// not a trained drafter's acceptance.

// Environment of BenchmarkDraftedDecode.
const (
	// draftLayersEnv sets the MoE targets' layer count (default 4, the
	// layers of synth.RealShape; more layers repeat its pattern).
	draftLayersEnv = "LFMQ_BENCH_DRAFT_MOE_LAYERS"
	// draftControlEnv, set to anything, makes the drafted side of each
	// cell a second plain scheduler: the control (runDraftBench).
	draftControlEnv = "LFMQ_BENCH_DRAFT_CONTROL"
	// draftTokensEnv sets the tokens each request generates (default 96).
	draftTokensEnv = "LFMQ_BENCH_DRAFT_TOKENS"
	// synthDirEnv keeps the synthetic checkpoints between runs, as the
	// engine's benchmarks do (engine/model/bench_test.go).
	synthDirEnv = "LFMQ_BENCH_SYNTH_DIR"
)

// publishedTokensPerStep is LiquidAI's published mean for
// LFM2.5-1.2B-Instruct-DSpark: 4.81 tokens per verify step of its block of
// 9 (the ceiling is 10) in SGLang; the MoE drafters' cards give speed-ups
// but no tokens per step, so the same acceptance stands for all three
// shapes here.
const publishedTokensPerStep = 4.81

// acceptRate is the per-row survival rate a of a geometric acceptance
// whose full-block verify emits publishedTokensPerStep tokens:
// 1 + a + a² + … + a^9 = publishedTokensPerStep.
var acceptRate = func() float64 {
	lo, hi := 0.0, 1.0
	for range 60 {
		a := (lo + hi) / 2
		if (1-math.Pow(a, 10))/(1-a) < publishedTokensPerStep {
			lo = a
		} else {
			hi = a
		}
	}
	return (lo + hi) / 2
}()

// draftShape is one target of the benchmark.
type draftShape struct {
	name  string
	shape func() (synth.Shape, error)
	// fullLayers is the published model's depth, for the projection of
	// a shallower synthetic target to it (0: the target is full depth).
	fullLayers int
}

func draftShapes(b *testing.B) []draftShape {
	moeLayers := 4
	if v := os.Getenv(draftLayersEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 || n > 64 {
			b.Fatalf("%s=%q: want a layer count in [2, 64]", draftLayersEnv, v)
		}
		moeLayers = n
	}
	moe := func(s synth.Shape) synth.Shape {
		base := s.LayerTypes
		s.LayerTypes = make([]string, moeLayers)
		for i := range s.LayerTypes {
			s.LayerTypes[i] = base[i%len(base)]
		}
		return s
	}
	return []draftShape{
		// tiny: synth.TinyShape, a check of the benchmark itself in seconds.
		{"tiny", func() (synth.Shape, error) { return synth.TinyShape(), nil }, 0},
		{"dense-1.2b", func() (synth.Shape, error) { return synth.DenseShape("LFM2-1.2B") }, 0},
		{fmt.Sprintf("8b-a1b-%dL", moeLayers), func() (synth.Shape, error) { return moe(synth.RealShape()), nil }, 24},
		{fmt.Sprintf("24b-a2b-%dL", moeLayers), func() (synth.Shape, error) { return moe(synth.A2BShape()), nil }, 40},
	}
}

// draftBenchTokens is the tokens each request generates.
func draftBenchTokens(b *testing.B) int {
	v := os.Getenv(draftTokensEnv)
	if v == "" {
		return 96
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 8 {
		b.Fatalf("%s=%q: want at least 8 tokens", draftTokensEnv, v)
	}
	return n
}

// BenchmarkDraftedDecode: see the comment above.
func BenchmarkDraftedDecode(b *testing.B) {
	tokens := draftBenchTokens(b)
	for _, ds := range draftShapes(b) {
		b.Run(ds.name, func(b *testing.B) {
			targetDir, drafterDir := writeDraftBench(b, ds)
			const maxContext = 1024
			plain, err := load.Load(targetDir, load.Options{MaxContext: maxContext})
			if err != nil {
				b.Fatal(err)
			}
			defer plain.Close()
			m, err := load.Load(targetDir, load.Options{MaxContext: maxContext})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			d, err := draft.Load(drafterDir, m)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			// As sched.MeasureDraftCosts does, wait for the loads'
			// background scans of the weights: beside the timed cells
			// they took a core (4.3 s of CPU in one run at 24B-A2B's
			// shape), and the table read steps slow.
			for _, mm := range []*model.Model{plain, m} {
				if err := mm.Verified(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			table, idle, head, idleHead := measureDraftCosts(b, m, d)
			// Printed, not logged: a benchmark's log is cut to 10 lines
			// without -v.
			fmt.Printf("%s: verify cost table (seconds; the drafter's pass beside), %d threads, load average %s, acceptance per row %.4f (%.2f tokens per full verify):\n%s%s",
				ds.name, m.Pool().Threads(), loadAverage(), acceptRate, publishedTokensPerStep, formatCells(table.Cells()), analyseCosts(table, head, m, ds.fullLayers))
			fmt.Printf("%s: the same in CPU seconds over threads (what an idle machine's wall time would be):\n%s%s",
				ds.name, formatCells(idle.Cells()), analyseCosts(idle, idleHead, m, ds.fullLayers))
			for _, width := range []int{1, 16} {
				b.Run(fmt.Sprintf("width=%d", width), func(b *testing.B) {
					runDraftBench(b, plain, m, d, table, width, tokens)
				})
			}
		})
	}
}

// writeDraftBench writes the BF16 target of ds and a released-size
// drafter for it, under synthDirEnv (kept) or a temporary directory,
// unless they are there already.
func writeDraftBench(b *testing.B, ds draftShape) (target, drafter string) {
	root := os.Getenv(synthDirEnv)
	if root == "" {
		root = b.TempDir()
	}
	target = filepath.Join(root, "draftbench-"+ds.name+"-bf16")
	drafter = filepath.Join(root, "draftbench-"+ds.name+"-dspark")
	if _, err := os.Stat(filepath.Join(drafter, "model.safetensors")); err == nil {
		return target, drafter
	}
	shape, err := ds.shape()
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	res, err := synth.Write(context.Background(), target, synth.Options{Shape: shape, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	t1 := time.Now()
	s := drafttest.Released(res.Config)
	n, err := drafttest.Write(drafter, s, 2)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%s: target %.2f GB written in %v; drafter %d parameters (%.0f MB), taps %v, written in %v",
		ds.name, float64(res.Bytes)/1e9, t1.Sub(t0).Round(time.Second), s.Params(), float64(n)/1e6, s.Taps, time.Since(t1).Round(time.Second))
	return target, drafter
}

// randomPrompts returns n prompts of length tokens each, seeded.
func randomPrompts(vocab, n, length int, seed uint64) [][]int {
	rng := rand.New(rand.NewPCG(seed, 7))
	out := make([][]int, n)
	for i := range out {
		out[i] = make([]int, length)
		for j := range out[i] {
			out[i][j] = rng.IntN(vocab)
		}
	}
	return out
}

// measureDraftCosts measures m's verify cost table as the scheduler keys
// it: steps of n sequences (1 and 16, after a 32-token prompt each) with
// k rows each (k = 1 to 10: the pending token and up to 9 drafts), all
// rows' logits from k = 2 on as a verify asks, and the drafter's pass
// over n sequences. Each cell is the median of its repetitions. It also
// times the LM head alone (Model.HeadRows) on 1 and 10 rows per
// sequence, keyed like the table's cells, for analyseCosts. Each is
// measured twice over: in wall seconds, and in the process's CPU seconds
// over its threads (idle), the wall time the work would take on an idle
// machine, which a shared machine's other work disturbs far less.
func measureDraftCosts(b *testing.B, m *model.Model, d *draft.Drafter) (t, idle *spec.Table, head, idleHead map[[2]int]float64) {
	t, idle = spec.NewTable(), spec.NewTable()
	head, idleHead = map[[2]int]float64{}, map[[2]int]float64{}
	threads := float64(m.Pool().Threads())
	var t0 time.Time
	var c0 time.Duration
	begin := func() { t0, c0 = time.Now(), cputime.Process() }
	end := func() (wall, cpu float64) {
		return time.Since(t0).Seconds(), (cputime.Process() - c0).Seconds() / threads
	}
	H, V := m.Config.HiddenSize, m.Config.VocabSize
	ctx := context.Background()
	// Each cell's first run is not recorded: the first step of a shape
	// allocates its workspace, and so took four times as long as the
	// next on the tiny target, a cost the scheduler's steps never pay
	// again (and the depth rule and the guard read the cells).
	const reps = 3
	for _, n := range []int{1, 16} {
		base := make([]*model.Sequence, n)
		prompts := randomPrompts(m.Config.VocabSize, n, 32, 11)
		for i := range base {
			base[i] = m.NewSequence()
		}
		if _, err := m.Forward(ctx, base, prompts, model.ForwardOptions{Logits: model.NoLogits}); err != nil {
			b.Fatal(err)
		}
		pending := make([]int, n)
		for r := range reps + 1 {
			begin()
			if _, err := d.Propose(base, pending, false); err != nil {
				b.Fatal(err)
			}
			if w, c := end(); r > 0 {
				t.ObserveDraft(n, w)
				idle.ObserveDraft(n, c)
			}
		}
		rng := rand.New(rand.NewPCG(12, uint64(n)))
		for k := 1; k <= draft.MaxBlockSize && k <= 10; k++ {
			for r := range reps + 1 {
				seqs := make([]*model.Sequence, n)
				toks := make([][]int, n)
				modes := make([]model.LogitsMode, n)
				for i := range seqs {
					seqs[i] = base[i].Clone()
					toks[i] = make([]int, k)
					for j := range toks[i] {
						toks[i][j] = rng.IntN(m.Config.VocabSize)
					}
					modes[i] = model.LastLogits
					if k > 1 {
						modes[i] = model.AllLogits
					}
				}
				begin()
				if _, err := m.Forward(ctx, seqs, toks, model.ForwardOptions{SeqLogits: modes, ChunkSize: n * k}); err != nil {
					b.Fatal(err)
				}
				if w, c := end(); r > 0 {
					t.Observe(n, n*k, w)
					idle.Observe(n, n*k, c)
				}
				for _, s := range seqs {
					s.Free()
				}
			}
		}
		for _, s := range base {
			s.Free()
		}
		for _, k := range []int{1, 10} {
			x := make([]float32, n*k*H)
			y := make([]float32, n*k*V)
			var ws, cs []float64
			for r := range reps + 1 {
				begin()
				m.HeadRows(y, x, n*k)
				if w, c := end(); r > 0 {
					ws, cs = append(ws, w), append(cs, c)
				}
			}
			slices.Sort(ws)
			slices.Sort(cs)
			head[[2]int{n, n * k}], idleHead[[2]int{n, n * k}] = ws[len(ws)/2], cs[len(cs)/2]
		}
	}
	return t, idle, head, idleHead
}

// expectedTokens is a sequence's expected tokens from a verify of k
// drafts at acceptRate: 1 + a + … + a^k.
func expectedTokens(k int) float64 {
	return (1 - math.Pow(acceptRate, float64(k+1))) / (1 - acceptRate)
}

// bestDepth returns, for a step of n sequences that all verify the same
// number of drafts k, the k of 0 to 9 that emits the most tokens per
// second with the drafter's pass draft included (k = 0: a plain step, no
// pass), and that rate over the plain one. cost(rows) is the step's time.
func bestDepth(n int, cost func(rows int) float64, draft float64) (int, float64) {
	plain := float64(n) / cost(n)
	best, bestK := plain, 0
	for k := 1; k <= 9; k++ {
		if r := float64(n) * expectedTokens(k) / (cost(n*(k+1)) + draft); r > best {
			best, bestK = r, k
		}
	}
	return bestK, best / plain
}

// analyseCosts reads the verify cost table (docs/drafting-speed.md): per
// width, the least-squares line of a step's time over its rows per
// sequence, t = A + B·k (A: what a step costs whatever its rows, chiefly
// reading the weights; B/n: one row's arithmetic), the weight bytes over
// A as the read rate it implies, the drafter's pass split likewise over
// the two widths, and the best fixed depth with its expected speed-up
// (bestDepth) at the published acceptance: as measured, for a target of
// fullLayers layers (the table's layer part, its time less the head's,
// scaled by fullLayers over the target's), and at 16 cores, where B and
// the pass's arithmetic are divided by 16/threads and A and the pass's
// read part by the factor bw by which the machine's read rate is higher.
func analyseCosts(t *spec.Table, head map[[2]int]float64, m *model.Model, fullLayers int) string {
	threads := float64(m.Pool().Threads())
	var sb strings.Builder
	drafterPass := func(n int) float64 { return t.DraftCost(n) }
	// The pass: Dr + n·Da through its cells at 1 and 16 sequences.
	da := (t.DraftCost(16) - t.DraftCost(1)) / 15
	dr := max(t.DraftCost(1)-da, 0)
	fmt.Fprintf(&sb, "drafter pass: %.4f s + %.4f s per sequence (read part and arithmetic)\n", dr, da)
	scaleLayers := 1.0
	if L := m.Config.NumLayers; fullLayers > 0 && fullLayers != L {
		scaleLayers = float64(fullLayers) / float64(L)
	}
	for _, n := range []int{1, 16} {
		cost := func(rows int) float64 { return t.Cost(n, rows) }
		// The head at rows, linear between its two timings.
		h1, h10 := head[[2]int{n, n}], head[[2]int{n, 10 * n}]
		headAt := func(rows int) float64 { return h1 + (h10-h1)*float64(rows-n)/float64(9*n) }
		full := func(rows int) float64 { return headAt(rows) + scaleLayers*(cost(rows)-headAt(rows)) }
		var sx, sy, sxx, sxy float64
		for k := 1; k <= 10; k++ {
			x, y := float64(k), full(n*k)
			sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
		}
		B := (10*sxy - sx*sy) / (10*sxx - sx*sx)
		A := max((sy-B*sx)/10, 0)
		k, r := bestDepth(n, cost, drafterPass(n))
		fmt.Fprintf(&sb, "seqs=%d: best fixed depth %d, expected %.2fx", n, k, r)
		if scaleLayers != 1 {
			k, r = bestDepth(n, full, drafterPass(n))
			fmt.Fprintf(&sb, "; at %d layers (head %.4f s at 1 row per sequence, %.4f s at 10) best depth %d, %.2fx", fullLayers, h1, h10, k, r)
		}
		wb := float64(m.DecodeWeightBytes()) * scaleLayers
		fmt.Fprintf(&sb, "; step = %.4f s + %.4f s per row per sequence (%.2f ms per row; %.1f GB/s if A is the weights' read)\n",
			A, B, 1000*B/float64(n), wb/A/1e9)
		for _, bw := range []float64{1, 2} {
			lin := func(rows int) float64 { return A/bw + B*threads/16*float64(rows)/float64(n) }
			pass := dr/bw + da*float64(n)*threads/16
			k, r := bestDepth(n, lin, pass)
			fmt.Fprintf(&sb, "  16 cores, read rate x%g: plain %.1f tok/s, best depth %d, expected %.2fx\n", bw, float64(n)/lin(n), k, r)
		}
	}
	return sb.String()
}

// formatCells prints a table's cells as rows of widths: seconds by rows
// per sequence, and the drafter's pass.
func formatCells(cs []spec.Cell) string {
	var sb strings.Builder
	widths := map[int]bool{}
	for _, c := range cs {
		widths[c.Seqs] = true
	}
	ws := slices.Sorted(func(yield func(int) bool) {
		for w := range widths {
			if !yield(w) {
				return
			}
		}
	})
	for _, w := range ws {
		fmt.Fprintf(&sb, "  seqs=%-3d", w)
		for _, c := range cs {
			if c.Seqs != w {
				continue
			}
			if c.Rows == 0 {
				fmt.Fprintf(&sb, " drafter=%.4f", c.Seconds)
			} else if c.Rows%w == 0 {
				fmt.Fprintf(&sb, " k%d=%.4f", c.Rows/w, c.Seconds)
			}
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

// timedSink records a request's tokens and when each arrived.
type timedSink struct {
	mu     sync.Mutex
	tokens []int
	at     []time.Time
	cpu    []time.Duration // the process's CPU time at each token
	err    error
	done   chan struct{}
}

func (s *timedSink) Started(int)                 {}
func (s *timedSink) PromptLogits(int, []float32) {}
func (s *timedSink) Token(id int, _ []float32, stop bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !stop {
		s.tokens = append(s.tokens, id)
		s.at = append(s.at, time.Now())
		s.cpu = append(s.cpu, cputime.Process())
	}
	return false
}
func (s *timedSink) Done(_ FinishReason, err error) {
	s.err = err
	close(s.done)
}

// decodeRun submits one greedy request per prompt at once and returns
// each one's tokens, and the decode rate while all of them were decoding:
// the tokens that arrived after the last request's first token and up to
// the first request's last, over that time, and over the process's CPU
// time in that window (which other processes on a shared machine disturb
// far less than the wall time).
func decodeRun(b *testing.B, s *Scheduler, prompts [][]int, tokens int) ([][]int, float64, float64) {
	p := sample.Neutral()
	p.Temperature = 0
	sinks := make([]*timedSink, len(prompts))
	for i, pr := range prompts {
		sinks[i] = &timedSink{done: make(chan struct{})}
		if err := s.Submit(context.Background(), &Request{ID: strconv.Itoa(i), Prompt: pr, MaxTokens: tokens, Params: p, Sink: sinks[i]}); err != nil {
			b.Fatal(err)
		}
	}
	var from, to time.Time
	out := make([][]int, len(sinks))
	for i, sk := range sinks {
		<-sk.done
		if sk.err != nil {
			b.Fatal(sk.err)
		}
		if len(sk.at) < 2 {
			b.Fatalf("request %d produced %d tokens", i, len(sk.at))
		}
		if sk.at[0].After(from) {
			from = sk.at[0]
		}
		if last := sk.at[len(sk.at)-1]; to.IsZero() || last.Before(to) {
			to = last
		}
		out[i] = sk.tokens
	}
	if !to.After(from) {
		// Some request ended before the last began: the whole run then.
		from, to = sinks[0].at[0], sinks[0].at[0]
		for _, sk := range sinks {
			from = minTime(from, sk.at[0])
			if last := sk.at[len(sk.at)-1]; last.After(to) {
				to = last
			}
		}
	}
	n := 0
	var cpuFrom, cpuTo time.Duration
	for _, sk := range sinks {
		for i, t := range sk.at {
			if t.Equal(from) {
				cpuFrom = sk.cpu[i]
			}
			if t.Equal(to) {
				cpuTo = sk.cpu[i]
			}
			if t.After(from) && !t.After(to) {
				n++
			}
		}
	}
	cpuRate := 0.0
	if cpuTo > cpuFrom {
		cpuRate = float64(n) / (cpuTo - cpuFrom).Seconds()
	}
	return out, float64(n) / to.Sub(from).Seconds(), cpuRate
}

// loadAverage returns /proc/loadavg's 1, 5 and 15 minute figures: the
// machine may be shared, and its load is part of what a figure means.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// oracle replaces drafts by the target's greedy continuation for a
// geometric number of rows (see BenchmarkDraftedDecode).
type oracle struct {
	cont  map[string][]int // request ID → its plain greedy tokens
	vocab int
	logit float32
	// round is the benchmark round: each round's requests draw their
	// survival afresh (the IDs repeat from round to round).
	round uint64

	mu     sync.Mutex
	depths [draft.MaxBlockSize + 1]int
}

func (o *oracle) propose(req *Request, produced int, drafts []int, conf []float32) {
	cont := o.cont[req.ID]
	h := fnv.New64a()
	h.Write([]byte(req.ID))
	rng := rand.New(rand.NewPCG(h.Sum64(), o.round<<32|uint64(produced)))
	// Every row's confidence is the same: the depth rule must not learn
	// from it where the drafts stop surviving.
	for i := range conf {
		conf[i] = o.logit
	}
	for i := range drafts {
		at := produced + i
		if at >= len(cont) {
			break
		}
		if rng.Float64() >= acceptRate {
			drafts[i] = (cont[at] + 1) % o.vocab
			break
		}
		drafts[i] = cont[at]
	}
}

func (o *oracle) chosen(depths []int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, k := range depths {
		o.depths[k]++
	}
}

// runDraftBench decodes width greedy requests of tokens tokens plain and
// with the drafter scheduled, b.N rounds, and reports both rates.
//
// The two runs of a round alternate their order: an even round draws
// fresh prompts and runs plain first (its replies are what the oracle
// drafts from), an odd round takes the same prompts again and runs the
// drafter first, so that neither side is always the one that runs while
// the machine warms or drifts. With draftControlEnv set, the "drafted" side
// is a second plain scheduler on the plain side's model: the ratio's
// spread on this machine with nothing to tell the two sides apart.
func runDraftBench(b *testing.B, plainM, m *model.Model, d *draft.Drafter, table *spec.Table, width, tokens int) {
	cfg := Config{Speculation: SpecConfig{Off: true}, PrefixCache: PrefixConfig{Off: true}, MaxModelLen: 32 + tokens}
	plain := start(b, plainM, cfg)
	dcfg := cfg
	control := os.Getenv(draftControlEnv) != ""
	if control {
		m = plainM
	} else {
		dcfg.Drafter, dcfg.DraftCosts = d, table
	}
	drafted := start(b, m, dcfg)
	o := &oracle{vocab: m.Config.VocabSize, logit: float32(math.Log(acceptRate / (1 - acceptRate)))}
	drafted.hooks = &draftHooks{propose: o.propose, depths: o.chosen}
	var rPlain, rDrafted, cPlain, cDrafted float64
	var draftedWall time.Duration // the drafted side's runs, whole
	st0 := drafted.Stats()
	draftedRun := func(prompts [][]int) ([][]int, float64, float64) {
		t0 := time.Now()
		defer func() { draftedWall += time.Since(t0) }()
		return decodeRun(b, drafted, prompts, tokens)
	}
	var prompts, want [][]int
	var rounds []string
	for i := range b.N {
		o.round = uint64(i)
		var got [][]int
		var rp, cp, rd, cd float64
		if i%2 == 0 {
			prompts = randomPrompts(m.Config.VocabSize, width, 32, uint64(100*width+i))
			want, rp, cp = decodeRun(b, plain, prompts, tokens)
			o.cont = map[string][]int{}
			for j, w := range want {
				o.cont[strconv.Itoa(j)] = w
			}
			got, rd, cd = draftedRun(prompts)
		} else {
			got, rd, cd = draftedRun(prompts)
			var again [][]int
			again, rp, cp = decodeRun(b, plain, prompts, tokens)
			for j := range again {
				if !slices.Equal(again[j], want[j]) {
					b.Errorf("request %d: plain decoding gave %v, and %v the round before", j, again[j], want[j])
				}
			}
		}
		for j := range got {
			if !slices.Equal(got[j], want[j]) {
				b.Errorf("request %d: with the drafter %v\nplain %v", j, got[j], want[j])
			}
		}
		rounds = append(rounds, fmt.Sprintf("%.3f", rd/rp))
		rPlain += rp
		rDrafted += rd
		cPlain += cp
		cDrafted += cd
	}
	rPlain /= float64(b.N)
	rDrafted /= float64(b.N)
	st := drafted.Stats()
	b.ReportMetric(rPlain, "plain_tok/s")
	b.ReportMetric(rDrafted, "drafted_tok/s")
	b.ReportMetric(rDrafted/rPlain, "ratio")
	if cPlain > 0 && cDrafted > 0 {
		b.ReportMetric(cDrafted/cPlain, "cpu_ratio")
	}
	if st.DraftSteps > 0 {
		b.ReportMetric(float64(st.DraftEmitted)/float64(st.DraftSteps), "tok/verify")
		b.ReportMetric(float64(st.DraftTokens)/float64(st.DraftSteps), "depth/verify")
	}
	b.ReportMetric(float64(st.DraftPasses), "passes")
	b.ReportMetric(float64(st.DraftHopelessSteps), "hopeless_steps")
	b.ReportMetric(float64(st.Steps), "steps")
	o.mu.Lock()
	hist := o.depths
	o.mu.Unlock()
	var hs []string
	for k, c := range hist {
		if c > 0 {
			hs = append(hs, fmt.Sprintf("%d:%d", k, c))
		}
	}
	// The guard's widths that found drafting not to pay; the others
	// never did.
	var gs []string
	for _, g := range st.DraftGuard {
		if g.Offs > 0 || !g.Drafting {
			gs = append(gs, fmt.Sprintf("width %d: off %d times, drafting now %v", g.Width, g.Offs, g.Drafting))
		}
	}
	// What the drafter's own work took of the drafted side's runs: an
	// account of its cost that this machine's drift does not blur.
	passSec, ctxSec := st.DraftPassSeconds-st0.DraftPassSeconds, st.DraftContextSeconds-st0.DraftContextSeconds
	side := "drafted"
	if control {
		side = "control (a second plain scheduler)"
	}
	fmt.Printf("%s: the drafter's passes took %.3f s and its context %.3f s, %.2f %% of the drafted runs' %.1f s\n",
		b.Name(), passSec, ctxSec, 100*(passSec+ctxSec)/draftedWall.Seconds(), draftedWall.Seconds())
	fmt.Printf("%s: %s ÷ plain per round (even rounds plain first) %s; depths chosen (depth:candidates) %s; verify steps %d, drafts %d, kept %d, emitted %d; guard of %d widths: %s; load average %s\n",
		b.Name(), side, strings.Join(rounds, " "), strings.Join(hs, " "), st.DraftSteps, st.DraftTokens, st.DraftAccepted, st.DraftEmitted, len(st.DraftGuard), strings.Join(gs, "; "), loadAverage())
}

// TestDraftOracle: the benchmark's stand-in for a trained drafter keeps
// the published mean. Its per-row rate solves 1 + a + … + a^9 = 4.81, and
// over many blocks of 9 the rows it makes the target's own tokens (the
// drafts a verify keeps) average 3.81 per block, the published 4.81
// tokens per verify less the target's own; the first row it spoils is
// never the target's token.
func TestDraftOracle(t *testing.T) {
	if got := expectedTokens(9); math.Abs(got-publishedTokensPerStep) > 1e-9 {
		t.Fatalf("acceptance %.6f gives %.6f tokens per full verify, want %.2f", acceptRate, got, publishedTokensPerStep)
	}
	const vocab, blocks = 1000, 20000
	cont := make([]int, blocks+9)
	for i := range cont {
		cont[i] = (7 * i) % vocab
	}
	o := &oracle{cont: map[string][]int{"r": cont}, vocab: vocab, logit: 1.5}
	kept := 0
	for produced := range blocks {
		drafts := make([]int, 9)
		for i := range drafts {
			drafts[i] = -1 // what the drafter drafted: never the target's
		}
		conf := []float32{-9, -9, -9, -9, -9, -9, -9, -9, -9} // the drafter's
		o.propose(&Request{ID: "r"}, produced, drafts, conf)
		n := 0
		for n < 9 && drafts[n] == cont[produced+n] {
			n++
		}
		if n < 9 && drafts[n] == -1 {
			t.Fatalf("block %d: row %d after %d kept is the drafter's, not a spoiled token", produced, n, n)
		}
		for i, c := range conf {
			if c != 1.5 {
				t.Fatalf("block %d: row %d's confidence %v, want the oracle's logit on every row", produced, i, c)
			}
		}
		kept += n
	}
	if mean, want := float64(kept)/blocks, publishedTokensPerStep-1; math.Abs(mean-want) > 0.05 {
		t.Errorf("%.3f drafts kept per block of 9, want %.2f", mean, want)
	}
}
