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
	dev        *devState    // the state on the model's device; layers then hold none
}

// layerState is one layer's part of a sequence's state.
type layerState struct {
	conv []float32 // conv layers: [H][K−1], oldest first (kernels.CausalConv's layout)
	k, v kvRows    // attention layers: [n][Hkv·d] in the cache's format
}

// seqShape is what a sequence's state depends on; a Sequence may be used
// with any Model of the same shape.
type seqShape struct {
	layers, hidden, convK, kvDim int
	kinds                        string
	kvDType                      KVDType
}

func (m *Model) seqShape() seqShape {
	c := m.Config
	kinds := make([]byte, c.NumLayers)
	for i, k := range c.LayerKinds {
		kinds[i] = byte('0' + k)
	}
	return seqShape{layers: c.NumLayers, hidden: c.HiddenSize, convK: c.ConvLCache, kvDim: c.NumKVHeads * c.HeadDim, kinds: string(kinds), kvDType: m.kvDType}
}

// NewSequence returns an empty sequence (zero conv state, empty KV caches)
// limited to the model's MaxContext.
func (m *Model) NewSequence() *Sequence {
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

// Clone returns a deep copy of the sequence: the copy and the original
// share no mutable memory, so each may be continued differently (prefix
// caching, speculation, candidate branches).
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
		c.layers[i] = layerState{conv: clone32(l.conv), k: l.k.clone(), v: l.v.clone()}
	}
	return c
}

// StateBytes returns the bytes of state the sequence holds (KV caches in
// their format, float32 conv states).
func (s *Sequence) StateBytes() int {
	if s.dev != nil {
		return s.dev.bytes(s.n)
	}
	n := 0
	for _, l := range s.layers {
		n += 4*len(l.conv) + l.k.bytes() + l.v.bytes()
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
	kv := s.shape.kvDim
	for i := range s.layers {
		l := &s.layers[i]
		if l.conv != nil {
			copy(l.conv, conv.layers[i])
		}
		if !l.k.empty() {
			l.k.truncate(s.shape.kvDType, kv, n)
			l.v.truncate(s.shape.kvDType, kv, n)
		}
	}
	s.n = n
	s.snaps = s.snaps[:0]
	return nil
}

// Span is a copy of positions [Start, End) of a sequence's state: each
// attention layer's keys and values for those positions and the conv
// state after position End−1. A prefix cache keeps spans and extends new
// sequences with them, which then continue exactly as the sequence they
// were copied from.
type Span struct {
	shape      seqShape
	start, end int
	k, v       []kvRows // per layer, in the sequence's format; empty for conv layers
	conv       *ConvState
}

// Start and End bound the span's positions.
func (sp *Span) Start() int { return sp.start }

// End is one past the span's last position.
func (sp *Span) End() int { return sp.end }

// Bytes is the state the span holds (keys and values in the cache's
// format, float32 conv states).
func (sp *Span) Bytes() int {
	n := 0
	for i := range sp.k {
		n += sp.k[i].bytes() + sp.v[i].bytes()
	}
	for _, c := range sp.conv.layers {
		n += 4 * len(c)
	}
	return n
}

// CopySpan returns a copy of positions [start, end) with conv, the state
// after end tokens (from ConvAt).
func (s *Sequence) CopySpan(start, end int, conv *ConvState) (*Span, error) {
	switch {
	case start < 0 || end <= start || end > s.n:
		return nil, &InputError{What: "CopySpan", Msg: fmt.Sprintf("[%d, %d) is not a span of a %d-token sequence", start, end, s.n)}
	case conv == nil || conv.n != end || len(conv.layers) != len(s.layers):
		return nil, &InputError{What: "CopySpan", Msg: fmt.Sprintf("needs the conv state after %d tokens", end)}
	case s.partial != 0 || s.start != 0:
		return nil, &InputError{What: "CopySpan", Msg: "a partial sequence (Layers or StartLayer) has no whole state"}
	}
	kv := s.shape.kvDim
	sp := &Span{shape: s.shape, start: start, end: end, k: make([]kvRows, len(s.layers)), v: make([]kvRows, len(s.layers)),
		conv: &ConvState{n: end, layers: make([][]float32, len(s.layers))}}
	if s.dev != nil {
		k, v, err := s.dev.readKV(start, end)
		if err != nil {
			return nil, err
		}
		sp.k, sp.v = k, v
		for i := range s.layers {
			sp.conv.layers[i] = clone32(conv.layers[i])
		}
		return sp, nil
	}
	for i, l := range s.layers {
		if !l.k.empty() {
			sp.k[i] = l.k.slice(s.shape.kvDType, kv, start, end)
			sp.v[i] = l.v.slice(s.shape.kvDType, kv, start, end)
		}
		sp.conv.layers[i] = clone32(conv.layers[i])
	}
	return sp, nil
}

// Extend appends a span to a sequence whose length is the span's start
// (a new sequence for the first span of a prefix).
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
		if err := s.dev.extend(sp); err != nil {
			return err
		}
		s.n = sp.end
		return nil
	}
	for i := range s.layers {
		l := &s.layers[i]
		l.k.appendRaw(&sp.k[i])
		l.v.appendRaw(&sp.v[i])
		if l.conv != nil {
			copy(l.conv, sp.conv.layers[i])
		}
	}
	s.n = sp.end
	return nil
}

