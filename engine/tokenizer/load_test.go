package tokenizer

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoadMissing(t *testing.T) {
	_, err := Load(t.TempDir())
	var fe *FormatError
	if !errors.As(err, &fe) || !errors.Is(err, fs.ErrNotExist) || !strings.HasSuffix(fe.File, TokenizerFile) {
		t.Fatalf("Load(empty dir) = %v", err)
	}
}

// TestLoadWithoutConfig: tokenizer.json alone; BOS comes from the
// post-processor's template.
func TestLoadWithoutConfig(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(fixtureDir, "model", TokenizerFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, TokenizerFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := tok.BOS(); !ok || id != 1 || !tok.AddBOSDefault() {
		t.Errorf("BOS = %d, %v; AddBOSDefault %v", id, ok, tok.AddBOSDefault())
	}
	if _, ok := tok.EOS(); ok {
		t.Error("EOS defined without a config")
	}
}

// TestMergesAsPairs: merges written as ["a", "b"] give the same tokenizer.
func TestMergesAsPairs(t *testing.T) {
	m := fixtureJSON(t)
	model := m["model"].(map[string]any)
	merges := model["merges"].([]any)
	for i, s := range merges {
		a, b, _ := strings.Cut(s.(string), " ")
		merges[i] = []string{a, b}
	}
	tok, err := FromJSON(marshal(t, m), nil)
	if err != nil {
		t.Fatal(err)
	}
	ref := loadFixture(t)
	for _, c := range loadVectors(t) {
		if got, want := tok.EncodeSpecialSplit(c.Text), ref.EncodeSpecialSplit(c.Text); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", c.Text, got, want)
		}
	}
}

