package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/dlclark/regexp2"
)

// File names read by Load.
const (
	TokenizerFile     = "tokenizer.json"
	ConfigFile        = "tokenizer_config.json"
	SpecialTokensFile = "special_tokens_map.json"
)

// maxSparseIDs bounds how far ids may run past the number of entries, so
// that a small hostile file cannot make Load allocate gigabytes.
const maxSparseIDs = 1 << 16

// Load reads a tokenizer from a model directory: tokenizer.json (required),
// tokenizer_config.json and special_tokens_map.json (optional; they supply
// the BOS, EOS and pad tokens and add_bos_token). Errors about the files'
// content are *FormatError values naming the file's path.
func Load(dir string) (*Tokenizer, error) {
	names := fileNames{
		tokenizer: filepath.Join(dir, TokenizerFile),
		config:    filepath.Join(dir, ConfigFile),
		special:   filepath.Join(dir, SpecialTokensFile),
	}
	tj, err := os.ReadFile(names.tokenizer)
	if err != nil {
		return nil, &FormatError{File: names.tokenizer, Reason: "cannot read", Err: err}
	}
	cj, err := readOptional(names.config)
	if err != nil {
		return nil, err
	}
	sj, err := readOptional(names.special)
	if err != nil {
		return nil, err
	}
	return build(tj, cj, sj, names)
}

func readOptional(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &FormatError{File: path, Reason: "cannot read", Err: err}
	}
	return b, nil
}

// FromJSON builds a tokenizer from the contents of tokenizer.json and,
// optionally (nil), tokenizer_config.json.
func FromJSON(tokenizerJSON, configJSON []byte) (*Tokenizer, error) {
	return build(tokenizerJSON, configJSON, nil, fileNames{TokenizerFile, ConfigFile, SpecialTokensFile})
}

type fileNames struct{ tokenizer, config, special string }

// JSON shapes of the files. Pointers tell absent (nil) from given.

type fileTokenizer struct {
	AddedTokens   []fileAddedToken `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
	Model         *fileModel       `json:"model"`
}

type fileAddedToken struct {
	ID         *int   `json:"id"`
	Content    string `json:"content"`
	SingleWord *bool  `json:"single_word"`
	LStrip     *bool  `json:"lstrip"`
	RStrip     *bool  `json:"rstrip"`
	Normalized *bool  `json:"normalized"`
	Special    *bool  `json:"special"`
}

type fileModel struct {
	Type                    string          `json:"type"`
	Dropout                 *float64        `json:"dropout"`
	UnkToken                *string         `json:"unk_token"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	ByteFallback            bool            `json:"byte_fallback"`
	IgnoreMerges            bool            `json:"ignore_merges"`
	Vocab                   map[string]int  `json:"vocab"`
	Merges                  json.RawMessage `json:"merges"`
}

type fileConfig struct {
	AddBOSToken        *bool                     `json:"add_bos_token"`
	AddEOSToken        *bool                     `json:"add_eos_token"`
	BOSToken           json.RawMessage           `json:"bos_token"`
	EOSToken           json.RawMessage           `json:"eos_token"`
	PadToken           json.RawMessage           `json:"pad_token"`
	AddedTokensDecoder map[string]fileAddedToken `json:"added_tokens_decoder"`
}

