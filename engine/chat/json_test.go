package chat

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDecodeJSON(t *testing.T) {
	v, err := DecodeJSON([]byte(`{"z": 1, "a": [1.0, 2, -3e2, true, null, "é"], "m": {"y": {}, "x": []}, "z": 9, "big": 123456789012345678901}`))
	if err != nil {
		t.Fatal(err)
	}
	obj := v.(*Object)
	if got := strings.Join(obj.Keys(), ","); got != "z,a,m,big" {
		t.Errorf("keys = %s, want z,a,m,big (duplicate keeps first position)", got)
	}
	if z, _ := obj.Get("z"); z != int64(9) {
		t.Errorf("z = %#v, want int64(9) (last value wins)", z)
	}
	a, _ := obj.Get("a")
	want := []any{1.0, int64(2), -300.0, true, nil, "é"}
	for i, w := range want {
		if a.([]any)[i] != w {
			t.Errorf("a[%d] = %#v, want %#v", i, a.([]any)[i], w)
		}
	}
	if big, _ := obj.Get("big"); big != 123456789012345678901.0 {
		t.Errorf("big = %#v, want a float64", big)
	}

	for _, bad := range []string{``, `{`, `{"a":1} x`, `[1,]`, `{1:2}`, strings.Repeat("[", maxJSONDepth+2) + strings.Repeat("]", maxJSONDepth+2)} {
		if _, err := DecodeJSON([]byte(bad)); err == nil {
			t.Errorf("DecodeJSON(%.20q) succeeded", bad)
		}
	}
}

func TestObjectJSON(t *testing.T) {
	var o Object
	if err := json.Unmarshal([]byte(`{"b": "<&>", "a": {"y": 1.0, "x": [null]}}`), &o); err != nil {
		t.Fatal(err)
	}
	out, err := o.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), `{"b":"<&>","a":{"y":1.0,"x":[null]}}`; got != want {
		t.Errorf("MarshalJSON = %s, want %s", got, want)
	}
	// encoding/json re-escapes <>& unless told not to.
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&o); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), string(out)+"\n"; got != want {
		t.Errorf("Encoder = %s, want %s", got, want)
	}
	if err := json.Unmarshal([]byte(`[1]`), &o); err == nil {
		t.Error("Unmarshal of an array into Object succeeded")
	}
	var nilObj *Object
	if nilObj.Len() != 0 || nilObj.Keys() != nil {
		t.Error("nil Object is not empty")
	}
	if _, ok := nilObj.Get("x"); ok {
		t.Error("nil Object has a key")
	}
}

// TestToJSON checks the HF tojson filter: Python json.dumps with
// ensure_ascii=False. Expected strings come from CPython's json module.
func TestToJSON(t *testing.T) {
	val, err := DecodeJSON([]byte(`{"z": "<b>&amp;</b>", "é": "日本\u2028\u0001\"\\/", "n": [1, 1.0, 1e16, 0.5, -0.0, null, false], "e": {}, "l": []}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, expr, want string
	}{
		{"default", `v | tojson`, `{"z": "<b>&amp;</b>", "é": "日本` + "\u2028" + `\u0001\"\\/", "n": [1, 1.0, 1e+16, 0.5, -0.0, null, false], "e": {}, "l": []}`},
		{"sort_keys", `v.n | tojson(sort_keys=true)`, `[1, 1.0, 1e+16, 0.5, -0.0, null, false]`},
		{"ensure_ascii", `v["é"] | tojson(ensure_ascii=true)`, `"\u65e5\u672c\u2028\u0001\"\\/"`},
		{"indent", `v.n[:2] | tojson(indent=2)`, "[\n  1,\n  1.0\n]"},
		{"indent empty containers", `[v.e, v.l] | tojson(indent=1)`, "[\n {},\n []\n]"},
		{"separators", `{"a": [1, 2]} | tojson(separators=[",", ":"])`, `{"a":[1,2]}`},
		{"positional ensure_ascii", `"é" | tojson(true)`, `"\u00e9"`},
		{"surrogate pair", `"😀" | tojson(ensure_ascii=true)`, `"\ud83d\ude00"`},
		{"in string concatenation", `"[" + (v.l | tojson) + "]"`, `[[]]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := Parse("{{ " + tt.expr + " }}")
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Render(Request{Kwargs: map[string]any{"v": val}})
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}

	for _, expr := range []string{`nope | tojson`, `1 | tojson(indent=[1])`, `1 | tojson(separators=[","])`, `1 | tojson(color=true)`} {
		tmpl, err := Parse("{{ " + expr + " }}")
		if err != nil {
			t.Fatal(err)
		}
		_, err = tmpl.Render(Request{})
		var re *RenderError
		if !errors.As(err, &re) {
			t.Errorf("%s: err = %v, want *RenderError", expr, err)
		}
	}
}