// TestGenericRegexFallback: a Split pattern other than the known one runs
// on regexp2 and still reproduces the fixture when it is equivalent.
func TestGenericRegexFallback(t *testing.T) {
	m := fixtureJSON(t)
	pre := m["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)
	// Same language, different spelling: (?:...) around the last branch.
	pre["pattern"] = map[string]any{"Regex": strings.TrimSuffix(llama3Pattern, `|\s+`) + `|(?:\s+)`}
	tok, err := FromJSON(marshal(t, m), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tok.splitter.(*regexSplitter); !ok {
		t.Fatalf("splitter is %T, want the regexp2 fallback", tok.splitter)
	}
	ref := loadFixture(t)
	for _, c := range loadVectors(t) {
		if got, want := tok.EncodeSpecialSplit(c.Text), ref.EncodeSpecialSplit(c.Text); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", c.Text, got, want)
		}
	}
}

// TestBadTokenizerJSON: each broken or unsupported file is refused with a
// *FormatError naming the file and field.
func TestBadTokenizerJSON(t *testing.T) {
	set := func(path string, v any) func(map[string]any) {
		return func(m map[string]any) {
			keys := strings.Split(path, ".")
			cur := m
			for _, k := range keys[:len(keys)-1] {
				cur = cur[k].(map[string]any)
			}
			cur[keys[len(keys)-1]] = v
		}
	}
	split := func(k string, v any) func(map[string]any) {
		return func(m map[string]any) {
			m["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)[k] = v
		}
	}
	added0 := func(k string, v any) func(map[string]any) {
		return func(m map[string]any) {
			a := m["added_tokens"].([]any)[0].(map[string]any)
			if v == nil {
				delete(a, k)
			} else {
				a[k] = v
			}
		}
	}
	vocab := func(edit func(map[string]any)) func(map[string]any) {
		return func(m map[string]any) { edit(m["model"].(map[string]any)["vocab"].(map[string]any)) }
	}
	merge0 := func(v any) func(map[string]any) {
		return func(m map[string]any) { m["model"].(map[string]any)["merges"].([]any)[0] = v }
	}
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}
	cases := []struct {
		name        string
		edit        func(map[string]any)
		field       string
		unsupported bool
	}{
		{"model type", set("model.type", "WordPiece"), "model.type", true},
		{"no model", func(m map[string]any) { delete(m, "model") }, "model", false},
		{"normalizer", set("normalizer", map[string]any{"type": "NFC"}), "normalizer", true},
		{"byte fallback", set("model.byte_fallback", true), "model.byte_fallback", true},
		{"unk token", set("model.unk_token", "<|pad|>"), "model.unk_token", true},
		{"dropout", set("model.dropout", 0.1), "model.dropout", true},
		{"subword prefix", set("model.continuing_subword_prefix", "##"), "model.continuing_subword_prefix", true},
		{"word suffix", set("model.end_of_word_suffix", "</w>"), "model.end_of_word_suffix", true},
		{"empty vocab", set("model.vocab", map[string]any{}), "model.vocab", false},
		{"no pre-tokenizer", set("pre_tokenizer", nil), "pre_tokenizer", true},
		{"whitespace pre-tokenizer", set("pre_tokenizer", map[string]any{"type": "Whitespace"}), "pre_tokenizer.type", true},
		{"three pre-tokenizers", set("pre_tokenizer", map[string]any{"type": "Sequence", "pretokenizers": []any{byteLevel, byteLevel, byteLevel}}), "pre_tokenizer.pretokenizers", true},
		{"split behavior", split("behavior", "Removed"), "pre_tokenizer.pretokenizers[0].behavior", true},
		{"split invert", split("invert", true), "pre_tokenizer.pretokenizers[0].invert", true},
		{"bad regex", split("pattern", map[string]any{"Regex": "(unclosed"}), "pre_tokenizer.pretokenizers[0].pattern", false},
		{"prefix space", set("pre_tokenizer", map[string]any{"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}), "pre_tokenizer.add_prefix_space", true},
		{"decoder", set("decoder", map[string]any{"type": "Metaspace"}), "decoder.type", true},
		{"no decoder", set("decoder", nil), "decoder", true},
		{"post-processor", set("post_processor", map[string]any{"type": "BertProcessing"}), "post_processor.type", true},
		{"merge text", merge0("Ġ"), "model.merges[0]", false},
		{"merge type", merge0(42), "model.merges[0]", false},
		{"merge triple", merge0([]any{"Ġ", "Ġ", "Ġ"}), "model.merges[0]", false},
		{"merges not a list", set("model.merges", "Ġ Ġ"), "model.merges", false},
		{"no merges", set("model.merges", nil), "model.merges", false},
		{"merge unknown token", merge0("Ġ qqqqqq"), "model.merges[0]", false},
		{"merge result unknown", merge0("q q"), "model.merges[0]", false},
		{"missing byte symbol", vocab(func(v map[string]any) { delete(v, "Ġ") }), "model.vocab", false},
		{"duplicate id", vocab(func(v map[string]any) { v["zzz"] = 300.0 }), "model.vocab", false},
		{"negative id", vocab(func(v map[string]any) { v["zzz"] = -3.0 }), "model.vocab", false},
		{"sparse ids", vocab(func(v map[string]any) { v["zzz"] = 1e9 }), "model.vocab", false},
		{"added id conflict", added0("id", 300.0), "added_tokens[0].id", false},
		{"added empty", added0("content", ""), "added_tokens[0].content", false},
		{"added missing flag", added0("normalized", nil), "added_tokens[0]", false},
		{"added missing id", added0("id", nil), "added_tokens[0].id", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := fixtureJSON(t)
			c.edit(m)
			tok, err := FromJSON(marshal(t, m), nil)
			checkFormatError(t, tok, err, TokenizerFile, c.field, c.unsupported)
		})
	}
	t.Run("invalid JSON", func(t *testing.T) {
		tok, err := FromJSON([]byte(`{"model": `), nil)
		checkFormatError(t, tok, err, TokenizerFile, "", false)
		var se *json.SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("error %v does not wrap *json.SyntaxError", err)
		}
	})
}

func TestBadConfig(t *testing.T) {
	tj, err := os.ReadFile(filepath.Join(fixtureDir, "model", TokenizerFile))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, config, field string
	}{
		{"invalid JSON", `{`, ""},
		{"unknown bos", `{"bos_token": "<s>"}`, "bos_token"},
		{"bos type", `{"bos_token": 5}`, "bos_token"},
		{"add_bos without bos", `{"add_bos_token": true, "bos_token": null}`, ""},
		{"added_tokens_decoder", `{"added_tokens_decoder": {"7": {"content": "<|im_start|>"}}}`, `added_tokens_decoder["7"]`},
		{"add_eos without eos", `{"add_eos_token": true}`, "add_eos_token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tok, err := FromJSON(tj, []byte(c.config))
			if c.name == "add_bos without bos" {
				// The template still supplies the BOS: accepted.
				if err != nil {
					t.Fatalf("FromJSON: %v", err)
				}
				return
			}
			checkFormatError(t, tok, err, ConfigFile, c.field, false)
		})
	}
	// The object form of a token field, as special_tokens_map.json writes it.
	tok, err := FromJSON(tj, []byte(`{"eos_token": {"content": "<|endoftext|>", "lstrip": false}}`))
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := tok.EOS(); !ok || id != 2 {
		t.Errorf("EOS = %d, %v; want 2", id, ok)
	}
}

// TestSpecialTokensMapDisagrees: special_tokens_map.json may fill in what
// tokenizer_config.json lacks but not contradict it.
func TestSpecialTokensMapDisagrees(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{TokenizerFile, ConfigFile} {
		b, err := os.ReadFile(filepath.Join(fixtureDir, "model", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, SpecialTokensFile), []byte(`{"eos_token": "<|endoftext|>"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := Load(dir)
	checkFormatError(t, tok, err, filepath.Join(dir, SpecialTokensFile), "eos_token", false)
}

func checkFormatError(t *testing.T, tok *Tokenizer, err error, file, field string, unsupported bool) {
	t.Helper()
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("error = %v (%T), want *FormatError; tokenizer %v", err, err, tok != nil)
	}
	if tok != nil {
		t.Error("a tokenizer was returned with the error")
	}
	if fe.File != file || fe.Field != field {
		t.Errorf("error %q: file %q field %q, want %q %q", err, fe.File, fe.Field, file, field)
	}
	if got := errors.Is(err, ErrUnsupported); got != unsupported {
		t.Errorf("error %q: errors.Is(ErrUnsupported) = %v, want %v", err, got, unsupported)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "tokenizer: ") || !strings.Contains(msg, file) || !strings.Contains(msg, field) {
		t.Errorf("message %q lacks the file or field", msg)
	}
}
