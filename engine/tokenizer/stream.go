package tokenizer

import "unicode/utf8"

// StreamDecoder decodes generated ids one at a time into text that never
// ends inside a multi-byte UTF-8 sequence: an incomplete sequence at the
// end is held back until the ids that complete it arrive. Bytes that can
// never form a character (invalid UTF-8) are passed through unchanged, so
// the concatenation of everything Add and Flush return equals Decode of
// all the ids. A StreamDecoder is not safe for concurrent use; use one per
// sequence.
type StreamDecoder struct {
	t       *Tokenizer
	pending []byte
}

// NewStreamDecoder returns a StreamDecoder with nothing held back.
func (t *Tokenizer) NewStreamDecoder() *StreamDecoder {
	return &StreamDecoder{t: t}
}

// Add decodes one id and returns the text that is now complete, possibly
// empty. An unknown id is an *IDError and leaves the decoder unchanged.
func (d *StreamDecoder) Add(id int) (string, error) {
	b, ok := d.t.TokenBytes(id)
	if !ok {
		return "", &IDError{ID: id, VocabSize: d.t.VocabSize()}
	}
	d.pending = append(d.pending, b...)
	cut := incompleteTail(d.pending)
	out := string(d.pending[:cut])
	d.pending = d.pending[:copy(d.pending, d.pending[cut:])]
	return out, nil
}

// Flush returns whatever is held back (an incomplete UTF-8 sequence, as raw
// bytes) and empties the decoder, e.g. at the end of a sequence.
func (d *StreamDecoder) Flush() string {
	out := string(d.pending)
	d.pending = d.pending[:0]
	return out
}

// Pending reports how many bytes are held back.
func (d *StreamDecoder) Pending() int { return len(d.pending) }

// incompleteTail returns where the trailing incomplete UTF-8 sequence of p
// starts: a lead byte followed by fewer continuation bytes than it needs,
// all of them valid so far; len(p) if p does not end in one.
func incompleteTail(p []byte) int {
	for k := len(p) - 1; k >= 0 && k >= len(p)-utf8.UTFMax+1; k-- {
		b := p[k]
		if b < utf8.RuneSelf {
			break
		}
		if b >= 0xC0 { // a lead byte (or an invalid one, which FullRune calls full)
			if !utf8.FullRune(p[k:]) {
				return k
			}
			break
		}
	}
	return len(p)
}
