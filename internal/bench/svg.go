package main

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// lineChart is a line chart that writeSVG draws as a standalone SVG
// image: a title, an x and a y axis with ticks, labels and titles, one
// polyline with markers per series, and a legend. Either axis can be
// logarithmic.
type lineChart struct {
	Title, XTitle, YTitle string
	// XLog and YLog make an axis logarithmic; points whose value on it is
	// not positive are left out.
	XLog, YLog bool
	// XTicks are the x values to mark (the measured sizes, say); nil
	// picks them like the y axis's.
	XTicks []float64
	// YZero makes a linear y axis start at 0 (or below, for negative
	// values).
	YZero bool
	// Width and Height are the image's size in pixels; 0 for 760x440.
	Width, Height int
	Series        []chartSeries
}

// chartSeries is one line of a chart.
type chartSeries struct {
	Name string
	// Points are drawn in order; a point whose X or Y is NaN (not
	// measured) is left out and breaks the line.
	Points []chartPoint
	Dashed bool
	// Color is an SVG color; "" picks the series' color from the palette.
	Color string
}

// chartPoint is one measurement of a series.
type chartPoint struct{ X, Y float64 }

// chartPalette are the series' colors, in order (colorblind-safe).
var chartPalette = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000"}

// Layout of a chart, in pixels.
const (
	chartMarginLeft   = 78
	chartMarginRight  = 190 // the legend's column
	chartMarginTop    = 46
	chartMarginBottom = 58
	chartInset        = 14 // between the y axis (or the plot's right edge) and the outermost x positions
)

// chartAxis maps the data values lo..hi onto the pixels p0..p1, linearly
// or logarithmically.
type chartAxis struct {
	lo, hi float64
	log    bool
	p0, p1 float64
}

// pos returns the pixel of value v.
func (a chartAxis) pos(v float64) float64 {
	var t float64
	switch {
	case a.hi == a.lo:
		t = 0.5
	case a.log:
		t = (math.Log10(v) - math.Log10(a.lo)) / (math.Log10(a.hi) - math.Log10(a.lo))
	default:
		t = (v - a.lo) / (a.hi - a.lo)
	}
	return a.p0 + t*(a.p1-a.p0)
}

// plotArea returns the plot's rectangle: left, top, right, bottom.
func (c *lineChart) plotArea() (x0, y0, x1, y1 float64) {
	w, h := c.size()
	return chartMarginLeft, chartMarginTop, float64(w - chartMarginRight), float64(h - chartMarginBottom)
}

func (c *lineChart) size() (int, int) {
	w, h := c.Width, c.Height
	if w <= 0 {
		w = 760
	}
	if h <= 0 {
		h = 440
	}
	return w, h
}

// plottable reports whether v can be drawn on an axis (log: positive).
func plottable(v float64, log bool) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (!log || v > 0)
}

// axes returns the chart's axes and their ticks.
func (c *lineChart) axes() (x, y chartAxis, xt, yt []float64) {
	var xs, ys []float64
	for _, s := range c.Series {
		for _, p := range s.Points {
			if plottable(p.X, c.XLog) && plottable(p.Y, c.YLog) {
				xs = append(xs, p.X)
				ys = append(ys, p.Y)
			}
		}
	}
	x0, y0, x1, y1 := c.plotArea()
	if c.XTicks != nil {
		for _, v := range c.XTicks {
			if plottable(v, c.XLog) {
				xt = append(xt, v)
				xs = append(xs, v)
			}
		}
		x = chartAxis{lo: minOr(xs, 1), hi: maxOr(xs, 1), log: c.XLog}
	} else {
		x.lo, x.hi, xt = ticksFor(xs, c.XLog, false)
		x.log = c.XLog
	}
	x.p0, x.p1 = x0+chartInset, x1-chartInset
	y.lo, y.hi, yt = ticksFor(ys, c.YLog, c.YZero)
	y.log, y.p0, y.p1 = c.YLog, y1, y0
	return x, y, xt, yt
}

func minOr(v []float64, def float64) float64 {
	if len(v) == 0 {
		return def
	}
	return slices.Min(v)
}

func maxOr(v []float64, def float64) float64 {
	if len(v) == 0 {
		return def
	}
	return slices.Max(v)
}