// typed is the common head of the tagged JSON objects (pre-tokenizers,
// post-processors, decoders).
type typed struct {
	Type string `json:"type"`
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// inFile makes *FormatError values for one file.
type inFile string

func (f inFile) fail(field, format string, args ...any) error {
	return &FormatError{File: string(f), Field: field, Reason: fmt.Sprintf(format, args...)}
}

func (f inFile) unsupported(field, format string, args ...any) error {
	return &FormatError{File: string(f), Field: field, Reason: fmt.Sprintf(format, args...), Err: ErrUnsupported}
}

func (f inFile) wrap(field, reason string, err error) error {
	return &FormatError{File: string(f), Field: field, Reason: reason, Err: err}
}

func build(tj, cj, sj []byte, names fileNames) (*Tokenizer, error) {
	tf := inFile(names.tokenizer)
	fail, unsupported := tf.fail, tf.unsupported

	var f fileTokenizer
	if err := json.Unmarshal(tj, &f); err != nil {
		return nil, tf.wrap("", "invalid JSON", err)
	}
	if !isNull(f.Normalizer) {
		return nil, unsupported("normalizer", "a normalizer is not supported (want null)")
	}
	if f.Model == nil {
		return nil, fail("model", "missing")
	}
	m := f.Model
	switch {
	case m.Type != "BPE":
		return nil, unsupported("model.type", "model type %q is not supported (want \"BPE\")", m.Type)
	case m.Dropout != nil:
		return nil, unsupported("model.dropout", "BPE dropout is not supported (want null)")
	case m.UnkToken != nil:
		return nil, unsupported("model.unk_token", "an unknown token (%q) is not supported (want null)", *m.UnkToken)
	case m.ByteFallback:
		return nil, unsupported("model.byte_fallback", "byte fallback is not supported (want false)")
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return nil, unsupported("model.continuing_subword_prefix", "a subword prefix is not supported (want null)")
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, unsupported("model.end_of_word_suffix", "an end-of-word suffix is not supported (want null)")
	case len(m.Vocab) == 0:
		return nil, fail("model.vocab", "missing or empty")
	}

	t := &Tokenizer{bos: -1, eos: -1, pad: -1}

	// Model vocabulary.
	maxID := -1
	for tok, id := range m.Vocab {
		if id < 0 {
			return nil, fail("model.vocab", "token %q has negative id %d", tok, id)
		}
		maxID = max(maxID, id)
	}
	for i, a := range f.AddedTokens {
		if a.ID == nil {
			return nil, fail(fmt.Sprintf("added_tokens[%d].id", i), "missing")
		}
		if *a.ID < 0 {
			return nil, fail(fmt.Sprintf("added_tokens[%d].id", i), "negative id %d", *a.ID)
		}
		maxID = max(maxID, *a.ID)
	}
	if maxID >= len(m.Vocab)+len(f.AddedTokens)+maxSparseIDs {
		return nil, fail("model.vocab", "ids run to %d for %d entries: too sparse", maxID, len(m.Vocab)+len(f.AddedTokens))
	}
	t.tokens = make([]string, maxID+1)
	t.known = make([]bool, maxID+1)
	t.raw = make([]string, maxID+1)
	t.toID = make(map[string]int, len(m.Vocab)+len(f.AddedTokens))
	for tok, id := range m.Vocab {
		if t.known[id] {
			a, b := t.tokens[id], tok
			if b < a {
				a, b = b, a
			}
			return nil, fail("model.vocab", "id %d is given to both %q and %q", id, a, b)
		}
		t.known[id] = true
		t.tokens[id] = tok
		t.toID[tok] = id
		if b, ok := byteLevelDecode(tok); ok {
			t.raw[id] = string(b)
		} else {
			t.raw[id] = tok // as the ByteLevel decoder does for such tokens
		}
	}

	bm := &bpeModel{ignoreMerges: m.IgnoreMerges, cache: newPieceCache()}
	for b := 0; b < 256; b++ {
		sym := string(byteToRune[b])
		id, ok := m.Vocab[sym]
		if !ok {
			return nil, fail("model.vocab", "no entry for byte 0x%02x (symbol %q): not a byte-level vocabulary", b, sym)
		}
		bm.byteID[b] = int32(id)
	}
	if m.IgnoreMerges {
		bm.rawVocab = make(map[string]int32, len(m.Vocab))
		for tok, id := range m.Vocab {
			if b, ok := byteLevelDecode(tok); ok {
				bm.rawVocab[string(b)] = int32(id)
			}
		}
	}
	merges, err := parseMerges(m.Merges, tf)
	if err != nil {
		return nil, err
	}
	bm.merges = newMergeTable(len(merges))
	for rank, mg := range merges {
		field := "model.merges[" + strconv.Itoa(rank) + "]"
		a, b := mg[0], mg[1]
		ia, oka := m.Vocab[a]
		ib, okb := m.Vocab[b]
		in, okn := m.Vocab[a+b]
		switch {
		case !oka:
			return nil, fail(field, "token %q is not in the vocabulary", a)
		case !okb:
			return nil, fail(field, "token %q is not in the vocabulary", b)
		case !okn:
			return nil, fail(field, "merged token %q is not in the vocabulary", a+b)
		}
		// A repeated pair keeps its last rank, as the Hugging Face loader's
		// map does.
		bm.merges.put(int32(ia), int32(ib), merge{rank: int32(rank), id: int32(in)})
	}
	t.bpe = bm

	// Added tokens.
	seen := map[int]int{}
	for i, a := range f.AddedTokens {
		field := fmt.Sprintf("added_tokens[%d]", i)
		id := *a.ID
		if a.Content == "" {
			return nil, fail(field+".content", "empty")
		}
		if j, dup := seen[id]; dup {
			return nil, fail(field+".id", "id %d is also added_tokens[%d]", id, j)
		}
		seen[id] = i
		if vid, ok := m.Vocab[a.Content]; ok && vid != id {
			return nil, fail(field+".id", "%q has id %d here but %d in model.vocab", a.Content, id, vid)
		}
		if t.known[id] && t.tokens[id] != a.Content {
			if _, added := t.toID[a.Content]; added {
				return nil, fail(field+".content", "%q is also another added token", a.Content)
			}
			return nil, fail(field+".id", "id %d is %q in model.vocab, not %q", id, t.tokens[id], a.Content)
		}
		if a.SingleWord == nil || a.LStrip == nil || a.RStrip == nil || a.Normalized == nil || a.Special == nil {
			return nil, fail(field, "%q lacks one of the flags single_word, lstrip, rstrip, normalized, special", a.Content)
		}
		t.added = append(t.added, AddedToken{
			ID: id, Content: a.Content, Special: *a.Special,
			SingleWord: *a.SingleWord, LStrip: *a.LStrip, RStrip: *a.RStrip, Normalized: *a.Normalized,
		})
		t.known[id] = true
		t.tokens[id] = a.Content
		t.raw[id] = a.Content
		t.toID[a.Content] = id
	}
	t.allSpecial = true
	for _, a := range t.added {
		t.allSpecial = t.allSpecial && a.Special
	}
	t.rawMatcher = newAddedMatcher(t.added, func(a *AddedToken) bool { return !a.Normalized })
	t.normMatcher = newAddedMatcher(t.added, func(a *AddedToken) bool { return a.Normalized })

	// Pre-tokenizer, post-processor, decoder.
	sp, err := parsePreTokenizer(f.PreTokenizer, tf)
	if err != nil {
		return nil, err
	}
	t.splitter = sp
	prefix, err := parsePostProcessor(f.PostProcessor, "post_processor", t, tf)
	if err != nil {
		return nil, err
	}
	if err := parseDecoder(f.Decoder, tf); err != nil {
		return nil, err
	}

	// BOS, EOS, pad and add_bos_token from tokenizer_config.json, falling
	// back to special_tokens_map.json and to the post-processor's template.
	if err := t.applyConfig(cj, sj, names, prefix); err != nil {
		return nil, err
	}
	return t, nil
}

// parseMerges reads the merges list, written as "a b" strings or as
// ["a", "b"] pairs.
func parseMerges(raw json.RawMessage, tf inFile) ([][2]string, error) {
	if isNull(raw) {
		return nil, tf.fail("model.merges", "missing")
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err == nil {
		out := make([][2]string, len(strs))
		for i, s := range strs {
			a, b, ok := strings.Cut(s, " ")
			if !ok || a == "" || b == "" || strings.Contains(b, " ") {
				return nil, tf.fail("model.merges["+strconv.Itoa(i)+"]", "%q is not two tokens separated by one space", s)
			}
			out[i] = [2]string{a, b}
		}
		return out, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err == nil {
		out := make([][2]string, len(pairs))
		for i, p := range pairs {
			if len(p) != 2 || p[0] == "" || p[1] == "" {
				return nil, tf.fail("model.merges["+strconv.Itoa(i)+"]", "%q is not a pair of tokens", p)
			}
			out[i] = [2]string{p[0], p[1]}
		}
		return out, nil
	}
	// Mixed or malformed: find the first bad entry for the message.
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, tf.fail("model.merges", "not a list")
	}
	out := make([][2]string, len(entries))
	for i, e := range entries {
		a, b, err := parseMerge(e)
		if err != nil {
			return nil, tf.fail("model.merges["+strconv.Itoa(i)+"]", "%v", err)
		}
		out[i] = [2]string{a, b}
	}
	return out, nil
}

// parseMerge reads one merges entry: "a b" or ["a", "b"].
func parseMerge(raw json.RawMessage) (string, string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		a, b, ok := strings.Cut(s, " ")
		if !ok || a == "" || b == "" || strings.Contains(b, " ") {
			return "", "", fmt.Errorf("%q is not two tokens separated by one space", s)
		}
		return a, b, nil
	}
	var pair []string
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return "", "", fmt.Errorf("%s is neither \"a b\" nor [\"a\", \"b\"]", truncate(string(raw)))
	}
	if pair[0] == "" || pair[1] == "" {
		return "", "", fmt.Errorf("empty token in %s", truncate(string(raw)))
	}
	return pair[0], pair[1], nil
}

