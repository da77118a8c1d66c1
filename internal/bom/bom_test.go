package bom

import "testing"

func TestHas(t *testing.T) {
	for _, tt := range []struct {
		data string
		want bool
	}{
		{"\xEF\xBB\xBF{\"text\": \"a\"}", true},
		{"\xEF\xBB\xBF", true},
		{"{\"text\": \"\xEF\xBB\xBF\"}", false}, // inside a string it is text
		{"\xEF\xBB", false},
		{"", false},
		{"{}", false},
	} {
		if got := Has([]byte(tt.data)); got != tt.want {
			t.Errorf("Has(%q) = %v, want %v", tt.data, got, tt.want)
		}
	}
}
