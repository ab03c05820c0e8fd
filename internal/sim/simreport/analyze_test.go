package simreport_test

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/sim/scenario"
	"github.com/weirhq/weir/internal/sim/simreport"
)

var dcs3 = []string{"dc-a", "dc-b", "dc-c"}

// counts maps DCs to counts, in order.
func counts(dcs []string, v ...int) map[string]int {
	m := make(map[string]int, len(dcs))
	for i, d := range dcs {
		m[d] = v[i]
	}
	return m
}

// shares maps DCs to shares, in order.
func shares(dcs []string, v ...float64) map[string]float64 {
	m := make(map[string]float64, len(dcs))
	for i, d := range dcs {
		m[d] = v[i]
	}
	return m
}

// level is what every DC offers, admits and holds from a time on.
type level struct {
	from              time.Duration
	offered, admitted []int
	share             []float64
}

// build returns a one-rule trace of n seconds with limit L per second:
// each second takes the last level at or before it, and shares are
// sampled every 100 ms from the last level (and the overrides, by
// sample time).
func build(dcs []string, limit int64, n int, levels []level, shareAt func(at time.Duration) map[string]float64) *simreport.Trace {
	rt := simreport.RuleTrace{RuleID: "total", Limit: limit, Window: time.Second}
	at := func(t time.Duration) level {
		l := levels[0]
		for _, x := range levels {
			if x.from <= t {
				l = x
			}
		}
		return l
	}
	for i := 0; i < n; i++ {
		t := time.Duration(i) * time.Second
		l := at(t)
		rt.Seconds = append(rt.Seconds, simreport.Second{At: t, Offered: counts(dcs, l.offered...), Admitted: counts(dcs, l.admitted...)})
	}
	for t := time.Duration(0); t < time.Duration(n)*time.Second; t += 100 * time.Millisecond {
		var s map[string]float64
		if shareAt != nil {
			s = shareAt(t)
		}
		if s == nil {
			s = shares(dcs, at(t).share...)
		}
		rt.Shares = append(rt.Shares, simreport.ShareSample{At: t, Share: s})
	}
	return &simreport.Trace{Scenario: "synthetic", DCs: dcs, Interval: time.Second, Rules: []simreport.RuleTrace{rt}}
}

// goals are the defaults: 10 s of warm-up, a 5 s convergence allowance.
var goals = scenario.DefaultGoals(time.Second)

// perfect is a tracker that admits exactly the max-min fair shares of
// dc-a 400, dc-b 30, dc-c 30 under L = 300.
func perfect() *simreport.Trace {
	return build(dcs3, 300, 40, []level{{0, []int{400, 30, 30}, []int{240, 30, 30}, []float64{0.8, 0.1, 0.1}}}, nil)
}