func truncate(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// parsePreTokenizer accepts Sequence[Split(Isolated), ByteLevel(use_regex
// false)], Split(Isolated) followed by nothing is refused (no byte-level
// mapping), and ByteLevel alone (use_regex true: the GPT-2 split; false: no
// split). add_prefix_space must be false.
func parsePreTokenizer(raw json.RawMessage, tf inFile) (splitter, error) {
	const field = "pre_tokenizer"
	fail, unsupported := tf.fail, tf.unsupported
	if isNull(raw) {
		return nil, unsupported(field, "null: a byte-level pre-tokenizer is required")
	}
	var head typed
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fail(field, "%v", err)
	}
	switch head.Type {
	case "ByteLevel":
		useRegex, err := parseByteLevel(raw, field, tf)
		if err != nil {
			return nil, err
		}
		if useRegex {
			rs, err := newRegexSplitter(gpt2Pattern)
			if err != nil {
				return nil, tf.wrap(field, "GPT-2 pattern", err)
			}
			return rs, nil
		}
		return wholeSplitter{}, nil
	case "Sequence":
		var seq struct {
			PreTokenizers []json.RawMessage `json:"pretokenizers"`
		}
		if err := json.Unmarshal(raw, &seq); err != nil {
			return nil, fail(field, "%v", err)
		}
		if len(seq.PreTokenizers) != 2 {
			return nil, unsupported(field+".pretokenizers", "%d entries: only [Split, ByteLevel] is supported", len(seq.PreTokenizers))
		}
		var h0, h1 typed
		_ = json.Unmarshal(seq.PreTokenizers[0], &h0)
		_ = json.Unmarshal(seq.PreTokenizers[1], &h1)
		if h0.Type != "Split" || h1.Type != "ByteLevel" {
			return nil, unsupported(field+".pretokenizers", "[%s, %s]: only [Split, ByteLevel] is supported", h0.Type, h1.Type)
		}
		useRegex, err := parseByteLevel(seq.PreTokenizers[1], field+".pretokenizers[1]", tf)
		if err != nil {
			return nil, err
		}
		if useRegex {
			return nil, unsupported(field+".pretokenizers[1].use_regex", "true after a Split is not supported (want false)")
		}
		return parseSplit(seq.PreTokenizers[0], field+".pretokenizers[0]", tf)
	}
	return nil, unsupported(field+".type", "%q is not supported (want Sequence[Split, ByteLevel] or ByteLevel)", head.Type)
}

