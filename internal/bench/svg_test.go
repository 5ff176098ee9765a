package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
)

// svgElement is an element of a chart's SVG, as decoded.
type svgElement struct {
	name  string
	attrs map[string]string
	text  string
}

// decodeSVG decodes an SVG document with encoding/xml, failing the test
// when it is not well-formed, and returns its elements in order.
func decodeSVG(t *testing.T, doc []byte) []svgElement {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var out []svgElement
	var open []int // indexes into out of the open elements
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, doc)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
				if tok.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("root namespace %q, want the SVG one", tok.Name.Space)
				}
			}
			el := svgElement{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				el.attrs[a.Name.Local] = a.Value
			}
			out = append(out, el)
			open = append(open, len(out)-1)
		case xml.EndElement:
			open = open[:len(open)-1]
		case xml.CharData:
			if len(open) > 0 {
				out[open[len(open)-1]].text += string(tok)
			}
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	return out
}

// points parses a polyline's points attribute.
func points(t *testing.T, s string) [][2]float64 {
	t.Helper()
	var out [][2]float64
	for _, p := range strings.Fields(s) {
		xs, ys, ok := strings.Cut(p, ",")
		x, err1 := strconv.ParseFloat(xs, 64)
		y, err2 := strconv.ParseFloat(ys, 64)
		if !ok || err1 != nil || err2 != nil {
			t.Fatalf("bad point %q", p)
		}
		out = append(out, [2]float64{x, y})
	}
	return out
}