// ticksFor returns an axis range that holds every value of v, with round
// bounds, and the ticks on it: 1-2-5 steps on a linear axis, powers of
// ten on a logarithmic one (with 2 and 5 between them over up to two
// decades).
func ticksFor(v []float64, log, zero bool) (lo, hi float64, ticks []float64) {
	lo, hi = minOr(v, 1), maxOr(v, 1)
	if log {
		d0, d1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if d1 == d0 {
			d1++
		}
		steps := []float64{1}
		if d1-d0 <= 2 {
			steps = []float64{1, 2, 5}
		}
		for d := d0; d <= d1; d++ {
			for _, s := range steps {
				if t := s * math.Pow(10, d); t <= math.Pow(10, d1)*(1+1e-9) {
					ticks = append(ticks, t)
				}
			}
		}
		return math.Pow(10, d0), math.Pow(10, d1), ticks
	}
	if zero {
		lo, hi = math.Min(lo, 0), math.Max(hi, 0)
	}
	if hi == lo {
		pad := math.Max(math.Abs(hi)*0.1, 1)
		if zero && lo == 0 {
			hi += pad
		} else {
			lo, hi = lo-pad, hi+pad
		}
	}
	step := niceStep((hi - lo) / 5)
	lo, hi = math.Floor(lo/step)*step, math.Ceil(hi/step)*step
	for i := 0; ; i++ {
		t := lo + float64(i)*step
		if t > hi+step/2 {
			break
		}
		ticks = append(ticks, t)
	}
	return lo, hi, ticks
}

// niceStep returns the 1, 2 or 5 times a power of ten closest above raw.
func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// tickLabel formats a tick value: 1500 -> "1500", 25000 -> "25k",
// 2.5e6 -> "2.5M", 0.25 -> "0.25".
func tickLabel(v float64) string {
	a := math.Abs(v)
	trim := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	switch {
	case a >= 1e6:
		return trim(round3(v/1e6)) + "M"
	case a >= 1e4:
		return trim(round3(v/1e3)) + "k"
	default:
		return trim(round3(v))
	}
}

