package calib

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	fixture   = "../../testdata/tiny-lfm2-moe"
	tinyModel = fixture + "/model"
	vocab     = 8192
)

func encoder(t *testing.T) *Encoder {
	t.Helper()
	enc, err := NewEncoder(tinyModel, vocab, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// TestFixtureCalibration: the fixture's JSONL and token-id files give the
// same 128 windows of 256 tokens, used as given, and the same digest.
func TestFixtureCalibration(t *testing.T) {
	enc := encoder(t)
	opts := Options{Seqs: 128, Len: 512, Seed: 9}
	a, err := Load(fixture+"/calibration/calibration.jsonl", enc, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(fixture+"/calibration/calibration_ids.safetensors", enc, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Windows) != 128 || a.Tokens != 128*256 || a.MaxLen != 256 || a.Given != 128 || a.Available != 128 {
		t.Fatalf("set: %d windows, %d tokens, max %d, given %d", len(a.Windows), a.Tokens, a.MaxLen, a.Given)
	}
	if a.Digest != b.Digest {
		t.Errorf("JSONL digest %s ≠ token-id file digest %s", a.Digest, b.Digest)
	}
	if a.FileSHA256 != "0204696b8beb28d33751ba6e76fa163c8843357e8678a7b9cba65f22fa88533c" {
		t.Errorf("file sha256 %s", a.FileSHA256)
	}
	// Every window, for any seed: the same set.
	c, _ := Load(fixture+"/calibration/calibration.jsonl", enc, Options{Seqs: 128, Len: 256, Seed: 1})
	if c.Digest != a.Digest {
		t.Error("using every window gave a seed-dependent digest")
	}
	// A subset depends on the seed and keeps file order.
	s1, _ := Load(fixture+"/calibration/calibration.jsonl", enc, Options{Seqs: 16, Len: 256, Seed: 1})
	s2, _ := Load(fixture+"/calibration/calibration.jsonl", enc, Options{Seqs: 16, Len: 256, Seed: 2})
	s1b, _ := Load(fixture+"/calibration/calibration.jsonl", enc, Options{Seqs: 16, Len: 256, Seed: 1})
	if s1.Digest == s2.Digest || s1.Digest != s1b.Digest {
		t.Errorf("seeded choice: digests %s, %s, %s", s1.Digest, s2.Digest, s1b.Digest)
	}
	pos := func(w []int) int {
		return slices.IndexFunc(a.Windows, func(x []int) bool { return slices.Equal(x, w) })
	}
	for i := 1; i < len(s1.Windows); i++ {
		if pos(s1.Windows[i]) <= pos(s1.Windows[i-1]) {
			t.Fatalf("chosen windows are not in file order")
		}
	}
	if _, err := Load(fixture+"/calibration/calibration.jsonl", enc, Options{Seqs: 129, Len: 256}); !errors.As(err, new(*TooFewError)) {
		t.Errorf("129 windows of 128: err = %v", err)
	}
}

// TestTextAndChatWindows: text and chat records are encoded, joined into
// one stream and cut into BOS-led windows.
func TestTextAndChatWindows(t *testing.T) {
	enc := encoder(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "c.jsonl")
	lines := []string{
		`{"text": "In the beginning God created the heaven and the earth. And the earth was without form, and void."}`,
		`{"messages": [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hi!"}]}`,
		`{"text": "func main() { fmt.Println(\"hello, world\") }"}`,
	}
	os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	text1, _ := enc.Text("In the beginning God created the heaven and the earth. And the earth was without form, and void.")
	chat, err := enc.Chat([]byte(`[{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hi!"}]`), nil)
	if err != nil {
		t.Fatal(err)
	}
	text2, _ := enc.Text(`func main() { fmt.Println("hello, world") }`)
	stream := slices.Concat(text1, chat, text2)
	const L = 8
	set, err := Load(path, enc, Options{Seqs: len(stream) / (L - 1), Len: L})
	if err != nil {
		t.Fatal(err)
	}
	bos, _ := enc.BOS()
	for i, w := range set.Windows {
		want := append([]int{bos}, stream[i*(L-1):(i+1)*(L-1)]...)
		if !slices.Equal(w, want) {
			t.Fatalf("window %d = %v, want %v", i, w, want)
		}
	}
	if chat[0] != bos || !enc.IsControl(chat[1]) {
		t.Errorf("chat record %v does not start with the template's control tokens", chat[:4])
	}
}

// TestChatMatchesFixture: chat records of the eval corpora encode to the
// fixture's input_ids (made with Hugging Face from the rendered text).
func TestChatMatchesFixture(t *testing.T) {
	enc := encoder(t)
	f, err := os.Open(fixture + "/corpora/chat.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for n := 0; sc.Scan() && n < 30; n++ {
		var rec struct {
			ID       string          `json:"id"`
			Messages json.RawMessage `json:"messages"`
			Tools    json.RawMessage `json:"tools"`
			InputIDs []int           `json:"input_ids"`
		}
		json.Unmarshal(sc.Bytes(), &rec)
		got, err := enc.Chat(rec.Messages, rec.Tools)
		if err != nil {
			t.Fatalf("%s: %v", rec.ID, err)
		}
		if !slices.Equal(got, rec.InputIDs) {
			t.Errorf("%s: encoded chat differs from the fixture's input_ids", rec.ID)
		}
	}
}

func loadCorpora(t *testing.T, enc *Encoder) []*Corpus {
	t.Helper()
	var out []*Corpus
	for _, name := range []string{"chat", "instruct", "code", "book"} {
		c, err := LoadCorpus(name, fixture+"/corpora/"+name+".jsonl", enc)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// TestDisjointFixture: the fixture's calibration set passes the check
// against its four eval corpora (the fixture's own check found no shared
// window either).
func TestDisjointFixture(t *testing.T) {
	enc := encoder(t)
	set, err := Load(fixture+"/calibration/calibration.jsonl", enc, Options{Seqs: 128, Len: 256})
	if err != nil {
		t.Fatal(err)
	}
	d, err := CheckDisjoint(set, loadCorpora(t, enc), enc.IsControl)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Checked || d.Result != "disjoint" || len(d.Corpora) != 4 || d.EvalWindows == 0 || d.CalibWindows == 0 {
		t.Fatalf("check %+v", d)
	}
	// The fixture's own counts include windows with control tokens; ours
	// skip them, so they are at most those.
	limits := map[string]int{"chat": 18349, "instruct": 13945, "code": 20420, "book": 50938}
	for _, c := range d.Corpora {
		if c.Windows == 0 || c.Windows > limits[c.Name] {
			t.Errorf("%s: %d windows (fixture: %d with control tokens)", c.Name, c.Windows, limits[c.Name])
		}
	}
	t.Logf("eval windows %d, calibration windows %d, per corpus %+v", d.EvalWindows, d.CalibWindows, d.Corpora)
	none, err := CheckDisjoint(set, nil, enc.IsControl)
	if err != nil || none.Checked || none.Result != "not_checked" {
		t.Errorf("no corpora: %+v, %v", none, err)
	}
}

// TestOverlapRefused: a calibration set holding a stretch of an eval
// record is refused with the corpus, record and offset named; the same
// stretch of chat-template control tokens alone is not.
func TestOverlapRefused(t *testing.T) {
	enc := encoder(t)
	corpora := loadCorpora(t, enc)
	code := corpora[2].Records[3]
	dir := t.TempDir()
	path := filepath.Join(dir, "c.jsonl")
	stolen := code.IDs[100:160]
	b, _ := json.Marshal(map[string]any{"input_ids": append([]int{1, 500, 600}, stolen...)})
	os.WriteFile(path, append(b, '\n'), 0o644)
	set, err := Load(path, enc, Options{Seqs: 1, Len: 16})
	if err != nil {
		t.Fatal(err)
	}
	_, err = CheckDisjoint(set, corpora, enc.IsControl)
	var oe *OverlapError
	if !errors.As(err, &oe) {
		t.Fatalf("err = %v, want an OverlapError", err)
	}
	if oe.Corpus != "code" || oe.Record != code.ID || oe.Offset != 100 || oe.CalibWindow != 0 || oe.CalibOffset != 3 {
		t.Errorf("overlap %+v, want code/%s offset 100 at calibration offset 3", oe, code.ID)
	}
	if !strings.Contains(err.Error(), code.ID) {
		t.Errorf("message %q does not name the record", err)
	}
	// 40 control tokens shared with an eval record are no overlap.
	ctl := make([]int, 40)
	for i := range ctl {
		ctl[i] = 6
	}
	withCtl := &Corpus{Name: "ctl", Records: []Record{{ID: "x", IDs: ctl}}}
	set2 := &Set{Windows: [][]int{ctl}}
	if _, err := CheckDisjoint(set2, []*Corpus{withCtl}, enc.IsControl); err != nil {
		t.Errorf("control tokens alone refused: %v", err)
	}
}

func TestRecordErrors(t *testing.T) {
	enc := encoder(t)
	for _, c := range []struct{ name, body, want string }{
		{"not json", "{\"text\": \n", "not a JSON object"},
		{"no field", `{"id": "a", "foo": 1}`, `none of "input_ids"`},
		{"bad ids", `{"input_ids": ["a"]}`, "input_ids is not an array"},
		{"id out of range", `{"id": "r7", "input_ids": [1, 8192]}`, "outside the vocabulary"},
		{"empty", "\n\n", "no records"},
		{"empty ids", `{"input_ids": []}`, "no tokens"},
		{"byte-order mark", "\xEF\xBB\xBF{\"text\": \"a b\"}\n", "c.jsonl:1: starts with a UTF-8 byte-order mark"},
		// What the line is, not a Go type (issue 45 item 7).
		{"array line", "{\"text\": \"a b\"}\n[1, 2]\n", `c.jsonl:2: a JSON array, not an object with "input_ids", "messages" or "text"`},
		{"string line", `"a b"`, `c.jsonl:1: a JSON string, not an object`},
		{"text a number", `{"text": 5}`, `c.jsonl:1: "text" is a JSON number, expected a string`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.jsonl")
			os.WriteFile(path, []byte(c.body), 0o644)
			_, err := Load(path, enc, Options{Seqs: 1, Len: 8})
			var re *RecordError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want a RecordError with %q", err, c.want)
			}
			if msg := err.Error(); strings.Contains(msg, "Go ") || strings.Contains(msg, "struct") {
				t.Errorf("err = %v names a Go type", err)
			}
		})
	}
}
