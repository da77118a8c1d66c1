package kv

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/lfmq/lfmq/engine/config"
)

// ConvState is a copy of a sequence's short-conv state (every conv layer's
// last K−1 values of B⊙x) after its first Len tokens.
type ConvState struct {
	n      int
	layers [][]float32 // nil for attention layers
}

// NewConvState returns a zero conv state of shape sh after n tokens.
func NewConvState(sh Shape, n int) *ConvState {
	c := &ConvState{n: n, layers: make([][]float32, sh.Layers)}
	for l := range sh.Layers {
		if sh.Kinds[l] != byte('0'+config.Conv) {
			continue
		}
		c.layers[l] = make([]float32, (sh.ConvK-1)*sh.Hidden)
	}
	return c
}

// ConvStateOf returns the state after n tokens made of layers (one entry
// per layer, nil for attention layers), which it keeps.
func ConvStateOf(n int, layers [][]float32) *ConvState { return &ConvState{n: n, layers: layers} }

// Len returns the sequence length the state belongs to.
func (c *ConvState) Len() int { return c.n }

// Layers returns the number of layers the state covers.
func (c *ConvState) Layers() int { return len(c.layers) }

// Layer returns layer l's state, [H][K−1] oldest first (nil for an
// attention layer), in place.
func (c *ConvState) Layer(l int) []float32 { return c.layers[l] }

// Clone returns a copy of the state.
func (c *ConvState) Clone() *ConvState {
	d := &ConvState{n: c.n, layers: make([][]float32, len(c.layers))}
	for i, l := range c.layers {
		d.layers[i] = Clone32(l)
	}
	return d
}

// Clone32 returns a copy of x (nil for nil).
func Clone32(x []float32) []float32 {
	if x == nil {
		return nil
	}
	return append(make([]float32, 0, len(x)), x...)
}

// Span is positions [Start, End) of a sequence's state: each attention
// layer's keys and values for those positions and the conv state after
// position End−1. A prefix cache keeps spans and extends new sequences
// with them, which then continue exactly as the sequence they were taken
// from.
//
// A span of the CPU engine holds the KV pages of its positions by
// reference (the first may also hold positions before Start, which the
// span ignores), full and window pages alike: taking one copies no keys or
// values, and extending a sequence whose length is a multiple of
// PageTokens with it shares them again. Free gives the pages back. A
// device's span holds a copy of its keys and values as rows. Either way a
// span holds every layer's rows of its positions, a sliding layer's
// included (a sequence refuses a span of positions whose window pages it
// gave back: Table.Span).
type Span struct {
	shape      Shape
	start, end int
	pool       *Pool   // a CPU span's pool; nil for a device's
	pages      []*Page // a CPU span's full pages, the first holding position start
	win        []*Page // a CPU span's window pages, as pages; nil when no layer slides
	k, v       []Rows  // a device's span: per layer [end−start] rows in the KV format; empty for conv layers
	conv       *ConvState
	// draftGone: the drafter's context of some of the span's positions
	// was given up (docs/drafting.md §3); its drafter rows are not to
	// be read, and a sequence extended with it drafts no more.
	draftGone bool
}

// NewRowSpan returns the span of positions [start, end) of shape sh whose
// keys and values are k and v (per layer, end−start rows in the shape's
// format; empty for conv layers), with conv the conv state after end
// tokens: a device's span.
func NewRowSpan(sh Shape, start, end int, k, v []Rows, conv *ConvState) *Span {
	return &Span{shape: sh, start: start, end: end, k: k, v: v, conv: conv}
}

// Start and End bound the span's positions.
func (sp *Span) Start() int { return sp.start }

// End is one past the span's last position.
func (sp *Span) End() int { return sp.end }

// DraftGone reports whether the drafter's context of some of the span's
// positions was given up (MarkDraftGone): a sequence extended with it
// holds no whole drafter context and drafts no more.
func (sp *Span) DraftGone() bool { return sp.draftGone }

