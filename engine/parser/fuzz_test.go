package parser

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseToolCalls checks, on arbitrary bodies: no panic; a success has
// calls with non-empty UTF-8 names and arguments that are a valid JSON
// object; and the result is canonical: writing the calls back in the JSON
// form and parsing that gives the same calls.
func FuzzParseToolCalls(f *testing.F) {
	for _, s := range []string{
		`[calculate(expression="619 + 419")]`,
		`[a(x=1), b.c.d(y='z\n\x41\u00e9'), e()]`,
		`[f(s="""t""", r=r"\d", n=-0x1F, x=1.5e-7, l=[1, (2,), {'k': None}], b=True, m=null)]`,
		`[{"name": "f", "arguments": {"a": [1.0, "\ud83d\ude00"]}}]`,
		`{"name": "g", "arguments": "{\"k\": 1}"}`,
		`[f(a=1,),]`, `[f(1)]`, `[f(a="x`, `[[[[`, "[f(a='\xff\xfe')]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		got, ok := ParseToolCalls(body)
		if !ok {
			if got != nil {
				t.Fatalf("failure with calls %q", got)
			}
			return
		}
		if len(got) == 0 {
			t.Fatal("success without calls")
		}
		var list []byte
		list = append(list, '[')
		for i, c := range got {
			if c.Name == "" || !utf8.ValidString(c.Name) {
				t.Fatalf("bad name %q", c.Name)
			}
			var obj map[string]any
			if !json.Valid([]byte(c.Arguments)) || json.Unmarshal([]byte(c.Arguments), &obj) != nil || obj == nil {
				t.Fatalf("arguments not a JSON object: %q", c.Arguments)
			}
			if i > 0 {
				list = append(list, ',')
			}
			list = append(list, `{"name":`...)
			list = appendJSONString(list, c.Name)
			list = append(list, `,"arguments":`...)
			list = append(list, c.Arguments...)
			list = append(list, '}')
		}
		list = append(list, ']')
		again, ok := ParseToolCalls(string(list))
		if !ok || !reflect.DeepEqual(again, got) {
			t.Fatalf("not canonical:\n%q\n%q, %v", got, again, ok)
		}
	})
}

// fuzzItems turns fuzz bytes into parser items: bytes 1–4 are the
// markers, byte 5 only separates text items, the rest is text made valid
// UTF-8.
func fuzzItems(data string) []item {
	var items []item
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			items = append(items, tx(strings.ToValidUTF8(text.String(), "\uFFFD")))
			text.Reset()
		}
	}
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case c >= 1 && c <= 4:
			flush()
			items = append(items, mk(Marker(c)))
		case c == 5:
			flush()
		default:
			text.WriteByte(c)
		}
	}
	flush()
	return items
}

// FuzzParser checks, on arbitrary item sequences: no panic, well-formed
// events, and the same fields for the items as given, merged into runs,
// one rune per item and in chunks of n runes.
func FuzzParser(f *testing.F) {
	f.Add("\x01 plan \x02\n\nanswer \x03[f(a=1)]\x04 [f(a=1)]\x04 tail", uint8(7), uint8(2))
	f.Add(" \x05 \x01r\x03[g()]\x04\x02 x\x03[h(s='<\x05>')]\x04\x05<b>", uint8(5), uint8(1))
	f.Add("\x03{\"name\": \"f\", \"arguments\": {}}\x04\x03oops\x04\x05\n", uint8(4), uint8(3))
	f.Add("r\x02 c \x01\x03[f(", uint8(7), uint8(0))
	f.Fuzz(func(t *testing.T, data string, flags, n uint8) {
		opts := Options{Reasoning: flags&1 != 0, StartInReasoning: flags&2 != 0, Tools: flags&4 != 0}
		items := fuzzItems(data)
		want := feed(t, opts, merged(items))
		for _, its := range [][]item{items, perRune(items), chunked(items, int(n%5)+1)} {
			if got := feed(t, opts, its); !reflect.DeepEqual(got, want) {
				t.Fatalf("opts %+v\ngot  %+v\nwant %+v\nitems %v", opts, got, want, its)
			}
		}
		if !opts.Reasoning && !opts.Tools {
			var all strings.Builder
			for _, it := range items {
				if it.marker != 0 {
					all.WriteString(it.marker.String())
				} else {
					all.WriteString(it.text)
				}
			}
			if want.Content != all.String() || want.Reasoning != "" || want.Calls != nil {
				t.Fatalf("plain output changed: %+v", want)
			}
		}
	})
}

// FuzzStopMatcher checks StopMatcher against bruteStop for the text whole,
// per byte and in chunks of n bytes, with runStops' checks on each run.
func FuzzStopMatcher(f *testing.F) {
	f.Add("helloEND world", "END", "wor", uint8(3))
	f.Add("xabcd", "abcd", "bc", uint8(1))
	f.Add("café!\xe2\x82", "é!", "", uint8(2))
	f.Add("aaab", "aab", "\n", uint8(0))
	f.Fuzz(func(t *testing.T, text, s1, s2 string, n uint8) {
		stops := []string{s1, s2}
		wantEmit, wantStop := bruteStop(text, stops)
		var bytes, chunks []string
		for i := range len(text) {
			bytes = append(bytes, text[i:i+1])
		}
		for s, k := text, int(n%7)+1; s != ""; {
			k = min(k, len(s))
			chunks = append(chunks, s[:k])
			s = s[k:]
		}
		for _, pieces := range [][]string{{text}, bytes, chunks} {
			emit, stopped := runStops(t, stops, pieces, len(pieces) == 1 && utf8.ValidString(text))
			if emit != wantEmit || stopped != wantStop {
				t.Fatalf("pieces %q: got %q, %v; want %q, %v", pieces, emit, stopped, wantEmit, wantStop)
			}
		}
	})
}
