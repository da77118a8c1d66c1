package tokenizer

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// streamAll feeds ids one by one and checks that every emitted chunk is
// valid UTF-8 when the whole text is; it returns the concatenation and how
// often bytes were held back.
func streamAll(t *testing.T, tok *Tokenizer, ids []int, wantValid bool) (string, int) {
	t.Helper()
	d := tok.NewStreamDecoder()
	var sb strings.Builder
	held := 0
	for _, id := range ids {
		out, err := d.Add(id)
		if err != nil {
			t.Fatalf("Add(%d): %v", id, err)
		}
		if wantValid && !utf8.ValidString(out) {
			t.Fatalf("Add(%d) emitted invalid UTF-8 %q", id, out)
		}
		if d.Pending() > 0 {
			held++
		}
		sb.WriteString(out)
	}
	sb.WriteString(d.Flush())
	if d.Pending() != 0 {
		t.Fatal("Flush left bytes pending")
	}
	return sb.String(), held
}

func TestStreamDecoderCorpora(t *testing.T) {
	tok := loadFixture(t)
	heldTotal := 0
	for _, s := range allTexts(t) {
		ids := tok.EncodeSpecialSplit(s)
		got, held := streamAll(t, tok, ids, utf8.ValidString(s))
		if want, _ := tok.Decode(ids); got != want || got != s {
			t.Fatalf("streamed text differs from Decode for %.40q", s)
		}
		heldTotal += held
	}
	if heldTotal == 0 {
		t.Fatal("no multi-byte character was split across tokens: the test proves nothing")
	}
	t.Logf("held back an incomplete character %d times", heldTotal)
}

// byteIDs returns the ids of the single-byte tokens spelling s.
func byteIDs(tok *Tokenizer, s string) []int {
	ids := make([]int, len(s))
	for i := range len(s) {
		ids[i] = int(tok.bpe.byteID[s[i]])
	}
	return ids
}

func TestStreamDecoderMultibyte(t *testing.T) {
	tok := loadFixture(t)
	cases := []struct {
		text string
		want []string // output of each Add
	}{
		{"é", []string{"", "é"}},
		{"a日b", []string{"a", "", "", "日", "b"}},
		{"😀!", []string{"", "", "", "😀", "!"}},
		{"\xe2a", []string{"", "\xe2a"}},             // a lead byte cut short by ASCII
		{"\xe0\x80x", []string{"", "\xe0\x80", "x"}}, // not a valid prefix: passed through
		{"\xff", []string{"\xff"}},
		{"\x80\x80", []string{"\x80", "\x80"}},
	}
	for _, c := range cases {
		d := tok.NewStreamDecoder()
		for i, id := range byteIDs(tok, c.text) {
			got, err := d.Add(id)
			if err != nil || got != c.want[i] {
				t.Errorf("%q: Add #%d = %q, %v; want %q", c.text, i, got, err, c.want[i])
			}
		}
		if rest := d.Flush(); rest != "" {
			t.Errorf("%q: Flush = %q", c.text, rest)
		}
	}
	// An incomplete tail is returned raw by Flush.
	d := tok.NewStreamDecoder()
	for _, id := range byteIDs(tok, "ok\xf0\x9f\x98") {
		if _, err := d.Add(id); err != nil {
			t.Fatal(err)
		}
	}
	if d.Pending() != 3 {
		t.Errorf("Pending = %d, want 3", d.Pending())
	}
	if rest := d.Flush(); rest != "\xf0\x9f\x98" {
		t.Errorf("Flush = %q", rest)
	}
}

func TestStreamDecoderUnknownID(t *testing.T) {
	tok := loadFixture(t)
	d := tok.NewStreamDecoder()
	if _, err := d.Add(int(tok.bpe.byteID[0xE6])); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int{-1, tok.VocabSize(), 1 << 40} {
		_, err := d.Add(id)
		var ie *IDError
		if !errors.As(err, &ie) || ie.ID != id {
			t.Errorf("Add(%d) error = %v, want *IDError", id, err)
		}
	}
	if d.Pending() != 1 {
		t.Errorf("an unknown id changed the pending bytes: %d", d.Pending())
	}
}
