package sched

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/sample"
)

const tinyModel = "../../testdata/tiny-lfm2-moe/model"

func loadTiny(t testing.TB) *model.Model {
	t.Helper()
	m, err := load.Load(tinyModel, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

type fixturePrompt struct {
	Name      string `json:"name"`
	InputIDs  []int  `json:"input_ids"`
	GreedyIDs []int  `json:"greedy_ids"`
}

func fixturePrompts(t testing.TB) []fixturePrompt {
	t.Helper()
	data, err := os.ReadFile("../../testdata/tiny-lfm2-moe/reference/prompts.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Prompts []fixturePrompt }
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f.Prompts
}

// recorder is a Sink that keeps everything.
type recorder struct {
	mu       sync.Mutex
	tokens   []int
	stopSeen bool
	prompt   []float32
	from     []int
	endAfter int // end the generation after this many tokens (0: never)
	cached   int
	reason   FinishReason
	err      error
	done     chan struct{}
	first    chan struct{}
}

func newRecorder() *recorder {
	return &recorder{done: make(chan struct{}), first: make(chan struct{})}
}

func (r *recorder) Started(cached int) {
	r.mu.Lock()
	r.cached = cached
	r.mu.Unlock()
}

func (r *recorder) PromptLogits(from int, logits []float32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.from = append(r.from, from)
	r.prompt = append(r.prompt, logits...)
}

func (r *recorder) Token(id int, logits []float32, stop bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.tokens) == 0 && !r.stopSeen {
		close(r.first)
	}
	if stop {
		r.stopSeen = true
		return false
	}
	r.tokens = append(r.tokens, id)
	return r.endAfter > 0 && len(r.tokens) >= r.endAfter
}

func (r *recorder) Done(reason FinishReason, err error) {
	r.mu.Lock()
	r.reason, r.err = reason, err
	r.mu.Unlock()
	close(r.done)
}

func (r *recorder) wait(t testing.TB) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(60 * time.Second):
		t.Fatal("request did not finish")
	}
}

func start(t testing.TB, m *model.Model, cfg Config) *Scheduler {
	t.Helper()
	s, err := New(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return s
}

func greedy() sample.Params {
	p := sample.Neutral()
	p.Temperature = 0
	return p
}

// TestGreedyMatchesFixture: greedy generation through the scheduler gives
// the fixture's independent greedy continuations, alone and with all six
// prompts running together.
func TestGreedyMatchesFixture(t *testing.T) {
	m := loadTiny(t)
	ps := fixturePrompts(t)
	for _, together := range []bool{false, true} {
		t.Run(fmt.Sprintf("together=%v", together), func(t *testing.T) {
			s := start(t, m, Config{PrefillChunk: 37})
			recs := make([]*recorder, len(ps))
			for i, p := range ps {
				recs[i] = newRecorder()
				if err := s.Submit(context.Background(), &Request{ID: p.Name, Prompt: p.InputIDs, MaxTokens: len(p.GreedyIDs), Params: greedy(), Sink: recs[i]}); err != nil {
					t.Fatal(err)
				}
				if !together {
					recs[i].wait(t)
				}
			}
			for i, p := range ps {
				recs[i].wait(t)
				if recs[i].reason != FinishLength || !slices.Equal(recs[i].tokens, p.GreedyIDs) {
					t.Errorf("%s: %v %v, want length %v", p.Name, recs[i].reason, recs[i].tokens, p.GreedyIDs)
				}
			}
		})
	}
}

// TestSeededBatchInvariance: seeded sampled requests give the same tokens
// alone and inside a batch of 8 mixed requests (other prompts, params,
// lengths, a scoring prefill, chunked prefill).
func TestSeededBatchInvariance(t *testing.T) {
	m := loadTiny(t)
	ps := fixturePrompts(t)
	type job struct {
		prompt []int
		params sample.Params
		max    int
		logits bool
	}
	var jobs []job
	for i := range 8 {
		p := sample.Neutral()
		switch i % 4 {
		case 0:
			p.Temperature, p.TopK, p.RepetitionPenalty = 0.8, 50, 1.05
		case 1:
			p.Temperature, p.TopP = 0.6, 0.95
		case 2:
			p.Temperature, p.MinP, p.PresencePenalty = 1.2, 0.05, 0.5
		case 3:
			p = greedy()
		}
		p.Seed = uint64(1000 + i)
		jobs = append(jobs, job{prompt: ps[i%len(ps)].InputIDs, params: p, max: 12 + 5*i, logits: i == 5})
	}
	run := func(s *Scheduler, js []job) [][]int {
		recs := make([]*recorder, len(js))
		for i, j := range js {
			recs[i] = newRecorder()
			if err := s.Submit(context.Background(), &Request{Prompt: j.prompt, MaxTokens: j.max, Params: j.params, PromptLogits: j.logits, Sink: recs[i]}); err != nil {
				t.Fatal(err)
			}
		}
		out := make([][]int, len(js))
		for i, r := range recs {
			r.wait(t)
			if r.err != nil {
				t.Fatal(r.err)
			}
			out[i] = r.tokens
		}
		return out
	}
	s := start(t, m, Config{PrefillChunk: 64})
	batch := run(s, jobs)
	for i, j := range jobs {
		alone := run(s, []job{j})[0]
		if !slices.Equal(alone, batch[i]) {
			t.Errorf("job %d: alone %v\n in batch %v", i, alone, batch[i])
		}
	}
	if st := s.Stats(); st.Running != 0 || st.KVReservedTokens != 0 || st.KVUsedTokens != 0 {
		t.Errorf("after the run: %+v", st)
	}
}

// TestPromptLogits: a prefill-only request returns every prompt position's
// logits, bit-identical to one in-process forward, while decodes share its
// steps.
func TestPromptLogits(t *testing.T) {
	m := loadTiny(t)
	ps := fixturePrompts(t)
	ids := ps[5].InputIDs
	seq := m.NewSequence()
	want, err := m.Forward(context.Background(), []*model.Sequence{seq}, [][]int{ids}, model.ForwardOptions{Logits: model.AllLogits})
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, m, Config{PrefillChunk: 100})
	busy := newRecorder()
	if err := s.Submit(context.Background(), &Request{Prompt: ps[0].InputIDs, MaxTokens: 40, Params: greedy(), Sink: busy}); err != nil {
		t.Fatal(err)
	}
	r := newRecorder()
	if err := s.Submit(context.Background(), &Request{Prompt: ids, PromptLogits: true, Sink: r}); err != nil {
		t.Fatal(err)
	}
	r.wait(t)
	busy.wait(t)
	if r.reason != FinishLength || len(r.tokens) != 0 {
		t.Fatalf("reason %v, tokens %v", r.reason, r.tokens)
	}
	if !slices.Equal(r.from, []int{0, 100, 200, 300}) {
		t.Errorf("chunks start at %v", r.from)
	}
	if !slices.Equal(r.prompt, want[0]) {
		t.Error("prompt logits differ from an in-process forward")
	}
}

