package report

import (
	"math"
	"strconv"
	"strings"

	"github.com/lfmq/lfmq/evidence"
)

// Markdown renders the figures of an evidence file: the model-card table
// (docs/scoring.md, "Output"), the paired comparisons between candidates
// when there are several, and the file's notes. It depends only on f, so a
// file read back renders the same bytes as the run that wrote it.
//
// The table has the model card's columns (corpus, tokens, PPL BF16 → cand,
// ΔPPL %, top-1 %, KL mean, KL p99), with ± SE after ΔPPL, top-1 and KL
// mean; when the file holds more than one variant (several candidates, or
// the noise floors) a first column names the variant of each row.
func Markdown(f *evidence.File) string {
	var b strings.Builder
	variants := 0
	for i, r := range f.Results {
		if i == 0 || r.Candidate != f.Results[i-1].Candidate {
			variants++
		}
	}
	ref := f.Receipts.Reference.Name
	if ref == "" {
		ref = "ref"
	}
	// With one candidate there is no candidate column, so the PPL column
	// names it.
	cand := "cand"
	if variants == 1 {
		cand = f.Results[0].Candidate
	}
	head := []string{"corpus", "tokens", "PPL " + ref + " → " + cand, "ΔPPL %", "top-1 %", "KL mean", "KL p99"}
	if variants > 1 {
		head = append([]string{"candidate"}, head...)
	}
	row(&b, head)
	b.WriteString(strings.Repeat("|---", len(head)) + "|\n")
	for _, r := range f.Results {
		cells := []string{
			r.Corpus,
			thousands(r.Tokens),
			sig(float64(r.PPLRef), 4) + " → " + sig(float64(r.PPLCand), 4),
			pm(float64(r.DPPLPct), r.DPPLPctSE, 1, true),
			pm(float64(r.Top1), r.Top1SE, 100, false),
			pm(float64(r.KLMean), r.KLMeanSE, 1, false),
			sig(float64(r.KLP99), 3),
		}
		if variants > 1 {
			cells = append([]string{r.Candidate}, cells...)
		}
		row(&b, cells)
	}
	if len(f.Comparisons) > 0 {
		b.WriteString("\nPaired differences on the same tokens (B − A, ± SE):\n\n")
		row(&b, []string{"corpus", "A → B", "tokens", "KL mean B − A", "ln PPL B − A"})
		b.WriteString(strings.Repeat("|---", 5) + "|\n")
		for _, c := range f.Comparisons {
			row(&b, []string{
				c.Corpus, c.A + " → " + c.B, thousands(c.Tokens),
				pm(float64(c.KLDiff), c.KLDiffSE, 1, true),
				pm(float64(c.NLLDiff), c.NLLDiffSE, 1, true),
			})
		}
	}
	if len(f.Notes) > 0 {
		b.WriteString("\n")
		for _, n := range f.Notes {
			b.WriteString("- " + n + "\n")
		}
	}
	return b.String()
}

// Row writes one row of a Markdown table, escaping the cells' pipes.
func Row(b *strings.Builder, cells []string) { row(b, cells) }

func row(b *strings.Builder, cells []string) {
	b.WriteString("|")
	for _, c := range cells {
		b.WriteString(" " + strings.ReplaceAll(c, "|", `\|`) + " |")
	}
	b.WriteString("\n")
}

// thousands writes n with comma separators.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// sig formats x with n significant digits: fixed notation between 1e-4 and
// 1e6, scientific outside; zero is "0".
func sig(x float64, n int) string {
	switch {
	case x == 0:
		return "0"
	case math.IsNaN(x) || math.IsInf(x, 0):
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	a := math.Abs(x)
	if a < 1e-4 || a >= 1e6 {
		return strconv.FormatFloat(x, 'e', n-1, 64)
	}
	d := max(n-1-int(math.Floor(math.Log10(a))), 0)
	return noNegZero(strconv.FormatFloat(x, 'f', d, 64))
}

// pm formats scale·x ± scale·se with the SE to two significant digits and x
// to the same decimal place (three significant digits when there is no
// SE). signed puts a + before positive values.
func pm(x float64, se *evidence.Float, scale float64, signed bool) string {
	x *= scale
	plus := func(s string) string {
		if signed && x > 0 && !strings.HasPrefix(s, "-") {
			return "+" + s
		}
		return s
	}
	if se == nil {
		return plus(sig(x, 3))
	}
	e := float64(*se) * scale
	if e == 0 {
		return plus(sig(x, 3)) + " ± 0"
	}
	d := 1 - int(math.Floor(math.Log10(e)))
	if d > 6 {
		return plus(strconv.FormatFloat(x, 'e', 2, 64)) + " ± " + strconv.FormatFloat(e, 'e', 1, 64)
	}
	d = max(d, 0)
	return plus(noNegZero(strconv.FormatFloat(x, 'f', d, 64))) + " ± " + strconv.FormatFloat(e, 'f', d, 64)
}

// noNegZero turns "-0.00" into "0.00".
func noNegZero(s string) string {
	if strings.HasPrefix(s, "-") && strings.Trim(s[1:], "0.") == "" {
		return s[1:]
	}
	return s
}
