package refcache

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/klauspost/compress/zstd"
)

const testVocab = 5

func testHeader() Header {
	return Header{
		Reference: "ref", TokenizerSHA256: "tok", Ctx: 4, VocabSize: testVocab, WindowRule: "rule",
		Corpora: []Corpus{{Name: "a", SHA256: "sa", Records: 2, Windows: 2, Tokens: 4}, {Name: "empty", SHA256: "se"}, {Name: "b", SHA256: "sb", Records: 1, Windows: 1, Tokens: 1}},
	}
}

func testWindows() []*Window {
	row := func(target int, nll float64) Row {
		lp := make([]uint16, testVocab)
		for v := range lp {
			lp[v] = FromFloat64(-float64(v+1) * 0.75)
		}
		return Row{Target: target, NLL: nll, Argmax: 0, LogProbs: lp}
	}
	return []*Window{
		{Record: 0, Tokens: []int{1, 2, 3, 4}, First: 1, Rows: []Row{row(2, 0.5), row(3, 1.25), row(4, math.Pi)}},
		{Record: 1, Tokens: []int{1, 4}, First: 1, Rows: []Row{row(4, 2)}},
		{Record: 0, Tokens: []int{1, 0}, First: 1, Rows: []Row{row(0, 3)}},
	}
}

