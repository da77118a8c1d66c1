package quant

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sourcegraph/conc/pool"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/canonjson"
	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant/plan"
	"github.com/lfmq/lfmq/version"
)

// Method names a way of quantizing the routed experts.
type Method string

// The methods lfmq implements.
const (
	// RTN is the plain BFP packer: round to nearest (docs/gptq.md §6).
	RTN Method = "rtn"
	// GPTQ quantizes the routed experts with GPTQ on calibration
	// statistics (docs/gptq.md); every other BFP tensor is RTN.
	GPTQ Method = "gptq"
)

// ParseMethod validates a --method value.
func ParseMethod(s string) (Method, error) {
	switch Method(s) {
	case RTN, GPTQ:
		return Method(s), nil
	}
	return "", fmt.Errorf("quant: unknown method %q (available: gptq, rtn)", s)
}

// Options configures Quantize.
type Options struct {
	ModelDir string
	OutDir   string
	Method   Method
	// Workers bounds the goroutines packing tensors, accumulating
	// statistics and solving experts, and the engine's threads; 0 means
	// GOMAXPROCS. The output bytes do not depend on it.
	Workers int
	// KeepExperts stores the routed experts unquantized (BF16), for the
	// "BF16 experts + BFP8 dense" ablation; Method is then unused.
	KeepExperts bool
	// CreatedBy is recorded in the manifest: the command line that makes
	// the checkpoint, without machine paths or speed-only flags, written
	// from the effective settings (the manifest is the checkpoint's
	// identity, so it must not depend on how the flags were typed).
	CreatedBy string
	// Progress, if set, is told the total number of tensors and then of
	// each tensor as it is finished (see Progress for when, and from which
	// goroutines). A GPTQ run also reports its stages to a Progress that
	// implements StageProgress.
	Progress Progress
	// GPTQ holds the settings of Method GPTQ (start from
	// DefaultGPTQOptions); unused otherwise.
	GPTQ GPTQOptions
	// ExponentRule chooses the BFP exponents of the routed experts (RTN or
	// GPTQ; hessian needs GPTQ) and DenseExponentRule those of the BFP8
	// dense tensors and the head (max or search). Empty means max.
	ExponentRule      ExponentRule
	DenseExponentRule ExponentRule
	// DenseMethod is how the BFP8 dense tensors (attention, conv
	// projections, an MoE's dense FFN layers) and the head are quantized:
	// RTN (empty means RTN) or GPTQ, which needs Method GPTQ and may be
	// used with KeepExperts.
	DenseMethod Method
	// FFNFormat is the format of a dense checkpoint's FFN w1/w3/w2: BFP4
	// (empty means BFP4), solved by Method like an MoE's experts, or BFP8,
	// always by RTN. LFM2-MoE checkpoints must leave it empty.
	FFNFormat lfmq1.TensorFormat
}

// Progress receives quantization progress. Its methods must be safe for
// concurrent use.
type Progress interface {
	// Start is called once, by the goroutine that called Quantize, with
	// the number of tensors the checkpoint will hold, before any Done.
	Start(total int)
	// Done is called once per tensor. For tensors packed by RTN or copied
	// (every tensor of an RTN run; the dense, head and kept tensors of a
	// GPTQ run) it is called from the worker pool's goroutines, up to
	// Options.Workers at a time and in no fixed order, as soon as that
	// tensor's bytes are in memory: before the safetensors file holding
	// it is written, which happens once every tensor of the file is done.
	// For a GPTQ run's routed experts it is called from the solving
	// goroutines as each expert's solve ends (w1 and w3 together, then
	// w2), before the layer's experts file is written, so that the count
	// moves while a layer is solved; for a layer taken over by --resume,
	// by the goroutine that called Quantize. A run that fails may have
	// reported tensors that were never written.
	Done(tensor string)
}

// Result summarises a finished quantization.
type Result struct {
	OutDir         string
	ManifestSHA256 string
	Tensors        int
	// Bytes and SourceBytes count tensor data only (no safetensors
	// headers, manifest or copied files), so that the two compare like for
	// like and agree with lfmq inspect.
	Bytes       int64
	SourceBytes int64
	// GPTQ reports a GPTQ run's per-layer metrics, timings and warnings;
	// nil for other methods.
	GPTQ *GPTQReport
}

// NonFiniteError reports a NaN or Inf in a weight to quantize; lfmq refuses
// such tensors (docs/bfp.md, "Special inputs", project policy).
type NonFiniteError struct {
	Tensor string
	Index  int
	Value  float32
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("quant: tensor %q: element %d is %v; refusing to quantize a non-finite weight", e.Tensor, e.Index, e.Value)
}

