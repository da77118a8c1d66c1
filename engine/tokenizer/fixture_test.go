package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// The tiny LFM2-MoE fixture: a byte-level BPE with the LFM2 structure and
// ids made by Hugging Face tokenizers (see its README, "Tokenizer").
var fixtureDir = filepath.Join("..", "..", "testdata", "tiny-lfm2-moe")

var (
	fixtureOnce sync.Once
	fixtureTok  *Tokenizer
	fixtureErr  error
)

func loadFixture(t testing.TB) *Tokenizer {
	t.Helper()
	fixtureOnce.Do(func() { fixtureTok, fixtureErr = Load(filepath.Join(fixtureDir, "model")) })
	if fixtureErr != nil {
		t.Fatalf("Load: %v", fixtureErr)
	}
	return fixtureTok
}

type vectorCase struct {
	Kind         string   `json:"kind"`
	Text         string   `json:"text"`
	IDs          []int    `json:"ids"`
	IDsNoSpecial []int    `json:"ids_no_special"`
	Tokens       []string `json:"tokens"`
	Decoded      string   `json:"decoded"`
}

func loadVectors(t testing.TB) []vectorCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, "reference", "tokenizer_vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Cases []vectorCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Cases) != 40 {
		t.Fatalf("tokenizer_vectors.json: %d cases, want 40", len(v.Cases))
	}
	return v.Cases
}

type corpusRecord struct {
	ID       string `json:"id"`
	Text     string `json:"text"`
	InputIDs []int  `json:"input_ids"`
}

// corpora lists the eval corpora and how their input_ids were made:
// chat/instruct = tokenizer(text, add_special_tokens=False) with special
// tokens matched; code/book = <|startoftext|> + ordinary tokens(text) +
// <|endoftext|>.
var corpora = []struct {
	name     string
	document bool
}{
	{"chat", false},
	{"instruct", false},
	{"code", true},
	{"book", true},
}

var corpusCache sync.Map // name -> []corpusRecord

func loadCorpus(t testing.TB, name string) []corpusRecord {
	t.Helper()
	if v, ok := corpusCache.Load(name); ok {
		return v.([]corpusRecord)
	}
	f, err := os.Open(filepath.Join(fixtureDir, "corpora", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []corpusRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var r corpusRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s.jsonl record %d: %v", name, len(recs), err)
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Fatalf("%s.jsonl: no records", name)
	}
	corpusCache.Store(name, recs)
	return recs
}

type promptRecord struct {
	Name         string `json:"name"`
	Kind         string `json:"kind"`
	RenderedText string `json:"rendered_text"`
	InputIDs     []int  `json:"input_ids"`
}

func loadPrompts(t testing.TB) []promptRecord {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, "reference", "prompts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Prompts []promptRecord `json:"prompts"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return p.Prompts
}

// allTexts returns every text of the fixture: vectors, prompts, corpora.
func allTexts(t testing.TB) []string {
	var texts []string
	for _, c := range loadVectors(t) {
		texts = append(texts, c.Text)
	}
	for _, p := range loadPrompts(t) {
		texts = append(texts, p.RenderedText)
	}
	for _, c := range corpora {
		for _, r := range loadCorpus(t, c.name) {
			texts = append(texts, r.Text)
		}
	}
	return texts
}