// MarkDraftGone records that the drafter's context of some of the span's
// positions was given up. Such a span is not encoded (MarshalBinary
// refuses it with a *DraftGoneError): a file keeps only spans whose rows
// are all there.
func (sp *Span) MarkDraftGone() { sp.draftGone = true }

// Shape returns the shape of the sequences the span belongs to.
func (sp *Span) Shape() Shape { return sp.shape }

// Conv returns the conv state after the span's last position.
func (sp *Span) Conv() *ConvState { return sp.conv }

// Bytes is the state the span's positions take (keys and values in the
// cache's format, float32 conv states); pages it shares with sequences
// or other spans are counted in full.
func (sp *Span) Bytes() int {
	n := (sp.end - sp.start) * sp.shape.BytesPerToken()
	for _, c := range sp.conv.layers {
		n += 4 * len(c)
	}
	return n
}

// Free gives the span's pages back to its pool; the span must not be used
// afterwards. Freeing twice does nothing.
func (sp *Span) Free() {
	for _, pg := range sp.pages {
		sp.pool.release(pg)
	}
	for _, pg := range sp.win {
		sp.pool.release(pg)
	}
	sp.pages, sp.win = nil, nil
}

// Shared reports whether some page of the span has another holder (a
// sequence or another span), so that freeing the span would not give it
// back to the pool.
func (sp *Span) Shared() bool {
	for _, pages := range [][]*Page{sp.pages, sp.win} {
		for _, pg := range pages {
			if sp.pool.isShared(pg) {
				return true
			}
		}
	}
	return false
}

// rows returns the rows holding position pos of layer l's keys and values
// in the span, and the row's index in them.
func (sp *Span) rows(l, pos int) (k, v *Rows, at int) {
	if sp.pages == nil {
		return &sp.k[l], &sp.v[l], pos - sp.start
	}
	pages := sp.pages
	if sp.shape.Sliding(l) {
		pages = sp.win
	}
	pg := pages[pos/PageTokens-sp.start/PageTokens]
	return &pg.k[l], &pg.v[l], pos % PageTokens
}

// ContiguousRows returns the span's keys and values as a device's span
// holds them: per layer, rows of positions [start, end) in the span's KV
// format, one after another.
func (sp *Span) ContiguousRows() (k, v []Rows) {
	if sp.pages == nil {
		return sp.k, sp.v
	}
	t := sp.shape.DType
	k, v = make([]Rows, sp.shape.KVLayers()), make([]Rows, sp.shape.KVLayers())
	for l := range sp.shape.KVLayers() {
		if !sp.shape.HasKV(l) {
			continue
		}
		kvd := sp.shape.Dim(l)
		k[l], v[l] = MakeRows(t, kvd, sp.end-sp.start), MakeRows(t, kvd, sp.end-sp.start)
		for pos := sp.start; pos < sp.end; pos++ {
			sk, sv, at := sp.rows(l, pos)
			k[l].Copy(t, kvd, pos-sp.start, sk, at, 1)
			v[l].Copy(t, kvd, pos-sp.start, sv, at, 1)
		}
	}
	return k, v
}

// spanMagic starts a marshalled span. Version 2 added the KV cache's
// format after the layer kinds; a version 1 span (float32 only) is refused
// by name, so a prefix cache written by an older lfmq is rebuilt rather
// than misread. The KV pages changed nothing here: a span is written as
// its positions' rows, whatever holds them in memory. Version 3 is a
// span with a drafter's layers (Shape.DraftLayers): two more header
// fields, and those layers' keys and values after the model's; a span
// without them is still written as version 2.
const (
	spanMagic   = "lfmq-span-2\x00"
	spanMagicV3 = "lfmq-span-3\x00"
	spanMagicV1 = "lfmq-span-1\x00"
)