// Quantize reads the Hugging Face checkpoint in opts.ModelDir and writes an
// lfmq-1 checkpoint to opts.OutDir. The output bytes depend only on the
// inputs, the method and its settings, never on Workers, GOMAXPROCS or
// scheduling, nor on whether a GPTQ run was interrupted and resumed.
//
// An RTN run builds the checkpoint in a temporary directory that is removed
// on failure. A GPTQ run builds it in lfmq1.PartialDir(OutDir) and keeps
// each finished MoE layer there; if it stops after finishing some (an error
// or a cancelled ctx), the error is a *PartialError and the directory stays
// for a run with GPTQOptions.Resume. Either way OutDir appears only when
// the checkpoint is complete.
func Quantize(ctx context.Context, opts Options) (*Result, error) {
	if opts.Method == "" {
		opts.Method = RTN
	}
	if _, err := ParseMethod(string(opts.Method)); err != nil {
		return nil, err
	}
	if err := checkRules(&opts); err != nil {
		return nil, err
	}
	switch opts.DenseMethod {
	case "", RTN:
	case GPTQ:
		if opts.Method != GPTQ {
			return nil, &OptionError{"DenseMethod", "gptq needs Method gptq (its calibration statistics)"}
		}
	default:
		return nil, &OptionError{"DenseMethod", fmt.Sprintf("%q; want rtn or gptq", opts.DenseMethod)}
	}
	cfg, err := config.Load(opts.ModelDir)
	if err != nil {
		return nil, err
	}
	src, err := hf.Open(opts.ModelDir)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	if err := checkArchitecture(cfg, &opts); err != nil {
		return nil, err
	}
	p, srcBytes, err := planSource(cfg, src, plan.Options{KeepExperts: opts.KeepExperts, FFNFormat: opts.FFNFormat})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", opts.ModelDir, err)
	}
	source, err := describeSource(opts.ModelDir)
	if err != nil {
		return nil, err
	}
	if opts.Method == GPTQ && (!opts.KeepExperts || opts.DenseMethod == GPTQ) {
		res, err := quantizeGPTQ(ctx, opts, cfg, src, p, source)
		if res != nil {
			res.SourceBytes = srcBytes
		}
		return res, err
	}

	w, err := lfmq1.Create(opts.OutDir)
	if err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed {
			w.Abort()
		}
	}()
	if opts.Progress != nil {
		opts.Progress.Start(len(p.Entries))
	}
	metrics := tensorMetrics{}
	res := &Result{OutDir: opts.OutDir, Tensors: len(p.Entries), SourceBytes: srcBytes}
	budget := newMemBudget(packMemory(cfg, 0), nil)
	for _, file := range p.Files() {
		entries := p.ByFile(file)
		out, err := produceAll(ctx, src, entries, opts.packRules(), opts.Workers, opts.Progress, budget)
		if err != nil {
			return nil, err
		}
		tensors := make([]lfmq1.Tensor, len(out))
		for i, o := range out {
			tensors[i] = o.tensor
			if o.metric != nil {
				metrics[o.tensor.Name] = *o.metric
			}
			res.Bytes += int64(len(o.tensor.Data))
		}
		if err := w.WriteFile(file, tensors); err != nil {
			return nil, err
		}
	}
	q := quantizationSpec(p, opts)
	if q.Settings, err = canonjson.Marshal(RuleSettings{ExponentRule: string(opts.ExponentRule.orMax()),
		DenseExponentRule: string(opts.DenseExponentRule.orMax())}); err != nil {
		return nil, err
	}
	if err := finish(w, opts, cfg.ModelType, source, q, map[string]any{"tensors": metrics}, res); err != nil {
		return nil, err
	}
	committed = true
	return res, nil
}

// planSource plans the checkpoint of src's tensors under cfg, and returns
// the bytes of tensor data src holds.
func planSource(cfg *config.Config, src *hf.Checkpoint, po plan.Options) (*plan.Plan, int64, error) {
	tensors := map[string]plan.SourceTensor{}
	var n int64
	for _, name := range src.Names() {
		info, _ := src.Info(name)
		tensors[name] = plan.SourceTensor{DType: info.DType, Shape: info.Shape}
		n += info.End - info.Begin
	}
	p, err := plan.Build(cfg, tensors, po)
	if err != nil {
		return nil, 0, cfg.ExplainShapes(err)
	}
	return p, n, nil
}

