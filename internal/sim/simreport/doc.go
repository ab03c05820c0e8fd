// Package simreport judges a simulation run (SPEC §1.3, §7): from what the
// DCs offered and admitted each second and the shares they enforced, it
// computes how accurate and how fast the global limits were, compares the
// figures with the scenario's goals and with two baselines on the same
// traffic, and writes a report with charts.
//
// The runner (package sim) records a Trace; Analyze turns it into a
// Report; WriteReport renders report.md and SVG charts; FormatLive prints
// a compact table per second while the run goes. Everything but
// WriteReport is pure, and a Report is a plain value.
//
// # Definitions
//
// L is a rule's limit per window of w whole seconds; L/s = L/w. Second i
// runs from i s to i+1 s; o_d[i] and a_d[i] are DC d's offered and
// admitted requests in it, O[i] and A[i] their sums over the DCs. The
// allowance is Goals.ConvergenceAllowance(interval): convergence_intervals
// intervals plus convergence_slack.
//
// Steady time is what is left after taking out the warm-up, the excluded
// faults (kill-leader, stop-broker, pause-redis, partition, from their
// start to their end plus the allowance; the report faults lose-,
// duplicate- and delay-reports are judged through) and the allowance after
// each change of demand. A change of demand is the start of the run, or
// is found in the offered series: a DC's offered count differs from its
// reference level (at first its mean over the first 3 s) by more than
// StepThreshold (20%) of L/s, the same way, in each of StepPersistence (3)
// consecutive seconds; steps less than 3 s apart are one change.
//
//   - Overshoot, each second of the whole run: max(0, Σ A over the w
//     seconds ending with it − L) / L.
//   - Utilisation: Σ A[i] / Σ min(O[i], L/s) over steady seconds with
//     O[i] ≥ L/s.
//   - Convergence: after each change, the time until every DC's share stays
//     within ConvergenceBand (5% of L) of its max-min fair share (only
//     from below when the change is not congested), until the next change,
//     excluded fault or the end; judged against the allowance.
//   - Oscillation: direction changes of each DC's share beyond
//     OscillationBand (2%) in the steady periods.
//   - Fairness: the mean over steady seconds with O[i] ≥ L/s of Jain's index
//     of a_d / min(o_d, fair_d · L/s) over the DCs that offered.
//   - Starvation: steady seconds in which a DC that offered admitted
//     nothing while the window's admitted total was below
//     ExhaustedFraction (95%) of L.
//
// The baselines are StaticSplit (each DC floor(L/N), never moving) and
// Centralized (one exact limiter, shared max-min fairly).
// docs/simulation.md gives every definition in full.
package simreport
