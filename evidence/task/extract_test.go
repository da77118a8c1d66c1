package task

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"
)

// TestExtract: the rule of docs/eval.md on hand-written answers.
func TestExtract(t *testing.T) {
	tests := []struct {
		name, text, want string
		rule             Rule
	}{
		{"hashes", "She has 12 apples.\n#### 12", "12", RuleHashes},
		{"hashes thousands", "So the total is large.\n#### 1,234", "1234", RuleHashes},
		{"hashes beat later numbers", "#### 7\nI checked it 3 times.", "7", RuleHashes},
		{"last hashes line wins", "#### 5\nno wait\n#### 6", "6", RuleHashes},
		{"hashes with dollars", "#### $45.50", "45.5", RuleHashes},
		{"hashes without number falls through", "####\nThe answer is 8.", "8", RuleLastNumber},
		{"negative", "The temperature fell to -7 degrees.", "-7", RuleLastNumber},
		{"unicode minus", "It ended at −12.", "-12", RuleLastNumber},
		{"decimal", "Each piece is 2.25 meters long.", "2.25", RuleLastNumber},
		{"trailing zeros", "The price is 3.50.", "3.5", RuleLastNumber},
		{"integral decimal", "#### 14.00", "14", RuleHashes},
		{"leading dot", "About .5 of it.", "0.5", RuleLastNumber},
		{"negative zero", "#### -0", "0", RuleHashes},
		{"boxed", `First 3 + 4 = 7, so the answer is \boxed{7}. Check: 10 - 3.`, "7", RuleBoxed},
		{"boxed nested braces", `\boxed{\frac{1}{2} = 0.5}`, "0.5", RuleBoxed},
		{"last boxed", `\boxed{3} then \boxed{4}`, "4", RuleBoxed},
		{"boxed without number", `\boxed{x} and 9`, "9", RuleLastNumber},
		{"hashes beat boxed", "\\boxed{3}\n#### 4", "4", RuleHashes},
		{"list of numbers", "The numbers are 1,2,3", "3", RuleLastNumber},
		{"thousands in prose", "They sold 12,500 tickets.", "12500", RuleLastNumber},
		{"sentence end", "The answer is 42.", "42", RuleLastNumber},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, rule, ok := Extract(tt.text)
			if !ok || got != tt.want || rule != tt.rule {
				t.Errorf("Extract(%q) = %q, %q, %v; want %q, %q", tt.text, got, rule, ok, tt.want, tt.rule)
			}
		})
	}
	for _, text := range []string{"", "I do not know.", "####", `\boxed{}`} {
		if got, rule, ok := Extract(text); ok || got != "" || rule != RuleNone {
			t.Errorf("Extract(%q) = %q, %q, %v; want no answer", text, got, rule, ok)
		}
	}
}

// TestNormalizeEqualValues: equal values, written differently, compare
// equal; different values do not.
func TestNormalizeEqualValues(t *testing.T) {
	same := [][]string{{"1,234", "1234", "1234.0", "1,234.000"}, {"0.1", "0.10", ".1"}, {"-5", "−5", "-5.00"}}
	for _, group := range same {
		for _, s := range group[1:] {
			if Normalize(s) != Normalize(group[0]) {
				t.Errorf("Normalize(%q) = %q, Normalize(%q) = %q", s, Normalize(s), group[0], Normalize(group[0]))
			}
		}
	}
	if Normalize("0.3") == Normalize("0.30000000000000004") {
		t.Error("0.3 and 0.30000000000000004 compare equal")
	}
}

// TestWilson95 checks the interval against published values (n = 10, k =
// 0 and 10: the textbook bounds 0.2775 and 0.7225) and against the
// identity that defines it: each end p₀ solves |k/n − p₀| = z·√(p₀(1−p₀)/n).
func TestWilson95(t *testing.T) {
	const z = 1.959963984540054
	if _, hi := Wilson95(0, 10); math.Abs(hi-0.2775) > 5e-5 {
		t.Errorf("Wilson95(0, 10) upper = %v, want 0.2775", hi)
	}
	if lo, _ := Wilson95(10, 10); math.Abs(lo-0.7225) > 5e-5 {
		t.Errorf("Wilson95(10, 10) lower = %v, want 0.7225", lo)
	}
	if lo, hi := Wilson95(0, 0); lo != 0 || hi != 1 {
		t.Errorf("Wilson95(0, 0) = %v, %v; want 0, 1", lo, hi)
	}
	for _, c := range [][2]int{{0, 1}, {1, 1}, {7, 10}, {13, 20}, {1, 50}, {37, 50}, {500, 1319}} {
		k, n := c[0], c[1]
		p := float64(k) / float64(n)
		lo, hi := Wilson95(k, n)
		if !(lo <= p && p <= hi) || lo < 0 || hi > 1 {
			t.Errorf("Wilson95(%d, %d) = [%v, %v] does not hold %v inside [0, 1]", k, n, lo, hi, p)
		}
		for _, end := range []float64{lo, hi} {
			if end == 0 || end == 1 {
				continue // clamped at k = 0 or n, where the identity holds at the other end
			}
			if d := math.Abs(p-end) - z*math.Sqrt(end*(1-end)/float64(n)); math.Abs(d) > 1e-12 {
				t.Errorf("Wilson95(%d, %d) end %v: |p−p₀| − z·se = %g, want 0", k, n, end, d)
			}
		}
	}
}