// finish ends every method the same way: it copies the source's config and
// tokenizer files, writes the manifest with the metrics, moves the
// checkpoint into place and fills in res.
func finish(w *lfmq1.Writer, opts Options, arch string, source lfmq1.Source, q lfmq1.Quantization, metrics any, res *Result) error {
	for _, name := range lfmq1.CopiedFiles {
		path := filepath.Join(opts.ModelDir, name)
		if !fileExists(path) {
			continue
		}
		if err := w.CopyFile(path, name); err != nil {
			return err
		}
	}
	man := &lfmq1.Manifest{LfmqVersion: version.Version, Architecture: arch, CreatedBy: opts.CreatedBy, Source: source, Quantization: q}
	sum, err := w.Commit(man, metrics)
	if err != nil {
		return err
	}
	res.ManifestSHA256 = sum
	return nil
}

// TensorMetric is the weight-space error of one quantized tensor.
type TensorMetric struct {
	// RelError is ‖W − Q‖_F / ‖W‖_F.
	RelError float64 `json:"rel_error"`
	// Flushed is the fraction of non-zero weights that quantized to zero.
	Flushed float64 `json:"flushed"`
}

type tensorMetrics map[string]TensorMetric

type produced struct {
	tensor lfmq1.Tensor
	metric *TensorMetric
}

// produceAll produces entries on up to workers goroutines, each admitted by
// budget for the bytes produce will hold (produceScratch): without it, 16
// workers on an 8B model's dense tensors held 1.8 GB of float32 copies,
// the peak of a whole GPTQ run (solvemem.go).
func produceAll(ctx context.Context, src *hf.Checkpoint, entries []plan.Entry, rules packRules, workers int, prog Progress, budget *memBudget) ([]produced, error) {
	out := make([]produced, len(entries))
	pl := pool.New().WithContext(ctx).WithCancelOnError().WithFirstError()
	if workers > 0 {
		pl = pl.WithMaxGoroutines(workers)
	} else {
		pl = pl.WithMaxGoroutines(max(1, runtimeProcs()))
	}
	for i, e := range entries {
		pl.Go(func(ctx context.Context) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			scratch := produceScratch(e)
			if err := budget.acquire(ctx, scratch); err != nil {
				return err
			}
			// Each result goes to its own slot, so file bytes never depend
			// on which goroutine finishes first.
			o, err := produce(src, e, rules.of(e.Class, e.Format))
			budget.release(scratch)
			if err != nil {
				return err
			}
			out[i] = o
			if prog != nil {
				prog.Done(e.Name)
			}
			return nil
		})
	}
	if err := pl.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// produceScratch is the most heap produce holds for e beyond its result:
// the float32 weights and, for BFP, their decoded quantization (the error
// metric compares the two), or for F32 the widened values. BF16 tensors are
// slices of the mapped source and hold nothing. The packed result stays in
// memory until its file is written, so it is not scratch.
func produceScratch(e plan.Entry) int64 {
	if e.Format == lfmq1.BF16 {
		return 0
	}
	n := int64(1)
	for _, d := range e.Shape {
		n *= d
	}
	return 8 * n
}

// minPackMemory is the least budget of an automatic RTN pass: a small
// model's tensors then all fit at once, whatever its statistics' size.
const minPackMemory = 1 << 30

// packMemory is the budget of the RTN pass over a checkpoint of cfg's
// shapes: limit when the user set one (GPTQOptions.SolveMemory), else the
// automatic solve budget (a layer's w1/w3 statistics, the size of an 8B
// model's head in float32) but at least minPackMemory.
func packMemory(cfg *config.Config, limit int64) int64 {
	if limit > 0 {
		return limit
	}
	return max(defaultSolveMemory(cfg.NumExperts, cfg.HiddenSize), minPackMemory)
}

