package simreport

import (
	"time"

	"github.com/weirhq/weir/internal/sim/scenario"
)

// Constants of the figures' definitions (docs/simulation.md).
const (
	// StepThreshold is the change of a DC's offered rate, as a fraction of
	// L per second, that makes a step change of demand.
	StepThreshold = 0.2
	// StepPersistence is how long a change must persist to be a step: it
	// must hold in each of this many whole seconds.
	StepPersistence = 3 * time.Second
	// ConvergenceBand is how near its max-min fair share a DC's share must
	// be, as a fraction of L, to have converged.
	ConvergenceBand = 0.05
	// OscillationBand is how far, as a fraction of L, a share must move
	// against its direction to count as a direction change. 2%: a DC's
	// share follows its neighbours' demand estimates, which settle after a
	// step within a few percent of their own level (one interval's Poisson
	// noise at demo rates is 2–3% of L); a settle of that size is not an
	// oscillation, a swing back and forth beyond it is.
	OscillationBand = 0.02
	// ExhaustedFraction is the fraction of L admitted in a window above
	// which the limit counts as exhausted (for starvation).
	ExhaustedFraction = 0.95
	// LeaderFailover is how long a kill-leader fault lasts when its For
	// is zero: the coordinators' election session TTL
	// (docs/architecture.md).
	LeaderFailover = 2 * time.Second
)

// Report is the judgement of a run: per rule, Weir's figures beside the
// two baselines' on the same offered traffic, and the goals' results.
// Analyze builds it; WriteReport renders it. It is a plain value.
type Report struct {
	// Scenario is the scenario's name.
	Scenario string
	// DCs are the run's DCs.
	DCs []string
	// Interval is the planning interval.
	Interval time.Duration
	// Start is when the run started.
	Start time.Time
	// Duration is the length of the run: its whole seconds.
	Duration time.Duration
	// Goals are the goals the run was judged against.
	Goals scenario.Goals
	// Allowance is the time a change of demand is given to converge:
	// Goals.ConvergenceAllowance(Interval).
	Allowance time.Duration
	// Faults are the faults injected, in order of At, with the time each
	// acted and the time excluded from the steady figures.
	Faults []FaultWindow
	// Rules holds one report per rule of the trace, in its order.
	Rules []RuleReport
	// WAN is the trace's: the delay emulated between the DCs and the
	// round trips measured; nil for an in-process run.
	WAN *WAN
}

// Passed reports whether every goal of every rule passed. A report
// without rules has measured nothing and has not passed.
func (r Report) Passed() bool {
	if len(r.Rules) == 0 {
		return false
	}
	for _, rr := range r.Rules {
		if !rr.Passed() {
			return false
		}
	}
	return true
}

// FaultWindow is a fault and the time it acted.
type FaultWindow struct {
	FaultMark
	// End is when the fault stopped acting: At + For; for a For of zero,
	// At + LeaderFailover (kill-leader), the next start-broker's At
	// (stop-broker), At (start-broker, a mere mark) or the run's end.
	End time.Duration
	// Excluded says that the fault's time, and its recovery, is not
	// judged as steady: true for kill-leader, stop-broker, pause-redis,
	// partition and unknown kinds; false for start-broker and the report
	// faults (lose-, duplicate- and delay-reports), through which the
	// goals must hold.
	Excluded bool
	// Until is the end of the excluded time, End plus the convergence
	// allowance, when Excluded.
	Until time.Duration
}

// RuleReport is the judgement of one rule.
type RuleReport struct {
	// RuleID, Limit and Window are the rule's.
	RuleID string
	Limit  int64
	Window time.Duration
	// Changes are the step changes of demand found in the offered
	// traffic, in order.
	Changes []Change
	// Excluded is the time not judged as steady: the warm-up, the
	// excluded faults with their recovery, and the convergence allowance
	// after each change; in order of From, possibly overlapping.
	Excluded []Span
	// SteadySeconds counts the whole seconds judged as steady.
	SteadySeconds int
	// Weir, Static and Centralized are the figures of the run and of the
	// two baselines on the same offered traffic.
	Weir, Static, Centralized Figures
	// Results are Weir's figures against the goals, one per goal.
	Results []Result
	// Trace is the run's trace of the rule; StaticTrace and
	// CentralizedTrace are the baselines' (same offered traffic, their own
	// admitted counts; the static split's shares, none for the
	// centralized limiter).
	Trace, StaticTrace, CentralizedTrace RuleTrace
}

// Passed reports whether every goal passed for the rule.
func (r RuleReport) Passed() bool {
	for _, x := range r.Results {
		if !x.Passed {
			return false
		}
	}
	return true
}

// Change is a step change of demand.
type Change struct {
	// At is the start of the first second at the new level.
	At time.Duration
	// DCs are the DCs whose offered rate stepped, in the trace's DC order.
	DCs []string
	// Offered is each DC's mean offered rate, in requests per second, from
	// At to the next change (or the end).
	Offered map[string]float64
	// Fair is each DC's max-min fair share of L for Offered
	// (MaxMinFair of Offered/(L per second) into 1).
	Fair map[string]float64
	// Congested says whether the offered rates sum to at least L per
	// second.
	Congested bool
}

// Span is a stretch of time, From inclusive to To exclusive.
type Span struct {
	From, To time.Duration
	// Why says what the span is ("warm-up", "partition dc-c",
	// "demand change").
	Why string
}

