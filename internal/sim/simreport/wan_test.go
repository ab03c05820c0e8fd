package simreport_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/sim/simreport"
)

// TestReportStatesTheNetwork checks that a report says whether the run was
// in process or behind a WAN, and then the delay emulated and the round
// trip measured between each pair of DCs, flagging a delay not applied.
func TestReportStatesTheNetwork(t *testing.T) {
	tests := []struct {
		name      string
		wan       *simreport.WAN
		want, not []string
	}{
		{"in process", nil, []string{"| network | in process (no WAN emulated) |"}, []string{"| WAN "}},
		{"WAN applied", &simreport.WAN{Links: []simreport.WANLink{
			{A: "dc-a", B: "dc-b", Delay: 40 * time.Millisecond, RTT: 81234 * time.Microsecond},
		}}, []string{"| WAN dc-a ↔ dc-b | one-way delay 40ms emulated (RTT ≥ 80ms); measured RTT 81.2ms |"}, []string{"not applied", "in process"}},
		{"WAN not applied", &simreport.WAN{Links: []simreport.WANLink{
			{A: "dc-a", B: "dc-b", Delay: 40 * time.Millisecond, RTT: 300 * time.Microsecond},
		}}, []string{"measured RTT 300µs ✗ shorter than the emulated round trip: the delay was not applied"}, nil},
		{"WAN not measured", &simreport.WAN{Links: []simreport.WANLink{
			{A: "dc-a", B: "dc-b", Delay: 40 * time.Millisecond, Error: "dial: refused"},
		}}, []string{"one-way delay 40ms emulated (RTT ≥ 80ms); not measured: dial: refused"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := moving(4 * time.Second)
			tr.WAN = tt.wan
			md, err := simreport.WriteReport(t.TempDir(), simreport.Analyze(tr, goals))
			if err != nil {
				t.Fatal(err)
			}
			text, err := os.ReadFile(md)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(text), w) {
					t.Errorf("report.md lacks %q:\n%s", w, text)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(string(text), n) {
					t.Errorf("report.md holds %q:\n%s", n, text)
				}
			}
		})
	}
}
