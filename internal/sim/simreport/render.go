package simreport

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// WriteReport writes rep into dir (created if missing): report.md, and
// for each rule three SVG charts beside it — RULE-shares.svg (each DC's
// share over time, with its fair share after each change dashed),
// RULE-demand.svg (offered requests per second per DC) and
// RULE-admitted.svg (admitted per DC, in all, the centralized baseline's,
// and L) — each with the fault windows shaded. It returns report.md's
// path. The same report always gives the same files.
func WriteReport(dir string, rep Report) (mdPath string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("write report: %w", err)
	}
	for i := range rep.Rules {
		rr := &rep.Rules[i]
		for _, c := range []struct {
			suffix string
			chart  chart
		}{
			{"shares", shareChart(&rep, rr)},
			{"demand", demandChart(&rep, rr)},
			{"admitted", admittedChart(&rep, rr)},
		} {
			p := filepath.Join(dir, chartFile(rr.RuleID, c.suffix))
			if err := os.WriteFile(p, []byte(c.chart.SVG()), 0o644); err != nil {
				return "", fmt.Errorf("write report: %w", err)
			}
		}
	}
	mdPath = filepath.Join(dir, "report.md")
	if err := os.WriteFile(mdPath, []byte(markdown(&rep)), 0o644); err != nil {
		return "", fmt.Errorf("write report: %w", err)
	}
	return mdPath, nil
}

// chartFile names a rule's chart file; rule ids are safe file names
// already, but anything else is replaced to be sure.
func chartFile(ruleID, suffix string) string {
	id := strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			return c
		}
		return '_'
	}, ruleID)
	return id + "-" + suffix + ".svg"
}

