package strictjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

type doc struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
	Tags  []string
}

// TestUnmarshal walks the faults one by one: each is refused with the error
// a caller can tell apart, and the well-formed cases decode.
func TestUnmarshal(t *testing.T) {
	cases := []struct {
		name, in string
		limit    int64
		want     doc
		trailing bool
		size     bool
		errHas   string // another error whose text contains this
	}{
		{name: "plain", in: `{"name":"a","count":2}`, want: doc{Name: "a", Count: 2}},
		{name: "white space around", in: " \t\r\n{\"name\":\"a\"}\n\n ", want: doc{Name: "a"}},
		{name: "exactly the limit", in: `{"count":1}`, limit: 11, want: doc{Count: 1}},
		{name: "over the limit", in: `{"count":1}`, limit: 10, size: true},
		{name: "unknown key", in: `{"name":"a","cuont":2}`, errHas: `unknown field "cuont"`},
		{name: "stray brace", in: `{"name":"a"}}`, trailing: true},
		{name: "stray bracket", in: `{"name":"a"}]`, trailing: true},
		{name: "second value", in: `{"name":"a"}{"name":"b"}`, trailing: true},
		{name: "text after", in: "{\"name\":\"a\"}\nx", trailing: true},
		{name: "nul after", in: "{\"name\":\"a\"}\x00", trailing: true},
		{name: "empty", in: ``, errHas: "EOF"},
		{name: "cut short", in: `{"name":"a"`, errHas: "EOF"},
		{name: "wrong type", in: `{"count":"2"}`, errHas: "cannot unmarshal string"},
		{name: "not an object", in: `[1]`, errHas: "cannot unmarshal array"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			limit := tc.limit
			if limit == 0 {
				limit = 1 << 20
			}
			var got doc
			err := Unmarshal([]byte(tc.in), limit, &got)
			var se *SizeError
			switch {
			case tc.size:
				if !errors.As(err, &se) || se.Size != int64(len(tc.in)) || se.Limit != limit {
					t.Fatalf("err = %v, want a *SizeError of %d over %d", err, len(tc.in), limit)
				}
			case tc.trailing:
				if !errors.Is(err, ErrTrailingData) {
					t.Fatalf("err = %v, want ErrTrailingData", err)
				}
			case tc.errHas != "":
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err = %v, want one containing %q", err, tc.errHas)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if got.Name != tc.want.Name || got.Count != tc.want.Count || len(got.Tags) != 0 {
					t.Fatalf("decoded %+v, want %+v", got, tc.want)
				}
			}
		})
	}
}

// FuzzUnmarshal feeds arbitrary bytes: Unmarshal never panics, and whatever
// it accepts is one valid JSON document within the limit that
// encoding/json decodes to the same value.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{`{"name":"a","count":2,"Tags":["x"]}`, `{"name":"a"}}`, `{} {}`, " {}\n", `{"count":1e400}`, `nul`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got doc
		if err := Unmarshal(data, 256, &got); err != nil {
			return
		}
		if len(data) > 256 || !json.Valid(data) {
			t.Fatalf("accepted %q", data)
		}
		var plain doc
		if err := json.Unmarshal(data, &plain); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", data, err)
		}
		if plain.Name != got.Name || plain.Count != got.Count || strings.Join(plain.Tags, "\x00") != strings.Join(got.Tags, "\x00") {
			t.Fatalf("%q: decoded %+v, encoding/json %+v", data, got, plain)
		}
	})
}
