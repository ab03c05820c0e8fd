package scenario

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/weirhq/weir/pkg/fielderr"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
)

// Bounds of the format.
const (
	// MaxDuration is the longest run: 24 h.
	MaxDuration = 24 * time.Hour
	// MaxDCs is the most DCs a scenario has, as a rule's shares.
	MaxDCs = 64
	// MaxRate is the highest rate a curve may reach, in requests per
	// second: a scenario runs on one machine.
	MaxRate = 1e6
)

const (
	maxNameLen        = 128
	maxDescriptionLen = 4096
)

// Validate checks s as it would run: zero Interval and TTL count as their
// defaults (see SetDefaults). It returns nil or a *ValidationError listing
// every problem with its field path, as Parse reports them.
func (s *Scenario) Validate() error {
	var r report
	s.validate(&r)
	return reportErr(&r)
}

func (s *Scenario) validate(r *report) {
	s.checkName(r)
	if len(s.Description) > maxDescriptionLen || !utf8.ValidString(s.Description) {
		r.Add("description", "must be at most %d bytes of UTF-8", maxDescriptionLen)
	}
	interval, ttl := s.Interval, s.TTL
	if interval == 0 {
		interval = DefaultInterval
	}
	if ttl == 0 {
		ttl = DefaultTTLIntervals * interval
	}
	switch {
	case s.Duration == 0:
		r.Add("duration", "required: how long the traffic runs, such as \"60s\"")
	case s.Duration < time.Second || s.Duration > MaxDuration:
		r.Add("duration", "must be from 1s to %v, got %v", MaxDuration, s.Duration)
	}
	if interval < 10*time.Millisecond || interval > time.Minute {
		r.Add("interval", "must be from 10ms to 1m, got %v", interval)
	}
	if ttl < interval {
		r.Add("ttl", "must be at least the interval (%v), got %v", interval, ttl)
	}
	dcs := s.checkDCs(r)
	set := s.checkRules(r, dcs)
	if len(s.Traffic) == 0 {
		r.Add("traffic", "required: at least one flow")
	}
	for i := range s.Traffic {
		s.checkFlow(r, fielderr.Index("traffic", i), &s.Traffic[i], dcs, set)
	}
	s.checkFaults(r, dcs)
	s.checkGoals(r)
}

