package sums

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/lfmq/lfmq/format/lfmq1"
)

// File names of the two lists inside a release.
const (
	SumsFile           = "SHA256SUMS"
	RuntimeReleaseFile = "runtime-release.json"
)

// Bounds on untrusted lists. A release lists a few hundred files; a
// repository's list a few thousand.
const (
	// MaxListBytes bounds a SHA256SUMS or runtime-release.json file.
	MaxListBytes = 16 << 20
	// MaxPathBytes bounds one path (Linux's PATH_MAX).
	MaxPathBytes = 4096
	// MaxEntries bounds the number of lines of a SHA256SUMS.
	MaxEntries = 1 << 16
)

// ErrMalformed is the sentinel of every syntax error in a hash list.
var ErrMalformed = errors.New("verify: malformed hash list")

// ErrUnsafePath is the sentinel of a path that could leave the directory it
// is relative to: absolute, with a ".." segment, a backslash, a control
// character, or (for bundle paths) a character outside [A-Za-z0-9._-].
var ErrUnsafePath = errors.New("verify: unsafe path")

// PathRule selects which paths a list may hold.
type PathRule int

const (
	// AnyPath accepts any relative path without "." or ".." segments,
	// backslash, CR, LF or NUL: a general sha256sum list.
	AnyPath PathRule = iota
	// BundlePath also restricts every segment to [A-Za-z0-9._-]
	// (docs/release.md, "Layout") and requires the list to be sorted.
	BundlePath
)

// Entry is one line of a SHA256SUMS file.
type Entry struct {
	// SHA256 is 64 lower-case hex digits.
	SHA256 string
	// Path is relative and '/'-separated.
	Path string
	// Line is the 1-based line number it was read from (0 when built in
	// memory).
	Line int
}

// SyntaxError reports a line of a hash list that breaks the format. Err is
// ErrMalformed or ErrUnsafePath.
type SyntaxError struct {
	// File names the list in messages (e.g. "SHA256SUMS").
	File string
	// Line is 1-based; 0 for a whole-file problem.
	Line int
	// Path is the offending path, when the line has one.
	Path string
	Msg  string
	Err  error
}

func (e *SyntaxError) Error() string {
	where := e.File
	if e.Line > 0 {
		where = fmt.Sprintf("%s line %d", e.File, e.Line)
	}
	if e.Path != "" {
		return fmt.Sprintf("verify: %s: %q: %s", where, e.Path, e.Msg)
	}
	return fmt.Sprintf("verify: %s: %s", where, e.Msg)
}

// Unwrap returns ErrMalformed or ErrUnsafePath.
func (e *SyntaxError) Unwrap() error { return e.Err }

// PathError reports a path that breaks the rules of a PathRule.
type PathError struct {
	Path string
	Msg  string
}

func (e *PathError) Error() string { return fmt.Sprintf("verify: path %q: %s", e.Path, e.Msg) }

// Unwrap returns ErrUnsafePath.
func (e *PathError) Unwrap() error { return ErrUnsafePath }

// CheckPath returns a *PathError if p is not a safe relative path under
// rule.
func CheckPath(p string, rule PathRule) error {
	bad := func(msg string) error { return &PathError{Path: p, Msg: msg} }
	switch {
	case p == "":
		return bad("empty")
	case len(p) > MaxPathBytes:
		return bad(fmt.Sprintf("longer than %d bytes", MaxPathBytes))
	case p[0] == '/':
		return bad("absolute")
	case strings.ContainsAny(p, "\\\r\n\x00"):
		return bad("contains a backslash, CR, LF or NUL")
	}
	for seg := range strings.SplitSeq(p, "/") {
		switch seg {
		case "":
			return bad("empty segment")
		case ".", "..":
			return bad("has a " + seg + " segment")
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if c < 0x20 || c == 0x7f {
				return bad("contains a control character")
			}
			if rule == BundlePath && !bundleChar(c) {
				return bad(fmt.Sprintf("character %q outside [A-Za-z0-9._-]", c))
			}
		}
	}
	if len(p) >= 2 && p[1] == ':' {
		// "C:foo" is a drive-relative path on Windows.
		return bad("looks like a Windows drive path")
	}
	return nil
}

func bundleChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// ValidSHA256 reports whether s is exactly 64 lower-case hex digits.
func ValidSHA256(s string) bool { return lfmq1.ValidSHA256(s) }