func result(t *testing.T, rr simreport.RuleReport, goal string) simreport.Result {
	t.Helper()
	for _, r := range rr.Results {
		if r.Goal == goal {
			return r
		}
	}
	t.Fatalf("no result for %s in %+v", goal, rr.Results)
	return simreport.Result{}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestPerfectTracker(t *testing.T) {
	rep := simreport.Analyze(perfect(), goals)
	if !rep.Passed() {
		t.Fatalf("got a failed report, want a pass: %+v", rep.Rules[0].Results)
	}
	rr := rep.Rules[0]
	w := rr.Weir
	if w.Overshoot.Worst != 0 || w.Overshoot.Above != 0 || w.Overshoot.Seconds != 40 {
		t.Errorf("got overshoot %+v, want none in 40 s", w.Overshoot)
	}
	// Steady: after the 10 s warm-up; the change at 0 s is inside it.
	if rr.SteadySeconds != 30 || w.Utilisation.Seconds != 30 || !near(w.Utilisation.Ratio, 1) {
		t.Errorf("got %d steady seconds and utilisation %+v, want 30 and 100%% over 30 s", rr.SteadySeconds, w.Utilisation)
	}
	if len(rr.Changes) != 1 || rr.Changes[0].At != 0 || !reflect.DeepEqual(rr.Changes[0].DCs, dcs3) {
		t.Fatalf("got changes %+v, want one at 0s, the start", rr.Changes)
	}
	if c := rr.Changes[0]; !c.Congested || !near(c.Fair["dc-a"], 0.8) || !near(c.Fair["dc-b"], 0.1) || !near(c.Offered["dc-a"], 400) {
		t.Errorf("got change %+v, want congested, fair dc-a 0.8 dc-b 0.1, dc-a offering 400", c)
	}
	want := []simreport.Settling{{At: 0, Status: simreport.Settled, Time: 0, Allowed: 10 * time.Second}}
	if !reflect.DeepEqual(w.Convergence.Changes, want) {
		t.Errorf("got settling %+v, want %+v", w.Convergence.Changes, want)
	}
	if w.Oscillation.Worst != 0 || w.Oscillation.Steady != 30*time.Second {
		t.Errorf("got oscillation %+v, want 0 in 30 s", w.Oscillation)
	}
	if !near(w.Fairness.Mean, 1) || w.Fairness.Seconds != 30 {
		t.Errorf("got fairness %+v, want 1 over 30 s", w.Fairness)
	}
	if w.Starvation.Seconds != 0 || w.Starvation.Judged != 30 {
		t.Errorf("got starvation %+v, want 0 of 30", w.Starvation)
	}
}

func TestBaselinesOnPerfectTraffic(t *testing.T) {
	rr := simreport.Analyze(perfect(), goals).Rules[0]
	// Static split: each DC admits at most 100: dc-a 100, dc-b 30, dc-c 30.
	st := rr.Static
	if !near(st.Utilisation.Ratio, 160.0/300) {
		t.Errorf("static: got utilisation %v, want 160/300", st.Utilisation.Ratio)
	}
	// x = (100/240, 1, 1): J = (2.41667)² / (3 × (0.17361 + 2)).
	x := 100.0 / 240
	if wantJ := (x + 2) * (x + 2) / (3 * (x*x + 2)); !near(st.Fairness.Mean, wantJ) {
		t.Errorf("static: got fairness %v, want %v", st.Fairness.Mean, wantJ)
	}
	// Its shares, 1/3 each, never come within 5% of dc-a's 80%.
	if got := st.Convergence.Changes[0].Status; got != simreport.Unsettled || st.Convergence.Late != 1 {
		t.Errorf("static: got convergence %+v, want the change unsettled", st.Convergence)
	}
	ce := rr.Centralized
	if !near(ce.Utilisation.Ratio, 1) || !near(ce.Fairness.Mean, 1) || ce.Overshoot.Worst != 0 {
		t.Errorf("centralized: got %+v, want utilisation 1, fairness 1, no overshoot", ce)
	}
	if ce.Convergence.Applicable || ce.Oscillation.Applicable {
		t.Errorf("centralized: convergence and oscillation should not apply")
	}
}

func TestFigures(t *testing.T) {
	s := time.Second
	tests := []struct {
		name  string
		trace *simreport.Trace
		check func(t *testing.T, rr simreport.RuleReport)
	}{
		{"5% overshoot", build(dcs3, 300, 30, []level{{0, []int{400, 30, 30}, []int{255, 30, 30}, []float64{0.8, 0.1, 0.1}}}, nil),
			func(t *testing.T, rr simreport.RuleReport) {
				o := rr.Weir.Overshoot
				if !near(o.Worst, 0.05) || o.Above != 30 || o.WorstAt != 0 {
					t.Errorf("got %+v, want worst 5%% at 0s, 30 seconds above", o)
				}
				if r := result(t, rr, "max_overshoot"); r.Passed || !strings.Contains(r.Reason, "worst 5% of L (second 0s) > 1%; 30 of 30 seconds above") {
					t.Errorf("got %+v, want a failure explaining 5%% > 1%%", r)
				}
			}},
		{"starving DC", build(dcs3, 300, 30, []level{{0, []int{100, 100, 50}, []int{100, 100, 0}, []float64{0.45, 0.45, 0.1}}}, nil),
			func(t *testing.T, rr simreport.RuleReport) {
				st := rr.Weir.Starvation
				if st.Seconds != 20 || st.ByDC["dc-c"] != 20 || st.ByDC["dc-a"] != 0 || st.FirstAt != 10*s {
					t.Errorf("got %+v, want dc-c starved in the 20 steady seconds from 10s", st)
				}
				if r := result(t, rr, "max_starvation"); r.Passed || !strings.Contains(r.Reason, "20 starved seconds > 0, from second 10s (dc-c 20)") {
					t.Errorf("got %+v", r)
				}
				// Not congested: utilisation and fairness are not measured, and pass.
				if r := result(t, rr, "min_utilisation"); !r.Passed || r.Measured {
					t.Errorf("got %+v, want an unmeasured pass", r)
				}
			}},
		{"no starvation when the limit is exhausted", build(dcs3, 300, 30, []level{{0, []int{400, 100, 50}, []int{300, 0, 0}, []float64{1, 0, 0}}}, nil),
			func(t *testing.T, rr simreport.RuleReport) {
				if st := rr.Weir.Starvation; st.Seconds != 0 {
					t.Errorf("got %+v, want none: the limit was exhausted", st)
				}
				// But unfair: x = (300/200, 0, 0) → J = 1/3.
				if f := rr.Weir.Fairness; !near(f.Mean, 1.0/3) {
					t.Errorf("got fairness %+v, want 1/3", f)
				}
			}},
		{"under-admission", build(dcs3, 300, 30, []level{{0, []int{400, 30, 30}, []int{210, 30, 30}, []float64{0.7, 0.1, 0.1}}}, nil),
			func(t *testing.T, rr simreport.RuleReport) {
				if u := rr.Weir.Utilisation; !near(u.Ratio, 0.9) || !near(u.Worst, 0.9) {
					t.Errorf("got %+v, want 90%%", u)
				}
				if r := result(t, rr, "min_utilisation"); r.Passed || !strings.Contains(r.Reason, "90% of L over 20 congested steady seconds < 98%") {
					t.Errorf("got %+v", r)
				}
			}},
		{"oscillating shares", build([]string{"dc-a", "dc-b"}, 300, 40, []level{{0, []int{300, 300}, []int{150, 150}, []float64{0.5, 0.5}}},
			func(at time.Duration) map[string]float64 {
				// Jitter inside the 2% band is not counted; dc-a goes up,
				// down, up and down again by 3%: three direction changes.
				a := 0.5 + 0.004*math.Sin(float64(at)/float64(s))
				switch {
				case at >= 20*s && at < 22*s, at >= 25*s && at < 27*s:
					a = 0.53
				}
				return map[string]float64{"dc-a": a, "dc-b": 1 - a - 0.01}
			}),
			func(t *testing.T, rr simreport.RuleReport) {
				o := rr.Weir.Oscillation
				if o.ByDC["dc-a"] != 3 || o.ByDC["dc-b"] != 3 || o.Worst != 3 || o.WorstDC != "dc-a" {
					t.Errorf("got %+v, want 3 direction changes each, worst dc-a", o)
				}
				if r := result(t, rr, "max_oscillation"); r.Passed {
					t.Errorf("got %+v, want a failure", r)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, simreport.Analyze(tt.trace, goals).Rules[0])
		})
	}
}

// moving is demand moving from dc-a to dc-b at 30 s; the shares follow,
// dc-b's arriving settle after the change.
func moving(settle time.Duration) *simreport.Trace {
	s := time.Second
	return build([]string{"dc-a", "dc-b"}, 300, 60, []level{
		{0, []int{400, 30}, []int{270, 30}, []float64{0.9, 0.1}},
		{30 * s, []int{30, 400}, []int{30, 270}, []float64{0.9, 0.1}},
	}, func(at time.Duration) map[string]float64 {
		switch {
		case at < 30*s:
			return nil
		case at < 30*s+settle/2:
			return map[string]float64{"dc-a": 0.9, "dc-b": 0.1}
		case at < 30*s+settle:
			return map[string]float64{"dc-a": 0.1, "dc-b": 0.5} // dc-a gave up its quota; dc-b waits
		}
		return map[string]float64{"dc-a": 0.1, "dc-b": 0.9}
	})
}

func TestConvergence(t *testing.T) {
	s := time.Second
	tests := []struct {
		name   string
		trace  *simreport.Trace
		status simreport.Status
		time   time.Duration
		pass   bool
	}{
		{"within the allowance", moving(4 * s), simreport.Settled, 4 * s, true},
		{"at the allowance", moving(5 * s), simreport.Settled, 5 * s, true},
		{"late", moving(7 * s), simreport.Late, 7 * s, false},
		{"never", moving(time.Hour), simreport.Unsettled, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rr := simreport.Analyze(tt.trace, goals).Rules[0]
			if len(rr.Changes) != 2 || rr.Changes[1].At != 30*s || !reflect.DeepEqual(rr.Changes[1].DCs, []string{"dc-a", "dc-b"}) {
				t.Fatalf("got changes %+v, want 0s and 30s (dc-a, dc-b)", rr.Changes)
			}
			if f := rr.Changes[1].Fair; !near(f["dc-a"], 0.1) || !near(f["dc-b"], 0.9) {
				t.Errorf("got fair shares %v, want dc-a 0.1, dc-b 0.9", f)
			}
			got := rr.Weir.Convergence.Changes[1]
			if got.Status != tt.status || got.Time != tt.time || got.Allowed != 5*s {
				t.Errorf("got %+v, want %s after %v, 5s allowed", got, tt.status, tt.time)
			}
			if r := result(t, rr, "convergence_intervals"); r.Passed != tt.pass {
				t.Errorf("got %+v, want passed %v", r, tt.pass)
			}
			// The change's allowance is not steady: 30 s to 35 s.
			if u := rr.Weir.Utilisation.Seconds; u != 45 {
				t.Errorf("got %d utilisation seconds, want 60 − 10 warm-up − 5 after the change = 45", u)
			}
		})
	}
}

