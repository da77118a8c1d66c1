package card

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxCardBytes bounds a source card read by ParseFrontMatter.
const MaxCardBytes = 1 << 20

// FrontMatter is what a release takes over from its source model's card.
type FrontMatter struct {
	License  License
	Language []string
}

// FrontMatterError reports a source card whose front matter cannot be read.
// Line is 1-based (0 for the whole card).
type FrontMatterError struct {
	Line int
	Msg  string
}

func (e *FrontMatterError) Error() string {
	if e.Line == 0 {
		return "card: front matter: " + e.Msg
	}
	return fmt.Sprintf("card: front matter line %d: %s", e.Line, e.Msg)
}

// Unwrap returns ErrFrontMatter.
func (e *FrontMatterError) Unwrap() error { return ErrFrontMatter }

// ParseFrontMatter reads the YAML front matter of a Hugging Face model card
// and returns its license, license_name, license_link and language keys.
//
// It understands the subset cards use for these keys: top-level
// "key: scalar" (plain, single- or double-quoted), "key: [a, b]" and
// "key:" followed by "- item" lines. Other keys, and anything nested under
// them, are skipped. A card without front matter gives an empty result.
func ParseFrontMatter(data []byte) (*FrontMatter, error) {
	if len(data) > MaxCardBytes {
		return nil, &FrontMatterError{Msg: fmt.Sprintf("card larger than %d bytes", MaxCardBytes)}
	}
	if !utf8.Valid(data) {
		return nil, &FrontMatterError{Msg: "not UTF-8"}
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	fm := &FrontMatter{}
	if !strings.HasPrefix(text, "---\n") {
		return fm, nil
	}
	lines := strings.Split(text[4:], "\n")
	closed := false
	var listKey string
	for i, l := range lines {
		n := i + 2
		if l == "---" || l == "..." {
			closed = true
			break
		}
		trimmed := strings.TrimSpace(l)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		indented := l[0] == ' ' || l[0] == '\t'
		if strings.HasPrefix(trimmed, "- ") || trimmed == "-" {
			if listKey == "" {
				continue
			}
			item, err := scalar(strings.TrimSpace(strings.TrimPrefix(trimmed, "-")), n)
			if err != nil {
				return nil, err
			}
			if listKey == "language" {
				fm.Language = append(fm.Language, item)
			}
			continue
		}
		if indented {
			continue // nested under a key we skip
		}
		key, val, ok := strings.Cut(l, ":")
		if !ok {
			return nil, &FrontMatterError{Line: n, Msg: "want 'key: value'"}
		}
		key = strings.TrimSpace(key)
		val = strings.TrimSpace(val)
		listKey = ""
		if val == "" {
			listKey = key
			continue
		}
		switch key {
		case "license", "license_name", "license_link":
			s, err := scalar(val, n)
			if err != nil {
				return nil, err
			}
			switch key {
			case "license":
				fm.License.ID = s
			case "license_name":
				fm.License.Name = s
			default:
				fm.License.Link = s
			}
		case "language":
			if strings.HasPrefix(val, "[") {
				if !strings.HasSuffix(val, "]") {
					return nil, &FrontMatterError{Line: n, Msg: "unterminated flow list"}
				}
				for item := range strings.SplitSeq(val[1:len(val)-1], ",") {
					item = strings.TrimSpace(item)
					if item == "" {
						continue
					}
					s, err := scalar(item, n)
					if err != nil {
						return nil, err
					}
					fm.Language = append(fm.Language, s)
				}
			} else {
				s, err := scalar(val, n)
				if err != nil {
					return nil, err
				}
				fm.Language = append(fm.Language, s)
			}
		}
	}
	if !closed {
		return nil, &FrontMatterError{Msg: "no closing '---'"}
	}
	if len(fm.Language) > 1000 {
		return nil, &FrontMatterError{Msg: "more than 1000 languages"}
	}
	return fm, nil
}

// scalar decodes a YAML scalar of the subset: plain (a trailing " #"
// comment removed), 'single' or "double" quoted.
func scalar(s string, line int) (string, error) {
	switch {
	case strings.HasPrefix(s, `"`):
		var out string
		if err := json.Unmarshal([]byte(s), &out); err != nil {
			return "", &FrontMatterError{Line: line, Msg: "bad double-quoted scalar: " + err.Error()}
		}
		return out, nil
	case strings.HasPrefix(s, "'"):
		if len(s) < 2 || !strings.HasSuffix(s, "'") {
			return "", &FrontMatterError{Line: line, Msg: "unterminated single-quoted scalar"}
		}
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'"), nil
	}
	if i := strings.Index(s, " #"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if strings.ContainsAny(s, "{}[]&*!|>%@`") {
		return "", &FrontMatterError{Line: line, Msg: fmt.Sprintf("unsupported YAML in %q", s)}
	}
	return s, nil
}

// DetectLicense recognises a few licence texts by their titles: Apache 2.0,
// MIT and the LFM Open License v1.0 (Liquid AI's, "other" / "lfm1.0").
func DetectLicense(text []byte) (License, bool) {
	head := string(text[:min(len(text), 4096)])
	switch {
	case strings.Contains(head, "LFM Open License v1.0"):
		return License{ID: "other", Name: "lfm1.0", Link: "LICENSE"}, true
	case strings.Contains(head, "Apache License") && strings.Contains(head, "Version 2.0"):
		return License{ID: "apache-2.0"}, true
	case strings.Contains(head, "MIT License") || strings.Contains(head, "Permission is hereby granted, free of charge"):
		return License{ID: "mit"}, true
	}
	return License{}, false
}
