package model_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
)

// TestRewind: a sequence that ran draft tokens and was rewound to any
// length continues bit-identically to one that never saw the rejected
// tokens (speculation's rollback), whether the draft went through one
// Forward call or several steps.
func TestRewind(t *testing.T) {
	checkRewind(t, tiny(t), tiny(t), []int{0, 1, 2, 3, 4, 5, 6})
}

// checkRewind runs a 6-token draft on m with conv snapshots, rewinds to
// keep of them for each keep, and checks the next tokens' logits against
// ref's cold run of the kept sequence, bit for bit.
func checkRewind(t *testing.T, m, ref *model.Model, keeps []int) {
	V := m.Config.VocabSize
	p := prompts(t)[5]
	prompt, draft := p.InputIDs[:40], []int{500, 501, 502, 503, 504, 505}
	next := []int{700, 701, 702}
	for _, keep := range keeps {
		t.Run(fmt.Sprintf("keep %d", keep), func(t *testing.T) {
			want := append(append(append([]int(nil), prompt...), draft[:keep]...), next...)
			_, full := forward(t, ref, want, model.ForwardOptions{Logits: model.AllLogits})

			s, _ := forward(t, m, prompt, model.ForwardOptions{})
			lens := make([]int, len(draft)+1)
			for i := range lens {
				lens[i] = len(prompt) + i
			}
			if _, err := m.Forward(context.Background(), []*model.Sequence{s}, [][]int{draft}, model.ForwardOptions{Logits: model.AllLogits, ConvSnapshots: [][]int{lens}, ChunkSize: 4}); err != nil {
				t.Fatal(err)
			}
			n := len(prompt) + keep
			conv, ok := s.ConvAt(n)
			if !ok {
				t.Fatalf("no conv state after %d tokens", n)
			}
			if err := s.Rewind(n, conv); err != nil {
				t.Fatal(err)
			}
			for i, id := range next {
				got := step(t, m, s, id)
				requireSame(t, fmt.Sprintf("token %d after the rewind", i), got, full[(n+i)*V:(n+i+1)*V])
			}
		})
	}
}

// blockSpans copies the first blocks 64-token blocks of src as spans, each
// with the conv snapshot at its end (src must hold snapshots at 64, 128, …),
// as the prefix cache stores them.
func blockSpans(t *testing.T, src *model.Sequence, blocks int) []*kv.Span {
	t.Helper()
	var spans []*kv.Span
	for b := range blocks {
		conv, ok := src.ConvAt(64 * (b + 1))
		if !ok {
			t.Fatalf("no snapshot at %d", 64*(b+1))
		}
		sp, err := src.CopySpan(64*b, 64*(b+1), conv)
		if err != nil {
			t.Fatal(err)
		}
		spans = append(spans, sp)
	}
	return spans
}

// TestSpans: a sequence extended with spans copied from another (a prefix
// cache's blocks, boundaries inside prefill chunks) continues exactly as
// a cold prefill of the whole prompt.
func TestSpans(t *testing.T) {
	m := tiny(t)
	V := m.Config.VocabSize
	ids := prompts(t)[5].InputIDs // 314 tokens
	_, full := forward(t, m, ids, model.ForwardOptions{Logits: model.AllLogits})

	src := m.NewSequence()
	if _, err := m.Forward(context.Background(), []*model.Sequence{src}, [][]int{ids[:200]}, model.ForwardOptions{ConvSnapshots: [][]int{{64, 128, 192}}, ChunkSize: 100}); err != nil {
		t.Fatal(err)
	}
	spans := blockSpans(t, src, 3)
	for _, blocks := range []int{1, 2, 3} {
		dst := m.NewSequence()
		for _, sp := range spans[:blocks] {
			if err := dst.Extend(sp); err != nil {
				t.Fatal(err)
			}
		}
		n := 64 * blocks
		out, err := m.Forward(context.Background(), []*model.Sequence{dst}, [][]int{ids[n:]}, model.ForwardOptions{Logits: model.AllLogits})
		if err != nil {
			t.Fatal(err)
		}
		requireSame(t, fmt.Sprintf("after %d cached blocks", blocks), out[0], full[n*V:])
	}
	// Misuse is refused.
	var ie *model.InputError
	if err := m.NewSequence().Extend(spans[1]); !errors.As(err, &ie) {
		t.Errorf("a span that does not start at the sequence's length: %v", err)
	}
	if err := src.Rewind(100, nil); !errors.As(err, &ie) {
		t.Errorf("rewind without a conv state: %v", err)
	}
	if _, err := m.Forward(context.Background(), []*model.Sequence{m.NewSequence()}, [][]int{{1, 2}}, model.ForwardOptions{ConvSnapshots: [][]int{{3}}}); !errors.As(err, &ie) {
		t.Errorf("a snapshot past the call's tokens: %v", err)
	}
}

// TestSpanRoundTrip: a span survives MarshalBinary/UnmarshalSpan bit for
// bit (a sequence extended with the copy continues as the original);
// corrupt or foreign bytes are refused with an error.
func TestSpanRoundTrip(t *testing.T) { checkSpanRoundTrip(t, tiny(t)) }

