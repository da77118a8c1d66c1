package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// mergeRef is the textbook BPE loop: merge the lowest-ranked adjacent pair
// (the leftmost of equals), again and again, on a plain slice.
func mergeRef(m *bpeModel, piece string) []int {
	syms := make([]int32, len(piece))
	for i := range len(piece) {
		syms[i] = m.byteID[piece[i]]
	}
	for {
		best, br, bid := -1, int32(noRank), int32(-1)
		for i := 0; i+1 < len(syms); i++ {
			if r, id := m.lookup(syms[i], syms[i+1]); r < br {
				best, br, bid = i, r, id
			}
		}
		if best < 0 {
			break
		}
		syms = slices.Replace(syms, best, best+2, bid)
	}
	out := make([]int, len(syms))
	for i, s := range syms {
		out[i] = int(s)
	}
	return out
}

func checkMerges(t *testing.T, m *bpeModel, piece string) {
	t.Helper()
	if piece == "" {
		return
	}
	want := mergeRef(m, piece)
	if got := m.mergeHeap(nil, piece); !slices.Equal(got, want) {
		t.Fatalf("mergeHeap(%q) = %v, want %v", piece, got, want)
	}
	if len(piece) >= 2 && len(piece) <= max(smallPiece, maxCachedPiece) {
		if got := m.mergeSmall(nil, piece); !slices.Equal(got, want) {
			t.Fatalf("mergeSmall(%q) = %v, want %v", piece, got, want)
		}
	}
	if got := m.encode(nil, piece); !slices.Equal(got, want) {
		t.Fatalf("encode(%q) = %v, want %v", piece, got, want)
	}
}

// TestMergeAlgorithms checks the rank scan and the heap against the
// textbook loop on every pre-token of the fixture texts and on long and
// random pieces.
func TestMergeAlgorithms(t *testing.T) {
	tok := loadFixture(t)
	seen := map[string]bool{}
	for _, s := range allTexts(t) {
		for _, p := range pieces(handOnig, s) {
			if !seen[p] {
				seen[p] = true
				checkMerges(t, tok.bpe, p)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	long := []string{
		strings.Repeat("a", 1000), strings.Repeat(" ", 777), strings.Repeat("ab", 301),
		strings.Repeat("the", 100), strings.Repeat("\n", 64), strings.Repeat("=", 49),
	}
	for range 200 {
		b := make([]byte, 1+rng.IntN(120))
		for i := range b {
			b[i] = "aeiou tnsrhl\n.,"[rng.IntN(15)]
			if rng.IntN(10) == 0 {
				b[i] = byte(rng.IntN(256))
			}
		}
		long = append(long, string(b))
	}
	for _, p := range long {
		checkMerges(t, tok.bpe, p)
	}
	t.Logf("%d distinct pieces", len(seen))
}

// TestNoWholePieceShortcut: ignore_merges is false, so a pre-token that is
// itself a vocabulary entry is still merged by rank. The special tokens are
// vocabulary entries that BPE does not rebuild from their text.
func TestNoWholePieceShortcut(t *testing.T) {
	tok := loadFixture(t)
	for _, a := range tok.SpecialTokens() {
		ids := tok.EncodeOrdinary(a.Content)
		if len(ids) < 2 || slices.Contains(ids, a.ID) {
			t.Errorf("EncodeOrdinary(%q) = %v: the special token must not appear", a.Content, ids)
		}
		if got := tok.EncodeSpecialSplit(a.Content); !slices.Equal(got, []int{a.ID}) {
			t.Errorf("EncodeSpecialSplit(%q) = %v, want [%d]", a.Content, got, a.ID)
		}
	}
}

func TestPieceCacheBounded(t *testing.T) {
	c := newPieceCache()
	for i := range cacheShards * shardEntries * 3 {
		c.put(strings.Repeat("x", i%7)+string(rune('a'+i%26))+strconv.Itoa(i%100)+string(rune(i)), []int{i})
	}
	n := 0
	for i := range c.shards {
		n += len(c.shards[i].m)
	}
	if n > cacheShards*shardEntries {
		t.Fatalf("cache holds %d entries, bound %d", n, cacheShards*shardEntries)
	}
}
