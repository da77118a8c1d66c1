package model

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/lfmq/lfmq/engine/config"
)

// Sequence is the complete state of one token stream (lfm2-moe.md §4.4,
// §4.5): for every attention layer the KV cache (k after its norm and RoPE,
// and v, in the model's KVDType), for every short-conv layer the last K−1 values of B⊙x per
// channel. A Sequence is used by one Forward call at a time.
type Sequence struct {
	shape      seqShape
	n          int // tokens consumed
	maxContext int
	limit      int // the creating model's MaxContext
	partial    int // ForwardOptions.Layers of the calls that built it (0: all)
	start      int // ForwardOptions.StartLayer of the calls that built it
	layers     []layerState
	snaps      []*ConvState // asked for by the last Forward (ConvSnapshots)
	dev        *devState    // the state on the model's device; layers and pages then hold none
	pool       *KVPool      // where pages come from (nil on a device)
	// pages is the page table: page i holds positions [64·i, 64·i+64) of
	// every attention layer. It holds the pages of positions [0, n) (a
	// Forward call takes those of its tokens before it runs).
	pages []*kvPage
}

// layerState is one layer's part of a sequence's state besides its KV
// pages.
type layerState struct {
	conv []float32 // conv layers: [H][K−1], oldest first (kernels.CausalConv's layout)
}

// seqShape is what a sequence's state depends on; a Sequence may be used
// with any Model of the same shape.
type seqShape struct {
	layers, hidden, convK, kvDim int
	kinds                        string
	kvDType                      KVDType
}

// kvBytesPerToken is the KV state one position takes over all attention
// layers.
func (sh seqShape) kvBytesPerToken() int {
	n := 0
	for l := range len(sh.kinds) {
		if sh.attention(l) {
			n += 2 * sh.kvDType.RowBytes(sh.kvDim)
		}
	}
	return n
}

// attention reports whether layer l is an attention layer.
func (sh seqShape) attention(l int) bool { return sh.kinds[l] == byte('0'+config.Attention) }

func (m *Model) seqShape() seqShape {
	c := m.Config
	kinds := make([]byte, c.NumLayers)
	for i, k := range c.LayerKinds {
		kinds[i] = byte('0' + k)
	}
	return seqShape{layers: c.NumLayers, hidden: c.HiddenSize, convK: c.ConvLCache, kvDim: c.NumKVHeads * c.HeadDim, kinds: string(kinds), kvDType: m.kvDType}
}

// NewSequence returns an empty sequence (zero conv state, empty KV caches)
// limited to the model's MaxContext, whose pages come from the model's own
// unbounded pool (KVPool).
func (m *Model) NewSequence() *Sequence { return m.newSequence(m.kvPool) }

// NewSequence returns an empty sequence of the pool's model whose pages
// come from p. On a device the sequence keeps its state there instead.
func (p *KVPool) NewSequence() *Sequence { return p.m.newSequence(p) }

func (m *Model) newSequence(p *KVPool) *Sequence {
	s := &Sequence{shape: m.seqShape(), maxContext: m.maxContext, limit: m.maxContext, layers: make([]layerState, m.Config.NumLayers)}
	if m.dev != nil {
		m.dev.newState().attach(s)
		return s
	}
	for i, k := range m.Config.LayerKinds {
		if k == config.Conv {
			s.layers[i].conv = make([]float32, (m.Config.ConvLCache-1)*m.Config.HiddenSize)
		}
	}
	s.pool = p
	return s
}

// Len returns the number of tokens the sequence holds.
func (s *Sequence) Len() int { return s.n }

// MaxContext returns the most tokens the sequence may hold.
func (s *Sequence) MaxContext() int { return s.maxContext }

// SetMaxContext sets the most tokens the sequence may hold, such as a
// server's per-request limit. n must be at least Len and 1, and at most the
// MaxContext of the model that made the sequence.
func (s *Sequence) SetMaxContext(n int) error {
	if n < max(s.n, 1) || n > s.limit {
		return &InputError{What: "SetMaxContext", Msg: fmt.Sprintf("%d is outside [%d, %d]", n, max(s.n, 1), s.limit)}
	}
	s.maxContext = n
	return nil
}

