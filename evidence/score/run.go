package score

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sourcegraph/conc/pool"

	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/evidence/corpus"
	"github.com/lfmq/lfmq/evidence/refcache"
	"github.com/lfmq/lfmq/format/identity"
	"github.com/lfmq/lfmq/format/lfmq1"
)

// DefaultCtx is the window length C when Options.Ctx is 0
// (docs/scoring.md, "Windows").
const DefaultCtx = 512

// DefaultChunk is the noise floor's chunk length when Options.Chunk is 0.
const DefaultChunk = 32

// ReferenceName labels the reference in receipts and tables.
const ReferenceName = "BF16"

// batchRows is the number of window positions run through a model per
// Forward call (windows are batched until they reach it): enough rows to
// keep the products efficient, while the logits of a batch (rows ×
// vocab_size float32 per model) stay small.
const batchRows = 512

// Options configures Run.
type Options struct {
	// Reference is the reference checkpoint directory (the BF16 source);
	// its tokenizer and chat template encode the corpora.
	Reference string
	// Candidates are scored against the reference, in this order.
	Candidates []Candidate
	// Corpora are scored in this order.
	Corpora []CorpusSpec
	// Ctx is the window length C (even); 0 means DefaultCtx. It is capped
	// by the reference's context.
	Ctx int
	// NoiseFloor adds the noise floor (the reference run in chunks of Chunk
	// tokens against one pass) and the storage floor (the reference
	// against its own binary16 log-probs).
	NoiseFloor bool
	// Chunk is the noise floor's chunk length; 0 means DefaultChunk.
	Chunk int
	// MaxRecords > 0 scores only the first MaxRecords records of each
	// corpus.
	MaxRecords int
	// SaveReference, if set, writes the reference log-probs to this cache
	// file (and FILE.sha256 beside it).
	SaveReference string
	// ReferenceCache, if set, reads the reference log-probs from this cache
	// file, verified against FILE.sha256 and the run's header, instead of
	// running the reference (which is still run for NoiseFloor).
	ReferenceCache string
	// Threads is the number of threads of the forward passes and the
	// statistics; 0 means GOMAXPROCS. Results do not depend on it.
	Threads int
	// Device, if set, runs the reference and the in-process candidates
	// there (the caller closes it); nil is the CPU engine. Results do not
	// depend on it; the receipts name it.
	Device device.Device
	// KVCacheDType is the KV cache format of the in-process candidates
	// (the reference always keeps float32); lfmq serve's default, so that
	// served and in-process rows agree without a flag.
	KVCacheDType kv.DType
	// Command is the command line recorded in the receipts.
	Command string
	// Progress, if set, is called after each batch of windows with the
	// scored tokens done and the total.
	Progress func(done, total int)
	// APIKey, if set, is sent to served candidates as "Authorization:
	// Bearer KEY". It is not recorded anywhere.
	APIKey string
	// HTTPClient, if set, makes the requests to served candidates; nil
	// means a client that does not follow redirects.
	HTTPClient *http.Client
}

// Candidate is a named checkpoint to score: a directory (Dir), or the
// checkpoint a running lfmq serve serves (URL, its base URL; Dir empty),
// scored through its /v1/completions prompt log-probs
// (docs/scoring.md, "Scoring a running server").
type Candidate struct {
	Name string
	Dir  string
	URL  string
}

// CorpusSpec names a corpus file.
type CorpusSpec struct {
	Name string
	Path string
}

// Output is the result of Run.
type Output struct {
	File *evidence.File
	// Series holds every variant's per-token KL on every corpus (for
	// plots), in the order of File.Results without the pooled rows.
	Series []Series
}

// Series is the per-token KL of one variant on one corpus, in token order.
type Series struct {
	Variant string
	Kind    string
	Corpus  string
	KL      []float64
}

// OptionsError reports unusable Options (a usage error for a command).
type OptionsError struct {
	Field string
	Msg   string
}

func (e *OptionsError) Error() string { return fmt.Sprintf("score: %s: %s", e.Field, e.Msg) }