// spanMagic starts a marshalled span. Version 2 added the KV cache's
// format after the layer kinds; a version 1 span (float32 only) is refused
// by name, so a prefix cache written by an older lfmq is rebuilt rather
// than misread.
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
	put := func(x []float32) {
		for _, f := range x {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
	}
	putRows := func(r *kvRows) {
		put(r.f)
		for _, h := range r.h {
			b = binary.LittleEndian.AppendUint16(b, h)
		}
		b = append(b, r.b...)
	}
	for i := range sp.k {
		putRows(&sp.k[i])
		putRows(&sp.v[i])
		put(sp.conv.layers[i])
	}
	return b, nil
}

// UnmarshalSpan decodes a span made by MarshalBinary for a model of m's
// shape and KV format; anything else is an *InputError, never a panic.
func (m *Model) UnmarshalSpan(data []byte) (*Span, error) {
	bad := func(msg string) (*Span, error) { return nil, &InputError{What: "UnmarshalSpan", Msg: msg} }
	shape := m.seqShape()
	if len(data) >= len(spanMagicV1) && string(data[:len(spanMagicV1)]) == spanMagicV1 {
		return bad("a version 1 span (float32 KV only, written by an older lfmq); this build reads version 2")
	}
	if len(data) < len(spanMagic)+6*8+1 || string(data[:len(spanMagic)]) != spanMagic {
		return bad("not a span")
	}
	p := data[len(spanMagic):]
	var h [6]int
	for i := range h {
		v := binary.LittleEndian.Uint64(p)
		if v > 1<<40 {
			return bad("field out of range")
		}
		h[i] = int(v)
		p = p[8:]
	}
	nk := int(p[0])
	p = p[1:]
	if len(p) < nk+1 {
		return bad("truncated")
	}
	got := seqShape{layers: h[0], hidden: h[1], convK: h[2], kvDim: h[3], kinds: string(p[:nk]), kvDType: KVDType(p[nk])}
	p = p[nk+1:]
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
	sp := &Span{shape: shape, start: start, end: end, k: make([]kvRows, shape.layers), v: make([]kvRows, shape.layers),
		conv: &ConvState{n: end, layers: make([][]float32, shape.layers)}}
	take := func(n int) ([]float32, bool) {
		if n == 0 {
			return nil, true
		}
		if len(p)/4 < n {
			return nil, false
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
		}
		p = p[4*n:]
		return x, true
	}
	rows := (end - start) * shape.kvDim
	takeRows := func(r *kvRows) bool {
		switch shape.kvDType {
		case KVBF16:
			if len(p)/2 < rows {
				return false
			}
			r.h = make([]uint16, rows)
			for i := range r.h {
				r.h[i] = binary.LittleEndian.Uint16(p[2*i:])
			}
			p = p[2*rows:]
		case KVBFP8:
			n := (end - start) * shape.kvDType.RowBytes(shape.kvDim)
			if len(p) < n {
				return false
			}
			r.b = append([]byte(nil), p[:n]...)
			p = p[n:]
		default:
			var ok bool
			if r.f, ok = take(rows); !ok {
				return false
			}
		}
		return true
	}
	convN := (shape.convK - 1) * shape.hidden
	for i, k := range m.Config.LayerKinds {
		var ok bool
		if k == config.Attention {
			if !takeRows(&sp.k[i]) || !takeRows(&sp.v[i]) {
				return bad("truncated")
			}
		} else if sp.conv.layers[i], ok = take(convN); !ok {
			return bad("truncated")
		}
	}
	if len(p) != 0 {
		return bad("trailing bytes")
	}
	return sp, nil
}
