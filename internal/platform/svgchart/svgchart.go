// Package svgchart draws line charts as SVG, by hand: a plot area with a
// grid, axes with ticks and labels, shaded windows, one polyline per series
// and a legend on the right. Coordinates are written with one decimal, so
// the same chart gives the same bytes. The simulator's reports
// (internal/sim/simreport) and the operators' console
// (internal/control/console) draw their charts with it.
package svgchart

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// Chart geometry, in SVG user units.
const (
	width  = 900
	height = 340
	left   = 64
	right  = 170
	top    = 36
	bottom = 48
	plotW  = width - left - right
	plotH  = height - top - bottom
)

// palette colours the DCs, in DC order; red is kept for limits and faults.
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"}

// Color returns the colour of the i-th series (a DC, in DC order).
func Color(i int) string { return palette[i%len(palette)] }

// Chart is one chart's content; the zero value draws an empty frame.
type Chart struct {
	Title, XLabel, YLabel string
	XMin, XMax            float64 // the x axis; XMax 0: 1
	YMax                  float64 // 0: from the data
	YUnit                 string  // appended to y tick labels ("%")
	Lines                 []Line
	Shades                []Shade
	Marks                 []float64 // vertical markers
}

// Line is one polyline.
type Line struct {
	Name  string
	Class string // "series" (one per DC), "total", "fair", "limit", "baseline"
	Color string
	Dash  bool
	Width float64
	Pts   [][2]float64 // (x, value)
}

// Shade is a shaded stretch of the x axis.
type Shade struct {
	From, To float64
	Label    string
}

// niceStep returns a round step (1, 2 or 5 × 10^k) that cuts span into
// about n parts.
func niceStep(span float64, n int) float64 {
	if !(span > 0) {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw-1e-12 {
			return m * mag
		}
	}
	return 10 * mag
}

// f1 formats a coordinate with one decimal.
func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// tickLabel formats a tick value without needless decimals.
func tickLabel(v, step float64) string {
	if math.Abs(v) < step*1e-6 {
		v = 0 // not "-0"
	}
	dec := 0
	if step < 1 {
		dec = int(math.Ceil(-math.Log10(step)))
	}
	return strconv.FormatFloat(v, 'f', dec, 64)
}

