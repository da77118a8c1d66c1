package model

import (
	"context"
	"fmt"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/kv"
)

// LogitsMode selects the positions whose logits Forward returns.
type LogitsMode int

const (
	// LastLogits returns the logits of each sequence's last new token
	// (generation). It is the zero value.
	LastLogits LogitsMode = iota
	// AllLogits returns the logits of every new token (scoring).
	AllLogits
	// NoLogits returns none and skips the head (calibration).
	NoLogits
)

// DefaultChunkSize is the number of token rows a Forward step processes when
// ForwardOptions.ChunkSize is 0.
const DefaultChunkSize = 512

// ForwardOptions configures Forward. The zero value returns the last
// position's logits.
type ForwardOptions struct {
	// Logits selects the positions whose logits are returned.
	Logits LogitsMode
	// ConvSnapshots, if set, holds for each sequence the lengths (in
	// increasing order, from its length before the call to its length
	// after it) at which to copy its conv state: Sequence.ConvAt
	// returns them after the call, until the sequence's next Forward.
	// Speculation rolls back to one of them; the prefix cache stores the
	// state at its block boundaries.
	ConvSnapshots [][]int
	// SeqLogits, if set, gives each sequence its own mode and overrides
	// Logits (one entry per sequence): a server's step mixes decodes that
	// need their last row, a prefill chunk that needs none or its last row,
	// and a scoring prefill that needs every row. It requires a forward to
	// the last layer (Layers 0).
	SeqLogits []LogitsMode
	// DropDraft: a sequence whose drafter context has draftPendMax rows
	// pending gives them up instead of computing them (docs/drafting.md
	// §3), and keeps no more; it then drafts no more (DraftWhole), until a
	// Rewind to before them. A scheduler sets it in steps where no draft
	// could pay for its pass, so that a drafter that cannot pay costs
	// nothing there. Without a drafter it does nothing.
	DropDraft bool
	// ChunkSize bounds the token rows (summed over the batch) processed per
	// step, and so the working memory; 0 means DefaultChunkSize. Results do
	// not depend on it.
	ChunkSize int
	// Observer, if set, receives activations (see Observer).
	Observer Observer
	// Layers, if positive, runs only the first Layers decoder layers (for
	// calibrating layer Layers−1 without the cost of the rest). It requires
	// NoLogits, and leaves the sequences usable only for further calls with
	// the same Layers and StartLayer.
	Layers int
	// StartLayer, if positive, runs only decoder layers [StartLayer, end),
	// end being Layers or, when Layers is 0, all of them, from the residual
	// streams in Hidden instead of the embedding: calibration keeps each
	// window's stream at the input of the next layer to process, so that
	// no layer runs twice for the same rows. The sequences must have been
	// built only by calls with the same StartLayer and Layers (a new
	// sequence qualifies): such a sequence is partial, holding state for
	// those layers alone. Logits may be asked for when end is the last
	// layer. Every row's computation is independent of how its input was
	// reached, so the results are bit-identical to a full forward's.
	StartLayer int
	// Hidden, required with a positive StartLayer and refused otherwise,
	// holds for each sequence the residual stream entering layer
	// StartLayer of its new tokens, row-major [len(tokens[i]),
	// hidden_size] (what an Observer's Hidden(StartLayer, …) reports). The
	// tokens are still needed: they count the rows and are checked, but
	// not embedded. Forward does not modify Hidden.
	Hidden [][]float32
	// LastLayer, if not WholeLayer, stops every step inside the last layer
	// run, once the Observer has had the reports that part names: a
	// calibration pass that wants only some of a layer's inputs does not
	// pay for the rest of it (an MoE layer's experts are about two thirds
	// of its work). The stream after that layer is then not formed
	// (no Hidden(end) report), so it requires NoLogits. Every report made
	// is bit-identical to a whole forward's, and so is the sequences'
	// state: a layer writes its conv state or keys and values before its
	// output projection, the first thing any part skips.
	LastLayer LayerPart
}