// markdown renders rep as report.md.
func markdown(rep *Report) string {
	var b strings.Builder
	g := rep.Goals
	fmt.Fprintf(&b, "# Simulation report: %s\n\n", mdText(rep.Scenario))
	if rep.Passed() {
		b.WriteString("**Result: PASSED** — every goal met for every rule.\n\n")
	} else {
		var failed []string
		for _, rr := range rep.Rules {
			for _, r := range rr.Results {
				if !r.Passed {
					failed = append(failed, fmt.Sprintf("`%s` %s", rr.RuleID, r.Goal))
				}
			}
		}
		if len(rep.Rules) == 0 {
			failed = append(failed, "no rule was measured")
		}
		fmt.Fprintf(&b, "**Result: FAILED** — %s.\n\n", strings.Join(failed, ", "))
	}
	b.WriteString("| run | |\n|---|---|\n")
	if !rep.Start.IsZero() {
		fmt.Fprintf(&b, "| started | %s |\n", rep.Start.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&b, "| duration | %v |\n", rep.Duration)
	fmt.Fprintf(&b, "| DCs | %s |\n", mdText(strings.Join(rep.DCs, ", ")))
	fmt.Fprintf(&b, "| planning interval | %v |\n", rep.Interval)
	wanRows(&b, rep.WAN)
	fmt.Fprintf(&b, "| convergence allowance | %s intervals + %v = %v |\n", num(g.ConvergenceIntervals), g.ConvergenceSlack, rep.Allowance)
	fmt.Fprintf(&b, "| warm-up (judged for overshoot only) | %v |\n\n", g.WarmUp)
	b.WriteString("The figures are defined in docs/simulation.md. Weir's are beside two baselines run on the same offered traffic: " +
		"a static equal split (each DC admits at most floor(L/N) per window) and an exact centralized limiter (L per window in all, shared max-min fairly).\n\n")
	for i := range rep.Rules {
		ruleSection(&b, rep, &rep.Rules[i])
	}
	b.WriteString("## Faults\n\n")
	if len(rep.Faults) == 0 {
		b.WriteString("None.\n")
		return b.String()
	}
	b.WriteString("| at | kind | DC | for | acted until | not judged as steady until |\n|---|---|---|---|---|---|\n")
	for _, f := range rep.Faults {
		forText := "-"
		if f.For > 0 {
			forText = f.For.String()
		}
		until := "judged throughout"
		if f.Excluded {
			until = sec(f.Until)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", sec(f.At), mdText(f.Kind), orDash(mdText(f.DC)), forText, sec(f.End), until)
	}
	return b.String()
}

func ruleSection(b *strings.Builder, rep *Report, rr *RuleReport) {
	g := rep.Goals
	fmt.Fprintf(b, "## Rule `%s`: L = %d per %v\n\n", rr.RuleID, rr.Limit, rr.Window)
	fmt.Fprintf(b, "%d of %d seconds judged as steady.\n\n", rr.SteadySeconds, len(rr.Trace.Seconds))
	b.WriteString("### Figures\n\n| figure | goal | Weir | static split | centralized |\n|---|---|---|---|---|\n")
	row := func(name, goal string, cell func(Figures) string) {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", name, goal, cell(rr.Weir), cell(rr.Static), cell(rr.Centralized))
	}
	overshoot := "worst overshoot in a second, of L"
	if rr.Weir.PerWindow {
		overshoot = fmt.Sprintf("worst overshoot in any %v window, of L", rr.Window)
	}
	row(overshoot, "≤ "+pct(g.MaxOvershoot), func(f Figures) string {
		return fmt.Sprintf("%s (%d s above goal)", pct(f.Overshoot.Worst), f.Overshoot.Above)
	})
	utilisation := "utilisation in congested steady seconds"
	if rr.Weir.PerWindow {
		utilisation = "utilisation in whole windows that offered L or more"
	}
	row(utilisation, "≥ "+pct(g.MinUtilisation), func(f Figures) string {
		if f.Utilisation.Seconds == 0 {
			return "not measured"
		}
		if f.PerWindow {
			return fmt.Sprintf("%s (%d windows, worst %s)", pct(f.Utilisation.Ratio), f.Utilisation.Seconds, pct(f.Utilisation.Worst))
		}
		return fmt.Sprintf("%s (%d s)", pct(f.Utilisation.Ratio), f.Utilisation.Seconds)
	})
	row("convergence after a change of demand", fmt.Sprintf("≤ %v", rep.Allowance), func(f Figures) string {
		c := f.Convergence
		switch {
		case !c.Applicable:
			return "n/a"
		case c.Judged == 0:
			return "not measured"
		case !anySettled(c):
			return fmt.Sprintf("none settled; %d of %d late", c.Late, c.Judged)
		}
		return fmt.Sprintf("slowest %s intervals; %d of %d late", num(intervals(c.Worst, rep.Interval)), c.Late, c.Judged)
	})
	row("oscillation: direction changes of the worst DC", fmt.Sprintf("≤ %d", g.MaxOscillation), func(f Figures) string {
		if !f.Oscillation.Applicable {
			return "n/a"
		}
		if f.Oscillation.Worst == 0 {
			return "0"
		}
		return fmt.Sprintf("%d (%s)", f.Oscillation.Worst, f.Oscillation.WorstDC)
	})
	row("fairness: mean Jain's index, congested steady seconds", fmt.Sprintf("≥ %.2f", g.MinFairness), func(f Figures) string {
		if f.Fairness.Seconds == 0 {
			return "not measured"
		}
		return fmt.Sprintf("%.3f (worst %.3f)", f.Fairness.Mean, f.Fairness.Worst)
	})
	row("starvation: steady seconds", fmt.Sprintf("≤ %d", g.MaxStarvation), func(f Figures) string {
		return fmt.Sprintf("%d", f.Starvation.Seconds)
	})

	b.WriteString("\n### Goals\n\n| goal | result | why |\n|---|---|---|\n")
	for _, r := range rr.Results {
		res := "pass"
		if !r.Passed {
			res = "**FAIL**"
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", r.Goal, res, mdText(r.Reason))
	}

	b.WriteString("\n### Changes of demand\n\n")
	if len(rr.Changes) == 0 {
		b.WriteString("None found.\n")
	} else {
		b.WriteString("| at | stepped | offered per DC (/s) | fair share per DC | Weir | static split |\n|---|---|---|---|---|---|\n")
		for k, c := range rr.Changes {
			var offered, fair []string
			for _, d := range rep.DCs {
				offered = append(offered, fmt.Sprintf("%s %.0f", d, c.Offered[d]))
				fair = append(fair, fmt.Sprintf("%s %s", d, pct(c.Fair[d])))
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", sec(c.At), mdText(strings.Join(c.DCs, ", ")),
				mdText(strings.Join(offered, ", ")), mdText(strings.Join(fair, ", ")),
				settling(rr.Weir.Convergence, k, rep.Interval), settling(rr.Static.Convergence, k, rep.Interval))
		}
	}

	b.WriteString("\n### Not judged as steady\n\n| from | to | why |\n|---|---|---|\n")
	for _, s := range rr.Excluded {
		fmt.Fprintf(b, "| %s | %s | %s |\n", sec(s.From), sec(s.To), mdText(s.Why))
	}

	fmt.Fprintf(b, "\n### Charts\n\n![%s: shares](%s)\n\n![%s: demand](%s)\n\n![%s: admitted](%s)\n\n",
		rr.RuleID, chartFile(rr.RuleID, "shares"), rr.RuleID, chartFile(rr.RuleID, "demand"), rr.RuleID, chartFile(rr.RuleID, "admitted"))
}

func anySettled(c Convergence) bool {
	for _, s := range c.Changes {
		if s.Status == Settled || s.Status == Late {
			return true
		}
	}
	return false
}

// settling describes how the k'th change settled.
func settling(c Convergence, k int, interval time.Duration) string {
	if !c.Applicable || k >= len(c.Changes) {
		return "n/a"
	}
	s := c.Changes[k]
	allowed := fmt.Sprintf("allowed %s", num(intervals(s.Allowed, interval)))
	switch s.Status {
	case Settled:
		return fmt.Sprintf("settled after %s intervals (%s)", num(intervals(s.Time, interval)), allowed)
	case Late:
		return fmt.Sprintf("**late**: settled after %s intervals (%s)", num(intervals(s.Time, interval)), allowed)
	case Unsettled:
		return "**never settled**"
	}
	return "not judged: " + string(s.Status)
}

// mdText escapes what would break a Markdown table cell.
func mdText(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// WriteTrace writes the trace a report was computed from to dir/trace.json,
// for plotting or re-analysis elsewhere, and returns the file's path.
// Durations are in nanoseconds, as encoding/json writes time.Duration.
func WriteTrace(dir string, t *Trace) (string, error) {
	b, err := json.MarshalIndent(t, "", " ")
	if err != nil {
		return "", fmt.Errorf("write trace: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("write trace: %w", err)
	}
	p := filepath.Join(dir, "trace.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		return "", fmt.Errorf("write trace: %w", err)
	}
	return p, nil
}

// wanRows writes the run table's network rows: in process, or the delay
// emulated and the round trip measured between each pair of DCs.
func wanRows(b *strings.Builder, w *WAN) {
	if w == nil {
		b.WriteString("| network | in process (no WAN emulated) |\n")
		return
	}
	for _, l := range w.Links {
		measured := "not measured: " + mdText(l.Error)
		if l.Error == "" {
			measured = "measured RTT " + l.RTT.Round(100*time.Microsecond).String()
			if !l.Applied() {
				measured += " ✗ shorter than the emulated round trip: the delay was not applied"
			}
		}
		fmt.Fprintf(b, "| WAN %s ↔ %s | one-way delay %v emulated (RTT ≥ %v); %s |\n", mdText(l.A), mdText(l.B), l.Delay, 2*l.Delay, measured)
	}
}
