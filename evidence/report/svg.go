package report

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Curve is one variant's per-token KL sample on a plot.
type Curve struct {
	Name string
	KL   []float64
	// Dashed draws the curve dashed (used for the noise floors).
	Dashed bool
}

// Plot geometry, in SVG user units.
const (
	plotW, plotH             = 760, 440
	marginL, marginR         = 64, 250
	marginT, marginB         = 44, 52
	plotPoints               = 256 // points per curve (ranks evenly spaced)
	minDecade, maxDecadeSpan = -12, 16
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// CDF draws the empirical CDF of each curve's per-token KL on a log-scale x
// axis (fraction of tokens with KL ≤ x against x) as a standalone SVG, with
// a legend on the right. Values at or below the left edge (including exact
// zeros) are drawn at the edge; the legend counts the values ≤ 0. The
// output depends only on the input.
func CDF(title string, curves []Curve) []byte {
	lo, hi := axisRange(curves)
	iw, ih := innerSize()
	xOf := func(v float64) float64 {
		l := float64(lo)
		if v > 0 {
			l = math.Max(math.Log10(v), float64(lo))
		}
		return float64(marginL) + (math.Min(l, float64(hi))-float64(lo))/float64(hi-lo)*iw
	}
	yOf := func(frac float64) float64 { return float64(marginT) + (1-frac)*ih }

	var b bytes.Buffer
	openSVG(&b, title)
	// Grid and axes.
	step := 1
	if hi-lo > 8 {
		step = 2
	}
	for d := lo; d <= hi; d++ {
		label := ""
		if (d-lo)%step == 0 {
			label = fmt.Sprintf("1e%d", d)
		}
		xGridLine(&b, float64(marginL)+float64(d-lo)/float64(hi-lo)*iw, label)
	}
	for _, q := range []float64{0, 0.25, 0.5, 0.75, 1} {
		yGridLine(&b, yOf(q), strconv.FormatFloat(q, 'f', 2, 64))
	}
	closeAxes(&b, "per-token KL(ref ‖ cand), nats (log scale)", "fraction of tokens with KL ≤ x")

	for i, c := range curves {
		color := palette[i%len(palette)]
		kl := slices.Clone(c.KL)
		slices.Sort(kl)
		n := len(kl)
		dash := ""
		if c.Dashed {
			dash = " stroke-dasharray=\"6 4\""
		}
		if n > 0 {
			var pts []string
			prev := -1
			for k := range plotPoints {
				j := int(math.Round(float64(k) * float64(n-1) / float64(plotPoints-1)))
				if j == prev {
					continue
				}
				prev = j
				// Step shape: the CDF jumps to (j+1)/n at kl[j].
				x := f1(xOf(kl[j]))
				if len(pts) == 0 {
					pts = append(pts, x+","+f1(yOf(0)))
				}
				pts = append(pts, x+","+f1(yOf(float64(j)/float64(n))), x+","+f1(yOf(float64(j+1)/float64(n))))
			}
			fmt.Fprintf(&b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\"%s points=\"%s\"/>\n", color, dash, strings.Join(pts, " "))
		}
		zeros, nonPos := 0, 0
		for _, v := range kl {
			if v == 0 {
				zeros++
			}
			if v <= 0 {
				nonPos++
			}
		}
		label := c.Name
		switch {
		case n > 0 && zeros == n:
			label += " (all 0)"
		case nonPos > 0:
			label += fmt.Sprintf(" (%s ≤ 0)", thousands(nonPos))
		}
		legendEntry(&b, i, color, dash, label)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// openSVG starts a plot: the SVG element, its white background and the
// title.
func openSVG(b *bytes.Buffer, title string) {
	fmt.Fprintf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(b, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", plotW, plotH)
	fmt.Fprintf(b, "<text x=\"%d\" y=\"24\" font-size=\"15\">%s</text>\n", marginL, html.EscapeString(title))
}

// innerSize is the width and height of the plotting area.
func innerSize() (iw, ih float64) {
	return float64(plotW - marginL - marginR), float64(plotH - marginT - marginB)
}

// yGridLine draws a horizontal grid line at y with its label on the left.
func yGridLine(b *bytes.Buffer, y float64, label string) {
	fmt.Fprintf(b, "<line x1=\"%d\" y1=\"%s\" x2=\"%d\" y2=\"%s\" stroke=\"#e0e0e0\"/>\n", marginL, f1(y), plotW-marginR, f1(y))
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%s\" text-anchor=\"end\">%s</text>\n", marginL-6, f1(y+4), html.EscapeString(label))
}

// xGridLine draws a vertical grid line at x, labelled below the axis when
// label is not empty.
func xGridLine(b *bytes.Buffer, x float64, label string) {
	fmt.Fprintf(b, "<line x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%d\" stroke=\"#e0e0e0\"/>\n", f1(x), marginT, f1(x), plotH-marginB)
	if label != "" {
		fmt.Fprintf(b, "<text x=\"%s\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", f1(x), plotH-marginB+16, html.EscapeString(label))
	}
}

// closeAxes frames the plotting area and names the axes.
func closeAxes(b *bytes.Buffer, xLabel, yLabel string) {
	iw, ih := innerSize()
	fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"%s\" height=\"%s\" fill=\"none\" stroke=\"#404040\"/>\n", marginL, marginT, f1(iw), f1(ih))
	fmt.Fprintf(b, "<text x=\"%s\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", f1(float64(marginL)+iw/2), plotH-12, html.EscapeString(xLabel))
	fmt.Fprintf(b, "<text transform=\"translate(16 %s) rotate(-90)\" text-anchor=\"middle\">%s</text>\n", f1(float64(marginT)+ih/2), html.EscapeString(yLabel))
}

// legendEntry draws the i-th entry of the legend on the right: a line in
// the curve's color and dash, and its label.
func legendEntry(b *bytes.Buffer, i int, color, dash, label string) {
	ly := marginT + 10 + 20*i
	lx := plotW - marginR + 14
	fmt.Fprintf(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", lx, ly, lx+22, ly, color, dash)
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" font-size=\"11\">%s</text>\n", lx+28, ly+4, html.EscapeString(label))
}

// axisRange returns the decades spanned by the positive values of the
// curves, at least one decade, starting no lower than 1e-12.
func axisRange(curves []Curve) (lo, hi int) {
	minPos, maxV := math.Inf(1), math.Inf(-1)
	for _, c := range curves {
		for _, v := range c.KL {
			if v > 0 && v < minPos {
				minPos = v
			}
			maxV = math.Max(maxV, v)
		}
	}
	if math.IsInf(minPos, 1) {
		return -6, 0
	}
	lo = max(int(math.Floor(math.Log10(minPos))), minDecade)
	hi = int(math.Ceil(math.Log10(maxV)))
	if hi <= lo {
		hi = lo + 1
	}
	if hi-lo > maxDecadeSpan {
		lo = hi - maxDecadeSpan
	}
	return lo, hi
}

func f1(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

// FileName turns a corpus name into a safe file name stem: letters, digits,
// '-', '_' and '.' are kept, anything else becomes '_'.
func FileName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := strings.TrimLeft(b.String(), ".")
	if s == "" {
		return "corpus"
	}
	return s
}
