package scenario

import (
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/weirhq/weir/pkg/rule"
)

// MaxDocumentSize is the largest scenario document Parse reads: 1 MiB.
const MaxDocumentSize = 1 << 20

// Scenario is one simulated run: the DCs, the rules, the traffic each DC
// sends, the faults injected and the goals the run is judged by.
//
// Parse and Load return scenarios with their defaults filled in and
// validated. A Scenario built in Go should be given its defaults with
// SetDefaults (its Goals start from DefaultGoals) and checked with
// Validate. A Scenario is a plain value: safe to share while nobody
// changes it.
type Scenario struct {
	// Name names the run in reports and file names: 1 to 128 characters
	// of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or
	// digit. Required.
	Name string
	// Description is free text for the report, at most 4,096 bytes.
	Description string
	// Duration is how long the traffic runs, from 1 s to 24 h. Required.
	Duration time.Duration
	// Interval is the coordinator's planning and the limiters' reporting
	// interval; SetDefaults makes it 1 s when zero.
	Interval time.Duration
	// TTL is the time to live of the quota documents; SetDefaults makes it
	// 5 intervals when zero. It must be at least one interval.
	TTL time.Duration
	// Seed makes the run's random draws (Poisson arrivals, lost and
	// duplicated reports) repeatable; 0 lets the runner choose.
	Seed uint64
	// DCs names the datacenters, each a valid DC name (rule.CheckDC),
	// 1 to 64 of them, without repeats.
	DCs []string
	// Rules are the rules every limiter and coordinator runs, as in a rule
	// file (docs/rules.md). Static shares may name only DCs of DCs.
	Rules rule.Set
	// Traffic is what the DCs send: at least one flow.
	Traffic []Flow
	// Faults are injected on schedule; see Fault.
	Faults []Fault
	// Goals are the targets the run is judged against.
	Goals Goals
}

// Flow is traffic sent from one DC: requests carrying Attributes, aimed
// at one rule, at Rate(t) requests per second.
type Flow struct {
	// DC is the sending DC, one of the scenario's DCs.
	DC string
	// Rule is the rule_id of the rule the flow is aimed at, for the
	// report: a global, limited rule of the scenario that applies to
	// Attributes.
	Rule string
	// Attributes are sent with every request ("path", "method", "user",
	// ...; see pkg/ruleset).
	Attributes map[string]string
	// Base is the base curve: Constant, Steps, Ramp or Diurnal. Nil means
	// none: a flow of a flash crowd alone.
	Base Curve
	// Flash, if set, is added to Base.
	Flash *Flash
	// Noise says how requests are spread in time; empty means NoiseEven.
	Noise Noise
}

// Rate returns the flow's rate at t, in requests per second: Base's rate
// plus Flash's, clipped at 0. It is pure, and never negative, infinite or
// NaN for a valid flow.
func (f Flow) Rate(t time.Duration) float64 {
	v := 0.0
	if f.Base != nil {
		v = f.Base.Rate(t)
	}
	if f.Flash != nil {
		v += f.Flash.Rate(t)
	}
	if !(v > 0) { // also NaN
		return 0
	}
	return v
}

// Poisson reports whether requests are drawn as a Poisson process rather
// than evenly paced.
func (f Flow) Poisson() bool { return f.Noise == NoisePoisson }

// FaultKind names a kind of fault.
type FaultKind string

// The kinds of fault. Fault lists the fields each needs.
const (
	// KillLeader kills the leading coordinator abruptly (no resignation);
	// a standby takes over and the runner starts a replacement.
	KillLeader FaultKind = "kill-leader"
	// StopBroker stops the Kafka broker, for For or, when For is zero,
	// until a StartBroker.
	StopBroker FaultKind = "stop-broker"
	// StartBroker starts the broker a StopBroker without For stopped.
	StartBroker FaultKind = "start-broker"
	// PauseRedis makes DC's Redis unresponsive for For.
	PauseRedis FaultKind = "pause-redis"
	// Partition cuts DC off from etcd and Kafka for For.
	Partition FaultKind = "partition"
	// LoseReports drops Fraction of the usage reports for For.
	LoseReports FaultKind = "lose-reports"
	// DuplicateReports delivers Fraction of the usage reports twice for
	// For.
	DuplicateReports FaultKind = "duplicate-reports"
	// DelayReports delays every usage report by By for For.
	DelayReports FaultKind = "delay-reports"
)

// FaultKinds returns every kind of fault, in the order the documentation
// gives them.
func FaultKinds() []FaultKind {
	return []FaultKind{KillLeader, StopBroker, StartBroker, PauseRedis, Partition, LoseReports, DuplicateReports, DelayReports}
}