func parseByteLevel(raw json.RawMessage, field string, tf inFile) (useRegex bool, err error) {
	fail, unsupported := tf.fail, tf.unsupported
	// The library's defaults: add_prefix_space true, use_regex true.
	bl := struct {
		AddPrefixSpace *bool `json:"add_prefix_space"`
		UseRegex       *bool `json:"use_regex"`
	}{}
	if err := json.Unmarshal(raw, &bl); err != nil {
		return false, fail(field, "%v", err)
	}
	if bl.AddPrefixSpace == nil || *bl.AddPrefixSpace {
		return false, unsupported(field+".add_prefix_space", "true (or absent) is not supported (want false)")
	}
	return bl.UseRegex == nil || *bl.UseRegex, nil
}

func parseSplit(raw json.RawMessage, field string, tf inFile) (splitter, error) {
	fail, unsupported := tf.fail, tf.unsupported
	var sp struct {
		Pattern *struct {
			Regex  *string `json:"Regex"`
			String *string `json:"String"`
		} `json:"pattern"`
		Behavior string `json:"behavior"`
		Invert   bool   `json:"invert"`
	}
	if err := json.Unmarshal(raw, &sp); err != nil {
		return nil, fail(field, "%v", err)
	}
	if sp.Behavior != "Isolated" {
		return nil, unsupported(field+".behavior", "%q is not supported (want \"Isolated\")", sp.Behavior)
	}
	if sp.Invert {
		return nil, unsupported(field+".invert", "true is not supported (want false)")
	}
	var pattern string
	switch {
	case sp.Pattern == nil:
		return nil, fail(field+".pattern", "missing")
	case sp.Pattern.Regex != nil:
		pattern = *sp.Pattern.Regex
	case sp.Pattern.String != nil:
		if *sp.Pattern.String == "" {
			return nil, fail(field+".pattern.String", "empty")
		}
		pattern = regexp2.Escape(*sp.Pattern.String)
	default:
		return nil, fail(field+".pattern", "neither Regex nor String")
	}
	if pattern == llama3Pattern {
		return &llama3Splitter{onig: true}, nil
	}
	rs, err := newRegexSplitter(pattern)
	if err != nil {
		return nil, tf.wrap(field+".pattern", "invalid regular expression", err)
	}
	return rs, nil
}