func produce(src *hf.Checkpoint, e plan.Entry, rule bfp.ExponentRule) (produced, error) {
	info, ok := src.Info(e.Source)
	if !ok {
		return produced{}, fmt.Errorf("quant: source tensor %q vanished", e.Source)
	}
	t := lfmq1.Tensor{Name: e.Name, Format: e.Format, Shape: e.Shape}
	switch e.Format {
	case lfmq1.BF16:
		if info.DType != dtype.BF16 {
			return produced{}, fmt.Errorf("quant: tensor %q: planned BF16 from %s", e.Source, info.DType)
		}
		data, err := src.Bytes(e.Source)
		if err != nil {
			return produced{}, err
		}
		t.DType, t.StoredShape, t.Data = dtype.BF16, info.Shape, data
		if e.Slice != nil {
			start, end := sliceSpan(info.Shape, e.Slice)
			t.StoredShape, t.Data = e.Shape, data[2*start:2*end]
		}
		return produced{tensor: t}, nil
	case lfmq1.F32:
		vals, err := weightValues(src, e)
		if err != nil {
			return produced{}, err
		}
		data, err := dtype.FromFloat32(dtype.F32, vals)
		if err != nil {
			return produced{}, err
		}
		t.DType, t.StoredShape, t.Data = dtype.F32, info.Shape, data
		if e.Slice != nil {
			// weightValues took the entry's slice of a fused source.
			t.StoredShape = e.Shape
		}
		return produced{tensor: t}, nil
	}
	w, err := weightValues(src, e)
	if err != nil {
		return produced{}, err
	}
	if i := firstNonFinite(w); i >= 0 {
		return produced{}, &NonFiniteError{Tensor: e.Source, Index: i, Value: w[i]}
	}
	f := bfp.BFP8
	if e.Format == lfmq1.BFP4 {
		f = bfp.BFP4
	}
	outDim, inDim := int(e.Shape[0]), int(e.Shape[1])
	packed, err := bfp.PackMatrixRule(f, rule, w, outDim, inDim)
	if err != nil {
		return produced{}, fmt.Errorf("quant: tensor %q: %w", e.Name, err)
	}
	q, err := bfp.UnpackMatrix(f, packed, outDim, inDim)
	if err != nil {
		return produced{}, fmt.Errorf("quant: tensor %q: %w", e.Name, err)
	}
	m := weightError(w, q)
	t.DType = dtype.U8
	t.StoredShape = []int64{int64(bfp.NumTiles(outDim, inDim)), int64(f.TileBytes())}
	t.Data = packed
	return produced{tensor: t, metric: &m}, nil
}

// weightValues returns the planned weight as float32 [out, in], slicing a
// fused expert tensor when the plan says so. It reads the source piece by
// piece and drops each piece's pages from the process's resident memory
// once converted (hf.Checkpoint.ReleaseTensorPages): a run reads each
// weight once or twice, and without this the mapped source would end up
// counted whole in its resident set, 2.6 GB for 4 layers of an 8B-A1B and
// growing with the layers, with the head's 268 MB at once (runMappedMemory).
func weightValues(src *hf.Checkpoint, e plan.Entry) ([]float32, error) {
	info, _ := src.Info(e.Source)
	raw, err := src.Bytes(e.Source)
	if err != nil {
		return nil, err
	}
	start, end := int64(0), int64(len(raw))/max(int64(info.DType.Size()), 1)
	if e.Slice != nil {
		// Convert only this expert's rows: the fused tensor holds every expert.
		start, end = sliceSpan(info.Shape, e.Slice)
	}
	out := make([]float32, end-start)
	if err := convertValues(src, e.Source, start, out); err != nil {
		return nil, err
	}
	return out, nil
}

// weightRows sets dst to the rows [n0, n0+len(dst)/in) of the planned
// weight e, [out, in] and not a slice of a fused tensor, as weightValues
// converts them: a band of a weight too large to hold whole in float32
// (the head, solveHead).
func weightRows(src *hf.Checkpoint, e plan.Entry, n0 int, dst []float32) error {
	return convertValues(src, e.Source, int64(n0)*e.Shape[1], dst)
}

// convertValues sets dst to the len(dst) values of tensor name from value
// start on, in float32, piece by piece, dropping each piece's pages from
// the process's resident memory once converted.
func convertValues(src *hf.Checkpoint, name string, start int64, dst []float32) error {
	info, _ := src.Info(name)
	raw, err := src.Bytes(name)
	if err != nil {
		return err
	}
	size := int64(info.DType.Size())
	end := start + int64(len(dst))
	if start < 0 || end*size > int64(len(raw)) {
		return fmt.Errorf("quant: tensor %q: values [%d, %d) past its %d bytes", name, start, end, len(raw))
	}
	for a := start; a < end; a += weightReadValues {
		b := min(end, a+weightReadValues)
		if err := dtype.ToFloat32(info.DType, raw[a*size:b*size], dst[a-start:b-start]); err != nil {
			return fmt.Errorf("quant: tensor %q: %w", name, err)
		}
		if err := src.ReleaseTensorPages(name, a*size, b*size); err != nil {
			return fmt.Errorf("quant: %w", err)
		}
	}
	return nil
}

// weightReadValues is how many values weightValues converts before it
// releases their pages: 2 MB of BF16.
const weightReadValues = 1 << 20

// sliceSpan returns the element range of a fused [E, rows, cols] tensor that
// holds the slice's expert rows.
func sliceSpan(shape []int64, s *plan.Slice) (start, end int64) {
	rows, cols := shape[1], shape[2]
	start = (int64(s.Expert)*rows + s.RowStart) * cols
	end = (int64(s.Expert)*rows + s.RowEnd) * cols
	return start, end
}