// Fault is a failure injected At a time. Which fields a kind takes:
//
//	kind               dc        for                 fraction   by
//	kill-leader        -         -                   -          -
//	stop-broker        -         optional (0: until a start-broker)
//	start-broker       -         -                   -          -
//	pause-redis        required  required            -          -
//	partition          required  required            -          -
//	lose-reports       -         required            (0, 1]     -
//	duplicate-reports  -         required            (0, 1]     -
//	delay-reports      -         required            -          > 0
//
// A field a kind does not take must be left zero. Two faults of the same
// kind (and DC) may not overlap, a stop-broker may not stop a stopped
// broker, and a start-broker must follow a stop-broker without For.
type Fault struct {
	// At is when the fault starts, from the start of the run: before
	// Duration.
	At time.Duration
	// Kind is the kind of fault.
	Kind FaultKind
	// DC is the DC a pause-redis or partition affects.
	DC string
	// For is how long the fault lasts.
	For time.Duration
	// Fraction is the fraction of reports a lose-reports or
	// duplicate-reports affects.
	Fraction float64
	// By is how long a delay-reports delays each report.
	By time.Duration
}

// Goals are the targets a run is judged against (SPEC §7); package
// simreport defines each figure precisely (docs/simulation.md, "How a run is judged"). The
// zero Goals are not the defaults: start from DefaultGoals.
type Goals struct {
	// MaxOvershoot is the largest admitted overshoot of the limit in any
	// second, as a fraction of L (YAML max_overshoot; default 0.01).
	MaxOvershoot float64
	// MinUtilisation is the least fraction of L admitted over the steady
	// seconds whose demand reaches L (min_utilisation; default 0.98).
	MinUtilisation float64
	// ConvergenceIntervals is how many intervals every DC may take to come
	// within 5% of its max-min fair share after a step change of demand
	// (convergence_intervals; default 3).
	ConvergenceIntervals float64
	// ConvergenceSlack is added to ConvergenceIntervals intervals for what
	// the interval does not cover: Kafka lag, etcd watch delays, the
	// quarantine of released quota (convergence_slack; default 2
	// intervals).
	ConvergenceSlack time.Duration
	// MaxOscillation is the most direction changes (beyond a 2% band,
	// simreport.OscillationBand) any one DC's share may make in the steady
	// periods of the run (max_oscillation; default 0).
	MaxOscillation int
	// MinFairness is the least mean Jain's index of the DCs' admitted
	// traffic against their fair shares in congested steady seconds
	// (min_fairness; default 0.95).
	MinFairness float64
	// MaxStarvation is the most steady seconds in which some DC that
	// offered traffic admitted none while the limit was not exhausted
	// (max_starvation; default 0).
	MaxStarvation int
	// WarmUp is the start of the run that is judged for overshoot only:
	// the coordinator has yet to see enough demand to move shares
	// (warm_up; default 10 intervals). Less than Duration.
	WarmUp time.Duration
}

// DefaultGoals returns SPEC §7's goals for a run with the given planning
// interval (1 s when not positive).
func DefaultGoals(interval time.Duration) Goals {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return Goals{
		MaxOvershoot:         0.01,
		MinUtilisation:       0.98,
		ConvergenceIntervals: 3,
		ConvergenceSlack:     2 * interval,
		MaxOscillation:       0,
		MinFairness:          0.95,
		MaxStarvation:        0,
		WarmUp:               10 * interval,
	}
}

// ConvergenceAllowance returns the time a step change of demand is given
// to converge: ConvergenceIntervals intervals plus ConvergenceSlack.
func (g Goals) ConvergenceAllowance(interval time.Duration) time.Duration {
	return time.Duration(math.Round(g.ConvergenceIntervals*float64(interval))) + g.ConvergenceSlack
}

// Defaults of the scenario's own settings.
const (
	// DefaultInterval is the planning interval when none is given.
	DefaultInterval = time.Second
	// DefaultTTLIntervals is the quota documents' time to live, in
	// intervals, when none is given.
	DefaultTTLIntervals = 5
)

// SetDefaults fills in Interval and TTL when they are zero. It leaves
// Goals alone: Parse fills in absent goals from DefaultGoals.
func (s *Scenario) SetDefaults() {
	if s.Interval == 0 {
		s.Interval = DefaultInterval
	}
	if s.TTL == 0 {
		s.TTL = DefaultTTLIntervals * s.Interval
	}
}

// Load reads and parses the scenario file at path. Errors are Parse's, or
// the file system's, wrapped with the path.
func Load(path string) (*Scenario, error) {
	s, err := load(path)
	if err != nil {
		return nil, fmt.Errorf("load scenario from %s: %w", path, err)
	}
	return s, nil
}

func load(path string) (*Scenario, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// One byte past the limit, so that Parse sees an oversized file as
	// such without reading all of it.
	data, err := io.ReadAll(io.LimitReader(f, MaxDocumentSize+1))
	if err != nil {
		return nil, err
	}
	return Parse(data)
}
