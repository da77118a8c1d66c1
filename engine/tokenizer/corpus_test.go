package tokenizer

import (
	"fmt"
	"slices"
	"testing"
)

func mustID(t testing.TB, tok *Tokenizer, content string) int {
	t.Helper()
	id, ok := tok.TokenID(content)
	if !ok {
		t.Fatalf("TokenID(%q): not found", content)
	}
	return id
}

// firstDiff describes where two id sequences part.
func firstDiff(got, want []int) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("lengths %d/%d, first difference at %d: got %v, want %v",
		len(got), len(want), i, got[i:min(len(got), i+8)], want[i:min(len(want), i+8)])
}

// TestCorpora reproduces the input_ids of every eval record, following the
// fixture README: chat/instruct records are rendered chat templates encoded
// with special tokens matched and no BOS added; code/book records are
// <|startoftext|> + ordinary encoding + <|endoftext|>.
func TestCorpora(t *testing.T) {
	tok := loadFixture(t)
	bos := mustID(t, tok, "<|startoftext|>")
	eot := mustID(t, tok, "<|endoftext|>")
	for _, c := range corpora {
		t.Run(c.name, func(t *testing.T) {
			recs := loadCorpus(t, c.name)
			tokens := 0
			for _, r := range recs {
				var got []int
				wantText := r.Text
				if c.document {
					got = append([]int{bos}, tok.EncodeOrdinary(r.Text)...)
					got = append(got, eot)
					wantText = "<|startoftext|>" + r.Text + "<|endoftext|>"
				} else {
					got = tok.EncodeSpecialSplit(r.Text)
					if bySeg := encodeBySegments(tok, r.Text); !slices.Equal(bySeg, got) {
						t.Errorf("%s: SplitSpecial + EncodeOrdinary differs from EncodeSpecialSplit: %s", r.ID, firstDiff(bySeg, got))
					}
				}
				tokens += len(got)
				if !slices.Equal(got, r.InputIDs) {
					t.Errorf("%s: %s", r.ID, firstDiff(got, r.InputIDs))
					continue
				}
				if dec, err := tok.Decode(got); err != nil || dec != wantText {
					t.Errorf("%s: Decode(input_ids) does not give the text back (err %v)", r.ID, err)
				}
				if dec, err := tok.Decode(tok.EncodeOrdinary(r.Text)); err != nil || dec != r.Text {
					t.Errorf("%s: Decode(EncodeOrdinary(text)) != text (err %v)", r.ID, err)
				}
			}
			t.Logf("%d records, %d tokens", len(recs), tokens)
		})
	}
}

func encodeBySegments(tok *Tokenizer, text string) []int {
	var ids []int
	for _, s := range tok.SplitSpecial(text) {
		if s.Token {
			ids = append(ids, s.ID)
		} else {
			ids = append(ids, tok.EncodeOrdinary(s.Text)...)
		}
	}
	return ids
}

// TestPrompts reproduces the reference prompts' input_ids: plain prompts
// under the completions policy (special tokens matched, BOS prepended),
// chat prompts as rendered templates (which carry their own BOS).
func TestPrompts(t *testing.T) {
	tok := loadFixture(t)
	prompts := loadPrompts(t)
	if len(prompts) != 6 {
		t.Fatalf("%d prompts, want 6", len(prompts))
	}
	for _, p := range prompts {
		t.Run(p.Name, func(t *testing.T) {
			got := tok.Encode(p.RenderedText, EncodeOptions{AddBOS: true, MatchSpecial: true})
			if !slices.Equal(got, p.InputIDs) {
				t.Errorf("Encode(AddBOS, MatchSpecial): %s", firstDiff(got, p.InputIDs))
			}
			if p.Kind == "chat" {
				if got := tok.EncodeSpecialSplit(p.RenderedText); !slices.Equal(got, p.InputIDs) {
					t.Errorf("EncodeSpecialSplit: %s", firstDiff(got, p.InputIDs))
				}
			}
			if dec, err := tok.Decode(p.InputIDs); err != nil || dec != p.RenderedText && dec != "<|startoftext|>"+p.RenderedText {
				t.Errorf("Decode = %q, %v", dec, err)
			}
		})
	}
}
