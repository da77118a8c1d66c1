package jsonkind

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestOfGo names, for each wrong-typed field, what encoding/json wanted.
func TestOfGo(t *testing.T) {
	var v struct {
		S  string
		B  bool
		I  *int
		U  uint8
		F  float64
		A  []int
		M  map[string]int
		O  struct{ X int }
		AR [2]int
	}
	for _, tt := range []struct{ body, want string }{
		{`{"S": 1}`, "a string"},
		{`{"B": "yes"}`, "a boolean"},
		{`{"I": 1.5}`, "an integer"},
		{`{"U": -1}`, "an integer"},
		{`{"F": "1"}`, "a number"},
		{`{"A": {}}`, "an array"},
		{`{"AR": "x"}`, "an array"},
		{`{"M": []}`, "an object"},
		{`{"O": 3}`, "an object"},
	} {
		var te *json.UnmarshalTypeError
		if err := json.Unmarshal([]byte(tt.body), &v); !errors.As(err, &te) {
			t.Fatalf("%s: %v, want an UnmarshalTypeError", tt.body, err)
		}
		if got := OfGo(te.Type.Kind()); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.body, got, tt.want)
		}
	}
}
