package model

import (
	"strings"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/kv"
)

// KeepWindowPool returns an unbounded pool of m's model whose sequences
// keep every position of every layer: its shape marks no layer sliding,
// so the sliding layers' keys and values sit in full pages, never given
// back, while attention still reads each layer's window alone. It is the
// path window pages are checked against (window_test.go).
func KeepWindowPool(m *Model) *KVPool {
	sh := m.seqShape()
	sh.Kinds = strings.ReplaceAll(sh.Kinds, string(rune(kv.SlidingKind)), string(rune('0'+config.Attention)))
	sh.Window = 0
	return &KVPool{Pool: kv.NewPool(sh, 0), m: m}
}

// HeldPages returns the full pages and the window pages (those not given
// back) a CPU sequence's table holds.
func HeldPages(s *Sequence) (full, window int) {
	t := &s.state.(*cpuState).table
	for _, pg := range t.Window() {
		if pg != nil {
			window++
		}
	}
	return len(t.Pages()), window
}