// ModelError reports checkpoints that cannot be compared, or a non-finite
// logit.
type ModelError struct {
	Name string // checkpoint label
	Dir  string
	URL  string // a served candidate's base URL (Dir is empty then)
	Msg  string
}

func (e *ModelError) Error() string {
	where := e.Dir
	if e.URL != "" {
		where = e.URL
	}
	return fmt.Sprintf("score: %s (%s): %s", e.Name, where, e.Msg)
}

// NonFiniteError reports a NaN or infinite logit at a scored position.
type NonFiniteError struct {
	Variant  string
	Corpus   string
	Record   string
	Position int // target index within the window
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("score: %s: corpus %s record %s: non-finite logits at window position %d", e.Variant, e.Corpus, e.Record, e.Position)
}

func (o *Options) validate() error {
	switch {
	case o.Reference == "":
		return &OptionsError{"reference", "required"}
	case len(o.Corpora) == 0:
		return &OptionsError{"corpus", "at least one corpus is required"}
	case len(o.Candidates) == 0 && !o.NoiseFloor:
		return &OptionsError{"candidate", "nothing to compare: give a candidate or ask for the noise floor"}
	case o.Ctx < 0 || o.Ctx%2 != 0 || o.Ctx == 2:
		return &OptionsError{"ctx", fmt.Sprintf("%d: the window length must be even and at least 4", o.Ctx)}
	case o.Chunk < 0:
		return &OptionsError{"chunk", fmt.Sprintf("%d: must be positive", o.Chunk)}
	case o.MaxRecords < 0:
		return &OptionsError{"max-records", fmt.Sprintf("%d: must be positive", o.MaxRecords)}
	case o.SaveReference != "" && o.ReferenceCache != "":
		return &OptionsError{"save-reference", "cannot both save and read a reference cache"}
	}
	names := map[string]bool{ReferenceName: true, noiseName(o.chunk()): true, storageName: true, evidence.AllCorpora: true}
	for _, c := range o.Candidates {
		if c.Name == "" || (c.Dir == "") == (c.URL == "") {
			return &OptionsError{"candidate", fmt.Sprintf("%q: want NAME=DIR or NAME=URL", c.Name+"="+c.Dir+c.URL)}
		}
		if c.URL != "" {
			if _, err := ParseServerURL(c.URL); err != nil {
				return err
			}
		}
		if names[c.Name] {
			return &OptionsError{"candidate", fmt.Sprintf("name %q is used twice or reserved", c.Name)}
		}
		names[c.Name] = true
	}
	seen := map[string]bool{evidence.AllCorpora: true}
	for _, c := range o.Corpora {
		if c.Name == "" || c.Path == "" {
			return &OptionsError{"corpus", fmt.Sprintf("%q: want NAME=FILE", c.Name+"="+c.Path)}
		}
		if seen[c.Name] {
			return &OptionsError{"corpus", fmt.Sprintf("name %q is used twice or reserved", c.Name)}
		}
		seen[c.Name] = true
	}
	if strings.ContainsFunc(o.APIKey, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return &OptionsError{"api-key", "contains control characters (a line break?)"}
	}
	return nil
}

func (o *Options) chunk() int {
	if o.Chunk == 0 {
		return DefaultChunk
	}
	return o.Chunk
}

const storageName = "storage floor (fp16)"

func noiseName(chunk int) string { return fmt.Sprintf("noise floor (chunk %d)", chunk) }

// variant is one row set: a candidate or a floor.
type variant struct {
	name, kind string
	m          *model.Model // nil for a served candidate
	// A served candidate: the server's model id and the windows asked of it.
	served *client
	model  string
	fetch  *fetcher
	toks   [][]Token // per corpus
}

// runner holds what the batches of a run share.
type runner struct {
	vocab     int
	threads   int
	chunk     int
	ref       *model.Model // nil when the cache replaces it
	cache     *refcache.Reader
	cachePath string
	save      *refcache.Writer
	noise     *variant
	storage   *variant
	cands     []*variant
	cacheOff  int // cached rows whose NLL or argmax differ from the in-memory reference
	passes    int // model positions run
	// models are the models loaded here (loadModels), closed when the run
	// ends (closeModels).
	models []*model.Model
}