// Clone returns a copy of the sequence that may be continued differently
// from the original (prefix caching, speculation, candidate branches). The
// two share their KV pages by reference; the first to write into a shared
// page copies it (copy on write), so neither ever sees the other's later
// tokens. The conv state is copied.
//
// On a device the copy is made there; a device fault there panics with the
// model's *DeviceError, as the CPU engine panics when memory runs out.
func (s *Sequence) Clone() *Sequence {
	if s.dev != nil {
		st, err := s.dev.clone(s.n)
		if err != nil {
			panic(err)
		}
		c := &Sequence{shape: s.shape, n: s.n, maxContext: s.maxContext, limit: s.limit, layers: make([]layerState, len(s.layers))}
		st.attach(c)
		return c
	}
	c := &Sequence{shape: s.shape, n: s.n, maxContext: s.maxContext, limit: s.limit, partial: s.partial, start: s.start, layers: make([]layerState, len(s.layers))}
	for i, l := range s.layers {
		c.layers[i] = layerState{conv: clone32(l.conv)}
	}
	c.pool = s.pool
	c.pages = append(make([]*kvPage, 0, len(s.pages)), s.pages...)
	for _, pg := range c.pages {
		s.pool.ref(pg)
	}
	return c
}

// StateBytes returns the bytes of state the sequence's tokens take (KV
// caches in their format, float32 conv states). Its last page may have
// room for more tokens, and pages it shares are counted here in full.
func (s *Sequence) StateBytes() int {
	if s.dev != nil {
		return s.dev.bytes(s.n)
	}
	n := s.n * s.shape.kvBytesPerToken()
	for _, l := range s.layers {
		n += 4 * len(l.conv)
	}
	return n
}

func clone32(x []float32) []float32 {
	if x == nil {
		return nil
	}
	return append(make([]float32, 0, len(x)), x...)
}

// ConvState is a copy of a sequence's short-conv state (every conv layer's
// last K−1 values of B⊙x) after its first Len tokens.
type ConvState struct {
	n      int
	layers [][]float32 // nil for attention layers
}

// Len returns the sequence length the state belongs to.
func (c *ConvState) Len() int { return c.n }

func (m *Model) newConvState(n int) *ConvState {
	c := &ConvState{n: n, layers: make([][]float32, m.Config.NumLayers)}
	for i, k := range m.Config.LayerKinds {
		if k == config.Conv {
			c.layers[i] = make([]float32, (m.Config.ConvLCache-1)*m.Config.HiddenSize)
		}
	}
	return c
}

// snapsWithin reports whether a snapshot was asked for after a token in
// positions [from, to).
func (s *Sequence) snapsWithin(from, to int) bool {
	for _, c := range s.snaps {
		if c.n > from && c.n <= to {
			return true
		}
	}
	return false
}

// fillSnaps writes layer l's part of the snapshots that fall inside a
// segment of n tokens starting at position start: the state after token t
// is the last h u vectors up to t, reaching back into before (the state
// at the segment's start, [H][h] oldest first) when t < h−1.
func (s *Sequence) fillSnaps(l, start, n int, before, u []float32, H, h int) {
	for _, c := range s.snaps {
		t := c.n - start - 1 // index of the snapshot's last token in the segment
		if t < 0 || t >= n {
			continue
		}
		dst := c.layers[l]
		for ch := range H {
			for j := range h {
				if i := t - h + 1 + j; i >= 0 {
					dst[ch*h+j] = u[i*H+ch]
				} else {
					dst[ch*h+j] = before[ch*h+h+i]
				}
			}
		}
	}
}

// ConvAt returns the conv state after the first n tokens, taken by the
// last Forward call that involved the sequence (ForwardOptions.
// ConvSnapshots), or its current state when n is its length.
func (s *Sequence) ConvAt(n int) (*ConvState, bool) {
	if n == s.n && s.dev != nil {
		c := &ConvState{n: n, layers: make([][]float32, len(s.layers))}
		h := s.shape.convK - 1
		for i := range c.layers {
			if s.shape.kinds[i] == byte('0'+config.Conv) {
				c.layers[i] = make([]float32, h*s.shape.hidden)
			}
		}
		if err := s.dev.readConv(c); err != nil {
			return nil, false
		}
		return c, true
	}
	if n == s.n {
		c := &ConvState{n: n, layers: make([][]float32, len(s.layers))}
		for i, l := range s.layers {
			c.layers[i] = clone32(l.conv)
		}
		return c, true
	}
	for _, c := range s.snaps {
		if c.n == n {
			return c, true
		}
	}
	return nil, false
}

