package parser

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// item is one input to a Parser: text, or a marker when marker != 0.
type item struct {
	text   string
	marker Marker
}

func tx(s string) item { return item{text: s} }
func mk(m Marker) item { return item{marker: m} }
func (it item) String() string {
	if it.marker != 0 {
		return it.marker.String()
	}
	return fmt.Sprintf("%q", it.text)
}

// result is what a response carries: the concatenated reasoning and
// content, and the calls in order.
type result struct {
	Reasoning string
	Content   string
	Calls     []ToolCall
}

// feed runs items through a fresh Parser and checks every event's shape.
func feed(t testing.TB, opts Options, items []item) result {
	t.Helper()
	p := New(opts)
	var r result
	add := func(evs []Event) {
		t.Helper()
		for i, e := range evs {
			switch e.Kind {
			case KindReasoning, KindContent:
				if e.Text == "" || e.Call != nil {
					t.Fatalf("bad text event %+v", e)
				}
				if i > 0 && evs[i-1].Kind == e.Kind {
					// Allowed, but this implementation merges within a call.
					t.Fatalf("unmerged adjacent %v events", e.Kind)
				}
				if e.Kind == KindReasoning {
					r.Reasoning += e.Text
				} else {
					r.Content += e.Text
				}
			case KindToolCall:
				if e.Call == nil || e.Text != "" {
					t.Fatalf("bad call event %+v", e)
				}
				if !json.Valid([]byte(e.Call.Arguments)) || !strings.HasPrefix(e.Call.Arguments, "{") {
					t.Fatalf("arguments not a JSON object: %q", e.Call.Arguments)
				}
				r.Calls = append(r.Calls, *e.Call)
			default:
				t.Fatalf("unknown event kind %d", e.Kind)
			}
		}
	}
	for _, it := range items {
		if it.marker != 0 {
			add(p.Marker(it.marker))
		} else {
			add(p.Text(it.text))
		}
	}
	add(p.Finish())
	if evs := p.Finish(); evs != nil {
		t.Fatalf("second Finish returned %v", evs)
	}
	if evs := p.Text("late"); evs != nil {
		t.Fatalf("Text after Finish returned %v", evs)
	}
	return r
}

// merged joins adjacent text items: one item per marker or text run.
func merged(items []item) []item {
	var out []item
	for _, it := range items {
		if it.marker == 0 && len(out) > 0 && out[len(out)-1].marker == 0 {
			out[len(out)-1].text += it.text
			continue
		}
		if it.marker == 0 && it.text == "" {
			continue
		}
		out = append(out, it)
	}
	return out
}

// perRune splits every text item into one item per rune.
func perRune(items []item) []item {
	var out []item
	for _, it := range items {
		if it.marker != 0 {
			out = append(out, it)
			continue
		}
		for _, r := range it.text {
			out = append(out, tx(string(r)))
		}
	}
	return out
}

// chunked splits every text item into pieces of n runes.
func chunked(items []item, n int) []item {
	var out []item
	for _, it := range items {
		if it.marker != 0 {
			out = append(out, it)
			continue
		}
		s := it.text
		for s != "" {
			k, i := 0, 0
			for i < len(s) && k < n {
				_, w := utf8.DecodeRuneInString(s[i:])
				i += w
				k++
			}
			out = append(out, tx(s[:i]))
			s = s[i:]
		}
	}
	return out
}

// checkSplits feeds items whole-run, per rune, and with each text item
// split at each rune boundary, and requires the same result every time.
// Only rune boundaries: the Parser's contract is complete UTF-8 per Text.
func checkSplits(t *testing.T, opts Options, items []item, want result) {
	t.Helper()
	check := func(how string, its []item) {
		t.Helper()
		if got := feed(t, opts, its); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: got %+v\nwant %+v\nitems %v", how, got, want, its)
		}
	}
	check("as given", items)
	check("merged", merged(items))
	check("per rune", perRune(items))
	m := merged(items)
	for j, it := range m {
		if it.marker != 0 {
			continue
		}
		for k := range it.text {
			if k == 0 {
				continue
			}
			split := append(append(append([]item{}, m[:j]...), tx(it.text[:k]), tx(it.text[k:])), m[j+1:]...)
			check(fmt.Sprintf("item %d split at %d", j, k), split)
		}
	}
}