func TestConvergenceInterrupted(t *testing.T) {
	s := time.Second
	// dc-a's demand drops at 30 s and comes back at 33 s: the shares,
	// still settling, are cut short before the 5 s allowance.
	tr := build([]string{"dc-a", "dc-b"}, 300, 60, []level{
		{0, []int{400, 30}, []int{270, 30}, []float64{0.9, 0.1}},
		{30 * s, []int{30, 400}, []int{30, 270}, []float64{0.9, 0.1}},
		{33 * s, []int{400, 30}, []int{270, 30}, []float64{0.9, 0.1}},
	}, nil)
	rr := simreport.Analyze(tr, goals).Rules[0]
	var got []simreport.Status
	for _, c := range rr.Weir.Convergence.Changes {
		got = append(got, c.Status)
	}
	if want := []simreport.Status{simreport.Settled, simreport.Interrupted, simreport.Settled}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestFaultWindows(t *testing.T) {
	s := time.Second
	tr := perfect()
	tr.Faults = []simreport.FaultMark{
		{At: 31 * s, Kind: "start-broker"},
		{At: 12 * s, Kind: "kill-leader"},
		{At: 25 * s, Kind: "stop-broker"},
		{At: 20 * s, Kind: "partition", DC: "dc-c", For: 3 * s},
		{At: 14 * s, Kind: "lose-reports", For: 10 * s},
	}
	rep := simreport.Analyze(tr, goals)
	want := []simreport.FaultWindow{
		{FaultMark: tr.Faults[1], End: 14 * s, Excluded: true, Until: 19 * s},
		{FaultMark: tr.Faults[4], End: 24 * s},
		{FaultMark: tr.Faults[3], End: 23 * s, Excluded: true, Until: 28 * s},
		{FaultMark: tr.Faults[2], End: 31 * s, Excluded: true, Until: 36 * s},
		{FaultMark: tr.Faults[0], End: 31 * s},
	}
	if !reflect.DeepEqual(rep.Faults, want) {
		t.Errorf("got\n%+v\nwant\n%+v", rep.Faults, want)
	}
	// Steady: 10–12, 19–20, 36–40.
	rr := rep.Rules[0]
	if rr.SteadySeconds != 7 || rr.Weir.Utilisation.Seconds != 7 {
		t.Errorf("got %d steady seconds, utilisation over %d, want 7", rr.SteadySeconds, rr.Weir.Utilisation.Seconds)
	}
	if got := rr.Weir.Oscillation.Steady; got != 7*s {
		t.Errorf("got %v of steady time, want 7s", got)
	}
}

func TestChangeDuringFaultNotJudged(t *testing.T) {
	s := time.Second
	tr := moving(time.Hour)
	tr.Faults = []simreport.FaultMark{{At: 28 * s, Kind: "partition", DC: "dc-b", For: 5 * s}}
	rr := simreport.Analyze(tr, goals).Rules[0]
	if got := rr.Weir.Convergence.Changes[1].Status; got != simreport.DuringFault {
		t.Errorf("got %s, want %s", got, simreport.DuringFault)
	}
	if r := result(t, rr, "convergence_intervals"); !r.Passed {
		t.Errorf("got %+v, want a pass: the only late change came during a fault", r)
	}
}

func TestNoisyDemandHasNoChanges(t *testing.T) {
	// ±15% of L around a level: below the 20% threshold, no change
	// after the start.
	tr := build([]string{"dc-a"}, 300, 40, []level{{0, []int{200}, []int{200}, []float64{1}}}, nil)
	for i := range tr.Rules[0].Seconds {
		tr.Rules[0].Seconds[i].Offered["dc-a"] = 200 + []int{45, -45, 30, -10}[i%4]
	}
	rr := simreport.Analyze(tr, goals).Rules[0]
	if len(rr.Changes) != 1 || rr.Changes[0].At != 0 {
		t.Errorf("got changes %+v, want only the start", rr.Changes)
	}
}

func TestWindowOverOneSecond(t *testing.T) {
	// L = 100 per 2 s: 60 admitted each second is 120 in every window,
	// 20% over.
	tr := build([]string{"dc-a"}, 100, 10, []level{{0, []int{60}, []int{60}, []float64{1}}}, nil)
	tr.Rules[0].Window = 2 * time.Second
	o := simreport.Analyze(tr, goals).Rules[0].Weir.Overshoot
	if !near(o.Worst, 0.2) || o.Above != 9 || o.WorstAt != time.Second {
		t.Errorf("got %+v, want 20%% from second 1 on (second 0 has half a window)", o)
	}
}

// TestPerWindowJudging: a rule of a 10 s window whose demand (30/s,
// offered from dc-a) is 3 × L per window. Each case admits a pattern per
// 10 s; utilisation is judged over every whole window after the warm-up
// (10 s), and the per-second goals are reported as not judged.
func TestPerWindowJudging(t *testing.T) {
	dcs := []string{"dc-a", "dc-b"}
	for _, tc := range []struct {
		name     string
		admitted func(i int) int // in second i
		wantUtil float64
		wantOver float64
	}{
		// All of L in the first second of each 10 s: every window holds
		// exactly L.
		{"burst then nothing", func(i int) int {
			if i%10 == 0 {
				return 100
			}
			return 0
		}, 1, 0},
		// 5 a second: half of L in every window.
		{"half", func(int) int { return 5 }, 0.5, 0},
		// 11 a second: 110 in every window, 10% over.
		{"over", func(int) int { return 11 }, 1.1, 0.1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := simreport.RuleTrace{RuleID: "total", Limit: 100, Window: 10 * time.Second}
			for i := range 40 {
				rt.Seconds = append(rt.Seconds, simreport.Second{At: time.Duration(i) * time.Second,
					Offered: counts(dcs, 30, 0), Admitted: counts(dcs, tc.admitted(i), 0)})
			}
			tr := &simreport.Trace{Scenario: "synthetic", DCs: dcs, Interval: time.Second, Rules: []simreport.RuleTrace{rt}}
			rr := simreport.Analyze(tr, goals).Rules[0]
			f := rr.Weir
			if !f.PerWindow {
				t.Fatal("a 10 s window: not judged per window")
			}
			// Windows starting at 10 s (after the warm-up) to 30 s.
			if u := f.Utilisation; u.Seconds != 21 || u.Window != 10 || !near(u.Ratio, tc.wantUtil) {
				t.Errorf("utilisation %+v, want %v over 21 windows of 10 s", u, tc.wantUtil)
			}
			if o := f.Overshoot; !near(o.Worst, tc.wantOver) {
				t.Errorf("overshoot %+v, want worst %v", o, tc.wantOver)
			}
			for _, goal := range []string{"convergence_intervals", "max_oscillation", "min_fairness", "max_starvation"} {
				if r := result(t, rr, goal); r.Measured || !r.Passed || !strings.Contains(r.Reason, "not judged") {
					t.Errorf("%s: got %+v, want not judged", goal, r)
				}
			}
			if r := result(t, rr, "min_utilisation"); !strings.Contains(r.Reason, "whole 10 s windows") {
				t.Errorf("min_utilisation: reason %q does not speak of windows", r.Reason)
			}
		})
	}
}