// Run scores the candidates (and the floors) against the reference over
// the corpora and returns the evidence file. Every model run here is
// opened with lfmq1.CheckFiles, so the manifest sha256 in the receipts
// stands for the bytes that ran; a served candidate's receipt holds the
// URL and what the server reported in /v1/models. Every statistic is
// computed from float32 log-prob rows (sample.LogProbs of each model's
// logits; a server returns those rows), see stats.
//
// Run goes in steps: prepare (the options and the reference's identity),
// the served candidates asked what they serve, the corpora split into
// windows, the reference (its cache, or the model) and the candidates
// loaded, the windows scored batch by batch, the reference cache checked
// or saved, and the result (every variant's statistics and the paired
// comparisons) written into the evidence file.
func Run(ctx context.Context, opts Options) (out *Output, err error) {
	start := time.Now()
	ref, err := prepare(opts)
	if err != nil {
		return nil, err
	}
	// Served candidates are asked first what they serve, so that a server
	// that cannot be scored fails the run before any model is loaded.
	served, err := askServers(ctx, opts, ref)
	if err != nil {
		return nil, err
	}
	ws, err := loadWindows(opts, ref)
	if err != nil {
		return nil, err
	}

	r := &runner{vocab: ref.vocab, chunk: opts.chunk()}
	var cacheReceipt *evidence.Cache
	if opts.ReferenceCache != "" {
		if cacheReceipt, err = r.openCache(opts.ReferenceCache, &ws.header); err != nil {
			return nil, err
		}
		defer r.cache.Close()
		ref.notes = append(ref.notes, "Reference log-probs read from the cache: KL uses its binary16 rows (renormalised), NLL and top-1 its exact stored values.")
	}

	kpool := kernels.NewPool(opts.Threads)
	defer kpool.Close()
	r.threads = kpool.Threads()
	defer r.closeModels()
	candReceipts, err := r.loadModels(opts, ref, served, kpool)
	if err != nil {
		return nil, err
	}
	vars := r.variants()
	for _, v := range vars {
		v.toks = make([][]Token, len(ws.corpora))
	}

	if opts.SaveReference != "" {
		if r.save, err = refcache.Create(opts.SaveReference, ws.header); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				r.save.Abort()
			}
		}()
	}
	// Every served candidate is asked for every window, in scoring order,
	// from now on, while the models here run.
	r.startFetchers(ctx, ws)
	defer r.closeFetchers()

	if err := r.scoreWindows(ctx, ws, ref.ctx, opts.Progress); err != nil {
		return nil, err
	}
	if cacheReceipt, err = r.endReference(opts, ref, cacheReceipt); err != nil {
		return nil, err
	}
	return r.result(opts, start, ref, ws, candReceipts, cacheReceipt)
}

// openCache opens the reference cache at path in place of the reference,
// checks it against the run's header hdr and returns its receipt. On
// success the caller closes r.cache.
func (r *runner) openCache(path string, hdr *refcache.Header) (*evidence.Cache, error) {
	r.cachePath = path
	c, err := refcache.Open(path, "")
	if err != nil {
		return nil, err
	}
	r.cache = c
	got := r.cache.Header()
	if err := refcache.Check(path, hdr, &got); err != nil {
		r.cache.Close()
		return nil, err
	}
	sum, size, err := evidence.HashFile(path)
	if err != nil {
		r.cache.Close()
		return nil, err
	}
	return &evidence.Cache{Mode: "used", Path: path, SHA256: sum, Bytes: size}, nil
}

