package simreport_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/sim/simreport"
)

// svgCounts parses an SVG and counts its polylines by class and data-series.
func svgCounts(t *testing.T, data []byte) (byClass map[string]int, series []string, faults int) {
	t.Helper()
	byClass = map[string]int{}
	dec := xml.NewDecoder(bytes.NewReader(data))
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if root == "" {
			root = se.Name.Local
		}
		attr := func(name string) string {
			for _, a := range se.Attr {
				if a.Name.Local == name {
					return a.Value
				}
			}
			return ""
		}
		switch {
		case se.Name.Local == "polyline":
			byClass[attr("class")]++
			if attr("class") == "series" {
				series = append(series, attr("data-series"))
			}
		case se.Name.Local == "rect" && attr("class") == "fault":
			faults++
		}
	}
	if root != "svg" {
		t.Fatalf("got root element %q, want svg", root)
	}
	return byClass, series, faults
}

func TestWriteReport(t *testing.T) {
	tr := moving(4 * time.Second)
	tr.Start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tr.Faults = []simreport.FaultMark{{At: 40 * time.Second, Kind: "partition", DC: "dc-b", For: 5 * time.Second}, {At: 50 * time.Second, Kind: "lose-reports", For: 5 * time.Second}}
	rep := simreport.Analyze(tr, goals)
	dir := t.TempDir()
	md, err := simreport.WriteReport(dir, rep)
	if err != nil {
		t.Fatal(err)
	}
	if md != filepath.Join(dir, "report.md") {
		t.Errorf("got %s, want report.md in %s", md, dir)
	}
	text, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# Simulation report: synthetic\n",
		"**Result: PASSED**",
		"| started | 2026-03-01T12:00:00Z |",
		"## Rule `total`: L = 300 per 1s",
		"| figure | goal | Weir | static split | centralized |",
		"| worst overshoot in a second, of L | ≤ 1% | 0% (0 s above goal) |",
		"| convergence_intervals | pass | all 2 changes settled within 3 intervals + 2s; slowest 4 intervals (change at 30s) |",
		"| 30s | dc-a, dc-b | dc-a 30, dc-b 400 | dc-a 10%, dc-b 90% | settled after 4 intervals (allowed 5) | **never settled** |",
		"| 40s | 50s | partition dc-b |",
		"![total: shares](total-shares.svg)",
		"| 40s | partition | dc-b | 5s | 45s | 50s |",
		"| 50s | lose-reports | - | 5s | 55s | judged throughout |",
	} {
		if !strings.Contains(string(text), want) {
			t.Errorf("report.md lacks %q:\n%s", want, text)
		}
	}
	for _, c := range []struct {
		file    string
		classes map[string]int
	}{
		{"total-shares.svg", map[string]int{"series": 2, "fair": 2}},
		{"total-demand.svg", map[string]int{"series": 2, "limit": 1}},
		{"total-admitted.svg", map[string]int{"series": 2, "total": 1, "baseline": 1, "limit": 1}},
	} {
		t.Run(c.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, c.file))
			if err != nil {
				t.Fatal(err)
			}
			byClass, series, faults := svgCounts(t, data)
			for class, n := range c.classes {
				if byClass[class] != n {
					t.Errorf("got %d polylines of class %s, want %d", byClass[class], class, n)
				}
			}
			if strings.Join(series, ",") != "dc-a,dc-b" {
				t.Errorf("got series %v, want one per DC: dc-a, dc-b", series)
			}
			if faults != 2 {
				t.Errorf("got %d fault windows, want 2", faults)
			}
			for _, want := range []string{`class="x-label"`, `class="y-label"`, `class="legend"`, `class="tick"`} {
				if !bytes.Contains(data, []byte(want)) {
					t.Errorf("chart lacks %s", want)
				}
			}
		})
	}
}

func TestWriteReportDeterministic(t *testing.T) {
	rep := simreport.Analyze(moving(7*time.Second), goals)
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{a, b} {
		if _, err := simreport.WriteReport(dir, rep); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(a, "*"))
	if len(files) != 4 {
		t.Fatalf("got files %v, want report.md and 3 charts", files)
	}
	for _, f := range files {
		x, _ := os.ReadFile(f)
		y, _ := os.ReadFile(filepath.Join(b, filepath.Base(f)))
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two writes", filepath.Base(f))
		}
	}
	text, _ := os.ReadFile(filepath.Join(a, "report.md"))
	for _, want := range []string{"**Result: FAILED** — `total` convergence_intervals.", "| convergence_intervals | **FAIL** | 1 of 2 changes not settled within 3 intervals + 2s: 30s settled after 7 intervals |"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("report.md lacks %q:\n%s", want, text)
		}
	}
}

func TestWriteReportError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := simreport.WriteReport(filepath.Join(file, "sub"), simreport.Analyze(perfect(), goals)); err == nil {
		t.Errorf("got no error writing under a file")
	}
}

func TestFormatLive(t *testing.T) {
	var b strings.Builder
	simreport.FormatLive(&b, simreport.Second{
		At:       7 * time.Second,
		Offered:  map[string]int{"dc-a": 612, "dc-b": 30, "us-east-1": 0},
		Admitted: map[string]int{"dc-a": 240, "dc-b": 30},
	}, map[string]float64{"dc-a": 0.8, "dc-b": 0.1, "us-east-1": 0.1}, 300)
	want := "" +
		"DC         offered/s  admitted/s  rejected/s   share\n" +
		"dc-a             612         240         372   80.0%\n" +
		"dc-b              30          30           0   10.0%\n" +
		"us-east-1          0           0           0   10.0%\n" +
		"all              642         270         372  100.0%  admitted 270 of L 300 (90.0%)\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	b.Reset()
	simreport.FormatLive(&b, simreport.Second{Offered: map[string]int{"a": 5}, Admitted: map[string]int{"a": 5}}, nil, 0)
	want = "" +
		"DC   offered/s  admitted/s  rejected/s   share\n" +
		"a            5           5           0       -\n" +
		"all          5           5           0       -  admitted 5 of L 0\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestWriteTraceRoundTrips(t *testing.T) {
	in := &simreport.Trace{
		Scenario: "x", DCs: []string{"a", "b"}, Interval: time.Second,
		Rules: []simreport.RuleTrace{{RuleID: "total", Limit: 300, Window: time.Second,
			Seconds: []simreport.Second{{At: 0, Offered: map[string]int{"a": 10}, Admitted: map[string]int{"a": 9}}},
			Shares:  []simreport.ShareSample{{At: 100 * time.Millisecond, Share: map[string]float64{"a": 0.5, "b": 0.5}}}}},
		Faults: []simreport.FaultMark{{At: time.Second, Kind: "partition", DC: "b", For: time.Second}},
	}
	dir := t.TempDir()
	p, err := simreport.WriteTrace(filepath.Join(dir, "sub"), in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var out simreport.Trace
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*in, out) {
		t.Fatalf("trace.json read back as %+v, want %+v", out, *in)
	}
}
