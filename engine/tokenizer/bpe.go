package tokenizer

import (
	"hash/maphash"
	"math"
	"strings"
	"sync"
)

// merge is the result of merging an adjacent pair: its rank (position in
// the file's merges list, lower merges first) and the merged token's id.
type merge struct {
	rank int32
	id   int32
}

const noRank = math.MaxInt32

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// mergeTable maps a pair of ids to its merge: an open-addressing hash
// table with linear probing, several times faster than a Go map for this
// one lookup that BPE spends most of its time in.
type mergeTable struct {
	slots []mergeSlot // len is a power of two, at most half full
	shift uint
}

type mergeSlot struct {
	key uint64 // pairKey + 1; 0 marks an empty slot
	merge
}

func newMergeTable(n int) *mergeTable {
	size, bits := 16, uint(4)
	for size < 2*n {
		size <<= 1
		bits++
	}
	return &mergeTable{slots: make([]mergeSlot, size), shift: 64 - bits}
}

func (t *mergeTable) slot(key uint64) uint64 {
	return (key * 0x9E3779B97F4A7C15) >> t.shift // Fibonacci hashing
}

// put sets the merge of a pair, replacing an earlier one.
func (t *mergeTable) put(a, b int32, m merge) {
	key := pairKey(a, b) + 1
	mask := uint64(len(t.slots) - 1)
	for i := t.slot(key); ; i = (i + 1) & mask {
		if s := &t.slots[i]; s.key == 0 || s.key == key {
			s.key, s.merge = key, m
			return
		}
	}
}

func (t *mergeTable) get(a, b int32) (merge, bool) {
	key := pairKey(a, b) + 1
	mask := uint64(len(t.slots) - 1)
	for i := t.slot(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.key == key {
			return s.merge, true
		}
		if s.key == 0 {
			return merge{}, false
		}
	}
}

// bpeModel applies the merges of a byte-level BPE model to one pre-token.
type bpeModel struct {
	byteID       [256]int32
	merges       *mergeTable
	ignoreMerges bool
	rawVocab     map[string]int32 // raw bytes -> id; only with ignoreMerges
	cache        *pieceCache
}

// lookup returns the merge of the pair (a, b), or noRank.
func (m *bpeModel) lookup(a, b int32) (int32, int32) {
	if mg, ok := m.merges.get(a, b); ok {
		return mg.rank, mg.id
	}
	return noRank, -1
}

// smallPiece is the longest pre-token merged by rank scan; longer ones use
// the heap. A scan is quadratic in the length but needs no allocation, which
// wins for the short pieces that make up almost all text.
const smallPiece = 48

// encode appends the ids of one pre-token (raw bytes) to dst.
func (m *bpeModel) encode(dst []int, piece string) []int {
	switch {
	case len(piece) == 0:
		return dst
	case len(piece) == 1:
		return append(dst, int(m.byteID[piece[0]]))
	}
	if m.ignoreMerges {
		if id, ok := m.rawVocab[piece]; ok {
			return append(dst, int(id))
		}
	}
	if m.cache != nil && len(piece) <= maxCachedPiece {
		if ids, ok := m.cache.get(piece); ok {
			return append(dst, ids...)
		}
		n := len(dst)
		dst = m.mergeSmall(dst, piece)
		m.cache.put(piece, dst[n:])
		return dst
	}
	if len(piece) <= smallPiece {
		return m.mergeSmall(dst, piece)
	}
	return m.mergeHeap(dst, piece)
}

// mergeSmall merges by scanning for the lowest-ranked adjacent pair
// (leftmost on ties) until no pair has a merge. len(piece) <= smallPiece
// or maxCachedPiece.
func (m *bpeModel) mergeSmall(dst []int, piece string) []int {
	const size = max(smallPiece, maxCachedPiece)
	var symBuf, rankBuf, idBuf [size]int32
	n := len(piece)
	syms := symBuf[:n]
	for i := 0; i < n; i++ {
		syms[i] = m.byteID[piece[i]]
	}
	ranks, ids := rankBuf[:n-1], idBuf[:n-1]
	for i := range ranks {
		ranks[i], ids[i] = m.lookup(syms[i], syms[i+1])
	}
	for len(ranks) > 0 {
		best, br := -1, int32(noRank)
		for i, r := range ranks {
			if r < br {
				best, br = i, r
			}
		}
		if best < 0 {
			break
		}
		// Pair best becomes one symbol; pair best+1 disappears; pairs best-1
		// and best now have the merged symbol on one side.
		syms[best] = ids[best]
		copy(syms[best+1:], syms[best+2:])
		syms = syms[:len(syms)-1]
		copy(ranks[best:], ranks[best+1:])
		ranks = ranks[:len(ranks)-1]
		copy(ids[best:], ids[best+1:])
		ids = ids[:len(ids)-1]
		if best < len(ranks) {
			ranks[best], ids[best] = m.lookup(syms[best], syms[best+1])
		}
		if best > 0 {
			ranks[best-1], ids[best-1] = m.lookup(syms[best-1], syms[best])
		}
	}
	for _, s := range syms {
		dst = append(dst, int(s))
	}
	return dst
}