// parsePostProcessor accepts null, ByteLevel, TemplateProcessing and
// Sequence of those; it returns the ids that the single-sequence template
// puts before the text (the BOS a post-processor adds).
func parsePostProcessor(raw json.RawMessage, field string, t *Tokenizer, tf inFile) ([]int, error) {
	fail, unsupported := tf.fail, tf.unsupported
	if isNull(raw) {
		return nil, nil
	}
	var head typed
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fail(field, "%v", err)
	}
	switch head.Type {
	case "ByteLevel":
		return nil, nil
	case "Sequence":
		var seq struct {
			Processors []json.RawMessage `json:"processors"`
		}
		if err := json.Unmarshal(raw, &seq); err != nil {
			return nil, fail(field, "%v", err)
		}
		var prefix []int
		for i, p := range seq.Processors {
			pre, err := parsePostProcessor(p, fmt.Sprintf("%s.processors[%d]", field, i), t, tf)
			if err != nil {
				return nil, err
			}
			prefix = append(prefix, pre...)
		}
		return prefix, nil
	case "TemplateProcessing":
		var tp struct {
			Single []struct {
				SpecialToken *struct {
					ID string `json:"id"`
				} `json:"SpecialToken"`
				Sequence *struct {
					ID string `json:"id"`
				} `json:"Sequence"`
			} `json:"single"`
			SpecialTokens map[string]struct {
				IDs []int `json:"ids"`
			} `json:"special_tokens"`
		}
		if err := json.Unmarshal(raw, &tp); err != nil {
			return nil, fail(field, "%v", err)
		}
		var prefix []int
		for i, it := range tp.Single {
			f := fmt.Sprintf("%s.single[%d]", field, i)
			switch {
			case it.Sequence != nil:
				return prefix, nil
			case it.SpecialToken != nil:
				st, ok := tp.SpecialTokens[it.SpecialToken.ID]
				if !ok {
					return nil, fail(f, "special token %q is not in special_tokens", it.SpecialToken.ID)
				}
				for _, id := range st.IDs {
					if _, ok := t.Token(id); !ok {
						return nil, fail(f, "special token %q has unknown id %d", it.SpecialToken.ID, id)
					}
				}
				prefix = append(prefix, st.IDs...)
			default:
				return nil, fail(f, "neither SpecialToken nor Sequence")
			}
		}
		return nil, fail(field+".single", "has no Sequence")
	}
	return nil, unsupported(field+".type", "%q is not supported (want TemplateProcessing, ByteLevel, Sequence or null)", head.Type)
}