// LayerPart is how much of its last layer a forward runs
// (ForwardOptions.LastLayer).
type LayerPart int

const (
	// WholeLayer runs the last layer whole.
	WholeLayer LayerPart = iota
	// MixerInputs runs the operator block (conv or attention) up to the
	// report of its output projection's input (conv.out_proj or
	// self_attn.out_proj); that projection and the feed-forward block are
	// skipped.
	MixerInputs
	// FFNInput runs the operator block whole and the ffn_norm, and stops
	// after the feed-forward block's input is reported: an MoE layer's
	// router (its Linear and Routing reports; no expert runs), a dense
	// feed-forward's w1 and w3 Linear reports (no product).
	FFNInput
	// LinearInputs stops after the input of the layer's last non-expert
	// linear weight is reported: w2's for a dense feed-forward (only the w2
	// product is skipped), the router's for an MoE layer (as FFNInput).
	LinearInputs
)

// Forward appends tokens[i] to seqs[i] for every i, running the batch
// together, and returns for each sequence the logits asked for, row-major
// [positions, vocab_size]: one row (its last new token) for LastLogits,
// len(tokens[i]) rows for AllLogits, nil for NoLogits or when tokens[i] is
// empty.
//
// Prompts of any length are processed in steps of at most
// opts.ChunkSize rows, a decode step is a call with one token per sequence;
// either way a sequence's logits are bit-identical to running it alone, with
// any chunk size and any thread count.
//
// The arguments are checked before anything runs: a token outside the
// vocabulary (*TokenError), a sequence that would exceed its maximum context
// (*ContextError), or mismatched or repeated arguments (*InputError) leave
// every sequence unchanged, and so does a bounded KV pool without the pages
// the tokens need (*kv.PoolError). If ctx is cancelled, Forward returns ctx.Err()
// between steps; each sequence then holds the tokens of the steps that
// completed (see Sequence.Len), with consistent state.
func (m *Model) Forward(ctx context.Context, seqs []*Sequence, tokens [][]int, opts ForwardOptions) ([][]float32, error) {
	if err := m.integrityFailed(); err != nil {
		return nil, err
	}
	if err := m.checkForward(seqs, tokens, &opts); err != nil {
		return nil, err
	}
	if err := m.run.Reserve(seqs, tokens); err != nil {
		return nil, err
	}
	for i, s := range seqs {
		s.snaps = s.snaps[:0]
		if opts.ConvSnapshots != nil {
			for _, L := range opts.ConvSnapshots[i] {
				c := kv.NewConvState(m.seqShape(), L)
				if L == s.n {
					if err := s.state.ReadConv(c); err != nil {
						return nil, err
					}
				}
				s.snaps = append(s.snaps, c)
			}
		}
	}
	V := m.Config.VocabSize
	out := make([][]float32, len(seqs))
	total := 0
	for i, toks := range tokens {
		total += len(toks)
		switch mode := opts.mode(i); {
		case len(toks) == 0 || mode == NoLogits:
		case mode == AllLogits:
			out[i] = make([]float32, len(toks)*V)
		default:
			out[i] = make([]float32, V)
		}
	}
	chunk := opts.ChunkSize
	if chunk <= 0 {
		chunk = DefaultChunkSize
	}
	st := m.run.Begin(min(chunk, total))
	defer st.End()
	var segs []Segment
	si, ti := 0, 0 // cursor: sequence, token index
	for si < len(seqs) {
		if err := ctx.Err(); err != nil {
			for _, s := range seqs {
				s.state.Trim(s.n)
			}
			return nil, err
		}
		segs = segs[:0]
		rows := 0
		for si < len(seqs) && rows < chunk {
			n := min(len(tokens[si])-ti, chunk-rows)
			if n > 0 {
				segs = append(segs, Segment{
					Index: si, s: seqs[si], Toks: tokens[si][ti : ti+n], Tok0: ti,
					Start: seqs[si].n, Row0: rows, Last: ti+n == len(tokens[si]),
				})
				rows += n
				ti += n
			}
			if ti == len(tokens[si]) {
				si, ti = si+1, 0
			}
		}
		if rows == 0 {
			continue
		}
		var heads []HeadSpan
		if opts.anyLogits() {
			heads = headSpans(segs, &opts)
		}
		if err := st.Step(segs, rows, &opts, heads, out); err != nil {
			return nil, err
		}
		if m.drafter != nil {
			flushFull(segs, opts.DropDraft)
		}
	}
	return out, nil
}

