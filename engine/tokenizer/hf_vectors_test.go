package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// testdata/hf_vectors.json holds ids made by Hugging Face tokenizers 0.23.2
// for edge cases (see testdata/gen_hf_vectors.js).
type hfVectors struct {
	Plain []struct {
		Text        string `json:"text"`
		IDs         []int  `json:"ids"`
		IDsOrdinary []int  `json:"ids_ordinary"`
	} `json:"plain"`
	Flags struct {
		AddedTokens []map[string]any `json:"added_tokens"`
		Cases       []struct {
			Text string `json:"text"`
			IDs  []int  `json:"ids"`
		} `json:"cases"`
	} `json:"flags"`
	IgnoreMerges struct {
		VocabAdded map[string]int `json:"vocab_added"`
		Cases      []struct {
			Text      string `json:"text"`
			IDs       []int  `json:"ids"`
			IDsMerged []int  `json:"ids_merged"`
		} `json:"cases"`
	} `json:"ignore_merges"`
}

func loadHFVectors(t testing.TB) hfVectors {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "hf_vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v hfVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// fixtureJSON returns the fixture's tokenizer.json as a generic value, to
// be edited by tests.
func fixtureJSON(t testing.TB) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, "model", TokenizerFile))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func marshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHFVectorsPlain(t *testing.T) {
	tok := loadFixture(t)
	for _, c := range loadHFVectors(t).Plain {
		if got := tok.Encode(c.Text, EncodeOptions{MatchSpecial: true}); !slices.Equal(got, c.IDs) {
			t.Errorf("Encode(%q, MatchSpecial): %s", c.Text, firstDiff(got, c.IDs))
		}
		if got := tok.EncodeOrdinary(c.Text); !slices.Equal(got, c.IDsOrdinary) {
			t.Errorf("EncodeOrdinary(%q): %s", c.Text, firstDiff(got, c.IDsOrdinary))
		}
		if dec, err := tok.Decode(c.IDs); err != nil || dec != c.Text {
			t.Errorf("Decode(ids of %q) = %q, %v", c.Text, dec, err)
		}
	}
}

// TestHFVectorsAddedFlags checks lstrip, rstrip, single_word, normalized
// (matched in a second pass) and overlapping added tokens.
func TestHFVectorsAddedFlags(t *testing.T) {
	v := loadHFVectors(t)
	m := fixtureJSON(t)
	added := m["added_tokens"].([]any)
	for _, a := range v.Flags.AddedTokens {
		added = append(added, a)
	}
	m["added_tokens"] = added
	tok, err := FromJSON(marshal(t, m), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range v.Flags.Cases {
		if got := tok.Encode(c.Text, EncodeOptions{MatchSpecial: true}); !slices.Equal(got, c.IDs) {
			t.Errorf("Encode(%q): got %v, want %v", c.Text, got, c.IDs)
		}
	}
}

func TestHFVectorsIgnoreMerges(t *testing.T) {
	v := loadHFVectors(t)
	for _, ignore := range []bool{true, false} {
		m := fixtureJSON(t)
		model := m["model"].(map[string]any)
		vocab := model["vocab"].(map[string]any)
		for k, id := range v.IgnoreMerges.VocabAdded {
			vocab[k] = id
		}
		model["ignore_merges"] = ignore
		tok, err := FromJSON(marshal(t, m), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range v.IgnoreMerges.Cases {
			want := c.IDsMerged
			if ignore {
				want = c.IDs
			}
			if got := tok.EncodeOrdinary(c.Text); !slices.Equal(got, want) {
				t.Errorf("ignore_merges %v: Encode(%q) = %v, want %v", ignore, c.Text, got, want)
			}
		}
	}
}