// parseDecoder requires the ByteLevel decoder that Decode implements.
func parseDecoder(raw json.RawMessage, tf inFile) error {
	fail, unsupported := tf.fail, tf.unsupported
	if isNull(raw) {
		return unsupported("decoder", "null: a ByteLevel decoder is required")
	}
	var head typed
	if err := json.Unmarshal(raw, &head); err != nil {
		return fail("decoder", "%v", err)
	}
	if head.Type != "ByteLevel" {
		return unsupported("decoder.type", "%q is not supported (want \"ByteLevel\")", head.Type)
	}
	return nil
}

// tokenField reads a special-token field of tokenizer_config.json or
// special_tokens_map.json: null, a string, or an object with "content".
func tokenField(raw json.RawMessage) (string, bool, error) {
	if isNull(raw) {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, true, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", false, errors.New("want a string, an object with \"content\", or null")
	}
	return *obj.Content, true, nil
}

func (t *Tokenizer) applyConfig(cj, sj []byte, names fileNames, prefix []int) error {
	var cfg, smap fileConfig
	if cj != nil {
		if err := json.Unmarshal(cj, &cfg); err != nil {
			return &FormatError{File: names.config, Reason: "invalid JSON", Err: err}
		}
	}
	if sj != nil {
		if err := json.Unmarshal(sj, &smap); err != nil {
			return &FormatError{File: names.special, Reason: "invalid JSON", Err: err}
		}
	}
	// added_tokens_decoder must agree with tokenizer.json.
	keys := make([]string, 0, len(cfg.AddedTokensDecoder))
	for k := range cfg.AddedTokensDecoder {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		field := fmt.Sprintf("added_tokens_decoder[%q]", k)
		id, err := strconv.Atoi(k)
		if err != nil {
			return &FormatError{File: names.config, Field: field, Reason: "key is not an id"}
		}
		if tok, ok := t.Token(id); !ok || tok != cfg.AddedTokensDecoder[k].Content {
			return &FormatError{File: names.config, Field: field,
				Reason: fmt.Sprintf("%q disagrees with %s (id %d is %q)", cfg.AddedTokensDecoder[k].Content, TokenizerFile, id, tok)}
		}
	}
	resolve := func(name string, fromCfg, fromMap json.RawMessage) (int, error) {
		c, okc, err := tokenField(fromCfg)
		if err != nil {
			return -1, &FormatError{File: names.config, Field: name, Reason: err.Error()}
		}
		s, oks, err := tokenField(fromMap)
		if err != nil {
			return -1, &FormatError{File: names.special, Field: name, Reason: err.Error()}
		}
		file := names.config
		switch {
		case okc && oks && c != s:
			return -1, &FormatError{File: names.special, Field: name,
				Reason: fmt.Sprintf("%q disagrees with %s (%q)", s, names.config, c)}
		case !okc && oks:
			c, okc, file = s, true, names.special
		}
		if !okc {
			return -1, nil
		}
		id, ok := t.TokenID(c)
		if !ok {
			return -1, &FormatError{File: file, Field: name, Reason: fmt.Sprintf("%q is not a token of %s", c, TokenizerFile)}
		}
		return id, nil
	}
	var err error
	if t.bos, err = resolve("bos_token", cfg.BOSToken, smap.BOSToken); err != nil {
		return err
	}
	if t.eos, err = resolve("eos_token", cfg.EOSToken, smap.EOSToken); err != nil {
		return err
	}
	if t.pad, err = resolve("pad_token", cfg.PadToken, smap.PadToken); err != nil {
		return err
	}
	templateBOS := len(prefix) == 1
	if t.bos < 0 && templateBOS {
		t.bos = prefix[0]
	}
	switch {
	case cfg.AddBOSToken != nil:
		t.addBOS = *cfg.AddBOSToken
	default:
		t.addBOS = templateBOS && prefix[0] == t.bos
	}
	if t.addBOS && t.bos < 0 {
		return &FormatError{File: names.config, Field: "add_bos_token", Reason: "true but no bos_token is defined"}
	}
	if cfg.AddEOSToken != nil {
		t.addEOS = *cfg.AddEOSToken
	}
	if t.addEOS && t.eos < 0 {
		return &FormatError{File: names.config, Field: "add_eos_token", Reason: "true but no eos_token is defined"}
	}
	return nil
}