// mode returns the logits mode of sequence i.
func (o *ForwardOptions) mode(i int) LogitsMode {
	if o.SeqLogits != nil {
		return o.SeqLogits[i]
	}
	return o.Logits
}

// anyLogits reports whether some sequence wants logits.
func (o *ForwardOptions) anyLogits() bool {
	if o.SeqLogits == nil {
		return o.Logits != NoLogits
	}
	for _, m := range o.SeqLogits {
		if m != NoLogits {
			return true
		}
	}
	return false
}

func (m *Model) checkForward(seqs []*Sequence, tokens [][]int, opts *ForwardOptions) error {
	if len(seqs) != len(tokens) {
		return &InputError{What: "Forward", Msg: fmt.Sprintf("%d sequences but %d token lists", len(seqs), len(tokens))}
	}
	if opts.Logits < LastLogits || opts.Logits > NoLogits {
		return &InputError{What: "ForwardOptions.Logits", Msg: fmt.Sprintf("unknown mode %d", opts.Logits)}
	}
	if opts.SeqLogits != nil {
		if len(opts.SeqLogits) != len(seqs) {
			return &InputError{What: "ForwardOptions.SeqLogits", Msg: fmt.Sprintf("%d modes for %d sequences", len(opts.SeqLogits), len(seqs))}
		}
		for i, mode := range opts.SeqLogits {
			if mode < LastLogits || mode > NoLogits {
				return &InputError{What: "ForwardOptions.SeqLogits", Msg: fmt.Sprintf("sequence %d: unknown mode %d", i, mode)}
			}
		}
		if opts.Layers > 0 && opts.Layers < m.Config.NumLayers {
			return &InputError{What: "ForwardOptions.SeqLogits", Msg: "needs a forward to the last layer (Layers 0)"}
		}
	}
	if opts.Layers < 0 || opts.Layers > m.Config.NumLayers {
		return &InputError{What: "ForwardOptions.Layers", Msg: fmt.Sprintf("%d is outside [0, %d]", opts.Layers, m.Config.NumLayers)}
	}
	if opts.Layers == m.Config.NumLayers {
		opts.Layers = 0
	}
	if opts.Layers > 0 && opts.Logits != NoLogits {
		return &InputError{What: "ForwardOptions.Layers", Msg: "a partial forward computes no logits; set Logits to NoLogits"}
	}
	end := m.Config.NumLayers
	if opts.Layers > 0 {
		end = opts.Layers
	}
	if opts.LastLayer < WholeLayer || opts.LastLayer > LinearInputs {
		return &InputError{What: "ForwardOptions.LastLayer", Msg: fmt.Sprintf("unknown layer part %d", opts.LastLayer)}
	}
	if opts.LastLayer != WholeLayer && opts.anyLogits() {
		return &InputError{What: "ForwardOptions.LastLayer", Msg: "a forward that stops inside its last layer computes no logits; set Logits to NoLogits"}
	}
	if opts.StartLayer < 0 || opts.StartLayer >= end {
		return &InputError{What: "ForwardOptions.StartLayer", Msg: fmt.Sprintf("%d is outside [0, %d)", opts.StartLayer, end)}
	}
	if opts.StartLayer == 0 && opts.Hidden != nil {
		return &InputError{What: "ForwardOptions.Hidden", Msg: "set without a positive StartLayer; layer 0 reads the embedding"}
	}
	if opts.StartLayer > 0 {
		if len(opts.Hidden) != len(seqs) {
			return &InputError{What: "ForwardOptions.Hidden", Msg: fmt.Sprintf("%d residual streams for %d sequences", len(opts.Hidden), len(seqs))}
		}
		H := m.Config.HiddenSize
		for i, x := range opts.Hidden {
			if len(x) != len(tokens[i])*H {
				return &InputError{What: "ForwardOptions.Hidden", Msg: fmt.Sprintf("sequence %d: %d floats for %d tokens of hidden size %d", i, len(x), len(tokens[i]), H)}
			}
		}
	}
	if opts.ConvSnapshots != nil {
		if len(opts.ConvSnapshots) != len(seqs) {
			return &InputError{What: "ForwardOptions.ConvSnapshots", Msg: fmt.Sprintf("%d lists for %d sequences", len(opts.ConvSnapshots), len(seqs))}
		}
		if opts.Layers > 0 || opts.StartLayer > 0 {
			return &InputError{What: "ForwardOptions.ConvSnapshots", Msg: "needs a forward over every layer"}
		}
		for i, ls := range opts.ConvSnapshots {
			prev := seqs[i].n - 1 // the state before the call may be asked for too
			for _, L := range ls {
				if L <= prev || L > seqs[i].n+len(tokens[i]) {
					return &InputError{What: "ForwardOptions.ConvSnapshots", Msg: fmt.Sprintf("sequence %d: length %d is not in [%d, %d] or out of order", i, L, seqs[i].n, seqs[i].n+len(tokens[i]))}
				}
				prev = L
			}
		}
	}
	if m.drafter != nil && (opts.Layers > 0 || opts.StartLayer > 0 || opts.LastLayer != WholeLayer) {
		return &InputError{What: "ForwardOptions", Msg: "a model with a drafter runs whole forwards only (Layers, StartLayer and LastLayer are for calibration)"}
	}
	if err := m.run.Check(opts); err != nil {
		return err
	}
	shape := m.seqShape()
	seen := make(map[*Sequence]bool, len(seqs))
	for i, s := range seqs {
		switch {
		case s == nil:
			return &InputError{What: "Forward", Msg: fmt.Sprintf("sequence %d is nil", i)}
		case seen[s]:
			return &InputError{What: "Forward", Msg: fmt.Sprintf("sequence %d appears twice in the batch", i)}
		case s.shape != shape:
			return &InputError{What: "Forward", Msg: fmt.Sprintf("sequence %d was made for a model of another shape", i)}
		case !m.run.Owns(s.state):
			return &InputError{What: "Forward", Msg: fmt.Sprintf("sequence %d holds its state on another device than this model's (sequences stay with the model that made them)", i)}
		case s.partial != opts.Layers || s.start != opts.StartLayer:
			// A sequence holds state only for the layers that built it;
			// only an empty one may start another range.
			if s.n > 0 {
				return &InputError{What: "Forward", Msg: fmt.Sprintf("sequence %d holds %d tokens run with ForwardOptions.StartLayer=%d, Layers=%d; this call has StartLayer=%d, Layers=%d",
					i, s.n, s.start, s.partial, opts.StartLayer, opts.Layers)}
			}
		}
		seen[s] = true
		if n := len(tokens[i]); s.n+n > s.maxContext {
			return &ContextError{Seq: i, Len: s.n, Add: n, MaxContext: s.maxContext}
		}
		for j, id := range tokens[i] {
			if id < 0 || id >= m.Config.VocabSize {
				return &TokenError{Seq: i, Index: j, ID: id, VocabSize: m.Config.VocabSize}
			}
		}
	}
	return nil
}

