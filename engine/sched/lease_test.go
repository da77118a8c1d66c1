package sched

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
)

// TestLease: a Lease's sequences take their pages from the scheduler's
// pool, where Stats counts them, within its reservation; a lease that
// does not fit beside the running requests waits for them; one larger
// than the pool is refused; and its holder's pages are reclaimed from the
// prefix cache when the pool is full of cached blocks (from the holder's
// goroutine, while the loop runs).
func TestLease(t *testing.T) {
	m := loadTiny(t)
	ps := fixturePrompts(t)
	prompt := ps[5].InputIDs // 314 tokens: 5 pages
	const pool = 8 * kv.PageTokens
	t.Run("counted", func(t *testing.T) {
		s := start(t, m, Config{KVPoolTokens: pool, PrefixCache: PrefixConfig{Off: true}})
		var le *LimitError
		if _, err := s.Lease(context.Background(), 9*kv.PageTokens, 9); !errors.As(err, &le) || le.What != "kv_pool" || le.PoolPages != 8 {
			t.Fatalf("9 pages of 8: %v", err)
		}
		l, err := s.Lease(context.Background(), len(prompt), 5)
		if err != nil {
			t.Fatal(err)
		}
		seq := l.NewSequence()
		if _, err := m.Forward(context.Background(), []*model.Sequence{seq}, [][]int{prompt}, model.ForwardOptions{}); err != nil {
			t.Fatal(err)
		}
		if st := s.Stats(); st.KVPagesUsed != 5 || st.KVReservedTokens != len(prompt) {
			t.Errorf("holding 314 tokens: %d pages used, %d tokens reserved; want 5, 314", st.KVPagesUsed, st.KVReservedTokens)
		}
		// 3 pages are left: a request needing 4 waits for the release.
		r := newRecorder()
		if err := s.Submit(context.Background(), &Request{Prompt: ps[0].InputIDs, MaxTokens: 4*kv.PageTokens - len(ps[0].InputIDs), Params: greedy(), Sink: r}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		if st := s.Stats(); st.Running != 0 || st.Waiting != 1 {
			t.Errorf("beside the lease: %d running, %d waiting; want 0, 1", st.Running, st.Waiting)
		}
		l.Release()
		r.wait(t)
		if st := s.Stats(); st.KVPagesUsed != 0 || st.KVReservedTokens != 0 {
			t.Errorf("after the release: %+v", st)
		}
	})
	t.Run("waits", func(t *testing.T) {
		s := start(t, m, Config{KVPoolTokens: pool, PrefixCache: PrefixConfig{Off: true}})
		r := newRecorder()
		if err := s.Submit(context.Background(), &Request{Prompt: prompt, MaxTokens: 60, Params: greedy(), Sink: r}); err != nil {
			t.Fatal(err)
		}
		// The request reserves 6 pages; a lease of 3 waits for its end.
		l, err := s.Lease(context.Background(), 3*kv.PageTokens, 3)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-r.done:
		default:
			t.Error("the lease was granted while the request held its pages")
		}
		l.Release()
		ctx, cancel := context.WithCancel(context.Background())
		r2 := newRecorder()
		s.Submit(context.Background(), &Request{Prompt: prompt, MaxTokens: 60, Params: greedy(), Sink: r2})
		go func() { time.Sleep(20 * time.Millisecond); cancel() }()
		if _, err := s.Lease(ctx, 3*kv.PageTokens, 3); !errors.Is(err, context.Canceled) {
			t.Errorf("a cancelled waiting lease: %v", err)
		}
		r2.wait(t)
		if st := s.Stats(); st.Waiting != 0 || st.KVReservedTokens != 0 {
			t.Errorf("after: %+v", st)
		}
	})
	t.Run("reclaims", func(t *testing.T) {
		s := start(t, m, Config{KVPoolTokens: pool})
		// Fill the cache: 4 cached blocks of this prompt stay in the pool.
		r := newRecorder()
		s.Submit(context.Background(), &Request{Prompt: prompt, MaxTokens: 1, Params: greedy(), Sink: r})
		r.wait(t)
		if st := s.Stats(); st.PrefixBlocks != 4 {
			t.Fatalf("%d cached blocks, want 4", st.PrefixBlocks)
		}
		// A lease of the whole pool needs the cache's pages: its Forward,
		// on this goroutine, reclaims them.
		l, err := s.Lease(context.Background(), pool, 8)
		if err != nil {
			t.Fatal(err)
		}
		seq := l.NewSequence()
		if _, err := m.Forward(context.Background(), []*model.Sequence{seq}, [][]int{append(append([]int{}, prompt...), prompt[:pool-len(prompt)]...)}, model.ForwardOptions{}); err != nil {
			t.Fatalf("a lease of the whole pool over a full cache: %v", err)
		}
		if st := s.Stats(); st.KVPagesUsed != 8 || st.PrefixBlocks != 0 {
			t.Errorf("holding the pool: %d pages used, %d cached blocks; want 8, 0", st.KVPagesUsed, st.PrefixBlocks)
		}
		l.Release()
	})
}