// loadModels loads the reference (unless the cache replaces it and no floor
// needs it) and every candidate run here, on kpool's threads, and makes the
// run's variants: the candidates, served or here, and the floors. It
// returns the candidates' receipts. The models it loads are r's to close
// (closeModels), also when it fails.
func (r *runner) loadModels(opts Options, ref *reference, served []*servedCandidate, kpool *kernels.Pool) ([]evidence.Checkpoint, error) {
	C, V, refID, tokSHA := ref.ctx, ref.vocab, ref.id, ref.tokSHA
	loadModel := func(name, dir string, kvType kv.DType) (*model.Model, error) {
		m, err := load.Load(dir, load.Options{Pool: kpool, Check: lfmq1.CheckFiles, MaxContext: C, Device: opts.Device, KVCacheDType: kvType})
		if err != nil {
			return nil, fmt.Errorf("score: %s: %w", name, err)
		}
		return m, nil
	}
	var err error
	if r.cache == nil || opts.NoiseFloor {
		if r.ref, err = loadModel(ReferenceName, opts.Reference, kv.F32); err != nil {
			return nil, err
		}
		r.models = append(r.models, r.ref)
	}
	var candReceipts []evidence.Checkpoint
	for i, c := range opts.Candidates {
		if s := served[i]; s != nil {
			sm, cl := s.model, s.client
			id := sm.Checkpoint
			candReceipts = append(candReceipts, evidence.Checkpoint{
				Name: c.Name, URL: cl.base, ServedModel: sm.ID,
				BinarySHA256: sm.BinarySHA256, LfmqVersion: sm.LfmqVersion, SourceDigest: sm.SourceDigest,
				Format: id.Format, Identity: id.Identity, ManifestSHA256: id.ManifestSHA256, ConfigSHA256: id.ConfigSHA256,
				KVCacheDType: kvReceipt(sm.KVCacheDType),
			})
			// An lfmq-1 checkpoint's config.json is its source's, copied
			// unmodified: the reported config sha256 is its lineage.
			if id.Format == identity.FormatLfmq1 && id.ConfigSHA256 != refID.ConfigSHA256 {
				ref.notes = append(ref.notes, fmt.Sprintf("%s was quantized from a checkpoint whose config.json differs from the reference's.", c.Name))
			}
			r.cands = append(r.cands, &variant{name: c.Name, kind: evidence.KindCandidate, served: cl, model: sm.ID})
			continue
		}
		id, err := evidence.IdentifyCheckpoint(c.Name, c.Dir)
		if err != nil {
			return nil, err
		}
		id.KVCacheDType = kvReceipt(opts.KVCacheDType.String())
		candReceipts = append(candReceipts, id)
		m, err := loadModel(c.Name, c.Dir, opts.KVCacheDType)
		if err != nil {
			return nil, err
		}
		r.models = append(r.models, m)
		if m.Config.VocabSize != V {
			return nil, &ModelError{Name: c.Name, Dir: c.Dir, Msg: fmt.Sprintf("vocab_size %d, the reference has %d", m.Config.VocabSize, V)}
		}
		if sum, _, err := evidence.HashFile(filepath.Join(c.Dir, "tokenizer.json")); err == nil && sum != tokSHA {
			return nil, &ModelError{Name: c.Name, Dir: c.Dir, Msg: "its tokenizer.json differs from the reference's; the two cannot be scored on the same tokens"}
		}
		if id.SourceConfigSHA256 != "" && id.SourceConfigSHA256 != refID.ConfigSHA256 {
			ref.notes = append(ref.notes, fmt.Sprintf("%s was quantized from a checkpoint whose config.json differs from the reference's.", c.Name))
		}
		r.cands = append(r.cands, &variant{name: c.Name, kind: evidence.KindCandidate, m: m})
	}
	if opts.NoiseFloor {
		r.noise = &variant{name: noiseName(r.chunk), kind: evidence.KindNoiseFloor, m: r.ref}
		r.storage = &variant{name: storageName, kind: evidence.KindStorageFloor, m: r.ref}
	}
	return candReceipts, nil
}

// closeModels closes the models loadModels loaded.
func (r *runner) closeModels() {
	for _, m := range r.models {
		m.Close()
	}
}

// startFetchers starts asking every served candidate for every window of
// ws, in scoring order.
func (r *runner) startFetchers(ctx context.Context, ws *windowSet) {
	for _, v := range r.cands {
		if v.served == nil {
			continue
		}
		var jobs []job
		for ci, c := range ws.corpora {
			for wi, w := range ws.windows[ci] {
				jobs = append(jobs, job{tokens: w.Tokens, label: fmt.Sprintf("corpus %s window %d (record %s)", c.Name, wi, c.Records[w.Record].ID)})
			}
		}
		v.fetch = startFetcher(ctx, v.served, v.model, r.vocab, jobs)
	}
}

