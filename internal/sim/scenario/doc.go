// Package scenario reads simulation scenarios: the DCs of a simulated
// Weir, the rules it runs, the traffic each DC sends, the faults injected
// on schedule, and the goals the run is judged by (SPEC §1.3, §7). The
// simulation runner (package sim) plays a Scenario; package simreport
// judges the run against its Goals.
//
// # The format
//
// A scenario is one YAML (or JSON) document:
//
//	name: default                  # required; A-Z a-z 0-9 . _ -
//	description: demand moves from dc-a to dc-b
//	duration: 60s                  # required; Go duration syntax
//	interval: 1s                   # planning interval; default 1s
//	ttl: 5s                        # quota documents' TTL; default 5 intervals
//	seed: 7                        # random draws; default: the runner's
//	dcs: [dc-a, dc-b, dc-c]        # required; DC names as in rule shares
//	rules:                         # required; a rule file, inline (docs/rules.md)
//	  domain: api
//	  rules:
//	    - rule_id: total
//	      path_pattern: /total
//	      limit: 300
//	      window_seconds: 1
//	      algorithm: SlidingWindowLog
//	traffic:                       # required; at least one flow
//	  - dc: dc-a
//	    rule: total                # the rule the flow is aimed at, for the report
//	    attributes: {path: /total} # sent with every request
//	    steps: [{at: 0s, rate: 600}, {at: 30s, rate: 30}]
//	    noise: poisson             # or even (the default)
//	faults:
//	  - {at: 20s, kind: partition, dc: dc-c, for: 10s}
//	goals:                         # each optional; SPEC §7 by default
//	  max_overshoot: 0.01
//
// The document is read with package document, as rule files are: unknown
// fields and keys that appear more than once are errors reported with
// their path (traffic[0].stpes: unknown field), and a second YAML document
// is a syntax error. Durations are strings in Go's syntax ("90s", "1m30s",
// "250ms"). The rules are read by rulefile.Decode, so they are validated
// exactly as a rule file is, and their problems are reported under
// "rules" (rules.rules[0].limit: ...). Each flow must be aimed at an
// enabled global rule with a limit that applies to the flow's attributes
// (as pkg/ruleset matches them), and rules' static shares may name only
// the scenario's DCs.
//
// # Rate curves
//
// A flow's rate, in requests per second at time t from the start of the
// run, is its base curve plus its flash crowd, clipped at 0:
//
//	Rate(t) = max(0, base(t) + flash(t))
//
// The base is at most one of:
//
//	rate: 300                                           constant
//	steps: [{at: 0s, rate: 600}, {at: 30s, rate: 30}]   piecewise constant; 0 before the first step
//	ramp: {from: 0, to: 600, start: 10s, end: 40s}      linear between start and end, flat outside
//	diurnal: {mean: 300, amplitude: 200, period: 60s, phase: 0s}
//	                                                    mean + amplitude·sin(2π(t − phase)/period)
//
// and the flash, if any, is
//
//	flash: {at: 20s, peak: 2000, rise: 1s, decay: 5s}   0 → peak linearly over rise, back to 0 over decay
//
// A flow needs a base, a flash, or both. noise says how requests are
// spread: even (the default) paces them evenly at the instantaneous rate,
// poisson draws them as a Poisson process at that rate. Flow.Rate gives
// the rate; Flow.Poisson the noise.
//
// # Faults
//
// Each fault has an at and a kind, and the fields its kind needs (Fault
// lists them): kill-leader; stop-broker (for, or until a start-broker);
// start-broker; pause-redis (dc, for); partition (dc, for); lose-reports
// and duplicate-reports (fraction, for); delay-reports (by, for).
//
// # Goals
//
// Absent goals take DefaultGoals: max_overshoot 0.01, min_utilisation
// 0.98, convergence_intervals 3, convergence_slack 2 intervals,
// max_oscillation 0, min_fairness 0.95, max_starvation 0, warm_up 10
// intervals. Package simreport defines the figures each is compared with
// (docs/simulation.md, "How a run is judged").
//
// Everything in this package is pure: Parse, Validate and the curves do no
// I/O but Load's reading of its file, and a Scenario is a plain value.
package scenario