func TestLineChartSVG(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name  string
		chart lineChart
		// lines is the number of points of each polyline drawn.
		lines   []int
		markers int
	}{
		{
			name: "log x, linear y from zero",
			chart: lineChart{
				Title: "Throughput vs goroutines", XTitle: "goroutines", YTitle: "cycles/s",
				XLog: true, XTicks: []float64{1, 16, 128, 512}, YZero: true,
				Series: []chartSeries{
					{Name: "floor", Points: []chartPoint{{1, 900}, {16, 5200}, {128, 9100}, {512, 9800}}},
					{Name: "mutex", Points: []chartPoint{{1, 1000}, {16, 6100}, {128, 9900}, {512, 10400}}},
				},
			},
			lines:   []int{4, 4},
			markers: 8,
		},
		{
			name: "log both, a missing point breaks the line",
			chart: lineChart{
				Title: "Hand-off p99", XTitle: "waiters", YTitle: "ms",
				XLog: true, YLog: true, XTicks: []float64{10, 100, 1000},
				Series: []chartSeries{
					{Name: "ours", Points: []chartPoint{{10, 1.2}, {100, 1.9}, {1000, 4.4}}},
					{Name: "kazoo", Points: []chartPoint{{10, 3}, {100, nan}, {1000, 60}}, Dashed: true},
				},
			},
			lines:   []int{3},
			markers: 5,
		},
		{
			name: "escaped text, one point, negative values",
			chart: lineChart{
				Title: `heap <per> "waiter" & more`, XTitle: "n", YTitle: "bytes",
				Series: []chartSeries{
					{Name: "a<b", Points: []chartPoint{{3, -200}}},
					{Name: "c&d", Points: []chartPoint{{5, 1500}, {7, 2500}}},
				},
			},
			lines:   []int{2},
			markers: 3,
		},
		{
			name:  "no data",
			chart: lineChart{Title: "empty", XLog: true, YLog: true, Series: []chartSeries{{Name: "none"}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := tc.chart.writeSVG(&buf); err != nil {
				t.Fatal(err)
			}
			els := decodeSVG(t, buf.Bytes())
			x0, y0, x1, y1 := tc.chart.plotArea()
			inside := func(what string, x, y float64) {
				if x < x0 || x > x1 || y < y0 || y > y1 {
					t.Errorf("%s at (%.1f, %.1f) outside the plot area (%.0f, %.0f)-(%.0f, %.0f)", what, x, y, x0, y0, x1, y1)
				}
			}
			var lines []int
			markers := 0
			var title string
			for _, el := range els {
				switch {
				case el.name == "polyline":
					pts := points(t, el.attrs["points"])
					lines = append(lines, len(pts))
					for i, p := range pts {
						inside("point", p[0], p[1])
						if i > 0 && p[0] <= pts[i-1][0] {
							t.Errorf("x goes back: %v", pts)
						}
					}
				case el.attrs["class"] == "marker" && el.name == "circle":
					cx, _ := strconv.ParseFloat(el.attrs["cx"], 64)
					cy, _ := strconv.ParseFloat(el.attrs["cy"], 64)
					inside("marker", cx, cy)
					markers++
				case el.attrs["class"] == "marker":
					markers++
				case el.name == "title" && title == "":
					title = el.text
				}
			}
			if !equalInts(lines, tc.lines) {
				t.Errorf("polylines with %v points, want %v", lines, tc.lines)
			}
			if markers != tc.markers {
				t.Errorf("%d data markers, want %d", markers, tc.markers)
			}
			if title != tc.chart.Title {
				t.Errorf("title %q, want %q", title, tc.chart.Title)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestChartAxisMapping(t *testing.T) {
	c := lineChart{
		XLog: true, XTicks: []float64{1, 16, 128, 512}, YZero: true,
		Series: []chartSeries{{Points: []chartPoint{{1, 0}, {512, 930}}}},
	}
	x, y, xt, yt := c.axes()
	if x.lo != 1 || x.hi != 512 || !x.log {
		t.Fatalf("x axis %+v, want log 1..512", x)
	}
	if len(xt) != 4 {
		t.Errorf("x ticks %v, want the 4 given", xt)
	}
	// On a log axis, 16 lies log(16)/log(512) = 4/9 of the way from 1 to 512.
	for _, tc := range []struct{ v, frac float64 }{{1, 0}, {16, 4.0 / 9}, {128, 7.0 / 9}, {512, 1}} {
		got := (x.pos(tc.v) - x.pos(1)) / (x.pos(512) - x.pos(1))
		if math.Abs(got-tc.frac) > 1e-9 {
			t.Errorf("x.pos(%v) at %.4f of the axis, want %.4f", tc.v, got, tc.frac)
		}
	}
	if y.lo != 0 || y.hi != 1000 {
		t.Errorf("y axis %v..%v, want 0..1000", y.lo, y.hi)
	}
	if want := []float64{0, 200, 400, 600, 800, 1000}; !equalFloats(yt, want) {
		t.Errorf("y ticks %v, want %v", yt, want)
	}
	if y.pos(0) <= y.pos(1000) {
		t.Errorf("y grows downwards: pos(0) = %v, pos(1000) = %v", y.pos(0), y.pos(1000))
	}
	if mid := y.pos(500); math.Abs(mid-(y.pos(0)+y.pos(1000))/2) > 1e-9 {
		t.Errorf("linear y: pos(500) = %v, not halfway", mid)
	}

	for _, tc := range []struct {
		v      []float64
		lo, hi float64
		ticks  []float64
	}{
		{[]float64{1.3, 4.4}, 1, 10, []float64{1, 2, 5, 10}},
		{[]float64{0.8, 9}, 0.1, 10, []float64{0.1, 0.2, 0.5, 1, 2, 5, 10}},
		{[]float64{0.8, 61}, 0.1, 100, []float64{0.1, 1, 10, 100}},
		{[]float64{3, 40000}, 1, 100000, []float64{1, 10, 100, 1000, 10000, 100000}},
		{[]float64{100, 100}, 100, 1000, []float64{100, 200, 500, 1000}},
	} {
		lo, hi, ticks := ticksFor(tc.v, true, false)
		if math.Abs(lo-tc.lo) > 1e-12 || math.Abs(hi-tc.hi) > 1e-9 || !equalFloats(ticks, tc.ticks) {
			t.Errorf("log ticksFor(%v) = %v..%v %v, want %v..%v %v", tc.v, lo, hi, ticks, tc.lo, tc.hi, tc.ticks)
		}
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9*math.Max(1, math.Abs(b[i])) {
			return false
		}
	}
	return true
}

func TestTickLabel(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {0.25, "0.25"}, {1500, "1500"}, {25000, "25k"}, {2.5e6, "2.5M"}, {0.1 + 0.2, "0.3"}, {-200, "-200"},
	} {
		if got := tickLabel(tc.v); got != tc.want {
			t.Errorf("tickLabel(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