// heapItem is a candidate merge of the symbol at pos with its successor.
type heapItem struct {
	rank int32
	pos  int32
}

func (a heapItem) less(b heapItem) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

type mergeHeap []heapItem

func (h *mergeHeap) push(it heapItem) {
	*h = append(*h, it)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *mergeHeap) pop() heapItem {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(s) {
			break
		}
		c := l
		if r := l + 1; r < len(s) && s[r].less(s[l]) {
			c = r
		}
		if !s[c].less(s[i]) {
			break
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
	*h = s
	return top
}

// mergeHeap merges with a priority queue over a linked list of symbols:
// the same order as mergeSmall (lowest rank, then leftmost position), in
// O(n log n) for long pieces.
func (m *bpeModel) mergeHeap(dst []int, piece string) []int {
	n := len(piece)
	id := make([]int32, n) // -1 once merged into the symbol on its left
	next := make([]int32, n)
	prev := make([]int32, n)
	for i := 0; i < n; i++ {
		id[i] = m.byteID[piece[i]]
		next[i] = int32(i + 1)
		prev[i] = int32(i - 1)
	}
	next[n-1] = -1
	h := make(mergeHeap, 0, n)
	for i := 0; i < n-1; i++ {
		if r, _ := m.lookup(id[i], id[i+1]); r != noRank {
			h.push(heapItem{r, int32(i)})
		}
	}
	for len(h) > 0 {
		it := h.pop()
		p := it.pos
		if id[p] < 0 || next[p] < 0 {
			continue
		}
		q := next[p]
		r, nid := m.lookup(id[p], id[q])
		if r != it.rank {
			continue // stale: a neighbour has changed since this was queued
		}
		id[p] = nid
		id[q] = -1
		next[p] = next[q]
		if next[q] >= 0 {
			prev[next[q]] = p
		}
		if pp := prev[p]; pp >= 0 {
			if r, _ := m.lookup(id[pp], id[p]); r != noRank {
				h.push(heapItem{r, pp})
			}
		}
		if nq := next[p]; nq >= 0 {
			if r, _ := m.lookup(id[p], id[nq]); r != noRank {
				h.push(heapItem{r, p})
			}
		}
	}
	for i := int32(0); i >= 0; i = next[i] {
		dst = append(dst, int(id[i]))
	}
	return dst
}

// The piece cache maps short pre-tokens to their ids. It is bounded: a
// shard that fills up is emptied, which keeps the common pieces of the
// current text without any bookkeeping per hit.
const (
	maxCachedPiece = 32
	cacheShards    = 8
	shardEntries   = 4096
)

type pieceCache struct {
	seed   maphash.Seed
	shards [cacheShards]cacheShard
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[string][]int
}

func newPieceCache() *pieceCache {
	c := &pieceCache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[string][]int)
	}
	return c
}

func (c *pieceCache) shard(piece string) *cacheShard {
	return &c.shards[maphash.String(c.seed, piece)%cacheShards]
}

func (c *pieceCache) get(piece string) ([]int, bool) {
	s := c.shard(piece)
	s.mu.RLock()
	ids, ok := s.m[piece]
	s.mu.RUnlock()
	return ids, ok
}

func (c *pieceCache) put(piece string, ids []int) {
	s := c.shard(piece)
	v := append([]int(nil), ids...)
	key := strings.Clone(piece) // piece may pin a large text
	s.mu.Lock()
	if len(s.m) >= shardEntries {
		clear(s.m)
	}
	s.m[key] = v
	s.mu.Unlock()
}