// workspace holds a Forward call's activations, sized for its largest step.
// Workspaces are recycled through Model.workspaces: a prefill chunk of the
// 8B model needs about 100 MB of them.
type workspace struct {
	capRows        int
	rows           Rows
	h, a, out      []float32 // [R, H]
	proj, y, u, cv []float32 // conv
	q, k, v, o     []float32 // attention
	gate           []float32 // [R, heads]: the attention output gate's inputs to the sigmoid (LFM3)
	ffG, ffU       []float32 // dense FFN
	router, rScore []float32 // MoE
	sel            []int
	wts            []float32
	ex, eg, eu, ey []float32
	mulJobs        []kernels.MulJob // products run as one parallel region, reused
	fin            []float32
	head           []float32  // grouped head products, grown on use
	convBefore     []float32  // a conv state before a step, for snapshots
	attnTasks      []attnTask // attention's work units, reused
	attnParts      []float32  // the states of decode rows' splits, grown on use
	taps           []float32  // a drafter's tapped rows, grown on use
}

// getWorkspace returns a recycled workspace of at least R rows, or a new one.
func (m *Model) getWorkspace(R int) *workspace {
	if ws, ok := m.workspaces.Get().(*workspace); ok && ws.capRows >= R {
		return ws
	}
	return m.newWorkspace(R)
}