// MarshalBinary encodes the span: a header (magic, shape, start, end, the
// layer kinds, the KV format) and the state, little-endian: per layer its
// keys and values in the cache's format (float32, bfloat16, or BFP8 groups
// of an exponent byte and 16 codes) or its float32 conv state. Only a
// model of the same shape and KV format reads it back (DecodeSpan), so
// a prefix cache can outlive the process.
func (sp *Span) MarshalBinary() ([]byte, error) {
	if sp.draftGone {
		return nil, &DraftGoneError{Start: sp.start, End: sp.end}
	}
	var b []byte
	head := []int{sp.shape.Layers, sp.shape.Hidden, sp.shape.ConvK, sp.shape.KVDim, sp.start, sp.end}
	if sp.shape.DraftLayers > 0 {
		b = append(b, spanMagicV3...)
		head = append(head, sp.shape.DraftLayers, sp.shape.DraftKVDim)
	} else {
		b = append(b, spanMagic...)
	}
	for _, v := range head {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	b = append(b, byte(len(sp.shape.Kinds)))
	b = append(b, sp.shape.Kinds...)
	b = append(b, byte(sp.shape.DType))
	t := sp.shape.DType
	for l := range sp.shape.KVLayers() {
		if sp.shape.HasKV(l) {
			kvd := sp.shape.Dim(l)
			for _, value := range []bool{false, true} {
				for pos := sp.start; pos < sp.end; {
					k, v, at := sp.rows(l, pos)
					r := k
					if value {
						r = v
					}
					n := sp.end - pos
					if sp.pages != nil {
						n = min(n, PageTokens-at)
					}
					b = r.AppendRaw(b, t, kvd, at, n)
					pos += n
				}
			}
		}
		if l < len(sp.conv.layers) {
			for _, f := range sp.conv.layers[l] {
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
			}
		}
	}
	return b, nil
}

// DraftGoneError is a span whose drafter context was given up
// (Span.MarkDraftGone), which MarshalBinary does not encode.
type DraftGoneError struct{ Start, End int }

// Error implements error.
func (e *DraftGoneError) Error() string {
	return fmt.Sprintf("kv: the span [%d, %d) lacks part of its drafter context: it is not written", e.Start, e.End)
}

// DecodeError is a marshalled span that cannot be read: Msg says why.
type DecodeError struct{ Msg string }

// Error implements error.
func (e *DecodeError) Error() string { return "kv: decoding a span: " + e.Msg }

// Store makes room for a decoded span's keys and values: a pool's pages
// (Pool.Store) or rows of its own (RowStore).
type Store func(sp *Span) error

// Store takes pages of p for the span's positions, full and window
// pages; on an error (a *PoolError) the span holds none.
func (p *Pool) Store(sp *Span) error {
	sp.pool = p
	for range pagesFor(sp.end) - sp.start/PageTokens {
		pg, err := p.take(false)
		if err != nil {
			sp.Free()
			return err
		}
		sp.pages = append(sp.pages, pg)
		if p.shape.HasWindow() {
			w, err := p.take(true)
			if err != nil {
				sp.Free()
				return err
			}
			sp.win = append(sp.win, w)
		}
	}
	return nil
}

// RowStore gives the span rows of its own, as a device's span holds them.
func RowStore(sp *Span) error {
	sh := sp.shape
	sp.k, sp.v = make([]Rows, sh.KVLayers()), make([]Rows, sh.KVLayers())
	for l := range sh.KVLayers() {
		if sh.HasKV(l) {
			sp.k[l] = MakeRows(sh.DType, sh.Dim(l), sp.end-sp.start)
			sp.v[l] = MakeRows(sh.DType, sh.Dim(l), sp.end-sp.start)
		}
	}
	return nil
}

// draftContext says what of a drafter's context a shape holds.
func draftContext(sh Shape) string {
	if sh.DraftLayers == 0 {
		return "no drafter context"
	}
	return fmt.Sprintf("a drafter's context of %d layers of %d values a position", sh.DraftLayers, sh.DraftKVDim)
}

// DecodeSpan decodes a span made by MarshalBinary for sequences of shape
// sh at most maxContext long, its keys and values in the room store
// makes. A span that does not fit is a *DecodeError, never a panic; the
// store's error is returned as it is.
func DecodeSpan(data []byte, sh Shape, maxContext int, store Store) (*Span, error) {
	bad := func(msg string) (*Span, error) { return nil, &DecodeError{Msg: msg} }
	if len(data) >= len(spanMagicV1) && string(data[:len(spanMagicV1)]) == spanMagicV1 {
		return bad("a version 1 span (float32 KV only, written by an older lfmq); this build reads version 2")
	}
	fields := 6
	switch {
	case len(data) >= len(spanMagicV3) && string(data[:len(spanMagicV3)]) == spanMagicV3:
		fields = 8
	case len(data) < len(spanMagic) || string(data[:len(spanMagic)]) != spanMagic:
		return bad("not a span")
	}
	if len(data) < len(spanMagic)+fields*8+1 {
		return bad("not a span")
	}
	q := data[len(spanMagic):]
	var h [8]int
	for i := range fields {
		v := binary.LittleEndian.Uint64(q)
		if v > 1<<40 {
			return bad("field out of range")
		}
		h[i] = int(v)
		q = q[8:]
	}
	nk := int(q[0])
	q = q[1:]
	if len(q) < nk+1 {
		return bad("truncated")
	}
	// The header carries which layers slide (Kinds), not their window,
	// as it carries no other part of the model's config: a prefix cache's
	// file names the model its spans came from (prefix.Header.Identity)
	// and is refused by another.
	got := Shape{Layers: h[0], Hidden: h[1], ConvK: h[2], KVDim: h[3], Kinds: string(q[:nk]), Window: sh.Window, DType: DType(q[nk]), DraftLayers: h[6], DraftKVDim: h[7]}
	q = q[nk+1:]
	if got.DType != sh.DType && got.DType <= BFP8 {
		return bad(fmt.Sprintf("the span's KV cache is %s; the model's is %s", got.DType, sh.DType))
	}
	if got.DraftLayers != sh.DraftLayers || got.DraftKVDim != sh.DraftKVDim {
		return bad(fmt.Sprintf("the span holds %s; the model's sequences hold %s: it was kept with another drafter (or none)", draftContext(got), draftContext(sh)))
	}
	if got != sh {
		return bad("the span belongs to a model of another shape")
	}
	start, end := h[4], h[5]
	if end <= start || end > maxContext {
		return bad(fmt.Sprintf("positions [%d, %d) do not fit the model", start, end))
	}
	// The size is known from the header: check it before taking pages.
	convN := (sh.ConvK - 1) * sh.Hidden
	want := 0
	for l := range sh.KVLayers() {
		if sh.HasKV(l) {
			want += 2 * (end - start) * sh.DType.RowBytes(sh.Dim(l))
		} else {
			want += 4 * convN
		}
	}
	switch {
	case len(q) < want:
		return bad("truncated")
	case len(q) > want:
		return bad("trailing bytes")
	}
	sp := &Span{shape: sh, start: start, end: end, conv: &ConvState{n: end, layers: make([][]float32, sh.Layers)}}
	if err := store(sp); err != nil {
		return nil, err
	}
	t := sh.DType
	for l := range sh.KVLayers() {
		kvd := sh.Dim(l)
		if !sh.HasKV(l) {
			x := make([]float32, convN)
			for i := range x {
				x[i] = math.Float32frombits(binary.LittleEndian.Uint32(q[4*i:]))
			}
			q = q[4*convN:]
			sp.conv.layers[l] = x
			continue
		}
		for _, value := range []bool{false, true} {
			for pos := start; pos < end; {
				k, v, at := sp.rows(l, pos)
				r := k
				if value {
					r = v
				}
				n := end - pos
				if sp.pages != nil {
					n = min(n, PageTokens-at)
				}
				q, _ = r.ReadRaw(q, t, kvd, at, n) // the size was checked above
				pos += n
			}
		}
	}
	return sp, nil
}
