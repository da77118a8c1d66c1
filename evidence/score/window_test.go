package score

import (
	"errors"
	"testing"
)

// TestSplitCoverage is the window-rule property test
// (docs/scoring.md, "Windows"): for every record length and context,
// every target 1 … n−1 is scored exactly once, windows hold at most C
// tokens, start with t_0 or BOS, carry the record's tokens in order, and
// every target after the first window sees at least S−1 tokens of its record.
func TestSplitCoverage(t *testing.T) {
	const bos = -7
	for _, C := range []int{2, 4, 6, 8, 10, 16, 34, 64, 512} {
		for n := 0; n <= 3*C+5 && n <= 1200; n++ {
			ids := make([]int, n)
			for i := range ids {
				ids[i] = 1000 + i
			}
			wins, err := Split(ids, C, bos)
			if err != nil {
				t.Fatal(err)
			}
			seen := make([]int, n)
			S := C / 2
			for w, win := range wins {
				if len(win.Tokens) > C || win.First < 1 || win.First >= len(win.Tokens) {
					t.Fatalf("C=%d n=%d window %d: %d tokens, first %d", C, n, w, len(win.Tokens), win.First)
				}
				off := 0 // record index of window position p is off + p, p ≥ 1
				if w > 0 {
					off = w * S
					if win.Tokens[0] != bos || win.First != S {
						t.Fatalf("C=%d n=%d window %d: starts %d, first %d", C, n, w, win.Tokens[0], win.First)
					}
				} else if win.Tokens[0] != ids[0] {
					t.Fatalf("C=%d n=%d: window 0 starts %d", C, n, win.Tokens[0])
				}
				for p := 1; p < len(win.Tokens); p++ {
					if win.Tokens[p] != ids[off+p] {
						t.Fatalf("C=%d n=%d window %d position %d: %d, want %d", C, n, w, p, win.Tokens[p], ids[off+p])
					}
				}
				for p := win.First; p < len(win.Tokens); p++ {
					seen[off+p]++
					if w > 0 && p-1 < S-1 {
						t.Fatalf("C=%d n=%d window %d: target %d sees %d record tokens", C, n, w, off+p, p-1)
					}
				}
			}
			for j := 1; j < n; j++ {
				if seen[j] != 1 {
					t.Fatalf("C=%d n=%d: target %d scored %d times", C, n, j, seen[j])
				}
			}
			if n >= 2 && n <= C && len(wins) != 1 {
				t.Fatalf("C=%d n=%d: %d windows for a short record", C, n, len(wins))
			}
		}
	}
}

func TestSplitWindows(t *testing.T) {
	ids := []int{1, 11, 12, 13, 14, 15, 16, 17, 18, 19}
	wins, _ := Split(ids, 4, 1)
	want := []Window{
		{Tokens: []int{1, 11, 12, 13}, First: 1},
		{Tokens: []int{1, 13, 14, 15}, First: 2},
		{Tokens: []int{1, 15, 16, 17}, First: 2},
		{Tokens: []int{1, 17, 18, 19}, First: 2},
	}
	if len(wins) != len(want) {
		t.Fatalf("%d windows: %+v", len(wins), wins)
	}
	for i := range want {
		if wins[i].First != want[i].First || len(wins[i].Tokens) != len(want[i].Tokens) {
			t.Fatalf("window %d = %+v, want %+v", i, wins[i], want[i])
		}
		for j := range want[i].Tokens {
			if wins[i].Tokens[j] != want[i].Tokens[j] {
				t.Fatalf("window %d = %+v, want %+v", i, wins[i], want[i])
			}
		}
	}
	for _, C := range []int{-2, 0, 1, 3, 513} {
		var ce *CtxError
		if _, err := Split(ids, C, 1); !errors.As(err, &ce) {
			t.Errorf("ctx %d: %v", C, err)
		}
	}
}
