package console

import (
	"fmt"
	"html"
	"html/template"
	"strings"
	"time"

	"github.com/weirhq/weir/internal/platform/svgchart"
	"github.com/weirhq/weir/pkg/adminapi"
)

// chartView is one chart on the Rule page.
type chartView struct {
	ID, Caption string
	SVG         string
	// Latest describes the newest point (its time and values), so that
	// readers — and the browser test — see it change.
	Latest string
}

// charts draws a series' three charts: demand, shares (in force and
// target) and admitted requests per second, over the minutes before the
// newest point. It returns them and the newest point's time.
func charts(s adminapi.Series) ([]chartView, string) {
	var newest time.Time
	for _, d := range s.DCs {
		if n := len(d.Points); n > 0 && d.Points[n-1].At.After(newest) {
			newest = d.Points[n-1].At
		}
	}
	// The x axis spans the points there are (at least half a minute), in
	// seconds up to two minutes and in minutes beyond.
	span := max(float64(len(longest(s.DCs)))*s.IntervalSeconds, 30)
	unit, per := "seconds", 1.0
	if span > 120 {
		unit, per = "minutes", 60
	}
	x := func(t time.Time) float64 { return t.Sub(newest).Seconds() / per }
	iv := max(s.IntervalSeconds, 1e-3)
	mk := func(title, ylabel, yunit string, ymax float64) svgchart.Chart {
		return svgchart.Chart{Title: title, XLabel: unit + " before " + newest.UTC().Format("15:04:05 UTC"), YLabel: ylabel, YUnit: yunit, XMin: -span / per, XMax: 0, YMax: ymax}
	}
	demand := mk("Demand per DC (share of the limit)", "demand", "%", 0)
	shares := mk("Share per DC: in force (solid) and target (dashed)", "share of the limit", "%", 100)
	admitted := mk("Admitted requests per second per DC; rejected, all DCs (red)", "requests/s", "", 0)
	rejected := svgchart.Line{Name: "rejected", Class: "rejected", Color: "#d62728", Width: 1.5, Dash: true}
	rejAt := map[time.Time]float64{}
	var latest, latestDemand, latestShare, latestAdmitted []string
	for i, d := range s.DCs {
		col := svgchart.Color(i)
		dl := svgchart.Line{Name: d.DC, Class: "series", Color: col, Width: 1.5}
		sl := svgchart.Line{Name: d.DC, Class: "series", Color: col, Width: 1.5}
		tl := svgchart.Line{Name: d.DC + " target", Class: "target", Color: col, Width: 1, Dash: true}
		al := svgchart.Line{Name: d.DC, Class: "series", Color: col, Width: 1.5}
		for _, p := range d.Points {
			t := x(p.At)
			dl.Pts = append(dl.Pts, [2]float64{t, p.Demand * 100})
			sl.Pts = append(sl.Pts, [2]float64{t, p.Share * 100})
			tl.Pts = append(tl.Pts, [2]float64{t, p.Target * 100})
			al.Pts = append(al.Pts, [2]float64{t, float64(p.Admitted) / iv})
			rejAt[p.At] += float64(p.Rejected) / iv
		}
		demand.Lines = append(demand.Lines, dl)
		shares.Lines = append(shares.Lines, sl, tl)
		admitted.Lines = append(admitted.Lines, al)
		if n := len(d.Points); n > 0 {
			p := d.Points[n-1]
			latest = append(latest, fmt.Sprintf("%s: demand %s, share %s, admitted %d", d.DC, pct(p.Demand), pct(p.Share), p.Admitted))
			latestDemand = append(latestDemand, d.DC+" "+pct(p.Demand))
			latestShare = append(latestShare, fmt.Sprintf("%s %s (target %s)", d.DC, pct(p.Share), pct(p.Target)))
			latestAdmitted = append(latestAdmitted, fmt.Sprintf("%s %.0f/s", d.DC, float64(p.Admitted)/iv))
		}
	}
	for _, p := range longest(s.DCs) {
		rejected.Pts = append(rejected.Pts, [2]float64{x(p.At), rejAt[p.At]})
	}
	admitted.Lines = append(admitted.Lines, rejected)
	at := ""
	if !newest.IsZero() {
		at = newest.UTC().Format(time.RFC3339Nano)
	}
	summary := at + " — " + strings.Join(latest, "; ")
	caption := func(parts []string) string {
		if newest.IsZero() {
			return "no points yet"
		}
		return "At " + newest.UTC().Format("15:04:05.0") + ": " + strings.Join(parts, ", ")
	}
	return []chartView{
		{ID: "chart-demand", Caption: caption(latestDemand), SVG: demand.SVG(), Latest: summary},
		{ID: "chart-shares", Caption: caption(latestShare), SVG: shares.SVG(), Latest: summary},
		{ID: "chart-admitted", Caption: caption(latestAdmitted), SVG: admitted.SVG(), Latest: summary},
	}, at
}

func longest(dcs []adminapi.DCSeries) []adminapi.SeriesPoint {
	var out []adminapi.SeriesPoint
	for _, d := range dcs {
		if len(d.Points) > len(out) {
			out = d.Points
		}
	}
	return out
}

// shareBar draws a rule's shares in force as one stacked bar, a segment
// per DC in its colour.
func shareBar(dcs []adminapi.DCOverview) template.HTML {
	const w, h = 160.0, 14.0
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="bar" width="%g" height="%g" viewBox="0 0 %g %g" role="img"><title>`, w, h, w, h)
	var parts []string
	for _, d := range dcs {
		parts = append(parts, d.DC+" "+pct(d.Share))
	}
	b.WriteString(html.EscapeString(strings.Join(parts, ", ")))
	b.WriteString(`</title><rect width="160" height="14" fill="#eee"/>`)
	x := 0.0
	for i, d := range dcs {
		sw := min(max(d.Share, 0), 1) * w
		fmt.Fprintf(&b, `<rect x="%.1f" width="%.1f" height="%g" fill="%s"/>`, x, sw, h, svgchart.Color(i))
		x += sw
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