// round3 rounds v to three significant digits.
func round3(v float64) float64 {
	if v == 0 {
		return 0
	}
	p := math.Pow(10, 2-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}

// writeSVG draws the chart.
func (c *lineChart) writeSVG(w io.Writer) error {
	bw := bufio.NewWriter(w)
	width, height := c.size()
	x, y, xt, yt := c.axes()
	px0, py0, px1, py1 := c.plotArea()
	esc := func(s string) string {
		var b strings.Builder
		_ = xml.EscapeText(&b, []byte(s))
		return b.String()
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

	fmt.Fprintf(bw, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(bw, "<title>%s</title>\n", esc(c.Title))
	fmt.Fprintf(bw, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(bw, `<text x="%s" y="26" text-anchor="middle" font-size="15" font-weight="bold">%s</text>`+"\n",
		f((px0+px1)/2), esc(c.Title))

	// Grid lines and ticks.
	fmt.Fprintln(bw, `<g class="grid" stroke="#e4e4e4" stroke-width="1">`)
	for _, t := range yt {
		fmt.Fprintf(bw, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", f(px0), f(y.pos(t)), f(px1), f(y.pos(t)))
	}
	for _, t := range xt {
		fmt.Fprintf(bw, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", f(x.pos(t)), f(py0), f(x.pos(t)), f(py1))
	}
	fmt.Fprintln(bw, "</g>")
	fmt.Fprintln(bw, `<g class="axes" stroke="#333333" stroke-width="1">`)
	fmt.Fprintf(bw, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", f(px0), f(py1), f(px1), f(py1))
	fmt.Fprintf(bw, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", f(px0), f(py0), f(px0), f(py1))
	for _, t := range yt {
		fmt.Fprintf(bw, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", f(px0-5), f(y.pos(t)), f(px0), f(y.pos(t)))
	}
	for _, t := range xt {
		fmt.Fprintf(bw, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", f(x.pos(t)), f(py1), f(x.pos(t)), f(py1+5))
	}
	fmt.Fprintln(bw, "</g>")
	fmt.Fprintln(bw, `<g class="tick-labels" fill="#333333">`)
	for _, t := range yt {
		fmt.Fprintf(bw, `<text x="%s" y="%s" text-anchor="end">%s</text>`+"\n", f(px0-8), f(y.pos(t)+4), esc(tickLabel(t)))
	}
	for _, t := range xt {
		fmt.Fprintf(bw, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", f(x.pos(t)), f(py1+19), esc(tickLabel(t)))
	}
	fmt.Fprintln(bw, "</g>")
	scale := func(log bool) string {
		if log {
			return " (log scale)"
		}
		return ""
	}
	fmt.Fprintf(bw, `<text class="x-title" x="%s" y="%s" text-anchor="middle" font-size="13">%s</text>`+"\n",
		f((px0+px1)/2), f(py1+44), esc(c.XTitle+scale(c.XLog)))
	fmt.Fprintf(bw, `<text class="y-title" x="0" y="0" transform="translate(%s %s) rotate(-90)" text-anchor="middle" font-size="13">%s</text>`+"\n",
		f(18), f((py0+py1)/2), esc(c.YTitle+scale(c.YLog)))

	// The series, and the legend.
	for i, s := range c.Series {
		color, dash := seriesStyle(i, s)
		fmt.Fprintf(bw, `<g class="series" data-name="%s">`+"\n", esc(s.Name))
		var line []string
		flush := func() {
			if len(line) > 1 {
				fmt.Fprintf(bw, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", color, dash, strings.Join(line, " "))
			}
			line = line[:0]
		}
		var marks []string
		for _, p := range s.Points {
			if !plottable(p.X, c.XLog) || !plottable(p.Y, c.YLog) {
				flush()
				continue
			}
			cx, cy := x.pos(p.X), y.pos(p.Y)
			line = append(line, f(cx)+","+f(cy))
			marks = append(marks, marker(i, "marker", cx, cy, color, fmt.Sprintf("%s: %s at %s", s.Name, tickLabel(p.Y), tickLabel(p.X))))
		}
		flush()
		for _, m := range marks {
			fmt.Fprintln(bw, m)
		}
		fmt.Fprintln(bw, "</g>")
	}
	fmt.Fprintln(bw, `<g class="legend">`)
	lx, ly := px1+18, py0+8
	for i, s := range c.Series {
		color, dash := seriesStyle(i, s)
		yy := ly + float64(i)*20
		fmt.Fprintf(bw, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"%s/>`+"\n", f(lx), f(yy), f(lx+28), f(yy), color, dash)
		fmt.Fprintln(bw, marker(i, "legend-marker", lx+14, yy, color, ""))
		fmt.Fprintf(bw, `<text x="%s" y="%s">%s</text>`+"\n", f(lx+36), f(yy+4), esc(s.Name))
	}
	fmt.Fprintln(bw, "</g>")
	fmt.Fprintln(bw, "</svg>")
	return bw.Flush()
}

// marker returns the SVG of series i's marker at (cx, cy), of class
// class: a circle, a square, a triangle or a diamond, by turns, with title
// (if any) as its tooltip.
func marker(i int, class string, cx, cy float64, color, title string) string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	tip := ""
	if title != "" {
		var b strings.Builder
		_ = xml.EscapeText(&b, []byte(title))
		tip = "<title>" + b.String() + "</title>"
	}
	const r = 4.0
	attrs := fmt.Sprintf(`class="%s" fill="%s" stroke="#ffffff" stroke-width="1"`, class, color)
	var shape string
	switch i % 4 {
	case 0:
		shape = fmt.Sprintf(`<circle cx="%s" cy="%s" r="%s" %s>`, f(cx), f(cy), f(r), attrs) + tip + "</circle>"
	case 1:
		shape = fmt.Sprintf(`<rect x="%s" y="%s" width="%s" height="%s" %s>`, f(cx-r), f(cy-r), f(2*r), f(2*r), attrs) + tip + "</rect>"
	case 2:
		shape = fmt.Sprintf(`<polygon points="%s,%s %s,%s %s,%s" %s>`,
			f(cx), f(cy-r-1), f(cx-r-1), f(cy+r), f(cx+r+1), f(cy+r), attrs) + tip + "</polygon>"
	default:
		shape = fmt.Sprintf(`<polygon points="%s,%s %s,%s %s,%s %s,%s" %s>`,
			f(cx), f(cy-r-1), f(cx+r+1), f(cy), f(cx), f(cy+r+1), f(cx-r-1), f(cy), attrs) + tip + "</polygon>"
	}
	return shape
}

// seriesStyle returns the stroke color of series s, the i-th of its chart
// (its own, or the palette's), and the dash attribute of its line, if any.
func seriesStyle(i int, s chartSeries) (color, dash string) {
	color = s.Color
	if color == "" {
		color = chartPalette[i%len(chartPalette)]
	}
	if s.Dashed {
		dash = ` stroke-dasharray="6 4"`
	}
	return color, dash
}
