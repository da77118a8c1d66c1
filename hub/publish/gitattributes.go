package publish

import (
	"path"
	"strings"
)

// gitAttributes holds the lines of a .gitattributes that set or unset the
// lfs filter, in file order: what decides which release files the hub
// must store in LFS.
type gitAttributes struct {
	rules []attrRule
}

type attrRule struct {
	// segs are the pattern's '/'-separated segments; anchored patterns
	// (those with a slash) match from the root, the others match a path's
	// last segment at any depth.
	segs     []string
	anchored bool
	lfs      bool
}

// parseGitAttributes reads a .gitattributes (gitattributes(5)): each line
// is a pattern and attributes; "filter=lfs" routes matching paths to LFS,
// "-filter", "!filter" or another filter value takes them out; the last
// matching line that mentions the filter decides. Comments, "[attr]"
// macro definitions and negative patterns (which git refuses in this
// file) are skipped, as are quoted patterns, which this reader does not
// unquote.
func parseGitAttributes(text string) *gitAttributes {
	g := &gitAttributes{}
	for line := range strings.SplitSeq(text, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		pat := fields[0]
		if pat[0] == '#' || pat[0] == '!' || pat[0] == '"' || strings.HasPrefix(pat, "[attr]") {
			continue
		}
		said, lfs := false, false
		for _, a := range fields[1:] {
			switch {
			case a == "filter=lfs":
				said, lfs = true, true
			case a == "-filter", a == "!filter", strings.HasPrefix(a, "filter="):
				said, lfs = true, false
			}
		}
		if !said {
			continue
		}
		anchored := strings.Contains(strings.TrimSuffix(pat, "/"), "/")
		pat = strings.Trim(pat, "/")
		if pat == "" {
			continue
		}
		g.rules = append(g.rules, attrRule{segs: strings.Split(pat, "/"), anchored: anchored, lfs: lfs})
	}
	return g
}

// lfs reports whether p (a '/'-separated path) is routed to LFS.
func (g *gitAttributes) lfs(p string) bool {
	if g == nil {
		return false
	}
	segs := strings.Split(p, "/")
	for i := len(g.rules) - 1; i >= 0; i-- {
		r := g.rules[i]
		var ok bool
		if r.anchored {
			ok = matchSegments(r.segs, segs)
		} else {
			ok = len(r.segs) == 1 && matchSegment(r.segs[0], segs[len(segs)-1])
		}
		if ok {
			return r.lfs
		}
	}
	return false
}

// matchSegments matches path segments against pattern segments, where a
// "**" segment stands for zero or more segments (one or more when it ends
// the pattern: "dir/**" is what is inside dir). It runs in
// O(len(pat)·len(name)): ok[j] says whether pat[i:] matches name[j:].
func matchSegments(pat, name []string) bool {
	ok := make([]bool, len(name)+1)
	next := make([]bool, len(name)+1)
	ok[len(name)] = true // the empty pattern matches only the empty rest
	for i := len(pat) - 1; i >= 0; i-- {
		last := i == len(pat)-1
		for j := len(name); j >= 0; j-- {
			switch {
			case pat[i] == "**" && last:
				next[j] = j < len(name)
			case pat[i] == "**":
				// Zero segments, or one more and still "**".
				next[j] = ok[j] || j < len(name) && next[j+1]
			default:
				next[j] = j < len(name) && matchSegment(pat[i], name[j]) && ok[j+1]
			}
		}
		ok, next = next, ok
	}
	return ok[0]
}

// matchSegment matches one segment with fnmatch rules; a malformed
// pattern matches nothing.
func matchSegment(pat, name string) bool {
	ok, err := path.Match(pat, name)
	return err == nil && ok
}