func TestPassed(t *testing.T) {
	if (simreport.Report{}).Passed() {
		t.Errorf("an empty report passed")
	}
	rep := simreport.Analyze(perfect(), goals)
	if !rep.Passed() {
		t.Fatalf("the perfect tracker failed")
	}
	rep.Rules[0].Results[2].Passed = false
	if rep.Passed() || rep.Rules[0].Passed() {
		t.Errorf("a report with a failed goal passed")
	}
}

func TestChangeDetection(t *testing.T) {
	s := time.Second
	// offered returns a series of n seconds for two DCs.
	offered := func(n int, a, b func(i int) int) *simreport.Trace {
		tr := build([]string{"dc-a", "dc-b"}, 300, n, []level{{0, []int{0, 0}, []int{0, 0}, []float64{0.5, 0.5}}}, nil)
		for i := range tr.Rules[0].Seconds {
			tr.Rules[0].Seconds[i].Offered = map[string]int{"dc-a": a(i), "dc-b": b(i)}
		}
		return tr
	}
	step := func(at, before, after int) func(int) int {
		return func(i int) int {
			if i < at {
				return before
			}
			return after
		}
	}
	flat := func(v int) func(int) int { return func(int) int { return v } }
	tests := []struct {
		name  string
		trace *simreport.Trace
		at    []time.Duration
		dcs   [][]string
	}{
		{"steady: only the start", offered(30, flat(200), flat(60)), []time.Duration{0}, [][]string{{"dc-a", "dc-b"}}},
		{"nobody at the start", offered(30, step(10, 0, 200), flat(0)), []time.Duration{0, 10 * s}, [][]string{nil, {"dc-a"}}},
		{"step above 20% of L", offered(30, step(12, 200, 265), flat(60)), []time.Duration{0, 12 * s}, [][]string{{"dc-a", "dc-b"}, {"dc-a"}}},
		{"step below 20% of L", offered(30, step(12, 200, 255), flat(60)), []time.Duration{0}, [][]string{{"dc-a", "dc-b"}}},
		{"a two-second spike is not a step", offered(30, func(i int) int {
			if i == 12 || i == 13 {
				return 900
			}
			return 200
		}, flat(60)), []time.Duration{0}, [][]string{{"dc-a", "dc-b"}}},
		{"two DCs a second apart: one change", offered(30, step(12, 400, 30), step(13, 30, 400)), []time.Duration{0, 12 * s}, [][]string{{"dc-a", "dc-b"}, {"dc-a", "dc-b"}}},
		{"two DCs three seconds apart: two changes", offered(30, step(12, 400, 30), step(15, 30, 400)), []time.Duration{0, 12 * s, 15 * s}, [][]string{{"dc-a", "dc-b"}, {"dc-a"}, {"dc-b"}}},
		{"a ramp is a series of steps", offered(30, func(i int) int { return 20 * i }, flat(0)), []time.Duration{0, 5 * s, 10 * s, 15 * s, 20 * s, 25 * s}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changes := simreport.Analyze(tt.trace, goals).Rules[0].Changes
			var at []time.Duration
			var dcs [][]string
			for _, c := range changes {
				at = append(at, c.At)
				dcs = append(dcs, c.DCs)
			}
			if !reflect.DeepEqual(at, tt.at) {
				t.Errorf("got changes at %v, want %v", at, tt.at)
			}
			if tt.dcs != nil && !reflect.DeepEqual(dcs, tt.dcs) {
				t.Errorf("got DCs %q, want %q", dcs, tt.dcs)
			}
		})
	}
}