// closeFetchers stops the fetchers startFetchers started, the last first.
func (r *runner) closeFetchers() {
	for _, v := range slices.Backward(r.cands) {
		if v.fetch != nil {
			v.fetch.close()
		}
	}
}

// scoreWindows scores every window of ws, corpus by corpus, in batches of
// up to batchRows positions (or one window of C), telling progress, if
// set, the scored tokens done after each batch.
func (r *runner) scoreWindows(ctx context.Context, ws *windowSet, C int, progress func(done, total int)) error {
	done := 0
	for ci, c := range ws.corpora {
		wins := ws.windows[ci]
		for len(wins) > 0 {
			n, rows := 0, 0
			for n < len(wins) && (n == 0 || rows+len(wins[n].Tokens) <= max(batchRows, C)) {
				rows += len(wins[n].Tokens)
				n++
			}
			if err := r.batch(ctx, ci, c, wins[:n]); err != nil {
				return err
			}
			for _, w := range wins[:n] {
				done += w.Targets()
			}
			wins = wins[n:]
			if progress != nil {
				progress(done, ws.total)
			}
		}
	}
	return nil
}

// endReference ends the reference's cache once every window is scored: a
// cache read must hold no more windows (its rows that differ from the
// reference run now become a note), and a cache written is closed, whose
// receipt replaces cacheReceipt.
func (r *runner) endReference(opts Options, ref *reference, cacheReceipt *evidence.Cache) (*evidence.Cache, error) {
	if r.cache != nil {
		if _, err := r.cache.Next(); err != io.EOF {
			if err == nil {
				err = &refcache.FormatError{Path: opts.ReferenceCache, Where: "end", Msg: "more windows than the run scored"}
			}
			return nil, err
		}
		if r.cacheOff > 0 {
			ref.notes = append(ref.notes, fmt.Sprintf("%d cached reference rows differ in NLL or argmax from the reference run now (the engine changed since the cache was written).", r.cacheOff))
		}
	}
	if r.save != nil {
		sum, size, err := r.save.Close()
		if err != nil {
			return nil, err
		}
		cacheReceipt = &evidence.Cache{Mode: "saved", Path: opts.SaveReference, SHA256: sum, Bytes: size}
	}
	return cacheReceipt, nil
}

// variants returns the row sets in table order: floors first.
func (r *runner) variants() []*variant {
	var vs []*variant
	if r.noise != nil {
		vs = append(vs, r.noise, r.storage)
	}
	return append(vs, r.cands...)
}

// forward runs the windows through m, each window from an empty sequence,
// in steps of chunk tokens per window (chunk ≤ 0: the whole window in one
// step), and returns each window's logits [len(Tokens), V].
func (r *runner) forward(ctx context.Context, m *model.Model, wins []Window, chunk int) ([][]float32, error) {
	longest := 0
	for _, w := range wins {
		longest = max(longest, len(w.Tokens))
	}
	if chunk <= 0 {
		chunk = longest
	}
	seqs := make([]*model.Sequence, len(wins))
	out := make([][]float32, len(wins))
	for i, w := range wins {
		seqs[i] = m.NewSequence()
		if chunk < len(w.Tokens) {
			out[i] = make([]float32, len(w.Tokens)*r.vocab)
		}
	}
	toks := make([][]int, len(wins))
	for off := 0; off < longest; off += chunk {
		rows := 0
		for i, w := range wins {
			toks[i] = w.Tokens[min(off, len(w.Tokens)):min(off+chunk, len(w.Tokens))]
			rows += len(toks[i])
		}
		res, err := m.Forward(ctx, seqs, toks, model.ForwardOptions{Logits: model.AllLogits, ChunkSize: rows})
		if err != nil {
			return nil, err
		}
		for i := range wins {
			if out[i] == nil {
				out[i] = res[i]
			} else if res[i] != nil {
				copy(out[i][off*r.vocab:], res[i])
			}
		}
		r.passes += rows
	}
	return out, nil
}

