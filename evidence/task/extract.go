package task

import (
	"math/big"
	"regexp"
	"strings"
)

// Rule names which part of a text an answer was taken from.
type Rule string

// The extraction rules, in the order Extract tries them.
const (
	// RuleHashes is GSM8K's own answer line: "#### N".
	RuleHashes Rule = "####"
	// RuleBoxed is a LaTeX \boxed{…} answer, as many models write it.
	RuleBoxed Rule = "boxed"
	// RuleLastNumber is the last number anywhere in the text.
	RuleLastNumber Rule = "last-number"
	// RuleNone: the text holds no number.
	RuleNone Rule = ""
)

// numberPattern matches a number as word problems write it: an optional
// minus sign (ASCII or U+2212), digits with optional thousands commas, an
// optional decimal part. "1,2,3" is three numbers because a comma group
// has exactly three digits.
var numberPattern = regexp.MustCompile(`[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-−]?\.\d+`)

// hashesLine matches GSM8K's answer line; the number is the first one
// after the marks.
var hashesLine = regexp.MustCompile(`(?m)^[ \t]*####(.*)$`)

// Extract takes the answer out of a model's final answer text (not its
// reasoning) by the rule docs/eval.md writes down:
//
//  1. the last line that starts with "####": the first number after the
//     marks (GSM8K's format, which the task's instruction asks for);
//  2. else the last \boxed{…}: the last number inside it;
//  3. else the last number in the text.
//
// The number is normalized (Normalize) so that "1,234", "1234.00" and
// "1234" compare equal. ok is false when no rule finds a number.
func Extract(text string) (answer string, rule Rule, ok bool) {
	if lines := hashesLine.FindAllStringSubmatch(text, -1); len(lines) > 0 {
		if n := numberPattern.FindString(lines[len(lines)-1][1]); n != "" {
			return Normalize(n), RuleHashes, true
		}
	}
	if inner, found := lastBoxed(text); found {
		if ns := numberPattern.FindAllString(inner, -1); len(ns) > 0 {
			return Normalize(ns[len(ns)-1]), RuleBoxed, true
		}
	}
	if ns := numberPattern.FindAllString(text, -1); len(ns) > 0 {
		return Normalize(ns[len(ns)-1]), RuleLastNumber, true
	}
	return "", RuleNone, false
}

// lastBoxed returns the contents of the last \boxed{…} in text, braces
// balanced; an unclosed one runs to the end of the text.
func lastBoxed(text string) (string, bool) {
	i := strings.LastIndex(text, `\boxed{`)
	if i < 0 {
		return "", false
	}
	rest := text[i+len(`\boxed{`):]
	depth := 1
	for j, r := range rest {
		switch r {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return rest[:j], true
			}
		}
	}
	return rest, true
}

// Normalize writes a number matched by the extraction rules in one
// canonical form: no thousands commas, an ASCII minus, no trailing
// fractional zeros, no "-0". Values are compared exactly (as rationals),
// never as floats, so "0.1" and "0.10" are equal and "0.3" and
// "0.30000000000000004" are not.
func Normalize(n string) string {
	s := strings.ReplaceAll(n, ",", "")
	s = strings.ReplaceAll(s, "−", "-")
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return s
	}
	decimals := 0
	if i := strings.IndexByte(s, '.'); i >= 0 {
		decimals = len(s) - i - 1
	}
	out := r.FloatString(decimals)
	if strings.Contains(out, ".") {
		out = strings.TrimRight(strings.TrimRight(out, "0"), ".")
	}
	if out == "-0" {
		out = "0"
	}
	return out
}