func (m *Model) newWorkspace(R int) *workspace {
	c := m.Config
	H, d := c.HiddenSize, c.HeadDim
	ws := &workspace{
		capRows: R,
		rows:    Rows{Seq: make([]int, 0, R), Pos: make([]int, 0, R)},
		h:       make([]float32, R*H), a: make([]float32, R*H), out: make([]float32, R*H),
		fin: make([]float32, R*H),
	}
	var conv, attn bool
	for _, k := range c.LayerKinds {
		conv = conv || k == config.Conv
		attn = attn || k == config.Attention
	}
	if conv {
		ws.proj = make([]float32, R*3*H)
		ws.y = make([]float32, R*H)
		ws.u, ws.cv = make([]float32, R*H), make([]float32, R*H)
	}
	if attn {
		ws.q, ws.o = make([]float32, R*c.NumHeads*d), make([]float32, R*c.NumHeads*d)
		ws.k, ws.v = make([]float32, R*c.NumKVHeads*d), make([]float32, R*c.NumKVHeads*d)
		if c.AttnGate {
			ws.gate = make([]float32, R*c.NumHeads)
		}
	}
	if c.NumDenseLayers > 0 {
		ws.ffG, ws.ffU = make([]float32, R*c.IntermediateSize), make([]float32, R*c.IntermediateSize)
	}
	if c.NumMoELayers() > 0 {
		E, k, Fe := c.NumExperts, c.NumExpertsPerTok, c.MoEIntermediateSize
		ws.router, ws.rScore = make([]float32, R*E), make([]float32, 2*E)
		ws.sel, ws.wts = make([]int, R*k), make([]float32, R*k)
		ws.ex, ws.ey = make([]float32, R*k*H), make([]float32, R*k*H)
		ws.eg, ws.eu = make([]float32, R*k*Fe), make([]float32, R*k*Fe)
	}
	return ws
}