// position is one scored position of a batch.
type position struct{ w, p int }

// scratch is one statistics worker's rows.
type scratch struct {
	exact, cached, stored *Ref
	lp, buf               []float64
	// refRow and row are float32 log-prob rows (sample.LogProbs) of the
	// reference and of the variant being compared.
	refRow, row []float32
}

// batchInputs is what the statistics of a batch read: every model's
// output of every window, row-major [positions, vocab_size] with row p−1
// predicting target p, and the cached reference rows. The models run
// here give logits; a served candidate gives float32 log-prob rows, which
// the statistics workers compute from the logits of the others.
type batchInputs struct {
	ref, noise [][]float32
	cands      [][][]float32
	cached     []*refcache.Window
}

// batch scores a run of windows of one corpus.
func (r *runner) batch(ctx context.Context, ci int, c *corpus.Corpus, wins []Window) error {
	in, err := r.inputs(ctx, c, wins)
	if err != nil {
		return err
	}
	return r.stats(ci, c, wins, in)
}

// inputs runs the models over a batch and reads its cached rows.
func (r *runner) inputs(ctx context.Context, c *corpus.Corpus, wins []Window) (*batchInputs, error) {
	in := &batchInputs{}
	var err error
	if r.ref != nil {
		if in.ref, err = r.forward(ctx, r.ref, wins, 0); err != nil {
			return nil, err
		}
	}
	if r.cache != nil {
		for _, w := range wins {
			cw, err := r.cache.Next()
			if err == io.EOF {
				return nil, &refcache.FormatError{Path: r.cachePath, Where: "corpus " + c.Name, Msg: "ends before the windows the run scores"}
			}
			if err != nil {
				return nil, err
			}
			if cw.Record != w.Record || cw.First != w.First || !slices.Equal(cw.Tokens, w.Tokens) {
				return nil, &refcache.MismatchError{Path: r.cachePath, Field: fmt.Sprintf("corpus %s record %s window tokens", c.Name, c.Records[w.Record].ID), Want: "the tokens this run scores", Got: "different tokens"}
			}
			in.cached = append(in.cached, cw)
		}
	}
	if r.noise != nil {
		if in.noise, err = r.forward(ctx, r.ref, wins, r.chunk); err != nil {
			return nil, err
		}
	}
	in.cands = make([][][]float32, len(r.cands))
	for k, v := range r.cands {
		if v.m == nil {
			continue
		}
		if in.cands[k], err = r.forward(ctx, v.m, wins, 0); err != nil {
			return nil, err
		}
	}
	// The served rows were asked for ahead; most have arrived while the
	// models here ran.
	for k, v := range r.cands {
		if v.fetch == nil {
			continue
		}
		in.cands[k] = make([][]float32, len(wins))
		for i, w := range wins {
			if in.cands[k][i], err = v.fetch.take(ctx); err != nil {
				return nil, err
			}
			r.passes += len(w.Tokens)
		}
	}
	return in, nil
}

