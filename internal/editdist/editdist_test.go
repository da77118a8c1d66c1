package editdist

import "testing"

func TestLevenshtein(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "model", 5},
		{"model", "", 5},
		{"model", "model", 0},
		{"modle", "model", 2}, // a transposition is two edits
		{"max-token", "max-tokens", 1},
		{"hidden_sise", "hidden_size", 1},
		{"kitten", "sitting", 3},
		{"dry-run", "print-command", 10},
	} {
		if got := Levenshtein(tt.a, tt.b); got != tt.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := Levenshtein(tt.b, tt.a); got != tt.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d (symmetric)", tt.b, tt.a, got, tt.want)
		}
	}
}