// TestReadJSONL reads the project's word problems and refuses bad records
// with an error naming the line and field.
func TestReadJSONL(t *testing.T) {
	f, err := os.Open("../../testdata/eval/word-problems.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	items, err := ReadJSONL("word-problems.jsonl", f, GSM8K)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 24 || items[0].ID != "1" || items[0].Gold != "9" || items[7].Gold != "1236" || items[6].Gold != "-7" || items[5].Gold != "2.25" {
		t.Errorf("read %d items, first %+v", len(items), items[0])
	}
	bad := []struct {
		name, data, field string
		line              int
		kind              Kind
	}{
		{"not json", "{\"question\": \"q\", \"answer\": \"#### 1\"}\nnot json\n", "", 2, GSM8K},
		{"no gold line", `{"question": "q", "answer": "it is 4"}`, "answer", 1, GSM8K},
		{"gold without number", `{"question": "q", "answer": "#### four"}`, "answer", 1, GSM8K},
		{"no question", `{"answer": "#### 4"}`, "question", 1, GSM8K},
		{"duplicate id", "{\"id\": 3, \"question\": \"q\", \"answer\": \"#### 1\"}\n\n{\"id\": \"3\", \"question\": \"q\", \"answer\": \"#### 1\"}", "id", 3, GSM8K},
		{"label out of range", `{"context": "c", "choices": ["a", "b"], "answer": 2}`, "answer", 1, Choice},
		{"one choice", `{"context": "c", "choices": ["a"], "answer": 0}`, "choices", 1, Choice},
		{"empty choice", `{"context": "c", "choices": ["a", " "], "answer": 0}`, "choices[1]", 1, Choice},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadJSONL("d.jsonl", strings.NewReader(tt.data), tt.kind)
			var de *DatasetError
			if !errors.As(err, &de) || de.Line != tt.line || de.Field != tt.field || de.Name != "d.jsonl" {
				t.Fatalf("err = %v; want a DatasetError at line %d, field %q", err, tt.line, tt.field)
			}
		})
	}
	if _, err := ReadJSONL("empty.jsonl", strings.NewReader("\n\n"), GSM8K); err == nil {
		t.Error("an empty dataset was accepted")
	}
	long := `{"question": "` + strings.Repeat("x", maxRecordBytes) + `", "answer": "#### 1"}`
	if _, err := ReadJSONL("long.jsonl", strings.NewReader(long), GSM8K); err == nil {
		t.Error("a line over the limit was accepted")
	}
}

// FuzzReadJSONL: no input panics, and what is accepted has items with
// unique ids and a gold answer.
func FuzzReadJSONL(f *testing.F) {
	f.Add(`{"question": "q", "answer": "#### 1,234"}`, true)
	f.Add(`{"id": 7, "context": "c ", "choices": ["a", "b"], "answer": 1}`, false)
	f.Add("\n{\"question\": \"\"}\n", true)
	f.Fuzz(func(t *testing.T, data string, gsm bool) {
		kind := Choice
		if gsm {
			kind = GSM8K
		}
		items, err := ReadJSONL("f", strings.NewReader(data), kind)
		if err != nil {
			return
		}
		ids := map[string]bool{}
		for _, it := range items {
			if ids[it.ID] || (kind == GSM8K && it.Gold == "") || (kind == Choice && (it.Label < 0 || it.Label >= len(it.Choices))) {
				t.Fatalf("accepted a bad item %+v", it)
			}
			ids[it.ID] = true
		}
	})
}

// FuzzParse: task and gate files of any bytes parse or fail without a
// panic, and what parses marshals back and parses again.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"format":"lfmq-eval-1","task":"gsm8k","runs":[{"summary":{"items":1},"items":[{"id":"1","text":"#### 1"}]}]}`))
	f.Add([]byte(`{"format":"lfmq-eval-gate-1","runs":[{},{}],"identical":true}`))
	f.Add([]byte(`{"format":"lfmq-eval-1","task":"choice","runs":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if file, err := Parse("f", data); err == nil {
			out, err := Marshal(file)
			if err != nil {
				return // a float the file format cannot hold
			}
			if _, err := Parse("again", out); err != nil {
				t.Fatalf("a parsed file does not parse again: %v", err)
			}
		}
		if g, err := ParseGate("g", data); err == nil {
			out, err := MarshalGate(g)
			if err != nil {
				return
			}
			if _, err := ParseGate("again", out); err != nil {
				t.Fatalf("a parsed gate does not parse again: %v", err)
			}
		}
		Extract(string(data))
	})
}