// SVG returns the chart as an SVG document.
func (c *Chart) SVG() string {
	xmin, xmax := c.XMin, c.XMax
	if !(xmax > xmin) {
		xmax = xmin + 1
	}
	ymax := c.YMax
	if !(ymax > 0) {
		for _, l := range c.Lines {
			for _, p := range l.Pts {
				ymax = math.Max(ymax, p[1])
			}
		}
		ymax *= 1.08 // headroom, so that a line at the maximum is not on the frame
		step := niceStep(ymax, 5)
		ymax = math.Max(math.Ceil(ymax/step-1e-9)*step, step)
	}
	x := func(t float64) float64 { return left + (math.Min(math.Max(t, xmin), xmax)-xmin)/(xmax-xmin)*plotW }
	y := func(v float64) float64 { return top + plotH - math.Min(math.Max(v, 0), ymax)/ymax*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(c.Title))
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text class="title" x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", left, esc(c.Title))

	// Fault windows.
	b.WriteString(`<g class="faults">` + "\n")
	for _, s := range c.Shades {
		x0, x1 := x(s.From), x(s.To)
		w := math.Max(x1-x0, 1.5)
		fmt.Fprintf(&b, `<rect class="fault" x="%s" y="%d" width="%s" height="%d" fill="#d62728" fill-opacity="0.12"><title>%s</title></rect>`+"\n", f1(x0), top, f1(w), plotH, esc(s.Label))
		fmt.Fprintf(&b, `<text x="%s" y="%d" font-size="9" fill="#a02020">%s</text>`+"\n", f1(x0+2), top+10, esc(s.Label))
	}
	b.WriteString("</g>\n")

	// Grid, ticks and tick labels.
	xstep := niceStep(xmax-xmin, 10)
	ystep := niceStep(ymax, 5)
	b.WriteString(`<g class="grid" stroke="#e0e0e0" stroke-width="1">` + "\n")
	for t := math.Ceil(xmin/xstep-1e-9) * xstep; t <= xmax+1e-9; t += xstep {
		fmt.Fprintf(&b, `<line x1="%s" y1="%d" x2="%s" y2="%d"/>`+"\n", f1(x(t)), top, f1(x(t)), top+plotH)
	}
	for v := 0.0; v <= ymax+1e-9; v += ystep {
		fmt.Fprintf(&b, `<line x1="%d" y1="%s" x2="%d" y2="%s"/>`+"\n", left, f1(y(v)), left+plotW, f1(y(v)))
	}
	b.WriteString("</g>\n")
	b.WriteString(`<g class="axes" stroke="#333" stroke-width="1">` + "\n")
	fmt.Fprintf(&b, `<line class="x-axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`+"\n", left, top+plotH, left+plotW, top+plotH)
	fmt.Fprintf(&b, `<line class="y-axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`+"\n", left, top, left, top+plotH)
	for t := math.Ceil(xmin/xstep-1e-9) * xstep; t <= xmax+1e-9; t += xstep {
		fmt.Fprintf(&b, `<line class="tick" x1="%s" y1="%d" x2="%s" y2="%d"/>`+"\n", f1(x(t)), top+plotH, f1(x(t)), top+plotH+4)
	}
	for v := 0.0; v <= ymax+1e-9; v += ystep {
		fmt.Fprintf(&b, `<line class="tick" x1="%d" y1="%s" x2="%d" y2="%s"/>`+"\n", left-4, f1(y(v)), left, f1(y(v)))
	}
	b.WriteString("</g>\n")
	b.WriteString(`<g class="tick-labels" fill="#333">` + "\n")
	for t := math.Ceil(xmin/xstep-1e-9) * xstep; t <= xmax+1e-9; t += xstep {
		fmt.Fprintf(&b, `<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", f1(x(t)), top+plotH+16, tickLabel(t, xstep))
	}
	for v := 0.0; v <= ymax+1e-9; v += ystep {
		fmt.Fprintf(&b, `<text x="%d" y="%s" text-anchor="end">%s%s</text>`+"\n", left-7, f1(y(v)+4), tickLabel(v, ystep), esc(c.YUnit))
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<text class="x-label" x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", f1(left+plotW/2.0), height-10, esc(c.XLabel))
	fmt.Fprintf(&b, `<text class="y-label" x="14" y="%s" text-anchor="middle" transform="rotate(-90 14 %s)">%s</text>`+"\n", f1(top+plotH/2.0), f1(top+plotH/2.0), esc(c.YLabel))

	// Markers of the changes of demand.
	if len(c.Marks) > 0 {
		b.WriteString(`<g class="changes" stroke="#555" stroke-width="1" stroke-dasharray="2 3">` + "\n")
		for _, m := range c.Marks {
			fmt.Fprintf(&b, `<line x1="%s" y1="%d" x2="%s" y2="%d"/>`+"\n", f1(x(m)), top, f1(x(m)), top+plotH)
		}
		b.WriteString("</g>\n")
	}

	// The lines.
	for _, l := range c.Lines {
		var pts strings.Builder
		for i, p := range l.Pts {
			if i > 0 {
				pts.WriteByte(' ')
			}
			pts.WriteString(f1(x(p[0])) + "," + f1(y(p[1])))
		}
		dash := ""
		if l.Dash {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<polyline class="%s" data-series="%s" fill="none" stroke="%s" stroke-width="%s"%s points="%s"/>`+"\n", l.Class, esc(l.Name), l.Color, f1(l.Width), dash, pts.String())
	}

	// The legend: one entry per line, on the right.
	b.WriteString(`<g class="legend">` + "\n")
	lx := left + plotW + 16
	for i, l := range c.Lines {
		ly := top + 8 + i*16
		dash := ""
		if l.Dash {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="%s"%s/>`+"\n", lx, ly, lx+22, ly, l.Color, f1(math.Max(l.Width, 1.5)), dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", lx+28, ly+4, esc(l.Name))
	}
	if len(c.Shades) > 0 {
		ly := top + 8 + len(c.Lines)*16
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="22" height="10" fill="#d62728" fill-opacity="0.12"/>`+"\n", lx, ly-5)
		fmt.Fprintf(&b, `<text x="%d" y="%d">fault</text>`+"\n", lx+28, ly+4)
	}
	b.WriteString("</g>\n</svg>\n")
	return b.String()
}

func esc(s string) string { return html.EscapeString(s) }
