package model

import (
	"fmt"

	"github.com/lfmq/lfmq/engine/config"
)

// Sequence is the complete state of one token stream (lfm2-moe.md §4.4,
// §4.5): for every attention layer the KV cache (k after its norm and RoPE,
// and v, float32), for every short-conv layer the last K−1 values of B⊙x per
// channel. A Sequence is used by one Forward call at a time.
type Sequence struct {
	shape      seqShape
	n          int // tokens consumed
	maxContext int
	limit      int // the creating model's MaxContext
	partial    int // ForwardOptions.Layers of the calls that built it (0: all)
	start      int // ForwardOptions.StartLayer of the calls that built it
	layers     []layerState
}

// layerState is one layer's part of a sequence's state.
type layerState struct {
	conv []float32 // conv layers: [H][K−1], oldest first (kernels.CausalConv's layout)
	k, v []float32 // attention layers: [n][Hkv·d]
}

// seqShape is what a sequence's state depends on; a Sequence may be used
// with any Model of the same shape.
type seqShape struct {
	layers, hidden, convK, kvDim int
	kinds                        string
}

func (m *Model) seqShape() seqShape {
	c := m.Config
	kinds := make([]byte, c.NumLayers)
	for i, k := range c.LayerKinds {
		kinds[i] = byte('0' + k)
	}
	return seqShape{layers: c.NumLayers, hidden: c.HiddenSize, convK: c.ConvLCache, kvDim: c.NumKVHeads * c.HeadDim, kinds: string(kinds)}
}

// NewSequence returns an empty sequence (zero conv state, empty KV caches)
// limited to the model's MaxContext.
func (m *Model) NewSequence() *Sequence {
	s := &Sequence{shape: m.seqShape(), maxContext: m.maxContext, limit: m.maxContext, layers: make([]layerState, m.Config.NumLayers)}
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
func (s *Sequence) Clone() *Sequence {
	c := &Sequence{shape: s.shape, n: s.n, maxContext: s.maxContext, limit: s.limit, partial: s.partial, start: s.start, layers: make([]layerState, len(s.layers))}
	for i, l := range s.layers {
		c.layers[i] = layerState{conv: clone32(l.conv), k: clone32(l.k), v: clone32(l.v)}
	}
	return c
}

// StateBytes returns the bytes of float32 state the sequence holds (KV
// caches and conv states).
func (s *Sequence) StateBytes() int {
	n := 0
	for _, l := range s.layers {
		n += 4 * (len(l.conv) + len(l.k) + len(l.v))
	}
	return n
}

func clone32(x []float32) []float32 {
	if x == nil {
		return nil
	}
	return append(make([]float32, 0, len(x)), x...)
}
