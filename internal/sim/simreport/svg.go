package simreport

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
	"time"
)

// The charts are SVG written by hand: a plot area with a grid, axes with
// ticks and labels, shaded fault windows, one polyline per series and a
// legend on the right. Coordinates are written with one decimal, so the
// same report gives the same bytes.

// Chart geometry, in SVG user units.
const (
	chartW      = 900
	chartH      = 340
	chartLeft   = 64
	chartRight  = 170
	chartTop    = 36
	chartBottom = 48
	plotW       = chartW - chartLeft - chartRight
	plotH       = chartH - chartTop - chartBottom
)

// palette colours the DCs, in DC order; red is kept for limits and faults.
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"}

func dcColor(i int) string { return palette[i%len(palette)] }

// chart is one chart's content.
type chart struct {
	title, xlabel, ylabel string
	xmax                  float64 // seconds
	ymax                  float64 // 0: from the data
	yunit                 string  // appended to y tick labels ("%")
	lines                 []line
	shades                []shade
	marks                 []float64 // vertical markers, in seconds
}

// line is one polyline.
type line struct {
	name  string
	class string // "series" (one per DC), "total", "fair", "limit", "baseline"
	color string
	dash  bool
	width float64
	pts   [][2]float64 // (seconds, value)
}

// shade is a shaded stretch of time.
type shade struct {
	from, to float64
	label    string
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
	dec := 0
	if step < 1 {
		dec = int(math.Ceil(-math.Log10(step)))
	}
	return strconv.FormatFloat(v, 'f', dec, 64)
}