// TestStops: a stop id ends generation (counted, reported as stop), a Sink
// can end it (stop strings), MaxTokens ends it as length.
func TestStops(t *testing.T) {
	m := loadTiny(t)
	ps := fixturePrompts(t)
	p := ps[3] // chat_tools: greedy emits <|im_end|> (7) at index 19
	s := start(t, m, Config{})
	params := greedy()
	params.StopIDs = []int{7}
	r := newRecorder()
	s.Submit(context.Background(), &Request{Prompt: p.InputIDs, MaxTokens: 32, Params: params, Sink: r})
	r.wait(t)
	i := slices.Index(p.GreedyIDs, 7)
	if i < 0 {
		t.Fatal("fixture changed: no <|im_end|> in the greedy ids")
	}
	if r.reason != FinishStop || !r.stopSeen || !slices.Equal(r.tokens, p.GreedyIDs[:i]) {
		t.Errorf("stop id: %v stop seen %v tokens %v, want %v", r.reason, r.stopSeen, r.tokens, p.GreedyIDs[:i])
	}
	params.MinTokens = i + 3
	r = newRecorder()
	s.Submit(context.Background(), &Request{Prompt: p.InputIDs, MaxTokens: i + 3, Params: params, Sink: r})
	r.wait(t)
	if r.reason != FinishLength || len(r.tokens) != i+3 || slices.Contains(r.tokens, 7) {
		t.Errorf("min_tokens: %v %v", r.reason, r.tokens)
	}
	r = newRecorder()
	r.endAfter = 5
	s.Submit(context.Background(), &Request{Prompt: p.InputIDs, MaxTokens: 32, Params: greedy(), Sink: r})
	r.wait(t)
	if r.reason != FinishStop || len(r.tokens) != 5 {
		t.Errorf("sink end: %v %v", r.reason, r.tokens)
	}
}

