package svgchart

import (
	"strings"
	"testing"
)

func TestSVG(t *testing.T) {
	for _, tc := range []struct {
		name  string
		c     Chart
		want  []string
		avoid []string
	}{
		{"axis from zero", Chart{Title: "t", XMax: 10, YMax: 100, YUnit: "%",
			Lines: []Line{{Name: "a", Class: "series", Color: Color(0), Width: 1.5, Pts: [][2]float64{{0, 0}, {10, 100}}}}},
			[]string{`<title>t</title>`, `points="64.0,292.0 730.0,36.0"`, `>100%</text>`, `data-series="a"`}, nil},
		{"axis below zero", Chart{XMin: -15, XMax: 0, YMax: 1,
			Lines: []Line{{Name: "b", Pts: [][2]float64{{-15, 0}, {0, 1}}}}},
			[]string{`points="64.0,292.0 730.0,36.0"`, `>-14</text>`, `>0</text>`}, []string{`>-0</text>`}},
		{"text escaped", Chart{Title: "<b>&", XMax: 1, Shades: []Shade{{From: 0, To: 1, Label: "x<y"}}},
			[]string{`&lt;b&gt;&amp;`, `x&lt;y`}, []string{"<b>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.c.SVG()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("got an SVG without %s:\n%s", w, got)
				}
			}
			for _, a := range tc.avoid {
				if strings.Contains(got, a) {
					t.Errorf("got an SVG with %s, want none", a)
				}
			}
		})
	}
}
