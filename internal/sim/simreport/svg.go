package simreport

import (
	"fmt"
	"time"

	"github.com/weirhq/weir/internal/platform/svgchart"
)

// The charts are drawn by package svgchart; this file says what they show.

type (
	chart = svgchart.Chart
	line  = svgchart.Line
	shade = svgchart.Shade
)

func dcColor(i int) string { return svgchart.Color(i) }

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
		out = append(out, shade{From: secs(f.At), To: secs(min(f.End, rep.Duration)), Label: label})
	}
	return out
}

// shareChart is the chart of each DC's share over time, with each DC's
// fair share after each change dashed.
func shareChart(rep *Report, rr *RuleReport) chart {
	c := chart{
		Title:  fmt.Sprintf("%s: local limit per DC, as a share of L", rr.RuleID),
		XLabel: "time (s)", YLabel: "share of L", YUnit: "%",
		XMax: secs(rep.Duration), YMax: 100,
		Shades: faultShades(rep),
	}
	for _, ch := range rr.Changes {
		c.Marks = append(c.Marks, secs(ch.At))
	}
	for i, d := range rep.DCs {
		l := line{Name: d, Class: "series", Color: dcColor(i), Width: 1.5}
		for _, s := range rr.Trace.Shares {
			l.Pts = append(l.Pts, [2]float64{secs(s.At), s.Share[d] * 100})
		}
		c.Lines = append(c.Lines, l)
	}
	for i, d := range rep.DCs {
		if len(rr.Changes) == 0 {
			break
		}
		l := line{Name: d + " fair", Class: "fair", Color: dcColor(i), Width: 1, Dash: true}
		for k, ch := range rr.Changes {
			end := rep.Duration
			if k+1 < len(rr.Changes) {
				end = rr.Changes[k+1].At
			}
			v := ch.Fair[d] * 100
			l.Pts = append(l.Pts, [2]float64{secs(ch.At), v}, [2]float64{secs(end), v})
		}
		c.Lines = append(c.Lines, l)
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
	return line{Name: "L per second", Class: "limit", Color: "#d62728", Width: 1.5, Dash: true,
		Pts: [][2]float64{{0, lps}, {secs(rep.Duration), lps}}}
}

// demandChart is the chart of each DC's offered requests per second.
func demandChart(rep *Report, rr *RuleReport) chart {
	c := chart{
		Title:  fmt.Sprintf("%s: demand (offered requests per second) per DC", rr.RuleID),
		XLabel: "time (s)", YLabel: "offered requests/s",
		XMax: secs(rep.Duration), Shades: faultShades(rep),
	}
	for i, d := range rep.DCs {
		c.Lines = append(c.Lines, line{Name: d, Class: "series", Color: dcColor(i), Width: 1.5,
			Pts: perSecond(rr.Trace, func(s Second) float64 { return float64(s.Offered[d]) })})
	}
	c.Lines = append(c.Lines, limitLine(rep, rr))
	return c
}

// admittedChart is the chart of each DC's admitted requests per second,
// all DCs' together, the centralized baseline's and L.
func admittedChart(rep *Report, rr *RuleReport) chart {
	c := chart{
		Title:  fmt.Sprintf("%s: admitted requests per second, per DC and in all", rr.RuleID),
		XLabel: "time (s)", YLabel: "admitted requests/s",
		XMax: secs(rep.Duration), Shades: faultShades(rep),
	}
	total := func(s Second) float64 {
		n := 0
		for _, d := range rep.DCs {
			n += s.Admitted[d]
		}
		return float64(n)
	}
	for i, d := range rep.DCs {
		c.Lines = append(c.Lines, line{Name: d, Class: "series", Color: dcColor(i), Width: 1.5,
			Pts: perSecond(rr.Trace, func(s Second) float64 { return float64(s.Admitted[d]) })})
	}
	c.Lines = append(c.Lines,
		line{Name: "all DCs", Class: "total", Color: "#000000", Width: 2, Pts: perSecond(rr.Trace, total)},
		line{Name: "centralized, all", Class: "baseline", Color: "#999999", Width: 1, Dash: true, Pts: perSecond(rr.CentralizedTrace, total)},
		limitLine(rep, rr),
	)
	return c
}