func writeCache(t *testing.T, path string) string {
	t.Helper()
	w, err := Create(path, testHeader())
	if err != nil {
		t.Fatal(err)
	}
	for _, win := range testWindows() {
		if err := w.WriteWindow(win); err != nil {
			t.Fatal(err)
		}
	}
	sum, size, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st == nil || st.Size() != size {
		t.Fatalf("size %d", size)
	}
	return sum
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.zst")
	sum := writeCache(t, path)
	if again := writeCache(t, filepath.Join(dir, "d.zst")); again != sum {
		t.Errorf("the same content gave sha256 %s and %s", sum, again)
	}
	if got, err := ReadSum(path); err != nil || got != sum {
		t.Fatalf("ReadSum %q %v", got, err)
	}
	r, err := Open(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h, want := r.Header(), testHeader()
	want.Format = Format
	if err := Check(path, &want, &h); err != nil {
		t.Fatal(err)
	}
	for i, w := range testWindows() {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("window %d: %v", i, err)
		}
		if got.Record != w.Record || got.First != w.First || !slices.Equal(got.Tokens, w.Tokens) || len(got.Rows) != len(w.Rows) {
			t.Fatalf("window %d: %+v", i, got)
		}
		for j := range w.Rows {
			g, e := got.Rows[j], w.Rows[j]
			if g.Target != e.Target || g.NLL != e.NLL || g.Argmax != e.Argmax || !slices.Equal(g.LogProbs, e.LogProbs) {
				t.Fatalf("window %d row %d: %+v, want %+v", i, j, g, e)
			}
		}
		lp := make([]float64, testVocab)
		got.Rows[0].Widen(lp)
		if lp[1] != -1.5 {
			t.Errorf("widened %v", lp)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("after the last window: %v", err)
	}
}

func TestCheck(t *testing.T) {
	base := testHeader()
	base.Format = Format
	tests := []struct {
		field  string
		change func(*Header)
	}{
		{"reference", func(h *Header) { h.Reference = "other" }},
		{"tokenizer_sha256", func(h *Header) { h.TokenizerSHA256 = "x" }},
		{"ctx", func(h *Header) { h.Ctx = 8 }},
		{"vocab_size", func(h *Header) { h.VocabSize = 6 }},
		{"window_rule", func(h *Header) { h.WindowRule = "v2" }},
		{"corpora", func(h *Header) { h.Corpora = h.Corpora[:1] }},
		{"corpora[0].name", func(h *Header) { h.Corpora[0].Name = "z" }},
		{"corpora[2].sha256", func(h *Header) { h.Corpora[2].SHA256 = "z" }},
		{"corpora[0].records", func(h *Header) { h.Corpora[0].Records = 1 }},
		{"corpora[0].windows", func(h *Header) { h.Corpora[0].Windows = 3 }},
		{"corpora[2].tokens", func(h *Header) { h.Corpora[2].Tokens = 9 }},
	}
	for _, tt := range tests {
		got := base
		got.Corpora = slices.Clone(base.Corpora)
		tt.change(&got)
		var mm *MismatchError
		if err := Check("f", &base, &got); !errors.As(err, &mm) || mm.Field != tt.field {
			t.Errorf("%s: %v", tt.field, err)
		}
	}
}

func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.zst")
	writeCache(t, path)
	data, _ := os.ReadFile(path)

	// A changed byte: the hash check names sha256.
	bad := slices.Clone(data)
	bad[len(bad)/2] ^= 0x40
	os.WriteFile(filepath.Join(dir, "bad.zst"), bad, 0o644)
	os.WriteFile(SumPath(filepath.Join(dir, "bad.zst")), []byte(mustSum(t, path)+"  bad.zst\n"), 0o644)
	var mm *MismatchError
	if _, err := Open(filepath.Join(dir, "bad.zst"), ""); !errors.As(err, &mm) || mm.Field != "sha256" {
		t.Errorf("damaged file: %v", err)
	}
	// No recorded hash.
	os.WriteFile(filepath.Join(dir, "nosum.zst"), data, 0o644)
	if _, err := Open(filepath.Join(dir, "nosum.zst"), ""); err == nil {
		t.Error("a cache without its sha256 file was accepted")
	}

	// Damaged content behind a matching hash (NewReader does not hash):
	// every truncation is an error, never a panic.
	raw := decompress(t, data)
	for cut := 0; cut < len(raw); cut += 7 {
		if err := readAll(raw[:cut]); err == nil {
			t.Fatalf("truncated at %d of %d: no error", cut, len(raw))
		}
	}
	if err := readAll(append(slices.Clone(raw), 0)); err == nil {
		t.Error("trailing byte accepted")
	}
	if err := readAll(raw); err != nil {
		t.Errorf("intact content: %v", err)
	}

	// The writer refuses windows that do not fit the header.
	w, err := Create(filepath.Join(dir, "w.zst"), testHeader())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteWindow(&Window{Tokens: []int{1, 2, 3, 4, 5}, First: 1}); err == nil {
		t.Error("window longer than ctx accepted")
	}
	if _, _, err := w.Close(); err == nil {
		t.Error("Close after an error succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "w.zst")); !os.IsNotExist(err) {
		t.Error("a failed cache file was left behind")
	}
	w, _ = Create(filepath.Join(dir, "short.zst"), testHeader())
	w.WriteWindow(testWindows()[0])
	if _, _, err := w.Close(); err == nil {
		t.Error("a cache missing windows was closed without error")
	}
}

func mustSum(t *testing.T, path string) string {
	s, err := ReadSum(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func decompress(t testing.TB, data []byte) []byte {
	zr, err := zstd.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// readAll parses decompressed cache content to the end.
func readAll(raw []byte) error {
	d, err := newDecoder("fuzz", bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		return err
	}
	for range 1 << 16 {
		if _, err := d.next(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
	return errors.New("too many windows")
}

// FuzzDecode feeds arbitrary decompressed content to the parser: it must
// return an error or windows that respect the header, never panic.
func FuzzDecode(f *testing.F) {
	dir := f.TempDir()
	path := filepath.Join(dir, "c.zst")
	w, _ := Create(path, testHeader())
	for _, win := range testWindows() {
		w.WriteWindow(win)
	}
	w.Close()
	data, _ := os.ReadFile(path)
	raw := decompress(f, data)
	f.Add(raw)
	f.Add(raw[:40])
	f.Add([]byte(magic + "\x02\x00\x00\x00{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := newDecoder("fuzz", bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			return
		}
		for range 1 << 12 {
			win, err := d.next()
			if err != nil {
				return
			}
			if len(win.Tokens) > d.h.Ctx || len(win.Rows) != len(win.Tokens)-win.First {
				t.Fatalf("window breaks the header: %d tokens, %d rows", len(win.Tokens), len(win.Rows))
			}
		}
	})
}

// FuzzReader feeds arbitrary bytes to the zstd reader and the parser.
func FuzzReader(f *testing.F) {
	dir := f.TempDir()
	path := filepath.Join(dir, "c.zst")
	w, _ := Create(path, testHeader())
	for _, win := range testWindows() {
		w.WriteWindow(win)
	}
	w.Close()
	data, _ := os.ReadFile(path)
	f.Add(data)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := NewReader("fuzz", bytes.NewReader(b))
		if err != nil {
			return
		}
		defer r.Close()
		for range 1 << 12 {
			if _, err := r.Next(); err != nil {
				return
			}
		}
	})
}
