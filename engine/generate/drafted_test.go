package generate

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/sample"
)

// TestDrafted: with the DSpark drafter, at a fixed depth and scheduled,
// Run gives the tokens, stop and text of Run without it, greedy and
// seeded, and reports what the drafter did.
func TestDrafted(t *testing.T) {
	plain, err := Open(tinyModel, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	s, err := Open(tinyModel, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, err := draft.Load("../../testdata/tiny-lfm2-moe-dspark/model", s.Model)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	seeded := sample.Neutral()
	seeded.Temperature, seeded.TopP, seeded.Seed = 0.8, 0.95, 5
	for _, c := range []struct {
		name   string
		prompt string
		params sample.Params
		max    int
	}{
		{"greedy", "def fib(n):", sample.Neutral(), 60},
		{"seeded", "The weather today", seeded, 60},
		{"short", "Once upon a time", sample.Neutral(), 3},
	} {
		prompt := plain.EncodeText(c.prompt)
		var wantText string
		want, err := plain.Run(context.Background(), prompt, Options{MaxTokens: c.max, Params: c.params, OnText: func(x string) { wantText += x }})
		if err != nil {
			t.Fatal(err)
		}
		for _, depth := range []int{0, 5} {
			t.Run(fmt.Sprintf("%s/depth%d", c.name, depth), func(t *testing.T) {
				var text string
				got, err := s.Run(context.Background(), prompt, Options{MaxTokens: c.max, Params: c.params, Drafter: d, DraftDepth: depth,
					OnText: func(x string) { text += x }})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got.Tokens, want.Tokens) || got.Stopped != want.Stopped || text != wantText || got.ContextFilled != want.ContextFilled {
					t.Errorf("drafted %v %v %q\nplain %v %v %q", got.Tokens, got.Stopped, text, want.Tokens, want.Stopped, wantText)
				}
				// Scheduled (depth 0), the drafter may not run at all: on
				// the tiny model its pass costs more than any depth keeps.
				if got.Draft == nil || (depth > 0 && (got.Draft.Passes == 0 || c.max > 1 && got.Draft.Steps == 0)) {
					t.Errorf("drafter stats %+v", got.Draft)
				}
			})
		}
	}
}
