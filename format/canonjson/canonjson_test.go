package canonjson

import (
	"testing"
)

func TestMarshal(t *testing.T) {
	type inner struct {
		Zeta  int     `json:"zeta"`
		Alpha float64 `json:"alpha"`
	}
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"sorted keys", map[string]int{"b": 1, "a": 2}, "{\n  \"a\": 2,\n  \"b\": 1\n}\n"},
		{"struct fields sorted", inner{Zeta: 1, Alpha: 0.1}, "{\n  \"alpha\": 0.1,\n  \"zeta\": 1\n}\n"},
		{"no html escaping", map[string]string{"k": "<a&b>"}, "{\n  \"k\": \"<a&b>\"\n}\n"},
		{"nested", map[string]any{"x": []any{map[string]int{"d": 1, "c": 2}}}, "{\n  \"x\": [\n    {\n      \"c\": 2,\n      \"d\": 1\n    }\n  ]\n}\n"},
		{"shortest floats", []float64{1e-7, 0.30000000000000004, 100}, "[\n  1e-7,\n  0.30000000000000004,\n  100\n]\n"},
		{"unicode kept", map[string]string{"s": "héllo ✓"}, "{\n  \"s\": \"héllo ✓\"\n}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Marshal = %q, want %q", got, tt.want)
			}
			if !IsCanonical(got) {
				t.Errorf("IsCanonical(%q) = false", got)
			}
		})
	}
}

func TestIsCanonicalRejects(t *testing.T) {
	for _, s := range []string{`{"b":1,"a":2}`, "{\n  \"a\": 1\n}", "{\n    \"a\": 1\n}\n", "not json"} {
		if IsCanonical([]byte(s)) {
			t.Errorf("IsCanonical(%q) = true", s)
		}
	}
}