// Rewind shortens the sequence to its first n tokens: the KV caches drop
// the later positions, and the conv state becomes conv, which must be the
// state after n tokens (from ConvAt). Speculation rewinds past the draft
// tokens it rejected; what follows is bit-identical to a sequence that
// never saw them.
func (s *Sequence) Rewind(n int, conv *ConvState) error {
	switch {
	case n < 0 || n > s.n:
		return &InputError{What: "Rewind", Msg: fmt.Sprintf("length %d is outside [0, %d]", n, s.n)}
	case conv == nil || conv.n != n || len(conv.layers) != len(s.layers):
		return &InputError{What: "Rewind", Msg: fmt.Sprintf("needs the conv state after %d tokens", n)}
	case s.partial != 0 || s.start != 0:
		return &InputError{What: "Rewind", Msg: "a partial sequence (Layers or StartLayer) cannot be rewound"}
	}
	if s.dev != nil {
		if err := s.dev.writeConv(conv); err != nil {
			return err
		}
		s.n = n
		s.snaps = s.snaps[:0]
		return nil
	}
	for i := range s.layers {
		if c := s.layers[i].conv; c != nil {
			copy(c, conv.layers[i])
		}
	}
	s.trimPages(n)
	s.n = n
	s.snaps = s.snaps[:0]
	return nil
}

// Span is positions [Start, End) of a sequence's state: each attention
// layer's keys and values for those positions and the conv state after
// position End−1. A prefix cache keeps spans and extends new sequences
// with them, which then continue exactly as the sequence they were taken
// from.
//
// A span of the CPU engine holds the KV pages of its positions by
// reference (the first may also hold positions before Start, which the
// span ignores): taking one copies no keys or values, and extending a
// sequence whose length is a multiple of KVPageTokens with it shares them
// again. Free gives the pages back. A device's span holds a copy of its
// keys and values as float32 rows.
type Span struct {
	shape      seqShape
	start, end int
	pool       *KVPool   // a CPU span's pool; nil for a device's
	pages      []*kvPage // a CPU span's pages, the first holding position start
	k, v       []kvRows  // a device's span: per layer [end−start] rows in the KV format; empty for conv layers
	conv       *ConvState
}

// Start and End bound the span's positions.
func (sp *Span) Start() int { return sp.start }

// End is one past the span's last position.
func (sp *Span) End() int { return sp.end }

// Bytes is the state the span's positions take (keys and values in the
// cache's format, float32 conv states); pages it shares with sequences
// or other spans are counted in full.
func (sp *Span) Bytes() int {
	n := (sp.end - sp.start) * sp.shape.kvBytesPerToken()
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
	sp.pages = nil
}

// Shared reports whether some page of the span has another holder (a
// sequence or another span), so that freeing the span would not give it
// back to the pool.
func (sp *Span) Shared() bool {
	for _, pg := range sp.pages {
		if sp.pool.isShared(pg) {
			return true
		}
	}
	return false
}

// CopySpan returns positions [start, end) with conv, the state after end
// tokens (from ConvAt). On the CPU the span shares the sequence's pages.
func (s *Sequence) CopySpan(start, end int, conv *ConvState) (*Span, error) {
	switch {
	case start < 0 || end <= start || end > s.n:
		return nil, &InputError{What: "CopySpan", Msg: fmt.Sprintf("[%d, %d) is not a span of a %d-token sequence", start, end, s.n)}
	case conv == nil || conv.n != end || len(conv.layers) != len(s.layers):
		return nil, &InputError{What: "CopySpan", Msg: fmt.Sprintf("needs the conv state after %d tokens", end)}
	case s.partial != 0 || s.start != 0:
		return nil, &InputError{What: "CopySpan", Msg: "a partial sequence (Layers or StartLayer) has no whole state"}
	}
	sp := &Span{shape: s.shape, start: start, end: end, conv: &ConvState{n: end, layers: make([][]float32, len(s.layers))}}
	for i := range s.layers {
		sp.conv.layers[i] = clone32(conv.layers[i])
	}
	if s.dev != nil {
		k, v, err := s.dev.readKV(start, end)
		if err != nil {
			return nil, err
		}
		sp.k, sp.v = k, v
		return sp, nil
	}
	sp.pool = s.pool
	sp.pages = append([]*kvPage(nil), s.pages[start/KVPageTokens:pagesFor(end)]...)
	for _, pg := range sp.pages {
		s.pool.ref(pg)
	}
	return sp, nil
}

