package tokenizer

import (
	"sort"
)

// Tokenizer encodes text to token ids and decodes ids to text. It is
// immutable after Load or FromJSON and safe for concurrent use.
type Tokenizer struct {
	tokens []string // id -> token as written in tokenizer.json (byte-level form); added tokens: content
	raw    []string // id -> the bytes the token decodes to
	known  []bool   // id -> whether the id is assigned
	toID   map[string]int

	bpe      *bpeModel
	splitter splitter

	added       []AddedToken
	rawMatcher  *addedMatcher // added tokens with Normalized false
	normMatcher *addedMatcher // added tokens with Normalized true
	allSpecial  bool          // every added token is special

	bos, eos, pad  int // -1 when not defined
	addBOS, addEOS bool
}

// EncodeOptions selects how Encode treats the text.
type EncodeOptions struct {
	// AddBOS prepends the BOS token unless the encoding already starts
	// with it (a text that begins with the BOS string and is encoded with
	// MatchSpecial). Nothing is prepended when the tokenizer has no BOS.
	AddBOS bool
	// MatchSpecial makes the strings of special added tokens in the text
	// become their ids, as Hugging Face tokenizers does by default. When
	// false, they are encoded as ordinary text (Hugging Face's
	// split_special_tokens); added tokens that are not special are matched
	// either way.
	MatchSpecial bool
}

// Encode returns the token ids of text.
func (t *Tokenizer) Encode(text string, opts EncodeOptions) []int {
	ids := make([]int, 0, len(text)/3+2)
	if opts.AddBOS && t.bos >= 0 {
		ids = append(ids, t.bos)
	}
	ids = t.appendEncoded(ids, text, opts.MatchSpecial)
	if opts.AddBOS && t.bos >= 0 && len(ids) > 1 && ids[1] == t.bos {
		ids = ids[1:]
	}
	return ids
}

// EncodeOrdinary encodes text as ordinary text: no BOS, and special-token
// strings are encoded like any other text. This is how scoring corpora and
// request-supplied strings are encoded.
func (t *Tokenizer) EncodeOrdinary(text string) []int {
	return t.Encode(text, EncodeOptions{})
}

// EncodeSpecialSplit encodes the output of a chat template: the text is
// split at special-token strings, which become their ids, and the text
// between them is encoded as ordinary text; no BOS is added (the template
// emits it). It equals Encode with MatchSpecial, and, when no added token
// is single_word, encoding each segment of SplitSpecial (Token: its ID;
// otherwise EncodeOrdinary of its Text).
func (t *Tokenizer) EncodeSpecialSplit(text string) []int {
	return t.Encode(text, EncodeOptions{MatchSpecial: true})
}

// SplitSpecial splits text at the added tokens it contains, matched as
// Encode with MatchSpecial matches them. A chat renderer that replaced
// special-token strings in request-supplied text by placeholders can
// restore them in each ordinary segment and encode that with
// EncodeOrdinary, so that only template-emitted special tokens become ids.
func (t *Tokenizer) SplitSpecial(text string) []Segment {
	return t.segments(nil, text, true)
}

// segments applies the two added-token passes of Hugging Face: tokens with
// Normalized false on the raw text, then tokens with Normalized true on the
// ordinary stretches left (there is no normalizer, so they see the same
// text).
func (t *Tokenizer) segments(dst []Segment, text string, matchSpecial bool) []Segment {
	if t.normMatcher == nil {
		return splitAdded(dst, text, t.rawMatcher, t.added, matchSpecial)
	}
	first := splitAdded(nil, text, t.rawMatcher, t.added, matchSpecial)
	for _, s := range first {
		if s.Token {
			dst = append(dst, s)
			continue
		}
		dst = splitAdded(dst, s.Text, t.normMatcher, t.added, matchSpecial)
	}
	return dst
}

func (t *Tokenizer) appendEncoded(dst []int, text string, matchSpecial bool) []int {
	// Without special matching, special tokens are skipped where found, so
	// when all added tokens are special the text is one ordinary stretch.
	if (t.rawMatcher == nil && t.normMatcher == nil) || (!matchSpecial && t.allSpecial) {
		return t.appendOrdinary(dst, text)
	}
	var buf [8]Segment
	for _, s := range t.segments(buf[:0], text, matchSpecial) {
		if s.Token {
			dst = append(dst, s.ID)
		} else {
			dst = t.appendOrdinary(dst, s.Text)
		}
	}
	return dst
}