// step runs every layer over the rows of segs and writes the logits asked
// for into out.
func (m *Model) step(ws *workspace, segs []Segment, R int, opts *ForwardOptions, heads []HeadSpan, out [][]float32) {
	c := m.Config
	H := c.HiddenSize
	obs := opts.Observer
	rows := Rows{Seq: ws.rows.Seq[:0], Pos: ws.rows.Pos[:0]}
	for _, sg := range segs {
		for t := range sg.Toks {
			rows.Seq = append(rows.Seq, sg.Index)
			rows.Pos = append(rows.Pos, sg.Start+t)
		}
	}
	h, a, o := ws.h[:R*H], ws.a[:R*H], ws.out[:R*H]
	for _, sg := range segs {
		if opts.StartLayer > 0 {
			copy(h[sg.Row0*H:(sg.Row0+len(sg.Toks))*H], opts.Hidden[sg.Index][sg.Tok0*H:])
			continue
		}
		for t, id := range sg.Toks {
			m.embed.Row(id, h[(sg.Row0+t)*H:])
		}
	}
	if obs != nil {
		obs.Hidden(opts.StartLayer, rows, h)
	}
	nl := c.NumLayers
	if opts.Layers > 0 {
		nl = opts.Layers
	}
	for l := opts.StartLayer; l < nl; l++ {
		ly := m.layers[l]
		part := WholeLayer
		if l == nl-1 {
			part = opts.LastLayer
		}
		rmsNormRows(a, h, ly.OpNorm, R, c.NormEps)
		if ly.Kind == config.Conv {
			m.convBlock(l, ly, ws, segs, rows, a, o, obs, part)
		} else {
			m.attentionBlock(l, ly, ws, segs, rows, a, o, obs, part)
		}
		if part == MixerInputs {
			break
		}
		if ly.PostOpNorm != nil {
			// LFM3 normalises the operator's output before the
			// residual add (docs/lfm3.md).
			rmsNormRows(o, o, ly.PostOpNorm, R, c.NormEps)
		}
		addInto(h, o)
		rmsNormRows(a, h, ly.FFNNorm, R, c.NormEps)
		if ly.MoE {
			m.moeBlock(l, ly, ws, rows, a, o, obs, part)
		} else {
			m.denseBlock(l, ly, ws, rows, a, o, obs, part)
		}
		if part != WholeLayer {
			break
		}
		if ly.PostFFNNorm != nil {
			rmsNormRows(o, o, ly.PostFFNNorm, R, c.NormEps)
		}
		addInto(h, o)
		if obs != nil {
			obs.Hidden(l+1, rows, h)
		}
		if m.drafter != nil {
			m.tapRows(ws, l, R, h)
		}
	}
	if m.drafter != nil {
		W := len(m.drafter.Taps()) * c.HiddenSize
		for i := range segs {
			sg := &segs[i]
			sg.QueueDraft(ws.taps[sg.Row0*W : (sg.Row0+len(sg.Toks))*W])
		}
	}
	for _, sg := range segs {
		sg.s.n += len(sg.Toks)
		sg.s.partial, sg.s.start = opts.Layers, opts.StartLayer
	}
	if len(heads) == 0 {
		return
	}
	// Final norm (model.embedding_norm, docs/model.md §4.8) and head, only
	// for the rows whose logits are returned.
	V := c.VocabSize
	fin := ws.fin[:0]
	var finRows Rows
	spans := heads
	for _, sp := range spans {
		for r := sp.Row0; r < sp.Row0+sp.N; r++ {
			fin = fin[:len(fin)+H]
			kernels.RMSNorm(fin[len(fin)-H:], h[r*H:][:H], m.finalNorm, c.NormEps)
			if obs != nil {
				finRows.Seq = append(finRows.Seq, rows.Seq[r])
				finRows.Pos = append(finRows.Pos, rows.Pos[r])
			}
		}
	}
	if obs != nil && len(fin) > 0 {
		obs.Linear(-1, "lm_head.weight", finRows, fin)
	}
	// Consecutive spans have consecutive rows of fin, so a group of them
	// is one product: the head is the largest matrix, and a decode step of
	// B sequences would otherwise read it B times. Each group's rows go
	// to scratch and are copied out; a span of headGroupRows or more (a
	// scoring prefill) is written in place. Every row is bit-identical
	// whatever the grouping (kernels.Matrix.MatMul).
	for i := 0; i < len(spans); {
		sp := spans[i]
		j, rows := i+1, sp.N
		for j < len(spans) && rows+spans[j].N <= headGroupRows {
			rows += spans[j].N
			j++
		}
		if j == i+1 {
			m.pool.MatMul(m.head, out[sp.Index][sp.Dst*V:], fin[sp.Fin0*H:], sp.N)
			i++
			continue
		}
		if cap(ws.head) < rows*V {
			ws.head = make([]float32, rows*V)
		}
		tmp := ws.head[:rows*V]
		m.pool.MatMul(m.head, tmp, fin[sp.Fin0*H:], rows)
		for _, g := range spans[i:j] {
			r0 := g.Fin0 - sp.Fin0
			copy(out[g.Index][g.Dst*V:(g.Dst+g.N)*V], tmp[r0*V:])
		}
		i = j
	}
}