// Parse reads a SHA256SUMS file strictly (docs/release.md, "SHA256SUMS"): each line is 64
// lower-case hex digits, "  " or " *", a path, "\n"; no BOM, CR, empty line,
// GNU backslash escape or duplicate path; a final newline; at least one line.
// BundlePath lists must also be sorted by path bytes. name is used in
// messages. Every error is a *SyntaxError naming the line.
func Parse(name string, data []byte, rule PathRule) ([]Entry, error) {
	fail := func(line int, path, msg string, err error) error {
		return &SyntaxError{File: name, Line: line, Path: path, Msg: msg, Err: err}
	}
	switch {
	case len(data) > MaxListBytes:
		return nil, fail(0, "", fmt.Sprintf("%d bytes, larger than the %d-byte limit", len(data), MaxListBytes), ErrMalformed)
	case len(data) == 0:
		return nil, fail(0, "", "empty list", ErrMalformed)
	case bytes.HasPrefix(data, []byte("\xef\xbb\xbf")):
		return nil, fail(1, "", "starts with a byte-order mark", ErrMalformed)
	case data[len(data)-1] != '\n':
		return nil, fail(bytes.Count(data, []byte("\n"))+1, "", "no final newline", ErrMalformed)
	}
	lines := bytes.Split(data[:len(data)-1], []byte("\n"))
	if len(lines) > MaxEntries {
		return nil, fail(0, "", fmt.Sprintf("%d lines, more than the %d-line limit", len(lines), MaxEntries), ErrMalformed)
	}
	entries := make([]Entry, 0, len(lines))
	seen := make(map[string]int, len(lines))
	for i, l := range lines {
		n := i + 1
		if len(l) > 64+2+MaxPathBytes {
			return nil, fail(n, "", "line too long", ErrMalformed)
		}
		if bytes.IndexByte(l, '\r') >= 0 {
			return nil, fail(n, "", "contains a carriage return", ErrMalformed)
		}
		if len(l) > 0 && l[0] == '\\' {
			return nil, fail(n, "", "backslash-escaped name (GNU escape) refused", ErrUnsafePath)
		}
		if len(l) < 64+2+1 {
			return nil, fail(n, "", "want '<64 hex digits>  <path>'", ErrMalformed)
		}
		sum := string(l[:64])
		if !ValidSHA256(sum) {
			return nil, fail(n, "", "digest is not 64 lower-case hex digits", ErrMalformed)
		}
		if sep := string(l[64:66]); sep != "  " && sep != " *" {
			return nil, fail(n, "", fmt.Sprintf("separator %q, want two spaces or ' *'", sep), ErrMalformed)
		}
		p := string(l[66:])
		if err := CheckPath(p, rule); err != nil {
			return nil, fail(n, p, err.(*PathError).Msg, ErrUnsafePath)
		}
		if prev, dup := seen[p]; dup {
			return nil, fail(n, p, fmt.Sprintf("listed twice (first on line %d)", prev), ErrMalformed)
		}
		seen[p] = n
		if rule == BundlePath && len(entries) > 0 && entries[len(entries)-1].Path > p {
			return nil, fail(n, p, "not sorted by path bytes", ErrMalformed)
		}
		entries = append(entries, Entry{SHA256: sum, Path: p, Line: n})
	}
	return entries, nil
}

// Format writes entries as a SHA256SUMS file: sorted by path bytes, two
// spaces, final newline. It refuses invalid digests, unsafe paths (under
// rule) and duplicates, so its output always parses.
func Format(entries []Entry, rule PathRule) ([]byte, error) {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	if len(sorted) == 0 {
		return nil, &SyntaxError{File: SumsFile, Msg: "no entries", Err: ErrMalformed}
	}
	var buf bytes.Buffer
	for i, e := range sorted {
		if !ValidSHA256(e.SHA256) {
			return nil, &SyntaxError{File: SumsFile, Path: e.Path, Msg: fmt.Sprintf("digest %q is not 64 lower-case hex digits", e.SHA256), Err: ErrMalformed}
		}
		if err := CheckPath(e.Path, rule); err != nil {
			return nil, &SyntaxError{File: SumsFile, Path: e.Path, Msg: err.(*PathError).Msg, Err: ErrUnsafePath}
		}
		if i > 0 && sorted[i-1].Path == e.Path {
			return nil, &SyntaxError{File: SumsFile, Path: e.Path, Msg: "listed twice", Err: ErrMalformed}
		}
		buf.WriteString(e.SHA256)
		buf.WriteString("  ")
		buf.WriteString(e.Path)
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}

// ErrTooLarge reports a list file over MaxListBytes.
var ErrTooLarge = fmt.Errorf("larger than the %d-byte limit for a list file", MaxListBytes)

// ReadList reads a list file (SHA256SUMS, runtime-release.json) from r,
// reading at most MaxListBytes+1 bytes: a longer one is ErrTooLarge, so
// that no reader of untrusted lists holds more than the limit.
func ReadList(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxListBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxListBytes {
		return nil, ErrTooLarge
	}
	return data, nil
}
