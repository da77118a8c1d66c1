package dtype

import (
	"errors"
	"testing"
)

func TestSizeAndParse(t *testing.T) {
	tests := []struct {
		name        string
		size        int
		convertible bool
	}{
		{"BF16", 2, true},
		{"F16", 2, true},
		{"F32", 4, true},
		{"I32", 4, true},
		{"U8", 1, true},
		{"F64", 8, false},
		{"I64", 8, false},
		{"I16", 2, false},
		{"I8", 1, false},
		{"U16", 2, false},
		{"U32", 4, false},
		{"U64", 8, false},
		{"BOOL", 1, false},
		{"F8_E4M3", 1, false},
		{"F8_E5M2", 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Parse(tt.name)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.name, err)
			}
			if string(d) != tt.name {
				t.Errorf("Parse(%q) = %q", tt.name, d)
			}
			if got := d.Size(); got != tt.size {
				t.Errorf("Size() = %d, want %d", got, tt.size)
			}
			if got := d.Convertible(); got != tt.convertible {
				t.Errorf("Convertible() = %v, want %v", got, tt.convertible)
			}
		})
	}
	if len(sizes) != len(tests) {
		t.Errorf("sizes has %d dtypes, the test %d", len(sizes), len(tests))
	}
}

func TestParseUnknown(t *testing.T) {
	for _, s := range []string{"", "bf16", "f32", "float32", "F8_E4M3FN", "F4", "BF16 ", "C64"} {
		t.Run(s, func(t *testing.T) {
			d, err := Parse(s)
			if err == nil {
				t.Fatalf("Parse(%q) = %q, want an error", s, d)
			}
			if !errors.Is(err, ErrUnknown) {
				t.Errorf("error %v does not wrap ErrUnknown", err)
			}
			var de *Error
			if !errors.As(err, &de) || de.Op != "Parse" || de.DType != DType(s) {
				t.Errorf("error %#v, want *Error{Op: Parse, DType: %q}", err, s)
			}
			if DType(s).Size() != 0 || DType(s).Convertible() {
				t.Errorf("unknown dtype %q has a size or is convertible", s)
			}
		})
	}
}