// appendOrdinary pre-tokenizes text and appends the BPE ids of each piece.
func (t *Tokenizer) appendOrdinary(dst []int, text string) []int {
	if h, ok := t.splitter.(*llama3Splitter); ok {
		for i := 0; i < len(text); {
			j := h.next(text, i)
			dst = t.bpe.encode(dst, text[i:j])
			i = j
		}
		return dst
	}
	ends := t.splitter.split(make([]int, 0, len(text)/4+1), text)
	prev := 0
	for _, e := range ends {
		dst = t.bpe.encode(dst, text[prev:e])
		prev = e
	}
	return dst
}

// Decode returns the bytes that ids stand for: byte-level tokens are mapped
// back to their bytes and added tokens to their content, with no clean-up
// of spaces. The result is not necessarily valid UTF-8 (ids may end inside
// a character); StreamDecoder holds such tails back. An id outside the
// vocabulary is an *IDError. (Hugging Face passes added tokens through the
// ByteLevel decoder too, which agrees for ASCII content such as LFM2's
// control tokens, and replaces invalid UTF-8 by U+FFFD.)
func (t *Tokenizer) Decode(ids []int) (string, error) {
	n := 0
	for i, id := range ids {
		if id < 0 || id >= len(t.known) || !t.known[id] {
			return "", &IDError{ID: id, Index: i, VocabSize: len(t.known)}
		}
		n += len(t.raw[id])
	}
	b := make([]byte, 0, n)
	for _, id := range ids {
		b = append(b, t.raw[id]...)
	}
	return string(b), nil
}

// TokenID returns the id of a token given as written in tokenizer.json: an
// added token's content or a vocabulary entry in byte-level form (a space
// is 'Ġ'). Added tokens take precedence, as in Hugging Face's token_to_id.
func (t *Tokenizer) TokenID(token string) (int, bool) {
	id, ok := t.toID[token]
	return id, ok
}

// Token returns the token of id as written in tokenizer.json (byte-level
// form for vocabulary entries, content for added tokens).
func (t *Tokenizer) Token(id int) (string, bool) {
	if id < 0 || id >= len(t.known) || !t.known[id] {
		return "", false
	}
	return t.tokens[id], true
}

// TokenBytes returns the bytes that id decodes to.
func (t *Tokenizer) TokenBytes(id int) (string, bool) {
	if id < 0 || id >= len(t.known) || !t.known[id] {
		return "", false
	}
	return t.raw[id], true
}

// VocabSize returns the size of the id range: one more than the largest id
// of the vocabulary and the added tokens. The model's embedding table may
// be larger (padded).
func (t *Tokenizer) VocabSize() int { return len(t.known) }

// BOS returns the beginning-of-sequence token: tokenizer_config.json's
// bos_token, else special_tokens_map.json's, else the token that the
// post-processor's template puts before the text.
func (t *Tokenizer) BOS() (int, bool) { return t.bos, t.bos >= 0 }

// EOS returns the end-of-sequence token named by tokenizer_config.json's
// eos_token (or special_tokens_map.json's). For LFM2 chat models this is
// <|im_end|>; the engine's stop set is wider (docs/model.md §5).
func (t *Tokenizer) EOS() (int, bool) { return t.eos, t.eos >= 0 }

// Pad returns the padding token named by pad_token.
func (t *Tokenizer) Pad() (int, bool) { return t.pad, t.pad >= 0 }

// AddBOSDefault reports whether the files ask for a BOS before encoded
// text (add_bos_token, else whether the post-processor prepends the BOS).
// Encode adds it only when asked by EncodeOptions.AddBOS.
func (t *Tokenizer) AddBOSDefault() bool { return t.addBOS }

// AddEOSDefault reports tokenizer_config.json's add_eos_token. Encode
// never appends EOS; a caller that honours the flag appends EOS itself.
func (t *Tokenizer) AddEOSDefault() bool { return t.addEOS }

// AddedTokens returns all added tokens, ordered by id.
func (t *Tokenizer) AddedTokens() []AddedToken {
	out := append([]AddedToken(nil), t.added...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// SpecialTokens returns the added tokens marked special, ordered by id.
func (t *Tokenizer) SpecialTokens() []AddedToken {
	var out []AddedToken
	for _, a := range t.AddedTokens() {
		if a.Special {
			out = append(out, a)
		}
	}
	return out
}
