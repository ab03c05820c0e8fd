package simreport

import (
	"fmt"
	"strings"
	"time"
)

// results compares Weir's figures f with the report's goals.
func results(rep *Report, f Figures) []Result {
	g := rep.Goals
	var out []Result

	o := f.Overshoot
	r := Result{Goal: "max_overshoot", Measured: o.Seconds > 0, Passed: o.Worst <= g.MaxOvershoot+1e-12}
	switch {
	case o.Worst == 0:
		r.Reason = fmt.Sprintf("never above L in %d seconds", o.Seconds)
	case r.Passed:
		r.Reason = fmt.Sprintf("worst %s of L (second %s) ≤ %s", pct(o.Worst), sec(o.WorstAt), pct(g.MaxOvershoot))
	default:
		r.Reason = fmt.Sprintf("worst %s of L (second %s) > %s; %d of %d seconds above", pct(o.Worst), sec(o.WorstAt), pct(g.MaxOvershoot), o.Above, o.Seconds)
	}
	out = append(out, r)

	u := f.Utilisation
	r = Result{Goal: "min_utilisation", Measured: u.Seconds > 0, Passed: true}
	switch {
	case u.Seconds == 0 && f.PerWindow:
		r.Reason = fmt.Sprintf("not measured: no whole %d s window after the warm-up offered L or more", u.Window)
	case u.Seconds == 0:
		r.Reason = "not measured: no steady second offered L or more"
	case f.PerWindow:
		r.Passed = u.Ratio >= g.MinUtilisation-1e-12
		cmp := "≥"
		if !r.Passed {
			cmp = "<"
		}
		r.Reason = fmt.Sprintf("%s of L over %d whole %d s windows that offered L or more %s %s (worst window from %s: %s)", pct(u.Ratio), u.Seconds, u.Window, cmp, pct(g.MinUtilisation), sec(u.WorstAt), pct(u.Worst))
	default:
		r.Passed = u.Ratio >= g.MinUtilisation-1e-12
		cmp := "≥"
		if !r.Passed {
			cmp = "<"
		}
		r.Reason = fmt.Sprintf("%s of L over %d congested steady seconds %s %s (worst second %s: %s)", pct(u.Ratio), u.Seconds, cmp, pct(g.MinUtilisation), sec(u.WorstAt), pct(u.Worst))
	}
	out = append(out, r)

	if f.PerWindow {
		why := fmt.Sprintf("not judged: a rule with a %d s window is judged per window (overshoot, utilisation), not second by second", u.Window)
		for _, goal := range []string{"convergence_intervals", "max_oscillation", "min_fairness", "max_starvation"} {
			out = append(out, Result{Goal: goal, Passed: true, Reason: why})
		}
		return out
	}

	c := f.Convergence
	r = Result{Goal: "convergence_intervals", Measured: c.Judged > 0, Passed: c.Late == 0}
	allowed := fmt.Sprintf("%s intervals + %v", num(g.ConvergenceIntervals), g.ConvergenceSlack)
	switch {
	case c.Judged == 0:
		r.Reason = "not measured: no change of demand to judge"
	case c.Late == 0:
		r.Reason = fmt.Sprintf("all %d changes settled within %s; slowest %s intervals (change at %s)", c.Judged, allowed, num(intervals(c.Worst, rep.Interval)), sec(c.WorstAt))
	default:
		var late []string
		for _, s := range c.Changes {
			switch s.Status {
			case Late:
				late = append(late, fmt.Sprintf("%s settled after %s intervals", sec(s.At), num(intervals(s.Time, rep.Interval))))
			case Unsettled:
				late = append(late, fmt.Sprintf("%s never settled", sec(s.At)))
			}
		}
		r.Reason = fmt.Sprintf("%d of %d changes not settled within %s: %s", c.Late, c.Judged, allowed, strings.Join(late, "; "))
	}
	out = append(out, r)

	os := f.Oscillation
	r = Result{Goal: "max_oscillation", Measured: os.Steady > 0, Passed: os.Worst <= g.MaxOscillation}
	switch {
	case os.Steady == 0:
		r.Reason = "not measured: no steady period"
	case os.Worst == 0:
		r.Reason = fmt.Sprintf("no direction change beyond %s in %v of steady time", pct(OscillationBand), os.Steady)
	default:
		cmp := "≤"
		if !r.Passed {
			cmp = ">"
		}
		r.Reason = fmt.Sprintf("%s's share changed direction %d times %s %d, in %v of steady time", os.WorstDC, os.Worst, cmp, g.MaxOscillation, os.Steady)
	}
	out = append(out, r)

	fa := f.Fairness
	r = Result{Goal: "min_fairness", Measured: fa.Seconds > 0, Passed: true}
	switch {
	case fa.Seconds == 0:
		r.Reason = "not measured: no steady second offered L or more"
	default:
		r.Passed = fa.Mean >= g.MinFairness-1e-12
		cmp := "≥"
		if !r.Passed {
			cmp = "<"
		}
		r.Reason = fmt.Sprintf("mean Jain's index %.3f over %d congested steady seconds %s %.3f (worst second %s: %.3f)", fa.Mean, fa.Seconds, cmp, g.MinFairness, sec(fa.WorstAt), fa.Worst)
	}
	out = append(out, r)

	st := f.Starvation
	r = Result{Goal: "max_starvation", Measured: st.Judged > 0, Passed: st.Seconds <= g.MaxStarvation}
	switch {
	case st.Judged == 0:
		r.Reason = "not measured: no steady second"
	case st.Seconds == 0:
		r.Reason = fmt.Sprintf("no DC starved in %d steady seconds", st.Judged)
	default:
		cmp := "≤"
		if !r.Passed {
			cmp = ">"
		}
		var who []string
		for _, d := range rep.DCs {
			if n := st.ByDC[d]; n > 0 {
				who = append(who, fmt.Sprintf("%s %d", d, n))
			}
		}
		r.Reason = fmt.Sprintf("%d starved seconds %s %d, from second %s (%s)", st.Seconds, cmp, g.MaxStarvation, sec(st.FirstAt), strings.Join(who, ", "))
	}
	out = append(out, r)
	return out
}

// intervals returns d in intervals.
func intervals(d, interval time.Duration) float64 { return float64(d) / float64(interval) }

// pct formats a fraction as a percentage with up to two decimals.
func pct(f float64) string { return num(f*100) + "%" }

// num formats a number with up to two decimals, without trailing zeros.
func num(f float64) string {
	s := fmt.Sprintf("%.2f", f)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// sec formats an offset as whole or fractional seconds ("31s", "2.5s").
func sec(d time.Duration) string { return num(d.Seconds()) + "s" }