// TestLimits: requests that can never fit are refused with the counts; a
// full queue refuses; malformed requests are InputErrors.
func TestLimits(t *testing.T) {
	m := loadTiny(t)
	s, err := New(m, Config{MaxModelLen: 100, KVPoolTokens: 80, MaxQueue: 1, MaxNumSeqs: 1})
	if err != nil {
		t.Fatal(err)
	}
	var le *LimitError
	err = s.Submit(context.Background(), &Request{Prompt: make([]int, 60), MaxTokens: 41, Params: greedy(), Sink: newRecorder()})
	if !errors.As(err, &le) || le.What != "context" || le.Limit != 100 || le.Prompt != 60 || le.MaxTokens != 41 {
		t.Errorf("context: %v", err)
	}
	err = s.Submit(context.Background(), &Request{Prompt: make([]int, 60), MaxTokens: 30, Params: greedy(), Sink: newRecorder()})
	if !errors.As(err, &le) || le.What != "kv_pool" || le.Limit != 80 {
		t.Errorf("kv pool: %v", err)
	}
	// Not running: the first request waits in the queue, the second finds
	// it full.
	if err := s.Submit(context.Background(), &Request{Prompt: []int{1}, MaxTokens: 1, Params: greedy(), Sink: newRecorder()}); err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(context.Background(), &Request{Prompt: []int{1}, MaxTokens: 1, Params: greedy(), Sink: newRecorder()}); !errors.Is(err, ErrQueueFull) {
		t.Errorf("queue full: %v", err)
	}
	var ie *InputError
	for name, r := range map[string]*Request{
		"empty prompt":  {MaxTokens: 1, Params: greedy(), Sink: newRecorder()},
		"nothing asked": {Prompt: []int{1}, Params: greedy(), Sink: newRecorder()},
		"bad id":        {Prompt: []int{1, 99999}, MaxTokens: 1, Params: greedy(), Sink: newRecorder()},
		"bad params":    {Prompt: []int{1}, MaxTokens: 1, Params: sample.Params{Temperature: 5}, Sink: newRecorder()},
		"no sink":       {Prompt: []int{1}, MaxTokens: 1, Params: greedy()},
	} {
		if err := s.Submit(context.Background(), r); !errors.As(err, &ie) {
			t.Errorf("%s: %v", name, err)
		}
	}
	s.Close()
	if err := s.Submit(context.Background(), &Request{Prompt: []int{1}, MaxTokens: 1, Params: greedy(), Sink: newRecorder()}); !errors.Is(err, ErrClosed) {
		t.Errorf("closed: %v", err)
	}
	if _, err := New(m, Config{MaxModelLen: 1 << 20}); err == nil {
		t.Error("MaxModelLen beyond the model's context accepted")
	}
}

// TestCancel: a cancelled running request is freed within one step and
// its slot goes to the waiting one; a cancelled waiting request leaves the
// queue at once.
func TestCancel(t *testing.T) {
	m := loadTiny(t)
	ps := fixturePrompts(t)
	s := start(t, m, Config{MaxNumSeqs: 1, PrefillChunk: 8})
	ctx1, cancel1 := context.WithCancel(context.Background())
	r1 := newRecorder()
	if err := s.Submit(ctx1, &Request{Prompt: ps[5].InputIDs, MaxTokens: 1000, Params: greedy(), Sink: r1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return s.Stats().Running == 1 })
	ctx2, cancel2 := context.WithCancel(context.Background())
	r2 := newRecorder()
	if err := s.Submit(ctx2, &Request{Prompt: ps[0].InputIDs, MaxTokens: 5, Params: greedy(), Sink: r2}); err != nil {
		t.Fatal(err)
	}
	cancel2() // waiting: leaves the queue now
	r2.wait(t)
	if r2.reason != FinishCancelled {
		t.Errorf("waiting request: %v", r2.reason)
	}
	if st := s.Stats(); st.Waiting != 0 {
		t.Errorf("queue after cancelling the waiting request: %+v", st)
	}
	r3 := newRecorder()
	if err := s.Submit(context.Background(), &Request{Prompt: ps[0].InputIDs, MaxTokens: 5, Params: greedy(), Sink: r3}); err != nil {
		t.Fatal(err)
	}
	// Cancel r1 during its prefill (chunks of 8 over 314 tokens).
	cancel1()
	r1.wait(t)
	if r1.reason != FinishCancelled {
		t.Errorf("running request: %v", r1.reason)
	}
	r3.wait(t)
	if r3.reason != FinishLength || len(r3.tokens) != 5 {
		t.Errorf("the next request: %v %v", r3.reason, r3.tokens)
	}
	// Cancel during decode.
	ctx4, cancel4 := context.WithCancel(context.Background())
	r4 := newRecorder()
	s.Submit(ctx4, &Request{Prompt: ps[0].InputIDs, MaxTokens: 3000, Params: greedy(), Sink: r4})
	<-r4.first
	// Steps are counted from after the cancel: counted from before it, a
	// test goroutine descheduled between the two (a loaded machine, -race)
	// let the scheduler decode on and failed the bound for steps that ran
	// before the cancel.
	cancel4()
	before := s.Stats().Steps
	r4.wait(t)
	if got := s.Stats().Steps - before; got > 2 {
		t.Errorf("freed %d steps after the cancel, want at most one more step", got)
	}
	if st := s.Stats(); st.Running != 0 || st.KVReservedTokens != 0 || st.KVUsedTokens != 0 {
		t.Errorf("after cancelling: %+v", st)
	}
}

// TestCloseDrains: Close lets running and waiting requests finish, then
// Run returns nil.
func TestCloseDrains(t *testing.T) {
	m := loadTiny(t)
	ps := fixturePrompts(t)
	s, _ := New(m, Config{MaxNumSeqs: 1})
	recs := []*recorder{newRecorder(), newRecorder()}
	for _, r := range recs {
		s.Submit(context.Background(), &Request{Prompt: ps[0].InputIDs, MaxTokens: 8, Params: greedy(), Sink: r})
	}
	s.Close()
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		r.wait(t)
		if r.reason != FinishLength || len(r.tokens) != 8 {
			t.Errorf("%v %v", r.reason, r.tokens)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 30 s")
		}
		time.Sleep(time.Millisecond)
	}
}