// stats computes every variant's per-token quantities of a batch, in
// parallel over positions (results in pre-indexed slots), appends them in
// token order and writes the batch's cache rows.
//
// Every model's output position is first made the float32 log-prob row
// sample.LogProbs computes (a served candidate's rows are that already):
// the one definition of a row that lfmq serve returns, so that a served
// candidate and the same checkpoint run here give bit-identical figures.
// The float64 statistics (Ref.SetLogits, Compare) then read that row; their
// log-softmax of it is a renormalisation.
func (r *runner) stats(ci int, c *corpus.Corpus, wins []Window, in *batchInputs) error {
	V := r.vocab
	refL, noiseL, candL, cached := in.ref, in.noise, in.cands, in.cached

	var pos []position
	for wi, w := range wins {
		for p := w.First; p < len(w.Tokens); p++ {
			pos = append(pos, position{wi, p})
		}
	}
	vars := r.variants()
	res := make([][]Token, len(vars))
	for k := range res {
		res[k] = make([]Token, len(pos))
	}
	var saved []refcache.Row
	if r.save != nil {
		saved = make([]refcache.Row, len(pos))
	}
	offs := make([]int, len(pos)) // cached row differs (1) or not
	row := func(l []float32, p int) []float32 { return l[(p-1)*V : p*V] }
	work := func(s *scratch, i int) error {
		wi, p := pos[i].w, pos[i].p
		w := &wins[wi]
		target := w.Tokens[p]
		nonFinite := func(variant string) error {
			return &NonFiniteError{Variant: variant, Corpus: c.Name, Record: c.Records[w.Record].ID, Position: p}
		}
		var side *Ref
		if refL != nil {
			s.refRow = sample.LogProbs(s.refRow, row(refL[wi], p))
			if !s.exact.SetLogits(s.refRow, target) {
				return nonFinite(ReferenceName)
			}
			side = s.exact
		}
		var fp16 []uint16
		if r.save != nil || (r.storage != nil && r.cache == nil) {
			fp16 = make([]uint16, V)
			for v, x := range s.exact.LP {
				fp16[v] = refcache.FromFloat64(x)
			}
		}
		if r.save != nil {
			saved[i] = refcache.Row{Target: target, NLL: s.exact.NLL, Argmax: s.exact.Argmax, LogProbs: fp16}
		}
		if r.cache != nil {
			cr := &cached[wi].Rows[p-w.First]
			cr.Widen(s.buf)
			if !s.cached.SetStored(s.buf, cr.NLL, cr.Argmax) {
				return nonFinite("reference cache")
			}
			if side != nil && (cr.NLL != side.NLL || cr.Argmax != side.Argmax) {
				offs[i] = 1
			}
			side = s.cached
		}
		k := 0
		if r.noise != nil {
			s.row = sample.LogProbs(s.row, row(noiseL[wi], p))
			t, ok := Compare(s.exact, s.row, target, s.lp)
			if !ok {
				return nonFinite(r.noise.name)
			}
			res[k][i] = t
			st := s.cached
			if r.cache == nil {
				st = s.stored
				for v, h := range fp16 {
					s.buf[v] = refcache.ToFloat64(h)
				}
				st.SetStored(s.buf, s.exact.NLL, s.exact.Argmax)
			}
			if res[k+1][i], ok = Compare(st, s.refRow, target, s.lp); !ok {
				return nonFinite(r.storage.name)
			}
			k += 2
		}
		for j, v := range r.cands {
			zc := row(candL[j][wi], p)
			if v.served == nil {
				s.row = sample.LogProbs(s.row, zc)
				zc = s.row
			}
			t, ok := Compare(side, zc, target, s.lp)
			if !ok {
				return nonFinite(r.cands[j].name)
			}
			res[k+j][i] = t
		}
		return nil
	}

	shards := min(r.threads, len(pos))
	errs := make([]error, shards)
	wp := pool.New().WithMaxGoroutines(shards)
	for sh := range shards {
		wp.Go(func() {
			s := &scratch{exact: NewRef(V), cached: NewRef(V), stored: NewRef(V), lp: make([]float64, V), buf: make([]float64, V)}
			for i := sh * len(pos) / shards; i < (sh+1)*len(pos)/shards; i++ {
				if err := work(s, i); err != nil {
					errs[sh] = err
					return
				}
			}
		})
	}
	wp.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for k, v := range vars {
		v.toks[ci] = append(v.toks[ci], res[k]...)
	}
	for _, o := range offs {
		r.cacheOff += o
	}
	if r.save != nil {
		i := 0
		for _, w := range wins {
			n := w.Targets()
			if err := r.save.WriteWindow(&refcache.Window{Record: w.Record, Tokens: w.Tokens, First: w.First, Rows: saved[i : i+n]}); err != nil {
				return err
			}
			i += n
		}
	}
	return nil
}

// machineOn is the receipts' machine, with the device the models ran on.
func machineOn(d device.Device) evidence.Machine {
	m := evidence.CurrentMachine()
	if d != nil {
		info := d.Info()
		m.Device = &info
	}
	return m
}

// kvReceipt is a KV cache format as receipts record it: absent for the
// float32 cache.
func kvReceipt(name string) string {
	if name == kv.F32.String() {
		return ""
	}
	return name
}
