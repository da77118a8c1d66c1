package tokenizer

import (
	"errors"
	"slices"
	"sync"
	"testing"
)

func TestFixtureMetadata(t *testing.T) {
	tok := loadFixture(t)
	if n := tok.VocabSize(); n != 8192 {
		t.Errorf("VocabSize = %d, want 8192", n)
	}
	for _, c := range []struct {
		name string
		get  func() (int, bool)
		want int
	}{
		{"BOS", tok.BOS, 1}, {"EOS", tok.EOS, 7}, {"Pad", tok.Pad, 0},
	} {
		if id, ok := c.get(); !ok || id != c.want {
			t.Errorf("%s = %d, %v; want %d", c.name, id, ok, c.want)
		}
	}
	if !tok.AddBOSDefault() || tok.AddEOSDefault() {
		t.Errorf("AddBOSDefault/AddEOSDefault = %v/%v, want true/false", tok.AddBOSDefault(), tok.AddEOSDefault())
	}
	want := []string{"<|pad|>", "<|startoftext|>", "<|endoftext|>", "<|fim_pre|>", "<|fim_mid|>", "<|fim_suf|>",
		"<|im_start|>", "<|im_end|>", "<|tool_list_start|>", "<|tool_list_end|>", "<|tool_call_start|>",
		"<|tool_call_end|>", "<|tool_response_start|>", "<|tool_response_end|>", "<think>", "</think>"}
	sp := tok.SpecialTokens()
	if len(sp) != len(want) {
		t.Fatalf("%d special tokens, want %d", len(sp), len(want))
	}
	for i, a := range sp {
		if a.ID != i || a.Content != want[i] || !a.Special {
			t.Errorf("special token %d = %+v, want %q", i, a, want[i])
		}
		if id, ok := tok.TokenID(a.Content); !ok || id != i {
			t.Errorf("TokenID(%q) = %d, %v", a.Content, id, ok)
		}
	}
	if s, ok := tok.Token(2014); !ok || s != "Ġworld" {
		t.Errorf("Token(2014) = %q, %v", s, ok)
	}
	if b, ok := tok.TokenBytes(2014); !ok || b != " world" {
		t.Errorf("TokenBytes(2014) = %q, %v", b, ok)
	}
	if _, ok := tok.Token(8192); ok {
		t.Error("Token(8192) found")
	}
	if _, ok := tok.TokenID("no such token"); ok {
		t.Error("TokenID of a non-token found")
	}
}

// TestSpecialPolicy: the special-token policy of docs/model.md §5.
func TestSpecialPolicy(t *testing.T) {
	tok := loadFixture(t)
	text := "<|startoftext|>hi<|im_end|>"
	ordinary := tok.EncodeOrdinary(text)
	if slices.Contains(ordinary, 1) || slices.Contains(ordinary, 7) {
		t.Errorf("EncodeOrdinary(%q) = %v: special strings must stay text", text, ordinary)
	}
	if dec, _ := tok.Decode(ordinary); dec != text {
		t.Errorf("Decode(EncodeOrdinary) = %q", dec)
	}
	if got := tok.Encode(text, EncodeOptions{AddBOS: true}); got[0] != 1 || !slices.Equal(got[1:], ordinary) {
		t.Errorf("Encode(AddBOS, ordinary) = %v", got)
	}
	matched := tok.Encode(text, EncodeOptions{MatchSpecial: true})
	if matched[0] != 1 || matched[len(matched)-1] != 7 {
		t.Errorf("Encode(MatchSpecial) = %v", matched)
	}
	if got := tok.Encode(text, EncodeOptions{AddBOS: true, MatchSpecial: true}); !slices.Equal(got, matched) {
		t.Errorf("Encode(AddBOS, MatchSpecial) = %v, want %v (no second BOS)", got, matched)
	}
	if got := tok.Encode("hello world", EncodeOptions{AddBOS: true}); !slices.Equal(got, []int{1, 5302, 2014}) {
		t.Errorf("Encode(hello world, AddBOS) = %v", got)
	}
	if got := tok.Encode("", EncodeOptions{AddBOS: true}); !slices.Equal(got, []int{1}) {
		t.Errorf("Encode(\"\", AddBOS) = %v", got)
	}
	if got := tok.EncodeOrdinary(""); len(got) != 0 {
		t.Errorf("EncodeOrdinary(\"\") = %v", got)
	}
	segs := tok.SplitSpecial("a<|im_start|>user\nx<|im_end|>")
	want := []Segment{{Text: "a", ID: -1}, {Text: "<|im_start|>", Token: true, ID: 6}, {Text: "user\nx", ID: -1}, {Text: "<|im_end|>", Token: true, ID: 7}}
	if !slices.Equal(segs, want) {
		t.Errorf("SplitSpecial = %+v, want %+v", segs, want)
	}
}

func TestDecodeErrors(t *testing.T) {
	tok := loadFixture(t)
	for _, ids := range [][]int{{-1}, {5, 8192}, {1 << 33}} {
		_, err := tok.Decode(ids)
		var ie *IDError
		if !errors.As(err, &ie) || ie.ID != ids[len(ids)-1] || ie.Index != len(ids)-1 || ie.VocabSize != 8192 {
			t.Errorf("Decode(%v) error = %v", ids, err)
		}
	}
	if s, err := tok.Decode(nil); s != "" || err != nil {
		t.Errorf("Decode(nil) = %q, %v", s, err)
	}
}

// TestConcurrentEncode runs encoders on shared state; run with -race.
func TestConcurrentEncode(t *testing.T) {
	tok := loadFixture(t)
	texts := allTexts(t)
	if testing.Short() {
		texts = texts[:50]
	}
	want := make([][]int, len(texts))
	for i, s := range texts {
		want[i] = tok.EncodeSpecialSplit(s)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Go(func() {
			for k := range texts {
				i := (k + g*len(texts)/4) % len(texts)
				if got := tok.EncodeSpecialSplit(texts[i]); !slices.Equal(got, want[i]) {
					errs <- texts[i]
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for s := range errs {
		t.Errorf("concurrent encoding of %.40q differs", s)
	}
}