// rows returns the rows holding position pos of layer l's keys and values
// in the span, and the row's index in them.
func (sp *Span) rows(l, pos int) (k, v *kvRows, at int) {
	if sp.pages == nil {
		return &sp.k[l], &sp.v[l], pos - sp.start
	}
	pg := sp.pages[pos/KVPageTokens-sp.start/KVPageTokens]
	return &pg.k[l], &pg.v[l], pos % KVPageTokens
}

// contiguousRows returns the span's keys and values as a device's span
// holds them: per layer, rows of positions [start, end) in the span's KV
// format, one after another.
func (sp *Span) contiguousRows() (k, v []kvRows) {
	if sp.pages == nil {
		return sp.k, sp.v
	}
	kvd, t := sp.shape.kvDim, sp.shape.kvDType
	k, v = make([]kvRows, len(sp.conv.layers)), make([]kvRows, len(sp.conv.layers))
	for l := range len(sp.shape.kinds) {
		if !sp.shape.attention(l) {
			continue
		}
		k[l], v[l] = makeKVRows(t, kvd, sp.end-sp.start), makeKVRows(t, kvd, sp.end-sp.start)
		for pos := sp.start; pos < sp.end; pos++ {
			sk, sv, at := sp.rows(l, pos)
			k[l].copyRows(t, kvd, pos-sp.start, sk, at, 1)
			v[l].copyRows(t, kvd, pos-sp.start, sv, at, 1)
		}
	}
	return k, v
}

// Extend appends a span to a sequence whose length is the span's start
// (a new sequence for the first span of a prefix). A span of the same
// pool starting at a multiple of KVPageTokens is shared by reference;
// otherwise its rows are copied into the sequence's own pages.
func (s *Sequence) Extend(sp *Span) error {
	switch {
	case sp.shape != s.shape:
		return &InputError{What: "Extend", Msg: "the span was copied from a model of another shape"}
	case sp.start != s.n:
		return &InputError{What: "Extend", Msg: fmt.Sprintf("the span starts at %d; the sequence holds %d tokens", sp.start, s.n)}
	case sp.end > s.maxContext:
		return &ContextError{Len: s.n, Add: sp.end - sp.start, MaxContext: s.maxContext}
	case s.partial != 0 || s.start != 0:
		return &InputError{What: "Extend", Msg: "a partial sequence (Layers or StartLayer) cannot be extended"}
	}
	if s.dev != nil {
		flat := *sp
		flat.pages, flat.pool = nil, nil
		flat.k, flat.v = sp.contiguousRows()
		if err := s.dev.extend(&flat); err != nil {
			return err
		}
		s.n = sp.end
		return nil
	}
	if sp.pool == s.pool && sp.pages != nil && s.n%KVPageTokens == 0 {
		for _, pg := range sp.pages {
			s.pool.ref(pg)
			s.pages = append(s.pages, pg)
		}
	} else {
		if err := s.growPages(sp.end); err != nil {
			return err
		}
		kvd, t := s.shape.kvDim, s.shape.kvDType
		for l := range len(s.shape.kinds) {
			if !s.shape.attention(l) {
				continue
			}
			for pos := sp.start; pos < sp.end; pos++ {
				sk, sv, from := sp.rows(l, pos)
				pg, at := s.pages[pos/KVPageTokens], pos%KVPageTokens
				pg.k[l].copyRows(t, kvd, at, sk, from, 1)
				pg.v[l].copyRows(t, kvd, at, sv, from, 1)
			}
		}
	}
	for i := range s.layers {
		if c := s.layers[i].conv; c != nil {
			copy(c, sp.conv.layers[i])
		}
	}
	s.n = sp.end
	return nil
}

// spanMagic starts a marshalled span. Version 2 added the KV cache's
// format after the layer kinds; a version 1 span (float32 only) is refused
// by name, so a prefix cache written by an older lfmq is rebuilt rather
// than misread. The KV pages changed nothing here: a span is written as
// its positions' rows, whatever holds them in memory.
const (
	spanMagic   = "lfmq-span-2\x00"
	spanMagicV1 = "lfmq-span-1\x00"
)

