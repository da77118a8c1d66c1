package api

import (
	"slices"
	"testing"

	"github.com/lfmq/lfmq/engine/sched"
)

// denseModel is the dense LFM2 fixture (model_type "lfm2"): the MoE
// fixture's tokenizer and template, every layer with a dense FFN.
const denseModel = "../../testdata/tiny-lfm2/model"

// denseSession opens the dense fixture once per test binary.
var denseSession = (&sharedSession{model: denseModel}).get

// densePrompts reads the dense fixture's reference prompts: the MoE
// fixture's input ids with the dense model's own greedy continuations.
func densePrompts(t testing.TB) []fixturePrompt {
	t.Helper()
	prompts := readPrompts[fixturePrompt](t, "../../testdata/tiny-lfm2/reference/prompts.json")
	if len(prompts) != 6 || prompts[5].Name != "chat_long_300" {
		t.Fatalf("the dense reference has %d prompts", len(prompts))
	}
	return prompts
}

// TestOpenAISDKDense runs the SDK checks of TestOpenAISDK on the dense
// fixture. Its chat answer is its float32 reference's greedy continuation
// of chat_single; untrained after its FFNs were rebuilt, it runs on after
// its tool call (finish "length") and does not think.
func TestOpenAISDKDense(t *testing.T) {
	sess := denseSession(t)
	// The answer's content leaves out the control tokens the model emits
	// (ids 0–13, LFM2's special tokens; here a stray <|tool_list_start|>).
	var greedy, content []int
	for _, p := range densePrompts(t) {
		if p.Name == "chat_single" {
			greedy = p.GreedyIDs
		}
	}
	for _, id := range greedy {
		if id >= 14 {
			content = append(content, id)
		}
	}
	text, err := sess.Tokenizer.Decode(content)
	if err != nil || len(greedy) != 32 || len(content) == 32 {
		t.Fatalf("chat_single's reference continuation: %d ids, %d of them text, %v", len(greedy), len(content), err)
	}
	ts := newTestServerOn(t, sess, Options{APIKey: "k-123"}, sched.Config{MaxNumSeqs: 1, MaxQueue: 1})
	checkOpenAISDK(t, ts, sdkWant{chat: text, toolFinish: "length"})
}

// TestSchemaAnswerDense: the dense model answers a closed schema by
// scoring, as the MoE model does.
func TestSchemaAnswerDense(t *testing.T) {
	sess := denseSession(t)
	checkSchemaAnswer(t, newTestServerOn(t, sess, Options{}, sched.Config{}), sess)
}

// TestCacheAndSpeculationDense: the prefix cache and speculation work on the
// dense model, and its speculative greedy answer to chat_long_300 is its
// float32 reference's continuation.
func TestCacheAndSpeculationDense(t *testing.T) {
	ts := newTestServerOn(t, denseSession(t), Options{}, sched.Config{})
	// The fixtures' prompts are the same conversations (same input ids).
	ids := checkCacheAndSpeculation(t, ts, fixturePrompts(t)[5].Messages)
	want := densePrompts(t)[5].GreedyIDs
	if len(ids) < len(want) || !slices.Equal(ids[:len(want)], want) {
		t.Errorf("answer %v, want it to start with the reference's %v", ids, want)
	}
}