func norm(r result) result {
	if len(r.Calls) == 0 {
		r.Calls = nil
	}
	return r
}

func calls(nameArgs ...string) []ToolCall {
	var out []ToolCall
	for i := 0; i+1 < len(nameArgs); i += 2 {
		out = append(out, ToolCall{Name: nameArgs[i], Arguments: nameArgs[i+1]})
	}
	return out
}

var (
	thinkOn = Options{Reasoning: true}
	toolsOn = Options{Tools: true}
	bothOn  = Options{Reasoning: true, Tools: true}
)

type parserCase struct {
	name  string
	opts  Options
	items []item
	want  result
}

var reasoningCases = []parserCase{
	{"reasoning then content", thinkOn,
		[]item{mk(ThinkStart), tx("plan it"), mk(ThinkEnd), tx("\n\nAnswer.")},
		result{Reasoning: "plan it", Content: "Answer."}},
	{"whitespace after think end dropped across items", thinkOn,
		[]item{mk(ThinkStart), tx("a "), mk(ThinkEnd), tx(" \n"), tx("\t"), tx(" b c ")},
		result{Reasoning: "a ", Content: "b c "}},
	{"unicode whitespace after think end dropped", thinkOn,
		[]item{mk(ThinkStart), tx("r"), mk(ThinkEnd), tx("\u00a0\u3000\u2028x\u00a0")},
		result{Reasoning: "r", Content: "x\u00a0"}},
	{"only whitespace after think end", thinkOn,
		[]item{mk(ThinkStart), tx("r"), mk(ThinkEnd), tx("\n\n")},
		result{Reasoning: "r"}},
	{"leading whitespace then think", thinkOn,
		[]item{tx(" \n"), tx("\t"), mk(ThinkStart), tx("r"), mk(ThinkEnd), tx("c")},
		result{Reasoning: "r", Content: "c"}},
	{"leading whitespace then text is content", thinkOn,
		[]item{tx("  "), tx("\nhello")},
		result{Content: "  \nhello"}},
	{"whitespace-only output", thinkOn,
		[]item{tx(" \n "), tx("\t")},
		result{Content: " \n \t"}},
	{"think not at start is literal", thinkOn,
		[]item{tx("Hi "), mk(ThinkStart), tx("x"), mk(ThinkEnd), tx(" y")},
		result{Content: "Hi <think>x</think> y"}},
	{"end marker first is literal", thinkOn,
		[]item{mk(ThinkEnd), tx("x")},
		result{Content: "</think>x"}},
	{"whitespace then end marker is literal with the whitespace", thinkOn,
		[]item{tx(" "), mk(ThinkEnd), tx("x")},
		result{Content: " </think>x"}},
	{"unterminated reasoning", thinkOn,
		[]item{mk(ThinkStart), tx("37 * 80 + 24 * 70 + 24 * 1 = 1700 + 415 = 4160.")},
		result{Reasoning: "37 * 80 + 24 * 70 + 24 * 1 = 1700 + 415 = 4160."}},
	{"empty reasoning", thinkOn,
		[]item{mk(ThinkStart), mk(ThinkEnd), tx(" c")},
		result{Content: "c"}},
	{"start in reasoning", Options{Reasoning: true, StartInReasoning: true},
		[]item{tx("  r1 "), mk(ThinkEnd), tx("\n c")},
		result{Reasoning: "  r1 ", Content: "c"}},
	{"start in reasoning unterminated", Options{Reasoning: true, StartInReasoning: true},
		[]item{tx("abc")},
		result{Reasoning: "abc"}},
	{"start in reasoning: a second think is reasoning text", Options{Reasoning: true, StartInReasoning: true},
		[]item{mk(ThinkStart), tx("a"), mk(ThinkEnd), tx("b")},
		result{Reasoning: "<think>a", Content: "b"}},
	{"start in reasoning ignored without reasoning", Options{StartInReasoning: true},
		[]item{tx("a"), mk(ThinkEnd)},
		result{Content: "a</think>"}},
	{"think start inside reasoning is reasoning text", thinkOn,
		[]item{mk(ThinkStart), tx("a"), mk(ThinkStart), tx("b"), mk(ThinkEnd)},
		result{Reasoning: "a<think>b"}},
	{"think markers after reasoning are literal content", thinkOn,
		[]item{mk(ThinkStart), tx("a"), mk(ThinkEnd), tx("b"), mk(ThinkEnd), mk(ThinkStart)},
		result{Reasoning: "a", Content: "b</think><think>"}},
	{"reasoning off: think markers are literal", Options{},
		[]item{tx(" "), mk(ThinkStart), tx("a"), mk(ThinkEnd), tx(" b")},
		result{Content: " <think>a</think> b"}},
	{"tool-call markers inside reasoning are reasoning text", bothOn,
		[]item{mk(ThinkStart), tx("x "), mk(ToolCallStart), tx("[f(a=1)]"), mk(ToolCallEnd), mk(ThinkEnd),
			mk(ToolCallStart), tx("[g()]"), mk(ToolCallEnd)},
		result{Reasoning: "x <|tool_call_start|>[f(a=1)]<|tool_call_end|>", Calls: calls("g", "{}")}},
	{"reasoning then tool call", bothOn,
		[]item{mk(ThinkStart), tx("Use the calculator."), mk(ThinkEnd), mk(ToolCallStart),
			tx("[calc(expr='17 * 23')]"), mk(ToolCallEnd)},
		result{Reasoning: "Use the calculator.", Calls: calls("calc", `{"expr":"17 * 23"}`)}},
	{"leading whitespace then tool call", bothOn,
		[]item{tx(" "), mk(ToolCallStart), tx("[f()]"), mk(ToolCallEnd)},
		result{Content: " ", Calls: calls("f", "{}")}},
	{"unknown marker ignored", thinkOn,
		[]item{mk(Marker(99)), mk(ThinkStart), tx("r"), mk(Marker(-1))},
		result{Reasoning: "r"}},
	{"empty output", bothOn, nil, result{}},
}

