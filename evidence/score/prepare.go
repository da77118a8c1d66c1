package score

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/lfmq/lfmq/engine/chat"
	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/tokenizer"
	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/evidence/corpus"
	"github.com/lfmq/lfmq/evidence/refcache"
	"github.com/lfmq/lfmq/format/identity"
)

// reference is what the prepare step learns of the run and its reference:
// the window length (capped by the reference's context), the vocabulary,
// the reference's identity and tokenizer, and the notes so far.
type reference struct {
	binSHA string
	ctx    int
	vocab  int
	id     evidence.Checkpoint
	tok    *tokenizer.Tokenizer
	tokSHA string
	bos    int
	hasBOS bool
	notes  []string
}

// prepare checks the options, hashes the executable and reads the
// reference's config, identity and tokenizer.
func prepare(opts Options) (*reference, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	// The executable is hashed first: it is what runs, and a missing one
	// fails the run before the work rather than after.
	binSHA, err := evidence.BinarySHA256()
	if err != nil {
		return nil, err
	}
	C := opts.Ctx
	if C == 0 {
		C = DefaultCtx
	}
	cfg, err := config.Load(opts.Reference)
	if err != nil {
		return nil, fmt.Errorf("score: reference: %w", err)
	}
	var notes []string
	if maxC := cfg.MaxPositionEmbeddings &^ 1; C > maxC {
		notes = append(notes, fmt.Sprintf("--ctx %d capped to the reference's context, %d.", C, maxC))
		C = maxC
	}
	V := cfg.VocabSize
	refID, err := evidence.IdentifyCheckpoint(ReferenceName, opts.Reference)
	if err != nil {
		return nil, err
	}
	if refID.Format == identity.FormatLfmq1 {
		// Scored, it would be labelled BF16 in every table.
		return nil, &OptionsError{"reference", fmt.Sprintf("%s is an lfmq-1 checkpoint, not the BF16 source: give the Hugging Face checkpoint it was quantized from", opts.Reference)}
	}
	tok, err := tokenizer.Load(opts.Reference)
	if err != nil {
		return nil, fmt.Errorf("score: reference: %w", err)
	}
	tokSHA, _, err := evidence.HashFile(filepath.Join(opts.Reference, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	bos, hasBOS := tok.BOS()
	return &reference{binSHA: binSHA, ctx: C, vocab: V, id: refID, tok: tok, tokSHA: tokSHA, bos: bos, hasBOS: hasBOS, notes: notes}, nil
}

// servedCandidate is what a served candidate's server reported, with the
// client that asked it.
type servedCandidate struct {
	model  *servedModel
	client *client
}

// askServers asks the server of every served candidate what it serves and
// checks that it can be scored against ref: the same vocabulary and
// tokenizer, and a context that holds a window. The result is indexed like
// opts.Candidates, nil for a candidate run here.
func askServers(ctx context.Context, opts Options, ref *reference) ([]*servedCandidate, error) {
	V, C, tokSHA := ref.vocab, ref.ctx, ref.tokSHA
	served := make([]*servedCandidate, len(opts.Candidates))
	for i, c := range opts.Candidates {
		if c.URL == "" {
			continue
		}
		base, err := ParseServerURL(c.URL)
		if err != nil {
			return nil, err
		}
		cl := newClient(base, opts.APIKey, opts.HTTPClient)
		sm, err := cl.models(ctx)
		if err != nil {
			return nil, err
		}
		bad := func(format string, args ...any) error {
			return &ModelError{Name: c.Name, URL: base, Msg: fmt.Sprintf(format, args...)}
		}
		switch {
		case sm.VocabSize != V:
			return nil, bad("the server's model %s has vocab_size %d, the reference has %d", sm.ID, sm.VocabSize, V)
		case sm.Checkpoint.TokenizerSHA256 == "":
			return nil, bad("the server's model %s reports no tokenizer.json sha256; it cannot be checked to score the reference's tokens", sm.ID)
		case sm.Checkpoint.TokenizerSHA256 != tokSHA:
			return nil, bad("the server's tokenizer.json (sha256 %s) differs from the reference's (%s); the two cannot be scored on the same tokens", sm.Checkpoint.TokenizerSHA256, tokSHA)
		case sm.MaxModelLen < C:
			return nil, bad("the server's max_model_len %d is shorter than the window length %d: restart it with --max-model-len %d or score with --ctx %d", sm.MaxModelLen, C, C, sm.MaxModelLen&^1)
		}
		served[i] = &servedCandidate{model: sm, client: cl}
	}
	return served, nil
}

// windowSet is the corpora of a run split into windows, with their
// receipts, the reference cache's header that names them, and the number
// of scored tokens.
type windowSet struct {
	corpora  []*corpus.Corpus
	windows  [][]Window
	receipts []evidence.Corpus
	header   refcache.Header
	total    int
}

// loadWindows loads the corpora, encoded by the reference's tokenizer and
// chat template, and splits their records into windows of ref's length.
func loadWindows(opts Options, ref *reference) (*windowSet, error) {
	C, V, bos, hasBOS := ref.ctx, ref.vocab, ref.bos, ref.hasBOS
	enc := corpus.NewEncoder(ref.tok, V, func() (*chat.Template, error) { return chat.Load(opts.Reference) })
	s := &windowSet{
		corpora:  make([]*corpus.Corpus, len(opts.Corpora)),
		windows:  make([][]Window, len(opts.Corpora)),
		receipts: make([]evidence.Corpus, len(opts.Corpora)),
		header:   refcache.Header{Format: refcache.Format, Reference: ref.id.Identity, TokenizerSHA256: ref.tokSHA, Ctx: C, VocabSize: V, WindowRule: evidence.WindowRule},
	}
	for i, spec := range opts.Corpora {
		c, err := corpus.Load(spec.Name, spec.Path, enc, opts.MaxRecords)
		if err != nil {
			return nil, err
		}
		s.corpora[i] = c
		targets := 0
		for ri, r := range c.Records {
			b := bos
			if !hasBOS && len(r.Tokens) > 0 {
				b = r.Tokens[0]
			}
			ws, err := Split(r.Tokens, C, b)
			if err != nil {
				return nil, err
			}
			for _, w := range ws {
				w.Record = ri
				targets += w.Targets()
				s.windows[i] = append(s.windows[i], w)
			}
		}
		if targets == 0 {
			// The file's content is at fault, not the command line: an
			// empty corpus fails like a garbage one (exit 1).
			return nil, &corpus.EmptyError{Path: spec.Path, Records: len(c.Records)}
		}
		s.total += targets
		s.receipts[i] = evidence.Corpus{Name: spec.Name, Path: spec.Path, SHA256: c.SHA256, Bytes: c.Bytes, Records: len(c.Records), Windows: len(s.windows[i]), Tokens: targets}
		s.header.Corpora = append(s.header.Corpora, refcache.Corpus{Name: spec.Name, SHA256: c.SHA256, Records: len(c.Records), Windows: len(s.windows[i]), Tokens: targets})
	}
	return s, nil
}
