package sums

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

const (
	h1 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	h2 = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

func TestParse(t *testing.T) {
	data := h1 + "  README.md\n" + h2 + " *checkpoint/global.safetensors\n"
	got, err := Parse("SHA256SUMS", []byte(data), BundlePath)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{h1, "README.md", 1}, {h2, "checkpoint/global.safetensors", 2}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	// A general list may hold any safe path, in any order.
	any := h1 + "  z dir/with space.txt\n" + h2 + "  a/b\n"
	if _, err := Parse("list", []byte(any), AnyPath); err != nil {
		t.Fatal(err)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name   string
		data   string
		rule   PathRule
		line   int
		unsafe bool
		msg    string
	}{
		{"empty", "", AnyPath, 0, false, "empty list"},
		{"bom", "\xef\xbb\xbf" + h1 + "  a\n", AnyPath, 1, false, "byte-order mark"},
		{"no final newline", h1 + "  a\n" + h2 + "  b", AnyPath, 2, false, "no final newline"},
		{"crlf", h1 + "  a\r\n", AnyPath, 1, false, "carriage return"},
		{"empty line", h1 + "  a\n\n", AnyPath, 2, false, "want '<64 hex digits>"},
		{"upper hex", strings.ToUpper(h1) + "  a\n", AnyPath, 1, false, "64 lower-case hex"},
		{"short digest", h1[:63] + "  a\n", AnyPath, 1, false, "want '<64 hex digits>"},
		{"non-hex digest", h1[:63] + "g  a\n", AnyPath, 1, false, "64 lower-case hex"},
		{"short digest, long path", h1[:63] + "  abc\n", AnyPath, 1, false, "64 lower-case hex"},
		{"one space", h1 + " a\n", AnyPath, 1, false, "want '<64 hex digits>"},
		{"tab separator", h1 + "\t a\n", AnyPath, 1, false, "separator"},
		{"no path", h1 + "  \n", AnyPath, 1, false, "want '<64 hex digits>"},
		{"duplicate", h1 + "  a\n" + h2 + "  a\n", AnyPath, 2, false, "listed twice (first on line 1)"},
		{"absolute", h1 + "  /etc/passwd\n", AnyPath, 1, true, "absolute"},
		{"dotdot", h1 + "  a/../../etc/passwd\n", AnyPath, 1, true, ".. segment"},
		{"leading dotdot", h1 + "  ../x\n", AnyPath, 1, true, ".. segment"},
		{"dot segment", h1 + "  ./x\n", AnyPath, 1, true, ". segment"},
		{"empty segment", h1 + "  a//b\n", AnyPath, 1, true, "empty segment"},
		{"backslash", h1 + "  a\\b\n", AnyPath, 1, true, "backslash"},
		{"nul", h1 + "  a\x00b\n", AnyPath, 1, true, "NUL"},
		{"control", h1 + "  a\x01b\n", AnyPath, 1, true, "control character"},
		{"gnu escape", "\\" + h1 + "  a\\nb\n", AnyPath, 1, true, "backslash-escaped"},
		{"drive", h1 + "  C:evil\n", AnyPath, 1, true, "Windows drive"},
		{"bundle charset", h1 + "  a b\n", BundlePath, 1, true, "outside [A-Za-z0-9._-]"},
		{"bundle unsorted", h1 + "  b\n" + h2 + "  a\n", BundlePath, 2, false, "not sorted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("SHA256SUMS", []byte(tt.data), tt.rule)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a *SyntaxError", err)
			}
			if se.Line != tt.line || !strings.Contains(se.Msg, tt.msg) {
				t.Errorf("line %d msg %q, want line %d containing %q", se.Line, se.Msg, tt.line, tt.msg)
			}
			if got := errors.Is(err, ErrUnsafePath); got != tt.unsafe {
				t.Errorf("errors.Is(ErrUnsafePath) = %v, want %v", got, tt.unsafe)
			}
			if !tt.unsafe && !errors.Is(err, ErrMalformed) {
				t.Errorf("not ErrMalformed: %v", err)
			}
			if !strings.Contains(err.Error(), "SHA256SUMS") {
				t.Errorf("message %q does not name the list", err)
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	big := make([]byte, MaxListBytes+1)
	if _, err := Parse("x", big, AnyPath); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("oversized list: %v", err)
	}
	long := h1 + "  " + strings.Repeat("a", MaxPathBytes+1) + "\n"
	if _, err := Parse("x", []byte(long), AnyPath); err == nil {
		t.Error("over-long path accepted")
	}
}

func TestFormat(t *testing.T) {
	entries := []Entry{{SHA256: h2, Path: "runtime/lfmq-linux-amd64"}, {SHA256: h1, Path: "README.md"}, {SHA256: h1, Path: "LICENSE"}}
	data, err := Format(entries, BundlePath)
	if err != nil {
		t.Fatal(err)
	}
	want := h1 + "  LICENSE\n" + h1 + "  README.md\n" + h2 + "  runtime/lfmq-linux-amd64\n"
	if string(data) != want {
		t.Fatalf("got\n%s\nwant\n%s", data, want)
	}
	back, err := Parse(SumsFile, data, BundlePath)
	if err != nil || len(back) != 3 {
		t.Fatalf("round trip: %v %v", back, err)
	}
	for _, bad := range [][]Entry{
		nil,
		{{SHA256: "x", Path: "a"}},
		{{SHA256: h1, Path: "../a"}},
		{{SHA256: h1, Path: "a"}, {SHA256: h2, Path: "a"}},
	} {
		if _, err := Format(bad, BundlePath); err == nil {
			t.Errorf("Format(%v) succeeded", bad)
		}
	}
}

func TestCheckPath(t *testing.T) {
	for _, ok := range []string{"a", "a/b.c", "checkpoint/layer-00.safetensors", ".gitattributes"} {
		if err := CheckPath(ok, BundlePath); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/a", "a/", "a/./b", "..", "a/..", "a\\b", "a\nb"} {
		err := CheckPath(bad, AnyPath)
		if !errors.Is(err, ErrUnsafePath) {
			t.Errorf("%q: err %v, want ErrUnsafePath", bad, err)
		}
	}
}

// FuzzParse checks that the SHA256SUMS reader never panics, and that what it
// accepts formats back to a list it reads the same way.
func FuzzParse(f *testing.F) {
	f.Add([]byte(h1+"  a\n"+h2+" *b/c\n"), true)
	f.Add([]byte(h1+"  ../a\n"), false)
	f.Add([]byte("\\"+h1+"  a\n"), false)
	f.Add([]byte(""), true)
	f.Add([]byte(h1+"  a\r\n"), false)
	f.Fuzz(func(t *testing.T, data []byte, bundle bool) {
		rule := AnyPath
		if bundle {
			rule = BundlePath
		}
		entries, err := Parse("SHA256SUMS", data, rule)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsafePath) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			return
		}
		out, err := Format(entries, rule)
		if err != nil {
			t.Fatalf("accepted list does not format: %v", err)
		}
		again, err := Parse("SHA256SUMS", out, rule)
		if err != nil || len(again) != len(entries) {
			t.Fatalf("formatted list does not parse back: %v", err)
		}
		seen := map[string]string{}
		for _, e := range entries {
			seen[e.Path] = e.SHA256
		}
		for _, e := range again {
			if seen[e.Path] != e.SHA256 {
				t.Fatalf("%q changed in the round trip", e.Path)
			}
		}
	})
}

func TestReadList(t *testing.T) {
	for _, tt := range []struct {
		n       int
		tooLong bool
	}{{0, false}, {MaxListBytes, false}, {MaxListBytes + 1, true}} {
		data, err := ReadList(bytes.NewReader(make([]byte, tt.n)))
		if tt.tooLong != errors.Is(err, ErrTooLarge) || (!tt.tooLong && len(data) != tt.n) {
			t.Errorf("%d bytes: %d read, err %v", tt.n, len(data), err)
		}
	}
}