func firstNonFinite(w []float32) int {
	for i, v := range w {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return i
		}
	}
	return -1
}

// weightError is the tensor metric of the quantized values q of weight w:
// the relative error ‖w−q‖/‖w‖ and the fraction of non-zero weights
// flushed to zero.
func weightError(w, q []float32) TensorMetric {
	var s errorSums
	s.add(w, q)
	return s.metric()
}

// errorSums are weightError's sums over a weight given in pieces in order
// (the head's bands), with the bits of one pass over the whole. They are
// float64: the metric is a statistic, and its digits go into the manifest,
// so it must not depend on float32 rounding of long sums.
type errorSums struct {
	num, den         float64
	nonzero, flushed int
}

// add adds the next piece of the weight w and its quantized values q.
func (s *errorSums) add(w, q []float32) {
	q = q[:len(w)]
	for i, v := range w {
		d := float64(v) - float64(q[i])
		s.num += d * d
		s.den += float64(v) * float64(v)
		if v != 0 {
			s.nonzero++
			if q[i] == 0 {
				s.flushed++
			}
		}
	}
}

// metric is the relative error and the flushed fraction of what was added.
func (s *errorSums) metric() TensorMetric {
	m := TensorMetric{}
	if s.den > 0 {
		m.RelError = math.Sqrt(s.num / s.den)
	}
	if s.nonzero > 0 {
		m.Flushed = float64(s.flushed) / float64(s.nonzero)
	}
	return m
}

// quantizationSpec is the manifest's quantization block for plan p: each
// class's method, formats and tensor count. The experts (or a dense
// model's FFN) are quantized by opts.Method unless kept; the BFP8 dense
// tensors and the head are rounded to nearest unless opts.DenseMethod
// solves them.
func quantizationSpec(p *plan.Plan, opts Options) lfmq1.Quantization {
	method := opts.Method
	expertMethod := string(method)
	if opts.KeepExperts {
		expertMethod = "none"
	}
	specs := map[plan.Class]*lfmq1.ClassSpec{
		plan.Experts: {Method: expertMethod},
		plan.Dense:   {Method: string(RTN)},
		plan.Head:    {Method: string(RTN)},
		plan.Kept:    {Method: "none"},
		plan.FFN:     {Method: string(method)},
	}
	for _, e := range p.Entries {
		if e.Class == plan.FFN && e.Format == lfmq1.BFP8 {
			specs[plan.FFN].Method = string(RTN) // BFP8 is always packed by RTN
		}
		if denseSolved(opts, e) {
			specs[e.Class].Method = string(GPTQ)
		}
		s := specs[e.Class]
		s.Tensors++
		found := false
		for _, f := range s.Formats {
			found = found || f == e.Format
		}
		if !found {
			s.Formats = append(s.Formats, e.Format)
		}
	}
	for _, s := range specs {
		sort.Slice(s.Formats, func(i, j int) bool { return s.Formats[i] < s.Formats[j] })
		if s.Formats == nil {
			s.Formats = []lfmq1.TensorFormat{}
		}
	}
	q := lfmq1.Quantization{Experts: *specs[plan.Experts], Dense: *specs[plan.Dense], Head: *specs[plan.Head], Kept: *specs[plan.Kept]}
	if specs[plan.FFN].Tensors > 0 {
		// A dense LFM2: no experts were quantized by any method.
		q.FFN, q.Experts.Method = specs[plan.FFN], "none"
	}
	return q
}

// describeSource hashes every regular file at the top of the source
// directory (hidden files and sub-directories are not part of a checkpoint)
// and, for a snapshot of the Hugging Face cache, names its repository and
// commit.
func describeSource(dir string) (lfmq1.Source, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return lfmq1.Source{}, fmt.Errorf("quant: %w", err)
	}
	var s lfmq1.Source
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		// A symbolic link to a file counts as that file: the Hugging Face
		// cache's snapshot directories hold nothing else.
		if st, err := os.Stat(filepath.Join(dir, e.Name())); err != nil || !st.Mode().IsRegular() {
			continue
		}
		sum, size, err := lfmq1.HashFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return s, err
		}
		s.Files = append(s.Files, lfmq1.FileEntry{Path: e.Name(), Size: size, SHA256: sum})
		if e.Name() == "config.json" {
			s.ConfigSHA256 = sum
		}
	}
	if s.ConfigSHA256 == "" {
		return s, errors.New("quant: source has no config.json")
	}
	s.Repo, s.Commit, _ = hf.CacheOrigin(dir)
	return s, nil
}
