package parser

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

// The expected arguments are json.dumps(ast.literal_eval(…),
// separators=(",", ":"), ensure_ascii=False) of the Python literal, worked
// out by hand from the Python language reference.
func TestParseToolCalls(t *testing.T) {
	cases := []struct {
		name, body string
		want       []ToolCall // nil: failure
	}{
		// Shapes.
		{"bracketed", `[f(a=1)]`, calls("f", `{"a":1}`)},
		{"bare call", `f(a=1)`, calls("f", `{"a":1}`)},
		{"bare calls", `f(a=1), g()`, calls("f", `{"a":1}`, "g", "{}")},
		{"no arguments", `[get_time()]`, calls("get_time", "{}")},
		{"whitespace everywhere", " \n[ f ( a = 1 ,\n\tb = [ 1 , 2 , ] , ) , g ( ) , ]\n ", calls("f", `{"a":1,"b":[1,2]}`, "g", "{}")},
		{"dotted name", `[api.v2.search(q="x")]`, calls("api.v2.search", `{"q":"x"}`)},
		{"hyphen in name", `[get-weather(city="x")]`, calls("get-weather", `{"city":"x"}`)},
		{"underscore name", `[_private_1()]`, calls("_private_1", "{}")},
		{"unicode name", `[météo(ville="Paris")]`, calls("météo", `{"ville":"Paris"}`)},
		{"reserved-word keywords", `[f(class=1, for=2, True=3, async=4)]`, calls("f", `{"class":1,"for":2,"True":3,"async":4}`)},
		{"repeated keyword: last value, first position", `[f(a=1, b=2, a=3)]`, calls("f", `{"a":3,"b":2}`)},

		// Strings.
		{"single and double quotes", `[f(a='x"y', b="x'y")]`, calls("f", `{"a":"x\"y","b":"x'y"}`)},
		{"simple escapes", `[f(s="\\ \' \" \n \t \r \b \f \v \a")]`, calls("f", `{"s":"\\ ' \" \n \t \r \b \f \u000b \u0007"}`)},
		{"octal escapes", `[f(s="\0\101\1011\7\477")]`, calls("f", `{"s":"\u0000AA1\u0007Ŀ"}`)},
		{"hex escapes", `[f(s="\x41\xe9\x00")]`, calls("f", `{"s":"Aé\u0000"}`)},
		{"unicode escapes", `[f(s="\u00e9\u65e5\U0001F600")]`, calls("f", `{"s":"é日😀"}`)},
		{"surrogate pair combined", `[f(s="\ud83d\ude00")]`, calls("f", `{"s":"😀"}`)},
		{"lone surrogate", `[f(s="\ud83dx\ude00")]`, calls("f", `{"s":"�x�"}`)},
		{"unknown escapes keep the backslash", `[f(s="\q\N{DASH}\8\/é\é")]`, calls("f", `{"s":"\\q\\N{DASH}\\8\\/é\\é"}`)},
		{"backslash-newline", "[f(s='a\\\nb\\\r\nc')]", calls("f", `{"s":"abc"}`)},
		{"raw newline accepted", "[f(s='a\nb')]", calls("f", `{"s":"a\nb"}`)},
		{"triple quotes", `[f(s="""a "b" ""c
d""", t='''x'y''')]`, calls("f", `{"s":"a \"b\" \"\"c\nd","t":"x'y"}`)},
		{"raw string", `[f(s=r"a\nb\"c", t=R'\d+')]`, calls("f", `{"s":"a\\nb\\\"c","t":"\\d+"}`)},
		{"u prefix", `[f(s=u"é\n")]`, calls("f", `{"s":"é\n"}`)},
		{"adjacent literals concatenate", `[f(s="a" 'b'
 r"\c")]`, calls("f", `{"s":"ab\\c"}`)},
		{"no html escaping, raw non-ascii", "[f(s='<a href=\"x\">&amp;</a> \u2028\u2029 日本 \x7f')]", calls("f", "{\"s\":\"<a href=\\\"x\\\">&amp;</a> \u2028\u2029 日本 \x7f\"}")},
		{"control characters escaped", "[f(s='\x01\x1f')]", calls("f", `{"s":"\u0001\u001f"}`)},
		{"empty strings", `[f(a='', b="")]`, calls("f", `{"a":"","b":""}`)},

		// Numbers.
		{"integers", `[f(a=0, b=007, c=-0, d=+5, e=-12, f=00)]`, calls("f", `{"a":0,"b":7,"c":0,"d":5,"e":-12,"f":0}`)},
		{"big integer", `[f(n=123456789012345678901234567890, m=-000123456789012345678901234567890)]`,
			calls("f", `{"n":123456789012345678901234567890,"m":-123456789012345678901234567890}`)},
		{"underscores and prefixes", `[f(a=1_000, b=0x1F, c=0o17, d=0B101, e=-0x_10, g=0xffffffffffffffffffff)]`,
			calls("f", `{"a":1000,"b":31,"c":15,"d":5,"e":-16,"g":1208925819614629174706175}`)},
		{"floats", `[f(a=1.5, b=1., c=.5, d=1e5, e=-2.5E-3, g=00.25, h=1.e2, i=1_0.0_1)]`,
			calls("f", `{"a":1.5,"b":1.0,"c":0.5,"d":100000.0,"e":-0.0025,"g":0.25,"h":100.0,"i":10.01}`)},
		{"float repr", `[f(a=1e16, b=1e15, c=1e-5, d=0.0001, e=123456789.123456789, g=0.1, h=1.7976931348623157e308, i=5e-324, j=-0.0, k=1e-400)]`,
			calls("f", `{"a":1e+16,"b":1000000000000000.0,"c":1e-05,"d":0.0001,"e":123456789.12345679,"g":0.1,"h":1.7976931348623157e+308,"i":5e-324,"j":-0.0,"k":0.0}`)},
		{"sign with space", `[f(a=- 1, b=-.5)]`, calls("f", `{"a":-1,"b":-0.5}`)},

		// Constants and containers.
		{"constants", `[f(a=True, b=False, c=None, d=true, e=false, g=null)]`, calls("f", `{"a":true,"b":false,"c":null,"d":true,"e":false,"g":null}`)},
		{"lists", `[f(a=[], b=[1, [2, [3]]], c=[1,])]`, calls("f", `{"a":[],"b":[1,[2,[3]]],"c":[1]}`)},
		{"tuples", `[f(a=(), b=(1,), c=(1, 2), d=(1), e=((1)))]`, calls("f", `{"a":[],"b":[1],"c":[1,2],"d":1,"e":1}`)},
		{"dicts", `[f(a={}, b={'x': 1, "y": {'z': [None]},}, c={'k': 1, 'k': 2, 'j': 3})]`,
			calls("f", `{"a":{},"b":{"x":1,"y":{"z":[null]}},"c":{"k":2,"j":3}}`)},
		{"dict keys json.dumps converts", `[f(d={2: 'a', True: 'b', None: 'c', 1.5: 'd', 0x10: 'e'})]`,
			calls("f", `{"d":{"2":"a","true":"b","null":"c","1.5":"d","16":"e"}}`)},

		// JSON form.
		{"json form list", `[{"name": "a", "arguments": {"x": 1.0, "y": "p\/q", "z": [true, null]}}, {"name": "b.c", "arguments": {}}]`,
			calls("a", `{"x":1.0,"y":"p/q","z":[true,null]}`, "b.c", "{}")},
		{"json form object", ` {"name": "f", "arguments": {"k": "v"}} `, calls("f", `{"k":"v"}`)},
		{"json form arguments string", `[{"name": "f", "arguments": "{\"a\": 1, \"b\": \"<x>\"}"}]`, calls("f", `{"a":1,"b":"<x>"}`)},
		{"json form parameters", `[{"parameters": {"a": 1}, "name": "f", "id": 3}]`, calls("f", `{"a":1}`)},
		{"json form no arguments", `[{"name": "f"}, {"name": "g", "arguments": null}]`, calls("f", "{}", "g", "{}")},
		{"json form openai shape", `[{"type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]`, calls("f", `{"a":1}`)},
		{"json form surrogate pair", `[{"name": "f", "arguments": {"e": "\ud83d\ude00"}}]`, calls("f", `{"e":"😀"}`)},
		{"mixed forms", `[f(a=1), {"name": "g", "arguments": {"b": 2}}]`, calls("f", `{"a":1}`, "g", `{"b":2}`)},

		// Failures.
		{"empty", ``, nil},
		{"blank", " \n ", nil},
		{"empty list", `[]`, nil},
		{"positional argument", `[f(1)]`, nil},
		{"bare keyword", `[f(a)]`, nil},
		{"identifier value", `[f(a=b)]`, nil},
		{"expression value", `[f(a=1+2)]`, nil},
		{"call value", `[f(a=g())]`, nil},
		{"double star", `[f(**x)]`, nil},
		{"unterminated string", `[f(a="x)]`, nil},
		{"unterminated call", `[f(a=1`, nil},
		{"unterminated list", `[f(a=1)`, nil},
		{"trailing text", `[f()] and more`, nil},
		{"two lists", `[f()][g()]`, nil},
		{"missing comma", `[f() g()]`, nil},
		{"empty element", `[f(),,g()]`, nil},
		{"leading comma", `[,f()]`, nil},
		{"name only", `[f]`, nil},
		{"bad names", `[.f()]`, nil},
		{"bad names 2", `[f.()]`, nil},
		{"bad names 3", `[1f()]`, nil},
		{"space before dot", `[a .b()]`, nil},
		{"set literal", `[f(a={1, 2})]`, nil},
		{"list key", `[f(a={[1]: 2})]`, nil},
		{"missing colon", `[f(a={'k' 1})]`, nil},
		{"imaginary", `[f(a=1j)]`, nil},
		{"number then letters", `[f(a=12abc)]`, nil},
		{"double underscore", `[f(a=1__0)]`, nil},
		{"trailing underscore", `[f(a=1_)]`, nil},
		{"bad exponent", `[f(a=1e)]`, nil},
		{"bare dot", `[f(a=.)]`, nil},
		{"sign without number", `[f(a=-x)]`, nil},
		{"float overflow", `[f(a=1e309)]`, nil},
		{"short hex escape", `[f(a="\x4")]`, nil},
		{"short unicode escape", `[f(a="\u12")]`, nil},
		{"escape past max rune", `[f(a="\U00110000")]`, nil},
		{"trailing backslash", `[f(a="\`, nil},
		{"raw string escaped quote does not close", `[f(a=r"\")]`, nil},
		{"bytes literal", `[f(a=b"x")]`, nil},
		{"f-string", `[f(a=f"x")]`, nil},
		{"empty hex", `[f(a=0x)]`, nil},
		{"json form without name", `[{"arguments": {}}]`, nil},
		{"json form empty name", `[{"name": "", "arguments": {}}]`, nil},
		{"json form non-string name", `[{"name": 1}]`, nil},
		{"json form list arguments", `[{"name": "f", "arguments": [1]}]`, nil},
		{"json form bad arguments string", `[{"name": "f", "arguments": "not json"}]`, nil},
		{"json form arguments string not an object", `[{"name": "f", "arguments": "[1]"}]`, nil},
		{"too deep", "[f(a=" + strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1) + ")]", nil},
		{"deep but allowed", "[f(a=" + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + ")]",
			calls("f", `{"a":`+strings.Repeat("[", maxDepth-1)+strings.Repeat("]", maxDepth-1)+`}`)},
		{"huge hex", "[f(a=0x" + strings.Repeat("f", maxRadixDigits+1) + ")]", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ParseToolCalls(c.body)
			if ok != (c.want != nil) || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("ParseToolCalls(%q) = %q, %v; want %q", c.body, got, ok, c.want)
			}
		})
	}
}

