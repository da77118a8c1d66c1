package hubtest

import (
	"errors"
	"regexp"
	"strings"
)

// attrRule is one .gitattributes line that sets or unsets the lfs filter.
type attrRule struct {
	re  *regexp.Regexp
	lfs bool
}

type attrRules []attrRule

// parseAttributes reads the lines of a .gitattributes that say something
// about the filter attribute: "filter=lfs" routes a path to LFS, "-filter",
// "!filter" or another filter takes it out. Comments, macro lines and
// negative patterns (which git forbids here) are skipped.
func parseAttributes(text string) attrRules {
	var rules attrRules
	for line := range strings.SplitSeq(text, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") || strings.HasPrefix(fields[0], "[attr]") || strings.HasPrefix(fields[0], "!") {
			continue
		}
		set, said := false, false
		for _, a := range fields[1:] {
			switch {
			case a == "filter=lfs":
				set, said = true, true
			case a == "-filter" || a == "!filter" || strings.HasPrefix(a, "filter="):
				set, said = false, true
			}
		}
		if re := globRegexp(fields[0]); said && re != nil {
			rules = append(rules, attrRule{re: re, lfs: set})
		}
	}
	return rules
}

// lfs reports whether the last rule matching p routes it to LFS.
func (rs attrRules) lfs(p string) bool {
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].re.MatchString(p) {
			return rs[i].lfs
		}
	}
	return false
}

// ignoreRules is a .gitignore: patterns in order, "!" re-including.
type ignoreRules []attrRule

func parseIgnore(text string) ignoreRules {
	var rules ignoreRules
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		neg := strings.HasPrefix(line, "!")
		line = strings.TrimPrefix(line, "!")
		dir := strings.HasSuffix(line, "/")
		line = strings.TrimSuffix(line, "/")
		if dir {
			// A directory pattern ignores everything below it.
			line += "/**"
		}
		if re := globRegexp(line); re != nil {
			rules = append(rules, attrRule{re: re, lfs: !neg})
		}
	}
	return rules
}

func (rs ignoreRules) match(p string) bool { return attrRules(rs).lfs(p) }

// globRegexp translates a git wildmatch pattern into a regular expression
// over whole '/'-separated paths: a pattern without a slash matches the
// last segment at any depth; one with a slash is anchored at the root;
// "*" and "?" stay within a segment, "**" crosses them. It returns nil for
// a pattern it cannot read.
func globRegexp(pat string) *regexp.Regexp {
	anchored := strings.Contains(strings.TrimSuffix(pat, "/"), "/")
	pat = strings.TrimPrefix(pat, "/")
	var b strings.Builder
	b.WriteString("^")
	if !anchored {
		b.WriteString("(?:.*/)?")
	}
	for i := 0; i < len(pat); i++ {
		c := pat[i]
		switch {
		case strings.HasPrefix(pat[i:], "**/"):
			b.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(pat[i:], "/**") && i+3 == len(pat):
			b.WriteString("/.*")
			i += 2
		case strings.HasPrefix(pat[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '[':
			j := strings.IndexByte(pat[i+1:], ']')
			if j < 0 {
				return nil
			}
			class := pat[i+1 : i+1+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += j + 1
		case c == '\\' && i+1 < len(pat):
			i++
			b.WriteString(regexp.QuoteMeta(string(pat[i])))
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil
	}
	return re
}

// checkPath refuses a repository path the hub would: empty, absolute,
// with an empty, "." or ".." segment, a .git segment, a backslash or a
// control character.
func checkPath(p string) error {
	if p == "" || len(p) > 4096 || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00\r\n") {
		return errors.New("invalid path")
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || seg == "." || seg == ".." || seg == ".git" {
			return errors.New("invalid path segment")
		}
		for i := 0; i < len(seg); i++ {
			if seg[i] < 0x20 || seg[i] == 0x7f {
				return errors.New("control character in path")
			}
		}
	}
	return nil
}
