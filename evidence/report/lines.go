package report

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Series is one line of a Lines plot: a value per x position, NaN where
// it has none.
type Series struct {
	Name string
	Y    []float64
}

// Lines draws each series as a line with a marker per point over x
// positions spaced evenly and labelled by xs (1, 2, 4, 8, 16 streams read
// as a log₂ axis), on a linear y axis from 0 to a rounded bound above the
// largest value, with the frame, grid and legend of CDF. The output
// depends only on the input.
func Lines(title, xLabel, yLabel string, xs []string, series []Series) []byte {
	iw, ih := innerSize()
	top := 0.0
	for _, s := range series {
		for _, y := range s.Y {
			if !math.IsNaN(y) && !math.IsInf(y, 0) {
				top = math.Max(top, y)
			}
		}
	}
	step, top := niceStep(top)
	xOf := func(i int) float64 {
		if len(xs) < 2 {
			return float64(marginL) + iw/2
		}
		// Half a step of room on both sides, so that end points and their
		// markers stay inside the frame.
		return float64(marginL) + (float64(i)+0.5)/float64(len(xs))*iw
	}
	yOf := func(y float64) float64 { return float64(marginT) + (1-y/top)*ih }

	var b bytes.Buffer
	openSVG(&b, title)
	for i, x := range xs {
		xGridLine(&b, xOf(i), x)
	}
	decimals := max(0, -int(math.Floor(math.Log10(step)+1e-9)))
	for k := 0; float64(k)*step <= top*(1+1e-9); k++ {
		y := float64(k) * step
		yGridLine(&b, yOf(y), strconv.FormatFloat(y, 'f', decimals, 64))
	}
	closeAxes(&b, xLabel, yLabel)
	for i, s := range series {
		color := palette[i%len(palette)]
		var pts []string
		flush := func() {
			if len(pts) > 1 {
				fmt.Fprintf(&b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\" points=\"%s\"/>\n", color, strings.Join(pts, " "))
			}
			pts = nil
		}
		for j, y := range s.Y {
			if j >= len(xs) || math.IsNaN(y) || math.IsInf(y, 0) {
				flush() // a gap in the line
				continue
			}
			pts = append(pts, f1(xOf(j))+","+f1(yOf(y)))
		}
		flush()
		for j, y := range s.Y {
			if j < len(xs) && !math.IsNaN(y) && !math.IsInf(y, 0) {
				fmt.Fprintf(&b, "<circle cx=\"%s\" cy=\"%s\" r=\"3\" fill=\"%s\"/>\n", f1(xOf(j)), f1(yOf(y)), color)
			}
		}
		legendEntry(&b, i, color, "", s.Name)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// niceStep returns a grid step of 1, 2 or 5 times a power of ten that
// cuts [0, top] into 4 to 10 parts, and the axis bound: the first
// multiple of the step at or above top (1 when top is 0).
func niceStep(top float64) (step, bound float64) {
	if top <= 0 {
		return 0.25, 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(top/5)))
	for _, m := range []float64{1, 2, 5, 10} {
		step = m * mag
		if top/step <= 10 {
			break
		}
	}
	bound = math.Ceil(top/step-1e-9) * step
	return step, bound
}