var toolCases = []parserCase{
	{"fixture chat_tools", toolsOn,
		[]item{mk(ToolCallStart), tx(`[calculate(expression="619 + 419")]`), mk(ToolCallEnd)},
		result{Calls: calls("calculate", `{"expression":"619 + 419"}`)}},
	{"fixture tokenizer vector", toolsOn,
		[]item{mk(ToolCallStart), tx(`[calculate(expression="2+2")]`), mk(ToolCallEnd)},
		result{Calls: calls("calculate", `{"expression":"2+2"}`)}},
	{"content before and after a block", toolsOn,
		[]item{tx("Let me check. "), mk(ToolCallStart), tx("[get_weather(city='Paris')]"), mk(ToolCallEnd), tx(" Done.")},
		result{Content: "Let me check.  Done.", Calls: calls("get_weather", `{"city":"Paris"}`)}},
	{"several calls, dotted names", toolsOn,
		[]item{mk(ToolCallStart), tx(`[a(x=1), b.c.d(y="z"), e()]`), mk(ToolCallEnd)},
		result{Calls: calls("a", `{"x":1}`, "b.c.d", `{"y":"z"}`, "e", "{}")}},
	{"reserved-word keywords", toolsOn,
		[]item{mk(ToolCallStart), tx(`[f(class="x", def=1, lambda=None, import=True, from=[], if={}, None=2)]`), mk(ToolCallEnd)},
		result{Calls: calls("f", `{"class":"x","def":1,"lambda":null,"import":true,"from":[],"if":{},"None":2}`)}},
	{"every value type, nested", toolsOn,
		[]item{mk(ToolCallStart), tx(`[f(s='a', d="b", i=007, n=-3, fl=1.50, e=1e5, t=True, F=false, z=None, nl=null, ` +
			`l=[1, 'x', [2.0]], tu=(1, 2), d2={'k': {'j': [None, {"m": .5}]}})]`), mk(ToolCallEnd)},
		result{Calls: calls("f", `{"s":"a","d":"b","i":7,"n":-3,"fl":1.5,"e":100000.0,"t":true,"F":false,"z":null,"nl":null,`+
			`"l":[1,"x",[2.0]],"tu":[1,2],"d2":{"k":{"j":[null,{"m":0.5}]}}}`)}},
	{"python escapes", toolsOn,
		[]item{mk(ToolCallStart), tx(`[f(s='it\'s\n\t\x41\u00e9\U0001F600 <a>&b')]`), mk(ToolCallEnd)},
		result{Calls: calls("f", `{"s":"it's\n\tAé😀 <a>&b"}`)}},
	{"json form", toolsOn,
		[]item{mk(ToolCallStart), tx(`[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]`), mk(ToolCallEnd)},
		result{Calls: calls("get_weather", `{"city":"Paris","days":3}`)}},
	{"json form single object", toolsOn,
		[]item{mk(ToolCallStart), tx(`{"name": "f", "arguments": {}}`), mk(ToolCallEnd)},
		result{Calls: calls("f", "{}")}},
	{"parse failure becomes content with literal markers", toolsOn,
		[]item{tx("a "), mk(ToolCallStart), tx("[f(1)]"), mk(ToolCallEnd), tx(" b")},
		result{Content: "a <|tool_call_start|>[f(1)]<|tool_call_end|> b"}},
	{"empty block is content", toolsOn,
		[]item{mk(ToolCallStart), mk(ToolCallEnd)},
		result{Content: "<|tool_call_start|><|tool_call_end|>"}},
	{"empty list is content", toolsOn,
		[]item{mk(ToolCallStart), tx("[ ]"), mk(ToolCallEnd)},
		result{Content: "<|tool_call_start|>[ ]<|tool_call_end|>"}},
	{"missing end marker, parses", toolsOn,
		[]item{tx("x"), mk(ToolCallStart), tx("[f(a=1)]\n")},
		result{Content: "x", Calls: calls("f", `{"a":1}`)}},
	{"missing end marker, fails", toolsOn,
		[]item{tx("x"), mk(ToolCallStart), tx("[f(a=")},
		result{Content: "x<|tool_call_start|>[f(a="}},
	{"missing end marker, empty", toolsOn,
		[]item{mk(ToolCallStart)},
		result{Content: "<|tool_call_start|>"}},
	{"two blocks, indices in order", toolsOn,
		[]item{mk(ToolCallStart), tx("[f(a=1)]"), mk(ToolCallEnd), tx("\n"), mk(ToolCallStart), tx("[g(b=2), h()]"), mk(ToolCallEnd)},
		result{Content: "\n", Calls: calls("f", `{"a":1}`, "g", `{"b":2}`, "h", "{}")}},
	{"two blocks, second fails", toolsOn,
		[]item{mk(ToolCallStart), tx("[f()]"), mk(ToolCallEnd), mk(ToolCallStart), tx("oops"), mk(ToolCallEnd)},
		result{Content: "<|tool_call_start|>oops<|tool_call_end|>", Calls: calls("f", "{}")}},
	{"echo dropped with orphan end", toolsOn,
		[]item{mk(ToolCallStart), tx("[f(a=1)]"), mk(ToolCallEnd), tx(" [f(a=1)]"), mk(ToolCallEnd), tx("ok")},
		result{Content: "ok", Calls: calls("f", `{"a":1}`)}},
	{"echo starting with < dropped", toolsOn,
		[]item{mk(ToolCallStart), tx("[f()]"), mk(ToolCallEnd), tx("\n<|tool_call_start|>[f()]"), mk(ToolCallEnd)},
		result{Calls: calls("f", "{}")}},
	{"orphan end right after a block dropped", toolsOn,
		[]item{mk(ToolCallStart), tx("[f()]"), mk(ToolCallEnd), tx("  "), mk(ToolCallEnd), tx("x")},
		result{Content: "x", Calls: calls("f", "{}")}},
	{"two echoes dropped", toolsOn,
		[]item{mk(ToolCallStart), tx("[f()]"), mk(ToolCallEnd), tx("[f()]"), mk(ToolCallEnd), tx("[f()]"), mk(ToolCallEnd)},
		result{Calls: calls("f", "{}")}},
	{"held text flushed at finish", toolsOn,
		[]item{mk(ToolCallStart), tx("[f()]"), mk(ToolCallEnd), tx(" [not an echo")},
		result{Content: " [not an echo", Calls: calls("f", "{}")}},
	{"held whitespace flushed at finish", toolsOn,
		[]item{mk(ToolCallStart), tx("[f()]"), mk(ToolCallEnd), tx("\n")},
		result{Content: "\n", Calls: calls("f", "{}")}},
	{"held text released by a new block", toolsOn,
		[]item{mk(ToolCallStart), tx("[f()]"), mk(ToolCallEnd), tx("[x "), mk(ToolCallStart), tx("[g()]"), mk(ToolCallEnd)},
		result{Content: "[x ", Calls: calls("f", "{}", "g", "{}")}},
	{"text not starting with [ or < after a block is content", toolsOn,
		[]item{mk(ToolCallStart), tx("[f()]"), mk(ToolCallEnd), tx(" done"), mk(ToolCallEnd)},
		result{Content: " done<|tool_call_end|>", Calls: calls("f", "{}")}},
	{"echo rule after a failed block", toolsOn,
		[]item{mk(ToolCallStart), tx("oops"), mk(ToolCallEnd), tx(" [oops"), mk(ToolCallEnd)},
		result{Content: "<|tool_call_start|>oops<|tool_call_end|>"}},
	{"literal think marker after a block is held like text", bothOn,
		[]item{mk(ToolCallStart), tx("[f()]"), mk(ToolCallEnd), mk(ThinkStart), tx("x")},
		result{Content: "<think>x", Calls: calls("f", "{}")}},
	{"orphan end without a block is literal", toolsOn,
		[]item{tx("a"), mk(ToolCallEnd), tx("b")},
		result{Content: "a<|tool_call_end|>b"}},
	{"tools off: markers literal", thinkOn,
		[]item{mk(ToolCallStart), tx("[f()]"), mk(ToolCallEnd)},
		result{Content: "<|tool_call_start|>[f()]<|tool_call_end|>"}},
	{"nested start marker is body text, failure", toolsOn,
		[]item{mk(ToolCallStart), tx("[f(a="), mk(ToolCallStart), tx(")]"), mk(ToolCallEnd)},
		result{Content: "<|tool_call_start|>[f(a=<|tool_call_start|>)]<|tool_call_end|>"}},
	{"markers inside a string in the body", bothOn,
		[]item{mk(ToolCallStart), tx(`[f(a="`), mk(ToolCallStart), mk(ThinkStart), mk(ThinkEnd), tx(`")]`), mk(ToolCallEnd)},
		result{Calls: calls("f", `{"a":"<|tool_call_start|><think></think>"}`)}},
	{"json form with unicode and html", toolsOn,
		[]item{mk(ToolCallStart), tx(`[{"name":"note","arguments":{"text":"<b>日本</b> & \u2028"}}]`), mk(ToolCallEnd)},
		result{Calls: calls("note", "{\"text\":\"<b>日本</b> & \u2028\"}")}},
}