// headSpans lists the rows of a step whose logits are returned, in step
// order: every row of an AllLogits segment, the last row of a LastLogits
// sequence's last segment.
func headSpans(segs []Segment, opts *ForwardOptions) []HeadSpan {
	var spans []HeadSpan
	fin := 0
	for _, sg := range segs {
		r0, n, dst := sg.Row0, len(sg.Toks), sg.Tok0
		switch opts.mode(sg.Index) {
		case NoLogits:
			continue
		case LastLogits:
			if !sg.Last {
				continue
			}
			r0, n, dst = sg.Row0+len(sg.Toks)-1, 1, 0
		}
		spans = append(spans, HeadSpan{Index: sg.Index, Row0: r0, Fin0: fin, N: n, Dst: dst})
		fin += n
	}
	return spans
}

// headGroupRows bounds the rows of one grouped head product (and its
// scratch, 16 MiB at a vocabulary of 65,536).
const headGroupRows = 64

// convBlock is the gated short convolution (docs/model.md §4.4).
//
// With part MixerInputs it returns before the output projection.
func (m *Model) convBlock(l int, ly *Layer, ws *workspace, segs []Segment, rows Rows, a, out []float32, obs Observer, part LayerPart) {
	c := m.Config
	H, K, R := c.HiddenSize, c.ConvLCache, rows.Len()
	proj, y := ws.proj[:R*3*H], ws.y[:R*H]
	if obs != nil {
		obs.Linear(l, config.LayerPrefix(l)+"conv.in_proj.weight", rows, a)
	}
	m.pool.MatMul(ly.InProj, proj, a, R)
	if ly.InBias != nil {
		addBias(proj, ly.InBias, R)
	}
	for _, sg := range segs {
		n := len(sg.Toks)
		u, v := ws.u[:n*H], ws.cv[:n*H]
		for t := range n {
			p := proj[(sg.Row0+t)*3*H:][:3*H]
			ut := u[t*H:][:H]
			for ch := range H {
				ut[ch] = p[ch] * p[2*H+ch] // B ⊙ x
			}
		}
		// The conv state (the last K−1 u vectors) carries the window across
		// steps, so chunked prefill and decode see the same inputs.
		st := sg.s.state.(*cpuState).conv[l]
		var before []float32
		if sg.s.snapsWithin(sg.Start, sg.Start+n) {
			before = append(ws.convBefore[:0], st...)
			ws.convBefore = before
		}
		m.pool.CausalConv(v, u, st, ly.ConvW, ly.ConvBias, n, H, K)
		if before != nil {
			sg.s.fillSnaps(l, sg.Start, n, before, u, H, K-1)
		}
		for t := range n {
			p := proj[(sg.Row0+t)*3*H:][:3*H]
			yt, vt := y[(sg.Row0+t)*H:][:H], v[t*H:][:H]
			for ch := range H {
				yt[ch] = p[H+ch] * vt[ch] // C ⊙ v
			}
		}
	}
	if obs != nil {
		obs.Linear(l, config.LayerPrefix(l)+"conv.out_proj.weight", rows, y)
	}
	if part == MixerInputs {
		return
	}
	m.pool.MatMul(ly.OutProj, out, y, R)
	if ly.OutBias != nil {
		addBias(out, ly.OutBias, R)
	}
}