func (s *Scenario) checkName(r *report) {
	n := s.Name
	switch {
	case n == "":
		r.Add("name", "required")
	case len(n) > maxNameLen:
		r.Add("name", "must be at most %d characters, got %d", maxNameLen, len(n))
	case !isAlnum(n[0]):
		r.Add("name", "must start with a letter or digit, got %q", n)
	default:
		for i := 0; i < len(n); i++ {
			if c := n[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
				r.Add("name", "may hold only A-Z a-z 0-9 . _ -, got %q", n)
				break
			}
		}
	}
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// checkDCs checks the DC names and returns them as a set.
func (s *Scenario) checkDCs(r *report) map[string]bool {
	dcs := make(map[string]bool, len(s.DCs))
	switch {
	case len(s.DCs) == 0:
		r.Add("dcs", "required: at least one DC")
	case len(s.DCs) > MaxDCs:
		r.Add("dcs", "%d DCs; at most %d", len(s.DCs), MaxDCs)
	}
	for i, d := range s.DCs {
		p := fielderr.Index("dcs", i)
		if err := rule.CheckDC(d); err != nil {
			r.Add(p, "%s", reasonOf(err))
			continue
		}
		if dcs[d] {
			r.Add(p, "%q is listed twice", d)
		}
		dcs[d] = true
	}
	return dcs
}

// reasonOf returns the reason of a one-problem *rule.ValidationError, or
// the error's text.
func reasonOf(err error) string {
	if ve, ok := errors.AsType[*rule.ValidationError](err); ok && len(ve.Errors) == 1 {
		return ve.Errors[0].Reason
	}
	return err.Error()
}

// checkRules compiles the rules, reporting their problems under "rules",
// and checks that their static shares name the scenario's DCs. It returns
// nil if they do not compile.
func (s *Scenario) checkRules(r *report, dcs map[string]bool) *ruleset.Set {
	if s.Rules.Domain == "" && s.Rules.Rules == nil {
		r.Add("rules", "required: a domain and its rules, as in a rule file")
		return nil
	}
	set, err := ruleset.Compile(s.Rules)
	if err != nil {
		if ve, ok := errors.AsType[*rule.ValidationError](err); ok {
			for _, fe := range ve.Errors {
				r.Add(joinPath("rules", fe.Path), "%s", fe.Reason)
			}
		} else {
			r.Add("rules", "%v", err)
		}
		return nil
	}
	for i, x := range s.Rules.Rules {
		for _, dc := range slices.Sorted(maps.Keys(x.Shares)) {
			if len(dcs) > 0 && !dcs[dc] {
				r.Add(fielderr.Key(fmt.Sprintf("rules.rules[%d].shares", i), dc), "%q is not one of the scenario's dcs (%s)", dc, strings.Join(s.DCs, ", "))
			}
		}
	}
	return set
}

func (s *Scenario) checkFlow(r *report, p string, f *Flow, dcs map[string]bool, set *ruleset.Set) {
	switch {
	case f.DC == "":
		r.Add(fielderr.Field(p, "dc"), "required: the DC that sends the flow")
	case !dcs[f.DC] && len(s.DCs) > 0:
		r.Add(fielderr.Field(p, "dc"), "%q is not one of the scenario's dcs (%s)", f.DC, strings.Join(s.DCs, ", "))
	}
	s.checkFlowRule(r, p, f, set)
	if f.Base == nil && f.Flash == nil {
		r.Add(p, "has no rate: give one of rate, steps, ramp or diurnal, and/or a flash")
	}
	if f.Base != nil {
		f.Base.validate(r, p)
	}
	if f.Flash != nil {
		f.Flash.validate(r, fielderr.Field(p, "flash"))
	}
	switch f.Noise {
	case "", NoiseEven, NoisePoisson:
	default:
		r.Add(fielderr.Field(p, "noise"), "want %q or %q, got %q", NoiseEven, NoisePoisson, string(f.Noise))
	}
}

func (s *Scenario) checkFlowRule(r *report, p string, f *Flow, set *ruleset.Set) {
	rp := fielderr.Field(p, "rule")
	if f.Rule == "" {
		r.Add(rp, "required: the rule_id of the rule the flow is aimed at")
		return
	}
	if set == nil {
		return // the rules' own problems are reported
	}
	rr, ok := set.Rule(f.Rule)
	switch {
	case !ok:
		r.Add(rp, "no rule %q in rules", f.Rule)
		return
	case rr.Spec.Scope != rule.ScopeGlobal:
		r.Add(rp, "rule %q is local: the report measures global rules only", f.Rule)
		return
	case rr.Spec.Unlimited:
		r.Add(rp, "rule %q is unlimited: the report measures limited rules only", f.Rule)
		return
	case !rr.Spec.Enabled:
		r.Add(rp, "rule %q is disabled", f.Rule)
		return
	}
	for _, m := range set.Match(f.Attributes, nil) {
		if m.Rule.Spec.ID != f.Rule {
			continue
		}
		if m.Oversized {
			r.Add(fielderr.Field(p, "attributes"), "make a key of rule %q too long", f.Rule)
		}
		return
	}
	r.Add(fielderr.Field(p, "attributes"), "rule %q does not apply to requests with these attributes (%s)", f.Rule, describeRule(rr.Spec))
}

// describeRule says what a rule asks of a request.
func describeRule(x rule.Rule) string {
	var parts []string
	if x.PathPattern != "" {
		parts = append(parts, fmt.Sprintf("path_pattern %q", x.PathPattern))
	}
	if len(x.Methods) > 0 {
		parts = append(parts, "methods "+strings.Join(x.Methods, ","))
	}
	for _, k := range slices.Sorted(maps.Keys(x.Conditions)) {
		parts = append(parts, fmt.Sprintf("condition %s=%q", k, x.Conditions[k]))
	}
	if len(x.KeyType) > 0 {
		parts = append(parts, "key_type "+strings.Join(x.KeyType, ","))
	}
	if len(parts) == 0 {
		return "it applies to every request"
	}
	return "it needs " + strings.Join(parts, ", ")
}

// checkRate reports a rate that is negative, NaN or above MaxRate.
func checkRate(r *report, p string, v float64) {
	if !(v >= 0 && v <= MaxRate) {
		r.Add(p, "must be a rate from 0 to %g requests per second, got %v", float64(MaxRate), v)
	}
}

func checkOffset(r *report, p string, d time.Duration) {
	if d < 0 {
		r.Add(p, "must not be negative, got %v", d)
	}
}

func (c Constant) validate(r *report, p string) { checkRate(r, fielderr.Field(p, "rate"), float64(c)) }

func (s Steps) validate(r *report, p string) {
	sp := fielderr.Field(p, "steps")
	if len(s) == 0 {
		r.Add(sp, "want at least one step")
	}
	for i, st := range s {
		ip := fielderr.Index(sp, i)
		checkOffset(r, fielderr.Field(ip, "at"), st.At)
		if i > 0 && st.At <= s[i-1].At {
			r.Add(fielderr.Field(ip, "at"), "must be after the previous step's (%v), got %v", s[i-1].At, st.At)
		}
		checkRate(r, fielderr.Field(ip, "rate"), st.Rate)
	}
}

func (x Ramp) validate(r *report, p string) {
	rp := fielderr.Field(p, "ramp")
	checkRate(r, fielderr.Field(rp, "from"), x.From)
	checkRate(r, fielderr.Field(rp, "to"), x.To)
	checkOffset(r, fielderr.Field(rp, "start"), x.Start)
	if x.End <= x.Start {
		r.Add(fielderr.Field(rp, "end"), "must be after start (%v), got %v", x.Start, x.End)
	}
}

func (d Diurnal) validate(r *report, p string) {
	dp := fielderr.Field(p, "diurnal")
	checkRate(r, fielderr.Field(dp, "mean"), d.Mean)
	if !(d.Amplitude >= 0 && d.Mean+d.Amplitude <= MaxRate) {
		r.Add(fielderr.Field(dp, "amplitude"), "must be from 0 to %g − mean, got %v", float64(MaxRate), d.Amplitude)
	}
	if d.Period <= 0 {
		r.Add(fielderr.Field(dp, "period"), "must be positive, got %v", d.Period)
	}
	checkOffset(r, fielderr.Field(dp, "phase"), d.Phase)
}

func (f Flash) validate(r *report, fp string) {
	checkOffset(r, fielderr.Field(fp, "at"), f.At)
	if !(f.Peak > 0 && f.Peak <= MaxRate) {
		r.Add(fielderr.Field(fp, "peak"), "must be a rate above 0 and at most %g requests per second, got %v", float64(MaxRate), f.Peak)
	}
	checkOffset(r, fielderr.Field(fp, "rise"), f.Rise)
	checkOffset(r, fielderr.Field(fp, "decay"), f.Decay)
	if f.Rise <= 0 && f.Decay <= 0 {
		r.Add(fp, "rise and decay are both zero: the flash would last no time")
	}
}

// needs says which fields a kind of fault takes: whether it needs a DC, a
// For (required, optional or none), a Fraction or a By.
type needs struct {
	dc, fraction, by bool
	forField         int // forNone, forOptional or forRequired
}

const (
	forNone = iota
	forOptional
	forRequired
)

var faultNeeds = map[FaultKind]needs{
	KillLeader:       {},
	StopBroker:       {forField: forOptional},
	StartBroker:      {},
	PauseRedis:       {dc: true, forField: forRequired},
	Partition:        {dc: true, forField: forRequired},
	LoseReports:      {fraction: true, forField: forRequired},
	DuplicateReports: {fraction: true, forField: forRequired},
	DelayReports:     {by: true, forField: forRequired},
}

func (s *Scenario) checkFaults(r *report, dcs map[string]bool) {
	for i, f := range s.Faults {
		p := fielderr.Index("faults", i)
		ap := fielderr.Field(p, "at")
		checkOffset(r, ap, f.At)
		if s.Duration > 0 && f.At >= s.Duration {
			r.Add(ap, "must be before the end of the run (%v), got %v", s.Duration, f.At)
		}
		n, ok := faultNeeds[f.Kind]
		if !ok {
			if f.Kind == "" {
				r.Add(fielderr.Field(p, "kind"), "required: one of %s", kindList())
			} else {
				r.Add(fielderr.Field(p, "kind"), "want one of %s, got %q", kindList(), string(f.Kind))
			}
			continue
		}
		switch {
		case n.dc && f.DC == "":
			r.Add(fielderr.Field(p, "dc"), "required: %s needs the DC it affects", f.Kind)
		case n.dc && len(s.DCs) > 0 && !dcs[f.DC]:
			r.Add(fielderr.Field(p, "dc"), "%q is not one of the scenario's dcs (%s)", f.DC, strings.Join(s.DCs, ", "))
		case !n.dc && f.DC != "":
			r.Add(fielderr.Field(p, "dc"), "%s affects every DC and takes no dc", f.Kind)
		}
		switch {
		case n.forField == forRequired && f.For == 0:
			r.Add(fielderr.Field(p, "for"), "required: how long the %s lasts", f.Kind)
		case n.forField == forNone && f.For != 0:
			r.Add(fielderr.Field(p, "for"), "%s takes no for", f.Kind)
		case f.For < 0:
			r.Add(fielderr.Field(p, "for"), "must be positive, got %v", f.For)
		}
		switch {
		case n.fraction && f.Fraction == 0:
			r.Add(fielderr.Field(p, "fraction"), "required: the fraction of reports, in (0, 1]")
		case n.fraction && !(f.Fraction > 0 && f.Fraction <= 1):
			r.Add(fielderr.Field(p, "fraction"), "must be in (0, 1], got %v", f.Fraction)
		case !n.fraction && f.Fraction != 0:
			r.Add(fielderr.Field(p, "fraction"), "%s takes no fraction", f.Kind)
		}
		switch {
		case n.by && f.By == 0:
			r.Add(fielderr.Field(p, "by"), "required: how long each report is delayed")
		case n.by && f.By < 0:
			r.Add(fielderr.Field(p, "by"), "must be positive, got %v", f.By)
		case !n.by && f.By != 0:
			r.Add(fielderr.Field(p, "by"), "%s takes no by", f.Kind)
		}
	}
	s.checkFaultOrder(r)
}

func kindList() string {
	kinds := FaultKinds()
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// checkFaultOrder checks what depends on the order of the faults: faults
// of one kind and DC do not overlap, the broker is stopped only while it
// runs and started only while a stop-broker without for holds it down.
func (s *Scenario) checkFaultOrder(r *report) {
	order := make([]int, len(s.Faults))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return s.Faults[order[a]].At < s.Faults[order[b]].At })
	type slot struct {
		kind FaultKind
		dc   string
	}
	busy := map[slot]int{} // index of the fault holding the slot
	brokerDown, brokerBy := time.Duration(-1), -1
	for _, i := range order {
		f := s.Faults[i]
		p := fielderr.Index("faults", i)
		if _, ok := faultNeeds[f.Kind]; !ok {
			continue
		}
		switch f.Kind {
		case KillLeader:
			continue
		case StopBroker, StartBroker:
			if brokerDown >= 0 && f.At >= brokerDown {
				brokerDown, brokerBy = -1, -1 // a stop-broker with for is over
			}
			down := brokerBy >= 0
			switch {
			case f.Kind == StopBroker && down:
				r.Add(fielderr.Field(p, "at"), "the broker is already stopped at %v (by faults[%d])", f.At, brokerBy)
			case f.Kind == StopBroker && f.For > 0:
				brokerDown, brokerBy = f.At+f.For, i
			case f.Kind == StopBroker:
				brokerDown, brokerBy = time.Duration(math.MaxInt64), i
			case !down:
				r.Add(fielderr.Field(p, "at"), "the broker is running at %v: start-broker must follow a stop-broker without for", f.At)
			case s.Faults[brokerBy].For > 0:
				r.Add(fielderr.Field(p, "at"), "the broker stopped by faults[%d] restarts by itself after its for", brokerBy)
			default:
				brokerDown, brokerBy = -1, -1
			}
			continue
		}
		k := slot{f.Kind, f.DC}
		if j, ok := busy[k]; ok {
			g := s.Faults[j]
			if g.For == 0 || f.At < g.At+g.For {
				what := string(f.Kind)
				if f.DC != "" {
					what += " of " + f.DC
				}
				r.Add(fielderr.Field(p, "at"), "overlaps faults[%d] (%s from %v for %v): faults of one kind and DC may not overlap", j, what, g.At, g.For)
				continue
			}
		}
		busy[k] = i
	}
}

