package tokenizer

import (
	"slices"
	"strconv"
	"testing"
)

func TestVectors(t *testing.T) {
	tok := loadFixture(t)
	for i, c := range loadVectors(t) {
		t.Run(c.Kind+"/"+strconv.Itoa(i), func(t *testing.T) {
			// ids is Hugging Face's add_special_tokens=True: BOS always
			// prepended. AddBOS is the serving policy: no second BOS when
			// the text already starts with one.
			want := c.IDs
			if len(want) > 1 && want[0] == 1 && want[1] == 1 {
				want = want[1:]
			}
			if got := tok.Encode(c.Text, EncodeOptions{AddBOS: true, MatchSpecial: true}); !slices.Equal(got, want) {
				t.Errorf("Encode(%q, AddBOS+MatchSpecial)\n got %v\nwant %v", c.Text, got, want)
			}
			got := tok.Encode(c.Text, EncodeOptions{MatchSpecial: true})
			if !slices.Equal(got, c.IDsNoSpecial) {
				t.Errorf("Encode(%q, MatchSpecial)\n got %v\nwant %v", c.Text, got, c.IDsNoSpecial)
			}
			if got := tok.EncodeSpecialSplit(c.Text); !slices.Equal(got, c.IDsNoSpecial) {
				t.Errorf("EncodeSpecialSplit(%q) = %v, want %v", c.Text, got, c.IDsNoSpecial)
			}
			var toks []string
			for _, id := range c.IDsNoSpecial {
				s, ok := tok.Token(id)
				if !ok {
					t.Fatalf("Token(%d) unknown", id)
				}
				toks = append(toks, s)
				if back, ok := tok.TokenID(s); !ok || back != id {
					t.Errorf("TokenID(%q) = %d, %v; want %d", s, back, ok, id)
				}
			}
			if !slices.Equal(toks, c.Tokens) && !(len(toks) == 0 && len(c.Tokens) == 0) {
				t.Errorf("tokens of %q\n got %q\nwant %q", c.Text, toks, c.Tokens)
			}
			dec, err := tok.Decode(c.IDsNoSpecial)
			if err != nil || dec != c.Decoded || dec != c.Text {
				t.Errorf("Decode = %q, %v; want %q", dec, err, c.Decoded)
			}
			dec, err = tok.Decode(c.IDs)
			if err != nil || dec != "<|startoftext|>"+c.Text {
				t.Errorf("Decode(ids with BOS) = %q, %v", dec, err)
			}
		})
	}
}
