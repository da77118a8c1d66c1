package sshsig

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// AllowedSigners is a parsed allowed_signers file (ssh-keygen(1), ALLOWED
// SIGNERS).
type AllowedSigners struct {
	// Source names the file in messages.
	Source string
	// Entries are the file's key lines in order; blank and comment lines
	// are skipped.
	Entries []AllowedSigner
}

// AllowedSigner is one line of an allowed_signers file:
// principals [options] keytype base64-key [comment].
type AllowedSigner struct {
	// Line is the 1-based line number.
	Line int
	// Principals is the principals field as written: a comma-separated
	// pattern-list (ssh_config(5) PATTERNS: '*', '?', '!' negation).
	Principals string
	// Key is the public key.
	Key ssh.PublicKey
	// CertAuthority marks a cert-authority line. Certificates are not
	// supported, so such a line never grants a key.
	CertAuthority bool
	// Namespaces is the namespaces="…" pattern-list when HasNamespaces;
	// without the option any namespace is allowed (and with an empty list,
	// none, as in OpenSSH).
	Namespaces    string
	HasNamespaces bool
	// ValidAfter and ValidBefore are the valid-after/valid-before bounds;
	// zero when absent.
	ValidAfter, ValidBefore time.Time
}

// ReadAllowedSigners reads and parses the allowed_signers file at path,
// refusing one larger than MaxAllowedSignersBytes.
func ReadAllowedSigners(path string) (*AllowedSigners, error) {
	data, err := readBounded(path, MaxAllowedSignersBytes)
	if err != nil {
		return nil, err
	}
	return ParseAllowedSigners(path, data)
}

// ParseAllowedSigners parses an allowed_signers file; source names it in
// errors. Every key line must parse, whichever principal it is for: a bad
// line is a *SyntaxError with its line number (ssh-keygen -Y verify skips
// lines of other principals unread; a file lfmq accepts, ssh-keygen
// accepts). Option keywords are case-insensitive and values must be
// quoted, as in OpenSSH.
func ParseAllowedSigners(source string, data []byte) (*AllowedSigners, error) {
	if len(data) > MaxAllowedSignersBytes {
		return nil, &SyntaxError{Source: source, Msg: fmt.Sprintf("larger than %d bytes", MaxAllowedSignersBytes)}
	}
	as := &AllowedSigners{Source: source}
	line := 0
	for len(data) > 0 {
		line++
		raw, rest, _ := bytes.Cut(data, []byte("\n"))
		data = rest
		if len(raw) > MaxLineBytes {
			return nil, &SyntaxError{Source: source, Line: line, Msg: fmt.Sprintf("longer than %d bytes", MaxLineBytes)}
		}
		e, ok, err := parseLine(source, line, string(raw))
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if len(as.Entries) == MaxAllowedSigners {
			return nil, &SyntaxError{Source: source, Line: line, Msg: fmt.Sprintf("more than %d keys", MaxAllowedSigners)}
		}
		as.Entries = append(as.Entries, e)
	}
	return as, nil
}