func (s *Scenario) checkGoals(r *report) {
	g := s.Goals
	const p = "goals"
	if !(g.MaxOvershoot >= 0 && g.MaxOvershoot <= 1) {
		r.Add(fielderr.Field(p, "max_overshoot"), "must be a fraction of the limit from 0 to 1, got %v", g.MaxOvershoot)
	}
	if !(g.MinUtilisation >= 0 && g.MinUtilisation <= 1) {
		r.Add(fielderr.Field(p, "min_utilisation"), "must be a fraction from 0 to 1, got %v", g.MinUtilisation)
	}
	if !(g.ConvergenceIntervals > 0 && g.ConvergenceIntervals <= 1000) {
		r.Add(fielderr.Field(p, "convergence_intervals"), "must be above 0 and at most 1000, got %v", g.ConvergenceIntervals)
	}
	if g.ConvergenceSlack < 0 {
		r.Add(fielderr.Field(p, "convergence_slack"), "must not be negative, got %v", g.ConvergenceSlack)
	}
	if g.MaxOscillation < 0 {
		r.Add(fielderr.Field(p, "max_oscillation"), "must not be negative, got %d", g.MaxOscillation)
	}
	if !(g.MinFairness >= 0 && g.MinFairness <= 1) {
		r.Add(fielderr.Field(p, "min_fairness"), "must be a Jain's index from 0 to 1, got %v", g.MinFairness)
	}
	if g.MaxStarvation < 0 {
		r.Add(fielderr.Field(p, "max_starvation"), "must not be negative, got %d", g.MaxStarvation)
	}
	switch {
	case g.WarmUp < 0:
		r.Add(fielderr.Field(p, "warm_up"), "must not be negative, got %v", g.WarmUp)
	case s.Duration >= time.Second && s.Duration <= MaxDuration && g.WarmUp >= s.Duration:
		r.Add(fielderr.Field(p, "warm_up"), "must be shorter than the run (%v), got %v", s.Duration, g.WarmUp)
	}
}