// attentionBlock is grouped-query attention with per-head q/k RMSNorm and
// NeoX RoPE (docs/model.md §4.5), with what LFM3 adds (docs/lfm3.md): the
// layer's own RoPE (θ and partial rotation per attention kind), a sliding
// window (attend) and the output gate, sigmoid(gate_proj·a) per head
// multiplied onto that head's output before the output projection. With
// part MixerInputs it returns before the output projection.
func (m *Model) attentionBlock(l int, ly *Layer, ws *workspace, segs []Segment, rows Rows, a, out []float32, obs Observer, part LayerPart) {
	c := m.Config
	R, d, Hq, Hkv := rows.Len(), c.HeadDim, c.NumHeads, c.NumKVHeads
	qd, kvd := Hq*d, Hkv*d
	q, k, v, o := ws.q[:R*qd], ws.k[:R*kvd], ws.v[:R*kvd], ws.o[:R*qd]
	an := c.AttnNames()
	if obs != nil {
		p := config.LayerPrefix(l)
		obs.Linear(l, p+an.Q, rows, a)
		obs.Linear(l, p+an.K, rows, a)
		obs.Linear(l, p+an.V, rows, a)
		if ly.AttnGate != nil {
			obs.Linear(l, p+an.Gate, rows, a)
		}
	}
	// One parallel region for the projections of the same input: one
	// wait instead of three (or four), and their outputs shared out
	// together.
	ws.mulJobs = append(ws.mulJobs[:0], kernels.MulJob{M: ly.Q, Y: q, X: a, Batch: R},
		kernels.MulJob{M: ly.K, Y: k, X: a, Batch: R}, kernels.MulJob{M: ly.V, Y: v, X: a, Batch: R})
	var gate []float32
	if ly.AttnGate != nil {
		gate = ws.gate[:R*Hq]
		ws.mulJobs = append(ws.mulJobs, kernels.MulJob{M: ly.AttnGate, Y: gate, X: a, Batch: R})
	}
	m.pool.MatMulAll(ws.mulJobs)
	// Per-head RMSNorm, then RoPE at the token's absolute position.
	rope := m.layerRoPE(l)
	for r, pos := range rows.Pos {
		for hd := range Hq {
			z := q[r*qd+hd*d:][:d]
			kernels.RMSNorm(z, z, ly.QNorm, c.NormEps)
			rope.Apply(z, pos)
		}
		for hd := range Hkv {
			z := k[r*kvd+hd*d:][:d]
			kernels.RMSNorm(z, z, ly.KNorm, c.NormEps)
			rope.Apply(z, pos)
		}
	}
	for _, sg := range segs {
		n := len(sg.Toks)
		sg.s.state.(*cpuState).table.Write(l, sg.Start, k[sg.Row0*kvd:(sg.Row0+n)*kvd], v[sg.Row0*kvd:(sg.Row0+n)*kvd])
	}
	m.attend(ws, l, segs, q, o)
	if gate != nil {
		// One scalar per (row, head), each head's d outputs multiplied
		// by it: a row's bits depend on that row alone.
		for r := range R {
			for hd := range Hq {
				kernels.Scale(kernels.Sigmoid(gate[r*Hq+hd]), o[r*qd+hd*d:][:d])
			}
		}
	}
	if obs != nil {
		obs.Linear(l, config.LayerPrefix(l)+an.O, rows, o)
	}
	if part == MixerInputs {
		return
	}
	m.pool.MatMul(ly.O, out, o, R)
}

// denseBlock is the SwiGLU feed-forward of the first num_dense_layers
// layers (docs/model.md §4.6). With part FFNInput it returns after
// reporting w1's and w3's input, with LinearInputs after w2's.
func (m *Model) denseBlock(l int, ly *Layer, ws *workspace, rows Rows, a, out []float32, obs Observer, part LayerPart) {
	R, F := rows.Len(), m.Config.IntermediateSize
	g, u := ws.ffG[:R*F], ws.ffU[:R*F]
	if obs != nil {
		p := config.LayerPrefix(l)
		obs.Linear(l, p+"feed_forward.w1.weight", rows, a)
		obs.Linear(l, p+"feed_forward.w3.weight", rows, a)
	}
	if part == FFNInput {
		return
	}
	// w1 and w3 read the same input: one parallel region for both and
	// the activation.
	m.pool.MatMulSwiGLU(ly.W1, ly.W3, g, u, a, R)
	if obs != nil {
		obs.Linear(l, config.LayerPrefix(l)+"feed_forward.w2.weight", rows, g)
	}
	if part == LinearInputs {
		return
	}
	m.pool.MatMul(ly.W2, out, g, R)
}