func TestParser(t *testing.T) {
	for _, group := range [][]parserCase{reasoningCases, toolCases} {
		for _, c := range group {
			t.Run(c.name, func(t *testing.T) {
				checkSplits(t, c.opts, c.items, norm(c.want))
			})
		}
	}
}

// TestParserStreaming checks that text is not held where no rule needs it.
func TestParserStreaming(t *testing.T) {
	type step struct {
		in   item
		want []Event
	}
	content := func(s string) []Event { return []Event{{Kind: KindContent, Text: s}} }
	reasoning := func(s string) []Event { return []Event{{Kind: KindReasoning, Text: s}} }
	cases := []struct {
		name  string
		opts  Options
		steps []step
	}{
		{"content streams", toolsOn, []step{{tx("a"), content("a")}, {tx("b"), content("b")}}},
		{"leading whitespace held", thinkOn, []step{{tx(" "), nil}, {tx("\n"), nil}, {tx("x"), content(" \nx")}}},
		{"reasoning streams", thinkOn, []step{{mk(ThinkStart), nil}, {tx("r"), reasoning("r")}, {mk(ThinkEnd), nil},
			{tx(" "), nil}, {tx("c"), content("c")}}},
		{"body held, call whole", toolsOn, []step{{mk(ToolCallStart), nil}, {tx("[f("), nil}, {tx(")]"), nil},
			{mk(ToolCallEnd), []Event{{Kind: KindToolCall, Call: &ToolCall{Name: "f", Arguments: "{}"}}}}}},
		{"text after a block released at once", toolsOn, []step{{mk(ToolCallStart), nil}, {tx("[f()]"), nil},
			{mk(ToolCallEnd), []Event{{Kind: KindToolCall, Call: &ToolCall{Name: "f", Arguments: "{}"}}}},
			{tx("\n"), nil}, {tx("Done"), content("\nDone")}, {tx("[x"), content("[x")}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := New(c.opts)
			for i, s := range c.steps {
				var got []Event
				if s.in.marker != 0 {
					got = p.Marker(s.in.marker)
				} else {
					got = p.Text(s.in.text)
				}
				if !reflect.DeepEqual(got, s.want) {
					t.Fatalf("step %d (%v): got %+v, want %+v", i, s.in, got, s.want)
				}
			}
		})
	}
}