func (c *chart) svg() string {
	xmax := c.xmax
	if !(xmax > 0) {
		xmax = 1
	}
	ymax := c.ymax
	if !(ymax > 0) {
		for _, l := range c.lines {
			for _, p := range l.pts {
				ymax = math.Max(ymax, p[1])
			}
		}
		ymax *= 1.08 // headroom, so that a line at the maximum is not on the frame
		step := niceStep(ymax, 5)
		ymax = math.Max(math.Ceil(ymax/step-1e-9)*step, step)
	}
	x := func(t float64) float64 { return chartLeft + math.Min(math.Max(t, 0), xmax)/xmax*plotW }
	y := func(v float64) float64 { return chartTop + plotH - math.Min(math.Max(v, 0), ymax)/ymax*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(c.title))
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", chartW, chartH)
	fmt.Fprintf(&b, `<text class="title" x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", chartLeft, esc(c.title))

	// Fault windows.
	b.WriteString(`<g class="faults">` + "\n")
	for _, s := range c.shades {
		x0, x1 := x(s.from), x(s.to)
		w := math.Max(x1-x0, 1.5)
		fmt.Fprintf(&b, `<rect class="fault" x="%s" y="%d" width="%s" height="%d" fill="#d62728" fill-opacity="0.12"><title>%s</title></rect>`+"\n", f1(x0), chartTop, f1(w), plotH, esc(s.label))
		fmt.Fprintf(&b, `<text x="%s" y="%d" font-size="9" fill="#a02020">%s</text>`+"\n", f1(x0+2), chartTop+10, esc(s.label))
	}
	b.WriteString("</g>\n")

	// Grid, ticks and tick labels.
	xstep := niceStep(xmax, 10)
	ystep := niceStep(ymax, 5)
	b.WriteString(`<g class="grid" stroke="#e0e0e0" stroke-width="1">` + "\n")
	for t := 0.0; t <= xmax+1e-9; t += xstep {
		fmt.Fprintf(&b, `<line x1="%s" y1="%d" x2="%s" y2="%d"/>`+"\n", f1(x(t)), chartTop, f1(x(t)), chartTop+plotH)
	}
	for v := 0.0; v <= ymax+1e-9; v += ystep {
		fmt.Fprintf(&b, `<line x1="%d" y1="%s" x2="%d" y2="%s"/>`+"\n", chartLeft, f1(y(v)), chartLeft+plotW, f1(y(v)))
	}
	b.WriteString("</g>\n")
	b.WriteString(`<g class="axes" stroke="#333" stroke-width="1">` + "\n")
	fmt.Fprintf(&b, `<line class="x-axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`+"\n", chartLeft, chartTop+plotH, chartLeft+plotW, chartTop+plotH)
	fmt.Fprintf(&b, `<line class="y-axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`+"\n", chartLeft, chartTop, chartLeft, chartTop+plotH)
	for t := 0.0; t <= xmax+1e-9; t += xstep {
		fmt.Fprintf(&b, `<line class="tick" x1="%s" y1="%d" x2="%s" y2="%d"/>`+"\n", f1(x(t)), chartTop+plotH, f1(x(t)), chartTop+plotH+4)
	}
	for v := 0.0; v <= ymax+1e-9; v += ystep {
		fmt.Fprintf(&b, `<line class="tick" x1="%d" y1="%s" x2="%d" y2="%s"/>`+"\n", chartLeft-4, f1(y(v)), chartLeft, f1(y(v)))
	}
	b.WriteString("</g>\n")
	b.WriteString(`<g class="tick-labels" fill="#333">` + "\n")
	for t := 0.0; t <= xmax+1e-9; t += xstep {
		fmt.Fprintf(&b, `<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", f1(x(t)), chartTop+plotH+16, tickLabel(t, xstep))
	}
	for v := 0.0; v <= ymax+1e-9; v += ystep {
		fmt.Fprintf(&b, `<text x="%d" y="%s" text-anchor="end">%s%s</text>`+"\n", chartLeft-7, f1(y(v)+4), tickLabel(v, ystep), esc(c.yunit))
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<text class="x-label" x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", f1(chartLeft+plotW/2.0), chartH-10, esc(c.xlabel))
	fmt.Fprintf(&b, `<text class="y-label" x="14" y="%s" text-anchor="middle" transform="rotate(-90 14 %s)">%s</text>`+"\n", f1(chartTop+plotH/2.0), f1(chartTop+plotH/2.0), esc(c.ylabel))

	// Markers of the changes of demand.
	if len(c.marks) > 0 {
		b.WriteString(`<g class="changes" stroke="#555" stroke-width="1" stroke-dasharray="2 3">` + "\n")
		for _, m := range c.marks {
			fmt.Fprintf(&b, `<line x1="%s" y1="%d" x2="%s" y2="%d"/>`+"\n", f1(x(m)), chartTop, f1(x(m)), chartTop+plotH)
		}
		b.WriteString("</g>\n")
	}

	// The lines.
	for _, l := range c.lines {
		var pts strings.Builder
		for i, p := range l.pts {
			if i > 0 {
				pts.WriteByte(' ')
			}
			pts.WriteString(f1(x(p[0])) + "," + f1(y(p[1])))
		}
		dash := ""
		if l.dash {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<polyline class="%s" data-series="%s" fill="none" stroke="%s" stroke-width="%s"%s points="%s"/>`+"\n", l.class, esc(l.name), l.color, f1(l.width), dash, pts.String())
	}

	// The legend: one entry per line, on the right.
	b.WriteString(`<g class="legend">` + "\n")
	lx := chartLeft + plotW + 16
	for i, l := range c.lines {
		ly := chartTop + 8 + i*16
		dash := ""
		if l.dash {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="%s"%s/>`+"\n", lx, ly, lx+22, ly, l.color, f1(math.Max(l.width, 1.5)), dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", lx+28, ly+4, esc(l.name))
	}
	if len(c.shades) > 0 {
		ly := chartTop + 8 + len(c.lines)*16
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="22" height="10" fill="#d62728" fill-opacity="0.12"/>`+"\n", lx, ly-5)
		fmt.Fprintf(&b, `<text x="%d" y="%d">fault</text>`+"\n", lx+28, ly+4)
	}
	b.WriteString("</g>\n</svg>\n")
	return b.String()
}

func esc(s string) string { return html.EscapeString(s) }

// secs returns d in seconds.
func secs(d time.Duration) float64 { return d.Seconds() }

// faultShades returns the report's faults as shaded windows.
func faultShades(rep *Report) []shade {
	var out []shade
	for _, f := range rep.Faults {
		label := f.Kind
		if f.DC != "" {
			label += " " + f.DC
		}
		out = append(out, shade{from: secs(f.At), to: secs(min(f.End, rep.Duration)), label: label})
	}
	return out
}

// shareChart is the chart of each DC's share over time, with each DC's
// fair share after each change dashed.
func shareChart(rep *Report, rr *RuleReport) chart {
	c := chart{
		title:  fmt.Sprintf("%s: local limit per DC, as a share of L", rr.RuleID),
		xlabel: "time (s)", ylabel: "share of L", yunit: "%",
		xmax: secs(rep.Duration), ymax: 100,
		shades: faultShades(rep),
	}
	for _, ch := range rr.Changes {
		c.marks = append(c.marks, secs(ch.At))
	}
	for i, d := range rep.DCs {
		l := line{name: d, class: "series", color: dcColor(i), width: 1.5}
		for _, s := range rr.Trace.Shares {
			l.pts = append(l.pts, [2]float64{secs(s.At), s.Share[d] * 100})
		}
		c.lines = append(c.lines, l)
	}
	for i, d := range rep.DCs {
		if len(rr.Changes) == 0 {
			break
		}
		l := line{name: d + " fair", class: "fair", color: dcColor(i), width: 1, dash: true}
		for k, ch := range rr.Changes {
			end := rep.Duration
			if k+1 < len(rr.Changes) {
				end = rr.Changes[k+1].At
			}
			v := ch.Fair[d] * 100
			l.pts = append(l.pts, [2]float64{secs(ch.At), v}, [2]float64{secs(end), v})
		}
		c.lines = append(c.lines, l)
	}
	return c
}

// perSecond returns the points (i + 0.5 s, v(second i)) of a trace.
func perSecond(rt RuleTrace, v func(Second) float64) [][2]float64 {
	pts := make([][2]float64, len(rt.Seconds))
	for i, s := range rt.Seconds {
		pts[i] = [2]float64{float64(i) + 0.5, v(s)}
	}
	return pts
}

// limitLine is L per second across the chart.
func limitLine(rep *Report, rr *RuleReport) line {
	lps := float64(rr.Limit) / float64(windowSeconds(rr.Trace))
	return line{name: "L per second", class: "limit", color: "#d62728", width: 1.5, dash: true,
		pts: [][2]float64{{0, lps}, {secs(rep.Duration), lps}}}
}

// demandChart is the chart of each DC's offered requests per second.
func demandChart(rep *Report, rr *RuleReport) chart {
	c := chart{
		title:  fmt.Sprintf("%s: demand (offered requests per second) per DC", rr.RuleID),
		xlabel: "time (s)", ylabel: "offered requests/s",
		xmax: secs(rep.Duration), shades: faultShades(rep),
	}
	for i, d := range rep.DCs {
		c.lines = append(c.lines, line{name: d, class: "series", color: dcColor(i), width: 1.5,
			pts: perSecond(rr.Trace, func(s Second) float64 { return float64(s.Offered[d]) })})
	}
	c.lines = append(c.lines, limitLine(rep, rr))
	return c
}

// admittedChart is the chart of each DC's admitted requests per second,
// all DCs' together, the centralized baseline's and L.
func admittedChart(rep *Report, rr *RuleReport) chart {
	c := chart{
		title:  fmt.Sprintf("%s: admitted requests per second, per DC and in all", rr.RuleID),
		xlabel: "time (s)", ylabel: "admitted requests/s",
		xmax: secs(rep.Duration), shades: faultShades(rep),
	}
	total := func(s Second) float64 {
		n := 0
		for _, d := range rep.DCs {
			n += s.Admitted[d]
		}
		return float64(n)
	}
	for i, d := range rep.DCs {
		c.lines = append(c.lines, line{name: d, class: "series", color: dcColor(i), width: 1.5,
			pts: perSecond(rr.Trace, func(s Second) float64 { return float64(s.Admitted[d]) })})
	}
	c.lines = append(c.lines,
		line{name: "all DCs", class: "total", color: "#000000", width: 2, pts: perSecond(rr.Trace, total)},
		line{name: "centralized, all", class: "baseline", color: "#999999", width: 1, dash: true, pts: perSecond(rr.CentralizedTrace, total)},
		limitLine(rep, rr),
	)
	return c
}