// parseLine parses one line; ok is false for a blank or comment line.
func parseLine(source string, n int, s string) (AllowedSigner, bool, error) {
	bad := func(format string, args ...any) (AllowedSigner, bool, error) {
		return AllowedSigner{}, false, &SyntaxError{Source: source, Line: n, Msg: fmt.Sprintf(format, args...)}
	}
	s = strings.TrimRight(s, "\r")
	s = strings.TrimLeft(s, " \t")
	if s == "" || s[0] == '#' {
		return AllowedSigner{}, false, nil
	}
	if strings.ContainsRune(s, 0) {
		return bad("contains a NUL byte")
	}
	e := AllowedSigner{Line: n}
	var rest string
	if s[0] == '"' {
		end := strings.IndexByte(s[1:], '"')
		if end < 0 {
			return bad("the principals field has no closing quote")
		}
		e.Principals, rest = s[1:1+end], s[2+end:]
		if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			return bad("text right after the quoted principals")
		}
	} else {
		i := strings.IndexAny(s, " \t")
		if i < 0 {
			return bad("only one field; want principals [options] keytype base64-key")
		}
		e.Principals, rest = s[:i], s[i:]
		if strings.ContainsRune(e.Principals, '"') {
			return bad("a quote inside the principals field")
		}
	}
	if e.Principals == "" {
		return bad("empty principals field")
	}
	rest = strings.TrimLeft(rest, " \t")
	if rest == "" {
		return bad("no key after the principals")
	}
	key, _, options, _, err := ssh.ParseAuthorizedKey([]byte(rest))
	if err != nil {
		return bad("no valid key or options: %v", err)
	}
	e.Key = key
	seen := map[string]bool{}
	for _, opt := range options {
		name, value, hasValue := strings.Cut(opt, "=")
		name = strings.ToLower(name)
		if seen[name] {
			return bad("option %q given twice", name)
		}
		seen[name] = true
		switch {
		case name == "cert-authority" && !hasValue:
			e.CertAuthority = true
		case name == "namespaces" && hasValue:
			v, err := dequote(value)
			if err != nil {
				return bad("namespaces: %v", err)
			}
			e.Namespaces, e.HasNamespaces = v, true
		case (name == "valid-after" || name == "valid-before") && hasValue:
			v, err := dequote(value)
			if err != nil {
				return bad("%s: %v", name, err)
			}
			t, err := parseTime(v)
			if err != nil {
				return bad("%s: %v", name, err)
			}
			if name == "valid-after" {
				e.ValidAfter = t
			} else {
				e.ValidBefore = t
			}
		default:
			return bad("unknown option %q (known: cert-authority, namespaces=\"…\", valid-after=\"…\", valid-before=\"…\")", opt)
		}
	}
	if !e.ValidAfter.IsZero() && !e.ValidBefore.IsZero() && !e.ValidBefore.After(e.ValidAfter) {
		return bad("valid-before is not after valid-after")
	}
	return e, true, nil
}

// dequote removes the double quotes around an option value, turning \"
// into " (OpenSSH's opt_dequote).
func dequote(v string) (string, error) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", fmt.Errorf("value %s is not in double quotes", v)
	}
	v = v[1 : len(v)-1]
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) && v[i+1] == '"' {
			i++
		} else if v[i] == '"' {
			return "", fmt.Errorf("unescaped quote inside the value")
		}
		b.WriteByte(v[i])
	}
	return b.String(), nil
}

// parseTime reads an allowed_signers timestamp: YYYYMMDD, YYYYMMDDHHMM or
// YYYYMMDDHHMMSS, in the local time zone unless followed by "Z" or "UTC"
// (OpenSSH's parse_absolute_time).
func parseTime(s string) (time.Time, error) {
	loc := time.Local
	v := s
	switch {
	case len(v) > 1 && strings.EqualFold(v[len(v)-1:], "z"):
		loc, v = time.UTC, v[:len(v)-1]
	case len(v) > 3 && strings.EqualFold(v[len(v)-3:], "utc"):
		loc, v = time.UTC, v[:len(v)-3]
	}
	layout := map[int]string{8: "20060102", 12: "200601021504", 14: "20060102150405"}[len(v)]
	if layout == "" {
		return time.Time{}, fmt.Errorf("time %q is not YYYYMMDD[Z] or YYYYMMDDHHMM[SS][Z]", s)
	}
	t, err := time.ParseInLocation(layout, v, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: %v", s, err)
	}
	if t.Unix() <= 0 {
		return time.Time{}, fmt.Errorf("time %q is not after 1970", s)
	}
	return t, nil
}

// maxSubpattern is OpenSSH's limit on one pattern of a pattern-list
// (match_pattern_list's 1024-byte buffer): a longer one matches nothing.
const maxSubpattern = 1023

// matchList reports whether s matches the comma-separated pattern-list:
// some pattern matches and no negated ("!") pattern does. It follows
// OpenSSH's match_pattern_list (case-sensitive) to the edge cases: an empty
// list matches nothing, a trailing comma ends the list, and a pattern of
// 1023 bytes or more makes the whole list match nothing.
func matchList(s, list string) bool {
	positive := false
	for list != "" {
		negated := list[0] == '!'
		if negated {
			list = list[1:]
		}
		sub, rest, _ := strings.Cut(list, ",")
		list = rest
		if len(sub) >= maxSubpattern {
			return false
		}
		if match(s, sub) {
			if negated {
				return false
			}
			positive = true
		}
	}
	return positive
}

// match reports whether s matches the glob pattern p, where '*' matches
// any run of bytes and '?' any one byte. It backtracks only to the last
// '*', so it runs in O(len(s)·len(p)) at worst.
func match(s, p string) bool {
	si, pi := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			si++
			pi++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			mark++
			si, pi = mark, star+1
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
