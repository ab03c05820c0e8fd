package simreport

import "time"

// Trace is what a simulation run recorded: the input of Analyze. The
// runner (package sim) builds it; tests build synthetic ones. A Trace is a
// plain value; Analyze only reads it.
type Trace struct {
	// Scenario is the scenario's name.
	Scenario string
	// DCs names the run's DCs, in the scenario's order. Every figure
	// ranges over them: a DC missing from a Second's or a ShareSample's
	// maps offered, admitted or held 0.
	DCs []string
	// Interval is the coordinator's planning interval (1 s when zero).
	Interval time.Duration
	// Start is the wall-clock time of the run's start, for the report.
	Start time.Time
	// Rules holds one trace per global rule under test.
	Rules []RuleTrace
	// Faults are the faults injected, in any order.
	Faults []FaultMark
	// WAN, for a run behind an emulated WAN, is the delay applied and the
	// round trips measured between the DCs; nil for an in-process run.
	WAN *WAN
}

// WAN is what a run behind an emulated WAN applied and measured.
type WAN struct {
	// Links holds one entry per pair of DCs, in the DCs' order.
	Links []WANLink
}

// WANLink is one pair of DCs behind the emulated WAN.
type WANLink struct {
	A, B string
	// Delay is the one-way delay emulated between A and B: a round trip
	// should take at least twice as long.
	Delay time.Duration
	// RTT is the median round trip measured from A to B before the run
	// (zero with Error set when it could not be measured).
	RTT   time.Duration
	Error string
}

// Applied reports whether the round trip measured shows the delay: at
// least 90% of twice the one-way delay.
func (l WANLink) Applied() bool {
	return l.Error == "" && l.RTT >= 2*l.Delay*9/10
}

// RuleTrace is what one global rule saw during a run.
type RuleTrace struct {
	// RuleID is the rule's rule_id.
	RuleID string
	// Limit is the rule's limit L per Window.
	Limit int64
	// Window is the rule's window (1 s when zero).
	Window time.Duration
	// Seconds holds one entry per whole second of the run, in order:
	// Seconds[i].At is i seconds.
	Seconds []Second
	// Shares are the local limits in force, sampled about every 100 ms,
	// in order of At.
	Shares []ShareSample
}

// Second is what the DCs offered and admitted in one second of a run.
type Second struct {
	// At is the offset of the second's start from the run's start.
	At time.Duration
	// Offered counts the requests each DC sent, by DC name.
	Offered map[string]int
	// Admitted counts the requests each DC admitted, by DC name.
	Admitted map[string]int
}

// ShareSample is the local limit each DC enforced at one instant, as a
// fraction of L: a DC enforcing floor(share × L) has share
// floor(share × L)/L here.
type ShareSample struct {
	// At is the offset of the sample from the run's start.
	At time.Duration
	// Share is each DC's local limit as a fraction of L, by DC name.
	Share map[string]float64
}

// FaultMark is a fault injected during a run, as the scenario gave it.
type FaultMark struct {
	// At is when the fault started, from the run's start.
	At time.Duration
	// Kind is the fault's kind (scenario.FaultKind's values).
	Kind string
	// DC is the DC affected, for the kinds that affect one.
	DC string
	// For is how long the fault lasted; 0 means: once (kill-leader),
	// until the next start-broker (stop-broker), or to the end.
	For time.Duration
}
