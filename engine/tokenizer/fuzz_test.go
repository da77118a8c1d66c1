package tokenizer

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzEncodeDecode checks, on arbitrary bytes: decode(encode(x)) == x with
// and without special-token matching; the streaming decoder gives the same
// text and never a partial character of valid text; the hand splitter
// equals regexp2 running the file's pattern; the merge algorithms agree;
// and nothing panics.
func FuzzEncodeDecode(f *testing.F) {
	tok := loadFixture(f)
	for _, c := range loadVectors(f) {
		f.Add(c.Text)
	}
	for _, c := range loadHFVectors(f).Plain {
		f.Add(c.Text)
	}
	for _, name := range []string{"chat", "code"} {
		for i, r := range loadCorpus(f, name) {
			if i%16 == 0 {
				f.Add(r.Text[:min(len(r.Text), 300)])
			}
		}
	}
	f.Add("\xff\xfe<|im_end|>\xe2\x82")
	f.Add("'ſ'S 'Ll \u1C89 \u00a0\u2028\r\n\t ")
	f.Fuzz(func(t *testing.T, s string) {
		for _, opts := range []EncodeOptions{{}, {MatchSpecial: true}, {AddBOS: true, MatchSpecial: true}} {
			ids := tok.Encode(s, opts)
			dec, err := tok.Decode(ids)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			want := s
			if opts.AddBOS && !strings.HasPrefix(s, "<|startoftext|>") {
				want = "<|startoftext|>" + s
			}
			if dec != want {
				t.Fatalf("Decode(Encode(%q, %+v)) = %q", s, opts, dec)
			}
			streamed, _ := streamAll(t, tok, ids, utf8.ValidString(s))
			if streamed != dec {
				t.Fatalf("streamed %q, decoded %q", streamed, dec)
			}
		}
		if got, want := tok.EncodeSpecialSplit(s), encodeBySegments(tok, s); !slices.Equal(got, want) {
			t.Fatalf("EncodeSpecialSplit(%q) = %v, by segments %v", s, got, want)
		}
		checkSplitters(t, s)
		for _, p := range pieces(handOnig, s) {
			checkMerges(t, tok.bpe, p)
		}
	})
}
