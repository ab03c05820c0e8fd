package planner

import (
	"testing"
	"time"
)

// TestObserveStopped checks when a DC's demand counts as stopped: its
// estimate fell to 0 on an interval without requests, until it sends one
// again; a DC whose estimate never left 0 has not stopped.
func TestObserveStopped(t *testing.T) {
	p, err := New(Config{DCs: simDCs, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		observed []float64
		want     bool
	}{
		{"steady", []float64{0.5, 0.5, 0.5, 0.5}, false},
		{"falling silent, not yet confirmed", []float64{0.5, 0.5, 0.5, 0}, false},
		{"silent, confirmed", []float64{0.5, 0.5, 0.5, 0, 0, 0}, true},
		{"back after it stopped", []float64{0.5, 0.5, 0.5, 0, 0, 0, 0.1}, false},
		{"silent again", []float64{0.5, 0.5, 0.5, 0, 0, 0, 0.1, 0}, false},
		{"never asked", []float64{0, 0, 0, 0}, false},
		{"too sparse for an estimate", []float64{0, 0.01, 0, 0, 0.01, 0, 0}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := p.newEntry(&ruleState{spec: logRule(600, 60)}, "", 600)
			for i, x := range tc.observed {
				p.observe(e, 0, int64(i), x)
			}
			if e.stopped[0] != tc.want {
				t.Errorf("stopped = %v, want %v (estimate %v)", e.stopped[0], tc.want, e.est[0].Estimate())
			}
		})
	}
}

// TestOnlyStoppedBigConsumersGiveUpTheirOwn: a DC gives up what it consumed
// (awareTargets) only when its demand stopped, the entry is congested and
// what it holds is a tenth of the limit or more. Sparse and bursty DCs, and
// DCs of an entry with room to spare, keep theirs: when the rule applied to
// any DC with an estimate of 0 and a silent interval, a DC sending 3
// requests every 15 s beside a steady one at half the limit got 72 of 80
// rejected. The figures are virtual time, the same on every machine; the
// bounds are what the planner without the rule gave (so no worse), and for
// the congested move, what it gains.
func TestOnlyStoppedBigConsumersGiveUpTheirOwn(t *testing.T) {
	burst := func(steady, n float64, every int) func(int) map[string]float64 {
		return func(sec int) map[string]float64 {
			m := map[string]float64{"a": steady}
			if sec%every == 0 {
				m["c"] = n
			}
			return m
		}
	}
	for _, tc := range []struct {
		name        string
		rates       func(sec int) map[string]float64
		dc          string
		maxRejected int64 // of dc's requests
		minAdmitted int64 // in all
	}{
		{"sparse beside a steady half", burst(5, 3, 15), "c", 5, 0},
		{"one every 5 s beside a steady half", burst(5, 1, 5), "c", 0, 0},
		{"bursts beside a steady half", burst(5, 10, 20), "c", 74, 0},
		{"bursts beside a congesting DC", burst(40, 10, 20), "c", 130, 0},
		{"half the limit moving every 5 s", moving(5, 5, "a", "b"), "b", 192, 1632},
		// 3,832 admitted without the rule: a's consumption aged out to b
		// a round trip late at every plan.
		{"four times the limit moving every 20 s", moving(40, 20, "a", "b"), "b", 6100, 4100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, logRule(600, 60), "", 300*time.Millisecond)
			w.reportLag = 500 * time.Millisecond
			w.run(400, 10, tc.rates)
			t.Logf("%s offered %d, rejected %d; %d admitted in all", tc.dc, w.offered[tc.dc], w.rejected[tc.dc], w.total)
			if w.rejected[tc.dc] > tc.maxRejected || w.total < tc.minAdmitted {
				t.Errorf("%s rejected %d, %d admitted in all; want at most %d and at least %d", tc.dc, w.rejected[tc.dc], w.total, tc.maxRejected, tc.minAdmitted)
			}
		})
	}
}
