package tokenizer

import (
	"encoding/json"
	"slices"
	"testing"
)

// minimalJSON builds a small tokenizer.json: the 256 byte symbols as ids
// 0..255 (id = byte value), seven merges, one added token "<eos>", and a
// ByteLevel pre-tokenizer with use_regex true (the GPT-2 split, run on
// regexp2).
func minimalJSON(t testing.TB) []byte {
	vocab := map[string]int{}
	for b := range 256 {
		vocab[string(byteToRune[b])] = b
	}
	merges := [][2]string{{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"Ġ", "Ġ"}, {"ĠĠ", "ĠĠ"}, {"1", "2"}}
	for i, m := range merges {
		vocab[m[0]+m[1]] = 256 + i
	}
	f := false
	doc := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens":   []any{map[string]any{"id": 263, "content": "<eos>", "single_word": f, "lstrip": f, "rstrip": f, "normalized": f, "special": true}},
		"normalizer":     nil,
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"post_processor": nil,
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": merges},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMinimalGPT2Split: ids from Hugging Face tokenizers 0.23.2 for the
// same file (built there with the same vocabulary and merges).
func TestMinimalGPT2Split(t *testing.T) {
	tok, err := FromJSON(minimalJSON(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tok.BOS(); ok {
		t.Error("BOS defined without config or template")
	}
	cases := []struct {
		text string
		ids  []int
	}{
		{"the then 12345 in    the\n\n  x", []int{116, 257, 258, 110, 32, 262, 51, 52, 53, 32, 259, 260, 32, 258, 10, 10, 32, 32, 120}},
		{"it's 'S <eos>the", []int{105, 116, 39, 115, 32, 39, 83, 32, 263, 116, 257}},
		{"  \t\r\n x  ", []int{260, 9, 13, 10, 32, 120, 260}},
	}
	for _, c := range cases {
		if got := tok.EncodeSpecialSplit(c.text); !slices.Equal(got, c.ids) {
			t.Errorf("Encode(%q) = %v, want %v", c.text, got, c.ids)
		}
		if got, _ := tok.Decode(c.ids); got != c.text {
			t.Errorf("Decode = %q", got)
		}
	}
}

// FuzzFromJSON: arbitrary tokenizer.json bytes never panic, and a file that
// loads encodes and decodes round trip.
func FuzzFromJSON(f *testing.F) {
	f.Add(minimalJSON(f))
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a a"]}}`))
	f.Add([]byte(`{"added_tokens": [{"id": 1e9}], "model": null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := FromJSON(b, nil)
		if err != nil {
			return
		}
		for _, s := range []string{"hello <eos> world", "\xff\x00 12345 ", ""} {
			ids := tok.EncodeSpecialSplit(s)
			if got, err := tok.Decode(ids); err != nil || (got != s && !tok.hasStrip()) {
				t.Fatalf("round trip of %q: %q, %v", s, got, err)
			}
		}
	})
}

// hasStrip reports whether some added token strips whitespace (then the
// text is not rebuilt exactly).
func (t *Tokenizer) hasStrip() bool {
	for _, a := range t.added {
		if a.LStrip || a.RStrip {
			return true
		}
	}
	return false
}