// TestParserEchoHoldBound checks that held echo text past the bound is
// released as content and is no longer dropped by an orphan end marker,
// for a few chunkings (every split point would be quadratic here).
func TestParserEchoHoldBound(t *testing.T) {
	long := "[" + strings.Repeat("x", echoHoldMax)
	items := []item{mk(ToolCallStart), tx("[f()]"), mk(ToolCallEnd), tx(" "), tx(long), mk(ToolCallEnd)}
	want := result{Content: " " + long + "<|tool_call_end|>", Calls: calls("f", "{}")}
	for _, its := range [][]item{items, merged(items), chunked(items, 1000), chunked(items, 4096)} {
		if got := feed(t, toolsOn, its); !reflect.DeepEqual(got, want) {
			t.Fatalf("got content of %d bytes, calls %v", len(got.Content), got.Calls)
		}
	}
	// Just under the bound it is still an echo.
	short := "[" + strings.Repeat("x", echoHoldMax-2)
	items = []item{mk(ToolCallStart), tx("[f()]"), mk(ToolCallEnd), tx(" "), tx(short), mk(ToolCallEnd)}
	if got := feed(t, toolsOn, chunked(items, 999)); got.Content != "" {
		t.Fatalf("echo under the bound not dropped: %d bytes of content", len(got.Content))
	}
}

func TestMarkerString(t *testing.T) {
	for m, want := range map[Marker]string{
		ThinkStart: "<think>", ThinkEnd: "</think>", ToolCallStart: "<|tool_call_start|>",
		ToolCallEnd: "<|tool_call_end|>", 0: "parser.Marker(0)", 7: "parser.Marker(7)",
	} {
		if got := m.String(); got != want {
			t.Errorf("Marker(%d).String() = %q, want %q", int(m), got, want)
		}
	}
	for k, want := range map[EventKind]string{KindReasoning: "reasoning", KindContent: "content", KindToolCall: "tool_call"} {
		if got := k.String(); got != want {
			t.Errorf("EventKind(%d).String() = %q, want %q", int(k), got, want)
		}
	}
}