func TestAppendPyFloat(t *testing.T) {
	tenth := 0.1 // a variable: constant arithmetic would be exact
	// repr() of each float in CPython 3.
	cases := []struct {
		f    float64
		want string
	}{
		{0, "0.0"}, {math.Copysign(0, -1), "-0.0"}, {1, "1.0"}, {-1, "-1.0"}, {0.5, "0.5"},
		{100000, "100000.0"}, {1e15, "1000000000000000.0"}, {9999999999999998, "9999999999999998.0"},
		{1e16, "1e+16"}, {1.5e16, "1.5e+16"}, {1e22, "1e+22"}, {1e100, "1e+100"},
		{0.0001, "0.0001"}, {0.00012, "0.00012"}, {1e-5, "1e-05"}, {1.5e-7, "1.5e-07"},
		{0.1, "0.1"}, {tenth + 2*tenth, "0.30000000000000004"}, {1.0 / 3, "0.3333333333333333"},
		{123456789.123456789, "123456789.12345679"}, {math.MaxFloat64, "1.7976931348623157e+308"},
		{5e-324, "5e-324"}, {2.2250738585072014e-308, "2.2250738585072014e-308"}, {-2.5e-3, "-0.0025"},
		{123456789012345678, "1.2345678901234568e+17"},
	}
	for _, c := range cases {
		if got := string(appendPyFloat(nil, c.f)); got != c.want {
			t.Errorf("appendPyFloat(%v) = %s, want %s", c.f, got, c.want)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", `""`},
		{"plain", `"plain"`},
		{"<>&'", `"<>&'"`},
		{"\"\\/", `"\"\\/"`},
		{"\n\r\t\b\f\x00\x1f\x7f", `"\n\r\t\b\f\u0000\u001f` + "\x7f\""},
		{"\u2028\u2029é日😀", "\"\u2028\u2029é日😀\""},
		{"a\xffb\xe2\x82", "\"a\uFFFDb\uFFFD\uFFFD\""},
	}
	for _, c := range cases {
		if got := string(appendJSONString(nil, c.in)); got != c.want {
			t.Errorf("appendJSONString(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}
