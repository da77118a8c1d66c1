package score_test

import (
	"fmt"

	"github.com/lfmq/lfmq/evidence/score"
)

// A record of 10 tokens with context 4: the first window scores targets
// 1–3, each later one starts with BOS and scores the second half of its
// window.
func ExampleSplit() {
	ids := []int{1, 11, 12, 13, 14, 15, 16, 17, 18, 19}
	wins, _ := score.Split(ids, 4, 1)
	for _, w := range wins {
		fmt.Println(w.Tokens, "scores", w.Tokens[w.First:])
	}
	// Output:
	// [1 11 12 13] scores [11 12 13]
	// [1 13 14 15] scores [14 15]
	// [1 15 16 17] scores [16 17]
	// [1 17 18 19] scores [18 19]
}

// Compare scores one position of a candidate against the reference.
func ExampleCompare() {
	ref := score.NewRef(2)
	ref.SetLogits([]float32{0, 0}, 0) // p = (0.5, 0.5)
	tok, _ := score.Compare(ref, []float32{2, 0}, 0, make([]float64, 2))
	fmt.Printf("KL %.4f, NLL %.4f → %.4f, same argmax %v\n", tok.KL, tok.NLLRef, tok.NLLCand, tok.Same)
	// Output:
	// KL 0.4338, NLL 0.6931 → 0.1269, same argmax true
}