// checkSpanRoundTrip is TestSpanRoundTrip on m (of any KV format).
func checkSpanRoundTrip(t *testing.T, m *model.Model) {
	V := m.Config.VocabSize
	ids := prompts(t)[5].InputIDs
	_, full := forward(t, m, ids, model.ForwardOptions{Logits: model.AllLogits})
	src := m.NewSequence()
	if _, err := m.Forward(context.Background(), []*model.Sequence{src}, [][]int{ids[:64]}, model.ForwardOptions{Logits: model.NoLogits}); err != nil {
		t.Fatal(err)
	}
	conv, _ := src.ConvAt(64)
	sp, _ := src.CopySpan(0, 64, conv)
	data, err := sp.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	back, err := m.UnmarshalSpan(data)
	if err != nil {
		t.Fatal(err)
	}
	if back.Bytes() != sp.Bytes() || back.Start() != 0 || back.End() != 64 {
		t.Fatalf("round trip: %d bytes [%d, %d)", back.Bytes(), back.Start(), back.End())
	}
	dst := m.NewSequence()
	if err := dst.Extend(back); err != nil {
		t.Fatal(err)
	}
	out, err := m.Forward(context.Background(), []*model.Sequence{dst}, [][]int{ids[64:]}, model.ForwardOptions{Logits: model.AllLogits})
	if err != nil {
		t.Fatal(err)
	}
	requireSame(t, "after a round-tripped span", out[0], full[64*V:])
	for _, bad := range [][]byte{nil, data[:10], data[:len(data)-4], append(append([]byte(nil), data...), 0), []byte("lfmq-span-1\x00xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")} {
		if _, err := m.UnmarshalSpan(bad); err == nil {
			t.Errorf("%d corrupt bytes accepted", len(bad))
		}
	}
}

// FuzzUnmarshalSpan: arbitrary bytes never panic.
func FuzzUnmarshalSpan(f *testing.F) {
	m := tiny(f)
	src := m.NewSequence()
	m.Forward(context.Background(), []*model.Sequence{src}, [][]int{{1, 2, 3, 4}}, model.ForwardOptions{Logits: model.NoLogits})
	conv, _ := src.ConvAt(4)
	sp, _ := src.CopySpan(0, 4, conv)
	data, _ := sp.MarshalBinary()
	f.Add(data)
	f.Fuzz(func(t *testing.T, b []byte) {
		if sp, err := m.UnmarshalSpan(b); err == nil && sp.End() <= sp.Start() {
			t.Fatal("accepted an empty span")
		}
	})
}

// TestRewindSharedPages: a rewind over pages the sequence shares with a
// clone (speculation after Clone, or over a cached prefix) gives back the
// pages past the kept length, so a bounded pool counts them free once the
// clone lets go; the clone keeps its own tokens, and the rewound sequence
// continues bit-identically to one that never ran past the kept length.
func TestRewindSharedPages(t *testing.T) {
	m := tiny(t)
	V := m.Config.VocabSize
	prompt := prompts(t)[5].InputIDs[:150] // pages 0, 1 and 2
	for _, keep := range []int{10, 64, 100} {
		t.Run(fmt.Sprintf("keep %d", keep), func(t *testing.T) {
			pool := m.NewKVPool(4 * kv.PageTokens)
			a := pool.NewSequence()
			lens := []int{keep}
			out, err := m.Forward(context.Background(), []*model.Sequence{a}, [][]int{prompt}, model.ForwardOptions{Logits: model.AllLogits, ConvSnapshots: [][]int{lens}})
			if err != nil {
				t.Fatal(err)
			}
			b := a.Clone()
			conv, ok := a.ConvAt(keep)
			if !ok {
				t.Fatal("no conv snapshot")
			}
			if err := a.Rewind(keep, conv); err != nil {
				t.Fatal(err)
			}
			// a holds the pages of its first keep positions; b all three.
			if st := pool.Stats(); st.Used != 3 || st.Shared != (keep+kv.PageTokens-1)/kv.PageTokens {
				t.Errorf("after the rewind: %d pages used, %d shared; want 3 and the %d that hold a's positions", st.Used, st.Shared, (keep+kv.PageTokens-1)/kv.PageTokens)
			}
			b.Free()
			if st := pool.Stats(); st.Used != (keep+kv.PageTokens-1)/kv.PageTokens || st.Shared != 0 {
				t.Errorf("after the clone is freed: %d pages used, %d shared; want %d and 0", st.Used, st.Shared, (keep+kv.PageTokens-1)/kv.PageTokens)
			}
			// a continues as the prompt's first keep tokens would: the
			// logits of prompt[keep] equal the full run's row there.
			got := step(t, m, a, prompt[keep])
			requireSame(t, "the token after the rewind", got, out[0][keep*V:(keep+1)*V])
			a.Free()
			if st := pool.Stats(); st.Used != 0 {
				t.Errorf("after both are freed: %d pages used", st.Used)
			}
		})
	}
}