// Figures are one limiter's figures for one rule (docs/simulation.md defines
// each).
type Figures struct {
	Overshoot   Overshoot
	Utilisation Utilisation
	Convergence Convergence
	Oscillation Oscillation
	Fairness    Fairness
	Starvation  Starvation
	// PerWindow is set for a rule whose window is longer than a second:
	// it is judged per window (Overshoot, and Utilisation over whole
	// windows); convergence, oscillation, fairness and starvation, which
	// compare seconds with L per second, are left unmeasured.
	PerWindow bool
}

// Overshoot is how far admitted traffic went above the limit.
type Overshoot struct {
	// Worst is the largest overshoot of any second, as a fraction of L.
	Worst float64
	// WorstAt is the start of that second.
	WorstAt time.Duration
	// Above counts the seconds whose overshoot exceeds the goal.
	Above int
	// Seconds counts the seconds measured: all of the run.
	Seconds int
}

// Utilisation is how much of the limit was admitted when demand reached
// it.
//
// For a rule whose window is a second, the judged spans are the steady
// seconds whose offered total reaches L. For a longer window they are the
// whole windows (one ending at each second) that start after the warm-up,
// overlap no excluded fault, and whose offered total reaches L: over a
// long window a DC may rightly take the whole limit in its first seconds,
// so single seconds say nothing.
type Utilisation struct {
	// Ratio is the admitted requests over the admissible ones (L per
	// judged span, or what was offered when less) in the judged spans; 0
	// when Seconds is 0.
	Ratio float64
	// Worst is the lowest ratio of one judged span; WorstAt its start.
	Worst   float64
	WorstAt time.Duration
	// Seconds counts the judged spans.
	Seconds int
	// Window is the length of a judged span, in whole seconds.
	Window int
}

// Convergence is how fast shares reached the fair shares after each
// change of demand.
type Convergence struct {
	// Applicable is false for a limiter without shares (the centralized
	// baseline); the other fields are then zero.
	Applicable bool
	// Changes holds the settling of each of the rule's changes, in order.
	Changes []Settling
	// Judged counts the changes judged (Settled, Late or Unsettled).
	Judged int
	// Late counts the judged changes that did not settle within their
	// allowance (Late or Unsettled).
	Late int
	// Worst is the longest settling time of the judged changes that
	// settled, and WorstAt that change's At.
	Worst   time.Duration
	WorstAt time.Duration
}

// Settling is how shares settled after one change of demand.
type Settling struct {
	// At is the change's At.
	At time.Duration
	// Status says how the change was judged.
	Status Status
	// Time is the settling time, when the shares settled (Settled, Late).
	Time time.Duration
	// Allowed is the settling time allowed: the convergence allowance, or
	// up to the end of the warm-up for a change during it.
	Allowed time.Duration
}

// Status is how a change of demand was judged for convergence.
type Status string

// The statuses of a change.
const (
	// Settled: the shares settled within the allowance.
	Settled Status = "settled"
	// Late: the shares settled, after the allowance.
	Late Status = "late"
	// Unsettled: the shares had not settled when the next change, an
	// excluded fault or the end came, at least the allowance later.
	Unsettled Status = "unsettled"
	// Interrupted: not judged; the next change, an excluded fault or the
	// end came before the allowance was up, and the shares had not
	// settled.
	Interrupted Status = "interrupted"
	// DuringFault: not judged; the change came during an excluded fault
	// or its recovery.
	DuringFault Status = "during a fault"
)

// Judged reports whether s counts for the convergence goal.
func (s Status) Judged() bool { return s == Settled || s == Late || s == Unsettled }

// Oscillation is how often shares changed direction in steady periods.
type Oscillation struct {
	// Applicable is false for a limiter without shares.
	Applicable bool
	// ByDC counts each DC's direction changes.
	ByDC map[string]int
	// Worst is the largest count of one DC, WorstDC that DC (the first in
	// DC order on a tie).
	Worst   int
	WorstDC string
	// Steady is the time examined: the steady periods' total length.
	Steady time.Duration
}

// Fairness is how evenly the DCs got their fair shares in congested
// seconds.
type Fairness struct {
	// Mean is the mean of the judged seconds' Jain's indices; 0 when
	// Seconds is 0.
	Mean float64
	// Worst is the lowest index of one second, WorstAt its start.
	Worst   float64
	WorstAt time.Duration
	// Seconds counts the judged seconds: steady, offered ≥ L per second.
	Seconds int
}

// Starvation counts seconds in which a DC that offered traffic admitted
// none though the limit was not exhausted.
type Starvation struct {
	// Seconds counts the steady seconds in which some DC starved.
	Seconds int
	// ByDC counts each DC's starved seconds.
	ByDC map[string]int
	// FirstAt is the start of the first starved second, when Seconds > 0.
	FirstAt time.Duration
	// Judged counts the steady seconds examined.
	Judged int
}

// Result is one figure against its goal.
type Result struct {
	// Goal is the goal's YAML name (max_overshoot, min_utilisation,
	// convergence_intervals, max_oscillation, min_fairness,
	// max_starvation).
	Goal string
	// Passed says whether the goal was met. A goal with nothing to
	// measure passes.
	Passed bool
	// Measured is false when the run gave the figure nothing to measure.
	Measured bool
	// Reason says why, in a sentence for the report.
	Reason string
}
