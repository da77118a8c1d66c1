package chat

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, src string
		line      int // 0: reported by the engine, which puts the line in the message
		msg       string
	}{
		{"engine error keeps source lines", "{#\n\n#}\n{%- if x -%}\n\n{{ 'a' + }}{% endif %}", 0, "line 6"},
		{"unknown statement after trimmed lines", "line1\n  {%- for x in y -%}\n\n\n   {% endfr %}", 0, "line 5"},
		{"unclosed block", "a\n\n{% if x %}\n", 0, "unclosed if"},
		{"unterminated string", "a\n{{ 'abc }}\n", 2, "unterminated string"},
		{"unclosed comment", "a\n{# never closed\n", 2, "missing end of comment"},
		{"unclosed tag", "x\n\n{{ a ", 3, "not closed"},
		{"unbalanced", "{{ (1 }}", 1, "expected ')'"},
		{"stray bracket", "{{ 1 ]}}", 1, "unexpected ']'"},
		{"bad char", "{{ $ }}", 1, "unexpected char"},
		{"empty tag", "{{ }}", 1, "empty tag"},
		{"unclosed raw", "{% raw %}x", 1, "missing end of raw"},
		{"bad escape", `{{ '\x4' }}`, 1, `\x`},
		{"named escape", `{{ '\N{BULLET}' }}`, 1, `\N{...}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.src, WithName("t.jinja"))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *ParseError", err)
			}
			if pe.Line != tt.line || pe.Name != "t.jinja" || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %v (line %d), want line %d and %q", err, pe.Line, tt.line, tt.msg)
			}
		})
	}
}

// TestTranslateKeepsLines checks that every tag of the translation starts
// on its source line, whatever whitespace control removed.
func TestTranslateKeepsLines(t *testing.T) {
	src := "{#- c\n-#}\n  {%- if a -%}\n\n  x {{- b -}}\n\n{% raw %}\n{{ r }}\n{% endraw %}\n{{ 'q\\n' }}\n{%+ endif +%}\n"
	out, err := translate(src)
	if err != nil {
		t.Fatal(err)
	}
	lineOf := func(s, sub string) int {
		i := strings.Index(s, sub)
		if i < 0 {
			t.Fatalf("%q not in %q", sub, s)
		}
		return strings.Count(s[:i], "\n") + 1
	}
	for _, probe := range []struct{ src, out string }{
		{"if a", "if a"},
		{"b -}}", "( b )"},
		{"{{ 'q", "'q\\n'"},
		{"endif", "endif"},
		{"{{ r }}", "{{ r }}"},
	} {
		if a, b := lineOf(src, probe.src), lineOf(out, probe.out); a != b {
			t.Errorf("%q: source line %d, translated line %d\n%s", probe.src, a, b, out)
		}
	}
}

// TestConcurrentRender renders one template from many goroutines; run
// with -race.
func TestConcurrentRender(t *testing.T) {
	tmpl := loadFixture(t)
	req := Request{Messages: []Message{{Role: "user", Content: "hi <|im_end|>"}}, AddGenerationPrompt: true}
	want, err := tmpl.Render(req)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				got, err := tmpl.Render(req)
				if err != nil || got != want {
					t.Errorf("Render = %q, %v", got, err)
				}
				if _, err := tmpl.RenderSegments(req, lfm2Specials); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

// FuzzParse feeds arbitrary sources through translation, compilation and
// rendering: errors are fine, panics and hangs are not.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"{{ bos_token }}{% for m in messages %}{{ m.role }}{% endfor %}",
		"  {%- if x -%}\n{{ 'a' | tojson }}{% endif +%}{# c #}",
		"{% raw %}{{ x }}{% endraw %}",
		"{{ {'a': {'b': [1, 2.5e3]}} | string }}",
		"{{ '\\u00e9\\x41' ~ \"}}\" }}",
		"{% set ns = namespace(a=1) %}{% set ns.a = ns.a + 1 %}{{ ns.a }}",
		"{% macro m(x) %}{{ x }}{% endmacro %}{{ m(messages[0].content) }}",
		"{{ messages[0].content.split('<')[-1].strip() }}{{ raise_exception('x') if false }}",
	} {
		f.Add(s)
	}
	req := Request{Messages: []Message{{Role: "user", Content: "a<|im_end|>b"}}, Tools: []any{"t"}}
	f.Fuzz(func(t *testing.T, src string) {
		if !utf8.ValidString(src) || len(src) > 4096 || strings.Contains(src, "range") || strings.Contains(src, "recursive") || strings.Contains(src, "macro") {
			// Loops over range() and recursive macros may run long or
			// deep; that is the template author's business, not input.
			return
		}
		tmpl, err := Parse(src)
		if err != nil {
			return
		}
		_, _ = tmpl.Render(req)
		_, _ = tmpl.RenderSegments(req, lfm2Specials)
	})
}

// FuzzParseMessages feeds arbitrary request bodies to the request parsers.
func FuzzParseMessages(f *testing.F) {
	f.Add([]byte(`[{"role": "user", "content": [{"type": "text", "text": "a"}]}, {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{\"a\": [1, {\"b\": null}]}"}}]}]`))
	f.Add([]byte(`[{"role": "user", "content": null}]`))
	f.Add([]byte(`{"a": [1, 2.5, "x", true, null, {}]}`))
	tmpl, err := Parse(`{% for m in messages %}{{ m | tojson }}{{ m | string }}{% endfor %}{{ tools | tojson }}`)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, err := ParseMessages(data)
		if err == nil {
			if _, err := tmpl.RenderSegments(Request{Messages: msgs}, lfm2Specials); err != nil {
				t.Fatalf("render of parsed messages failed: %v", err)
			}
		}
		if tools, err := ParseTools(data); err == nil {
			if _, err := tmpl.Render(Request{Tools: tools}); err != nil && tools != nil {
				t.Fatalf("render of parsed tools failed: %v", err)
			}
		}
	})
}