// MarshalBinary encodes the span: a header (magic, shape, start, end, the
// layer kinds, the KV format) and the state, little-endian: per layer its
// keys and values in the cache's format (float32, bfloat16, or BFP8 groups
// of an exponent byte and 16 codes) or its float32 conv state. Only a
// model of the same shape and KV format reads it back (UnmarshalSpan), so
// a prefix cache can outlive the process.
func (sp *Span) MarshalBinary() ([]byte, error) {
	var b []byte
	b = append(b, spanMagic...)
	for _, v := range []int{sp.shape.layers, sp.shape.hidden, sp.shape.convK, sp.shape.kvDim, sp.start, sp.end} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	b = append(b, byte(len(sp.shape.kinds)))
	b = append(b, sp.shape.kinds...)
	b = append(b, byte(sp.shape.kvDType))
	kvd, t := sp.shape.kvDim, sp.shape.kvDType
	for l := range len(sp.shape.kinds) {
		if sp.shape.attention(l) {
			for _, value := range []bool{false, true} {
				for pos := sp.start; pos < sp.end; {
					k, v, at := sp.rows(l, pos)
					r := k
					if value {
						r = v
					}
					n := sp.end - pos
					if sp.pages != nil {
						n = min(n, KVPageTokens-at)
					}
					b = r.appendRaw(b, t, kvd, at, n)
					pos += n
				}
			}
		}
		for _, f := range sp.conv.layers[l] {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
	}
	return b, nil
}

// UnmarshalSpan decodes a span made by MarshalBinary for a model of m's
// shape and KV format, into pages of the model's own pool; anything else
// is an *InputError, never a panic.
func (m *Model) UnmarshalSpan(data []byte) (*Span, error) { return m.kvPool.UnmarshalSpan(data) }

// UnmarshalSpan decodes a span made by MarshalBinary for a model of the
// pool's model's shape and KV format into pages of p (on a device, into
// float32 rows); anything else is an *InputError, never a panic, and a
// *KVPoolError when p has no room for it.
func (p *KVPool) UnmarshalSpan(data []byte) (*Span, error) {
	m := p.m
	bad := func(msg string) (*Span, error) { return nil, &InputError{What: "UnmarshalSpan", Msg: msg} }
	shape := m.seqShape()
	if len(data) >= len(spanMagicV1) && string(data[:len(spanMagicV1)]) == spanMagicV1 {
		return bad("a version 1 span (float32 KV only, written by an older lfmq); this build reads version 2")
	}
	if len(data) < len(spanMagic)+6*8+1 || string(data[:len(spanMagic)]) != spanMagic {
		return bad("not a span")
	}
	q := data[len(spanMagic):]
	var h [6]int
	for i := range h {
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
	got := seqShape{layers: h[0], hidden: h[1], convK: h[2], kvDim: h[3], kinds: string(q[:nk]), kvDType: KVDType(q[nk])}
	q = q[nk+1:]
	if got.kvDType != shape.kvDType && got.kvDType <= KVBFP8 {
		return bad(fmt.Sprintf("the span's KV cache is %s; the model's is %s", got.kvDType, shape.kvDType))
	}
	if got != shape {
		return bad("the span belongs to a model of another shape")
	}
	start, end := h[4], h[5]
	if end <= start || end > m.maxContext {
		return bad(fmt.Sprintf("positions [%d, %d) do not fit the model", start, end))
	}
	// The size is known from the header: check it before taking pages.
	convN := (shape.convK - 1) * shape.hidden
	want := 0
	for _, k := range m.Config.LayerKinds {
		if k == config.Attention {
			want += 2 * (end - start) * shape.kvDType.RowBytes(shape.kvDim)
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
	sp := &Span{shape: shape, start: start, end: end, conv: &ConvState{n: end, layers: make([][]float32, shape.layers)}}
	if m.dev != nil {
		sp.k, sp.v = make([]kvRows, shape.layers), make([]kvRows, shape.layers)
		for l, k := range m.Config.LayerKinds {
			if k == config.Attention {
				sp.k[l] = makeKVRows(shape.kvDType, shape.kvDim, end-start)
				sp.v[l] = makeKVRows(shape.kvDType, shape.kvDim, end-start)
			}
		}
	} else {
		sp.pool = p
		for range pagesFor(end) - start/KVPageTokens {
			pg, err := p.take()
			if err != nil {
				sp.Free()
				return nil, err
			}
			sp.pages = append(sp.pages, pg)
		}
	}
	kvd, t := shape.kvDim, shape.kvDType
	for l, kind := range m.Config.LayerKinds {
		if kind != config.Attention {
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
					n = min(n, KVPageTokens-at)
				}
				q, _ = r.readRaw(q, t, kvd, at, n) // the size was checked above
				pos += n
			}
		}
	}
	return sp, nil
}
