package scenario_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/sim/scenario"
	"github.com/weirhq/weir/pkg/rule"
)

// base is a valid scenario the error cases change one thing in.
const base = `name: t
duration: 60s
dcs: [dc-a, dc-b]
rules:
  domain: api
  rules:
    - rule_id: total
      path_pattern: /total
      limit: 300
      window_seconds: 1
      algorithm: SlidingWindowLog
    - rule_id: per-user
      path_pattern: /user
      key_type: user
      limit: 100
      window_seconds: 1
    - rule_id: local-one
      path_pattern: /local
      limit: 10
      window_seconds: 1
      scope: local
traffic:
  - dc: dc-a
    rule: total
    attributes: {path: /total}
    rate: 100
`

// with returns base with old replaced by new, which must be found.
func with(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(base, old) {
		t.Fatalf("base has no %q", old)
	}
	return strings.Replace(base, old, new, 1)
}

// flow returns base with its flow replaced by the given YAML flow, written
// as one flow-style mapping.
func flow(t *testing.T, f string) string {
	t.Helper()
	i := strings.Index(base, "traffic:\n")
	return base[:i] + "traffic:\n  - " + f + "\n"
}

func TestParseValid(t *testing.T) {
	s, err := scenario.Parse([]byte(base))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if s.Name != "t" || s.Duration != time.Minute {
		t.Errorf("got name %q duration %v, want t 1m0s", s.Name, s.Duration)
	}
	if s.Interval != time.Second || s.TTL != 5*time.Second {
		t.Errorf("got interval %v ttl %v, want the defaults 1s 5s", s.Interval, s.TTL)
	}
	if got, want := s.Goals, scenario.DefaultGoals(time.Second); got != want {
		t.Errorf("got goals %+v, want the defaults %+v", got, want)
	}
	if got := len(s.Rules.Rules); got != 3 || s.Rules.Domain != "api" {
		t.Errorf("got %d rules in %q, want 3 in api", got, s.Rules.Domain)
	}
	if r := s.Rules.Rules[1]; r.Algorithm.String() != "SlidingWindowCounter" || !r.Enabled {
		t.Errorf("rule defaults not filled in: algorithm %v enabled %v", r.Algorithm, r.Enabled)
	}
	f := s.Traffic[0]
	if f.DC != "dc-a" || f.Rule != "total" || f.Attributes["path"] != "/total" || f.Base != scenario.Constant(100) || f.Poisson() {
		t.Errorf("got flow %+v, want dc-a total /total rate 100 even", f)
	}
}

func TestParseSettings(t *testing.T) {
	doc := with(t, "duration: 60s\n", "duration: 60s\ninterval: 500ms\nseed: 42\ndescription: d\n") + `faults:
  - {at: 10s, kind: kill-leader}
  - {at: 12s, kind: stop-broker}
  - {at: 20s, kind: start-broker}
  - {at: 21s, kind: pause-redis, dc: dc-b, for: 3s}
  - {at: 22s, kind: partition, dc: dc-a, for: 5s}
  - {at: 30s, kind: lose-reports, fraction: 0.2, for: 10s}
  - {at: 30s, kind: duplicate-reports, fraction: 0.2, for: 10s}
  - {at: 41s, kind: delay-reports, by: 1500ms, for: 5s}
  - {at: 50s, kind: stop-broker, for: 2s}
goals:
  max_overshoot: 0
  min_utilisation: 0.9
  convergence_intervals: 4
  convergence_slack: 1s
  max_oscillation: 2
  min_fairness: 0.8
  max_starvation: 1
  warm_up: 8s
`
	s, err := scenario.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if s.Interval != 500*time.Millisecond || s.TTL != 2500*time.Millisecond || s.Seed != 42 || s.Description != "d" {
		t.Errorf("got interval %v ttl %v seed %d description %q, want 500ms 2.5s 42 d", s.Interval, s.TTL, s.Seed, s.Description)
	}
	wantFaults := []scenario.Fault{
		{At: 10 * time.Second, Kind: scenario.KillLeader},
		{At: 12 * time.Second, Kind: scenario.StopBroker},
		{At: 20 * time.Second, Kind: scenario.StartBroker},
		{At: 21 * time.Second, Kind: scenario.PauseRedis, DC: "dc-b", For: 3 * time.Second},
		{At: 22 * time.Second, Kind: scenario.Partition, DC: "dc-a", For: 5 * time.Second},
		{At: 30 * time.Second, Kind: scenario.LoseReports, Fraction: 0.2, For: 10 * time.Second},
		{At: 30 * time.Second, Kind: scenario.DuplicateReports, Fraction: 0.2, For: 10 * time.Second},
		{At: 41 * time.Second, Kind: scenario.DelayReports, By: 1500 * time.Millisecond, For: 5 * time.Second},
		{At: 50 * time.Second, Kind: scenario.StopBroker, For: 2 * time.Second},
	}
	if !reflect.DeepEqual(s.Faults, wantFaults) {
		t.Errorf("got faults\n%+v\nwant\n%+v", s.Faults, wantFaults)
	}
	wantGoals := scenario.Goals{MaxOvershoot: 0, MinUtilisation: 0.9, ConvergenceIntervals: 4, ConvergenceSlack: time.Second, MaxOscillation: 2, MinFairness: 0.8, MaxStarvation: 1, WarmUp: 8 * time.Second}
	if s.Goals != wantGoals {
		t.Errorf("got goals %+v, want %+v", s.Goals, wantGoals)
	}
	if got, want := s.Goals.ConvergenceAllowance(s.Interval), 3*time.Second; got != want {
		t.Errorf("got allowance %v, want %v", got, want)
	}
}

func TestParseGoalDefaultsFollowInterval(t *testing.T) {
	s, err := scenario.Parse([]byte(with(t, "duration: 60s\n", "duration: 60s\ninterval: 2s\ngoals: {max_overshoot: 0.02}\n")))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := scenario.DefaultGoals(2 * time.Second)
	want.MaxOvershoot = 0.02
	if s.Goals != want {
		t.Errorf("got goals %+v, want %+v", s.Goals, want)
	}
	if s.Goals.ConvergenceSlack != 4*time.Second || s.Goals.WarmUp != 20*time.Second {
		t.Errorf("got slack %v warm-up %v, want 4s 20s", s.Goals.ConvergenceSlack, s.Goals.WarmUp)
	}
}

func TestParseCurves(t *testing.T) {
	tests := []struct {
		name string
		flow string
		want scenario.Flow
	}{
		{"constant", `{dc: dc-b, rule: total, attributes: {path: /total}, rate: 2.5, noise: even}`,
			scenario.Flow{DC: "dc-b", Rule: "total", Attributes: map[string]string{"path": "/total"}, Base: scenario.Constant(2.5), Noise: scenario.NoiseEven}},
		{"steps", `{dc: dc-a, rule: total, attributes: {path: /total}, steps: [{at: 0s, rate: 600}, {at: 30s, rate: 30}], noise: poisson}`,
			scenario.Flow{DC: "dc-a", Rule: "total", Attributes: map[string]string{"path": "/total"}, Base: scenario.Steps{{0, 600}, {30 * time.Second, 30}}, Noise: scenario.NoisePoisson}},
		{"ramp", `{dc: dc-a, rule: total, attributes: {path: /total}, ramp: {from: 0, to: 600, start: 10s, end: 40s}}`,
			scenario.Flow{DC: "dc-a", Rule: "total", Attributes: map[string]string{"path": "/total"}, Base: scenario.Ramp{From: 0, To: 600, Start: 10 * time.Second, End: 40 * time.Second}}},
		{"diurnal", `{dc: dc-a, rule: total, attributes: {path: /total}, diurnal: {mean: 300, amplitude: 200, period: 60s, phase: 5s}}`,
			scenario.Flow{DC: "dc-a", Rule: "total", Attributes: map[string]string{"path": "/total"}, Base: scenario.Diurnal{Mean: 300, Amplitude: 200, Period: time.Minute, Phase: 5 * time.Second}}},
		{"flash alone", `{dc: dc-a, rule: total, attributes: {path: /total}, flash: {at: 20s, peak: 2000, rise: 1s, decay: 5s}}`,
			scenario.Flow{DC: "dc-a", Rule: "total", Attributes: map[string]string{"path": "/total"}, Flash: &scenario.Flash{At: 20 * time.Second, Peak: 2000, Rise: time.Second, Decay: 5 * time.Second}}},
		{"base and flash, key attribute", `{dc: dc-b, rule: per-user, attributes: {path: /user, user: u1}, rate: 50, flash: {at: 1s, peak: 10, decay: 1s}}`,
			scenario.Flow{DC: "dc-b", Rule: "per-user", Attributes: map[string]string{"path": "/user", "user": "u1"}, Base: scenario.Constant(50), Flash: &scenario.Flash{At: time.Second, Peak: 10, Decay: time.Second}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := scenario.Parse([]byte(flow(t, tt.flow)))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := s.Traffic[0]; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name   string
		doc    string
		paths  []string // the error's paths, in order
		reason string   // a part of the first error's reason
	}{
		{"repeated key", base + "name: u\n", []string{"name"}, "appears more than once"},
		{"repeated key in JSON", `{"name": "a", "name": "b"}`, nil, "appears more than once"},
		{"repeated key in a flow", flow(t, `{dc: dc-a, rule: total, attributes: {path: /total}, rate: 1, rate: 2}`), []string{"traffic[0].rate"}, "appears more than once"},
		{"unknown top-level field", base + "colour: red\n", []string{"colour"}, "unknown field"},
		{"unknown flow field", flow(t, `{dc: dc-a, rule: total, attributes: {path: /total}, rate: 1, stpes: []}`), []string{"traffic[0].stpes"}, "unknown field"},
		{"unknown step field", flow(t, `{dc: dc-a, rule: total, attributes: {path: /total}, steps: [{at: 0s, rate: 1}, {at: 1s, rat: 2}]}`),
			[]string{"traffic[0].steps[1].rat", "traffic[0].steps[1].rate"}, "unknown field"},
		{"unknown goal", base + "goals: {max_overshot: 0.1}\n", []string{"goals.max_overshot"}, "unknown field"},
		{"name missing", with(t, "name: t\n", ""), []string{"name"}, "required"},
		{"bad name", with(t, "name: t\n", "name: -x\n"), []string{"name"}, "start with a letter or digit"},
		{"duration missing", with(t, "duration: 60s\n", ""), []string{"duration"}, "required"},
		{"duration a number", with(t, "duration: 60s\n", "duration: 60\n"), []string{"duration"}, `want a duration such as "30s" or "1m30s", got 60`},
		{"duration not a duration", with(t, "duration: 60s\n", "duration: a minute\n"), []string{"duration"}, "want a duration"},
		{"duration too short", with(t, "duration: 60s\n", "duration: 500ms\n"), []string{"duration"}, "from 1s"},
		{"ttl below interval", with(t, "duration: 60s\n", "duration: 60s\ninterval: 2s\nttl: 1s\n"), []string{"ttl"}, "at least the interval (2s)"},
		{"seed negative", with(t, "duration: 60s\n", "duration: 60s\nseed: -1\n"), []string{"seed"}, "negative"},
		{"dcs missing", with(t, "dcs: [dc-a, dc-b]\n", ""), []string{"dcs"}, "required"},
		{"dc twice", with(t, "dcs: [dc-a, dc-b]\n", "dcs: [dc-a, dc-b, dc-a]\n"), []string{"dcs[2]"}, "listed twice"},
		{"dc name", with(t, "dcs: [dc-a, dc-b]\n", "dcs: [dc-a, DC_B]\n"), []string{"dcs[1]"}, ""},
		{"dc not a string", with(t, "dcs: [dc-a, dc-b]\n", "dcs: [dc-a, [dc-b]]\n"), []string{"dcs[1]"}, "want a string, got a list"},
		{"rules missing", strings.Replace(base, base[strings.Index(base, "rules:"):strings.Index(base, "traffic:")], "", 1), []string{"rules"}, "required"},
		{"rules not an object", strings.Replace(base, base[strings.Index(base, "rules:"):strings.Index(base, "traffic:")], "rules: [a]\n", 1), []string{"rules"}, "want an object with a domain and rules"},
		{"rule invalid", with(t, "limit: 300\n", "limit: 0\n"), []string{"rules.rules[0].limit"}, ""},
		{"rule unknown field", with(t, "limit: 300\n", "limit: 300\n      colour: red\n"), []string{"rules.rules[0].colour"}, "unknown field"},
		{"rule shares name another DC", with(t, "limit: 300\n", "limit: 300\n      shares: {dc-a: 0.5, dc-z: 0.5}\n"), []string{"rules.rules[0].shares.dc-z"}, `"dc-z" is not one of the scenario's dcs (dc-a, dc-b)`},
		{"traffic missing", base[:strings.Index(base, "traffic:")], []string{"traffic"}, "at least one flow"},
		{"flow not an object", base[:strings.Index(base, "traffic:")] + "traffic: [x]\n", []string{"traffic[0]"}, "want an object"},
		{"flow dc unknown", flow(t, `{dc: dc-z, rule: total, attributes: {path: /total}, rate: 1}`), []string{"traffic[0].dc"}, `"dc-z" is not one of the scenario's dcs`},
		{"flow dc missing", flow(t, `{rule: total, attributes: {path: /total}, rate: 1}`), []string{"traffic[0].dc"}, "required"},
		{"flow rule missing", flow(t, `{dc: dc-a, attributes: {path: /total}, rate: 1}`), []string{"traffic[0].rule"}, "required"},
		{"flow rule unknown", flow(t, `{dc: dc-a, rule: nope, attributes: {path: /total}, rate: 1}`), []string{"traffic[0].rule"}, `no rule "nope"`},
		{"flow rule local", flow(t, `{dc: dc-a, rule: local-one, attributes: {path: /local}, rate: 1}`), []string{"traffic[0].rule"}, "is local"},
		{"flow attributes do not match", flow(t, `{dc: dc-a, rule: per-user, attributes: {path: /user}, rate: 1}`), []string{"traffic[0].attributes"}, `rule "per-user" does not apply to requests with these attributes (it needs path_pattern "/user", key_type user)`},
		{"attribute not a string", flow(t, `{dc: dc-a, rule: per-user, attributes: {path: /user, user: 1}, rate: 1}`), []string{"traffic[0].attributes.user"}, "want a string, got 1 (quote it)"},
		{"no rate", flow(t, `{dc: dc-a, rule: total, attributes: {path: /total}}`), []string{"traffic[0]"}, "has no rate"},
		{"two bases", flow(t, `{dc: dc-a, rule: total, attributes: {path: /total}, rate: 1, ramp: {from: 0, to: 1, start: 0s, end: 1s}}`), []string{"traffic[0]"}, "rate, ramp are all set: a flow has at most one base curve"},
		{"negative rate", flow(t, `{dc: dc-a, rule: total, attributes: {path: /total}, rate: -1}`), []string{"traffic[0].rate"}, "from 0 to"},
		{"rate a string", flow(t, `{dc: dc-a, rule: total, attributes: {path: /total}, rate: fast}`), []string{"traffic[0].rate"}, `want a number, got "fast"`},
		{"no steps", flow(t, `{dc: dc-a, rule: total, attributes: {path: /total}, steps: []}`), []string{"traffic[0].steps"}, "at least one step"},
		{"steps not a list", flow(t, `{dc: dc-a, rule: total, attributes: {path: /total}, steps: 3}`), []string{"traffic[0].steps"}, "want a list"},
		{"steps out of order", flow(t, `{dc: dc-a, rule: total, attributes: {path: /total}, steps: [{at: 0s, rate: 1}, {at: 10s, rate: 2}, {at: 10s, rate: 3}]}`), []string{"traffic[0].steps[2].at"}, "must be after the previous step's (10s), got 10s"},
		{"step at negative", flow(t, `{dc: dc-a, rule: total, attributes: {path: /total}, steps: [{at: -1s, rate: 1}]}`), []string{"traffic[0].steps[0].at"}, "negative"},
		{"ramp field missing", flow(t, `{dc: dc-a, rule: total, attributes: {path: /total}, ramp: {from: 0, start: 0s, end: 1s}}`), []string{"traffic[0].ramp.to"}, "required"},
		{"ramp backwards", flow(t, `{dc: dc-a, rule: total, attributes: {path: /total}, ramp: {from: 0, to: 5, start: 10s, end: 10s}}`), []string{"traffic[0].ramp.end"}, "must be after start (10s)"},
		{"diurnal period", flow(t, `{dc: dc-a, rule: total, attributes: {path: /total}, diurnal: {mean: 1, amplitude: 1, period: 0s}}`), []string{"traffic[0].diurnal.period"}, "positive"},
		{"diurnal amplitude", flow(t, `{dc: dc-a, rule: total, attributes: {path: /total}, diurnal: {mean: 1, amplitude: -1, period: 1s}}`), []string{"traffic[0].diurnal.amplitude"}, "from 0"},
		{"flash of no time", flow(t, `{dc: dc-a, rule: total, attributes: {path: /total}, flash: {at: 1s, peak: 5}}`), []string{"traffic[0].flash"}, "rise and decay are both zero"},
		{"flash peak", flow(t, `{dc: dc-a, rule: total, attributes: {path: /total}, flash: {at: 1s, peak: 0, decay: 1s}}`), []string{"traffic[0].flash.peak"}, "above 0"},
		{"flash unknown field", flow(t, `{dc: dc-a, rule: total, attributes: {path: /total}, flash: {at: 1s, peak: 5, decay: 1s, sustain: 2s}}`), []string{"traffic[0].flash.sustain"}, "unknown field"},
		{"noise", flow(t, `{dc: dc-a, rule: total, attributes: {path: /total}, rate: 1, noise: gaussian}`), []string{"traffic[0].noise"}, `"gaussian" is not valid (want "even" or "poisson")`},
		{"fault kind unknown", base + "faults: [{at: 1s, kind: meteor}]\n", []string{"faults[0].kind"}, "want one of kill-leader, stop-broker"},
		{"fault kind missing", base + "faults: [{at: 1s}]\n", []string{"faults[0].kind"}, "required"},
		{"fault at missing", base + "faults: [{kind: kill-leader}]\n", []string{"faults[0].at"}, "required"},
		{"fault after the end", base + "faults: [{at: 60s, kind: kill-leader}]\n", []string{"faults[0].at"}, "before the end of the run (1m0s)"},
		{"fault unknown field", base + "faults: [{at: 1s, kind: kill-leader, dcs: [dc-a]}]\n", []string{"faults[0].dcs"}, "unknown field"},
		{"pause-redis needs dc and for", base + "faults: [{at: 1s, kind: pause-redis}]\n", []string{"faults[0].dc", "faults[0].for"}, "required: pause-redis needs the DC it affects"},
		{"partition of an unknown DC", base + "faults: [{at: 1s, kind: partition, dc: dc-z, for: 5s}]\n", []string{"faults[0].dc"}, "not one of the scenario's dcs"},
		{"kill-leader takes no for", base + "faults: [{at: 1s, kind: kill-leader, for: 5s}]\n", []string{"faults[0].for"}, "kill-leader takes no for"},
		{"stop-broker takes no dc", base + "faults: [{at: 1s, kind: stop-broker, dc: dc-a}]\n", []string{"faults[0].dc"}, "takes no dc"},
		{"lose-reports fraction", base + "faults: [{at: 1s, kind: lose-reports, fraction: 1.5, for: 5s}]\n", []string{"faults[0].fraction"}, "in (0, 1]"},
		{"duplicate-reports needs fraction", base + "faults: [{at: 1s, kind: duplicate-reports, for: 5s}]\n", []string{"faults[0].fraction"}, "required"},
		{"delay-reports needs by", base + "faults: [{at: 1s, kind: delay-reports, for: 5s}]\n", []string{"faults[0].by"}, "required"},
		{"delay-reports takes no fraction", base + "faults: [{at: 1s, kind: delay-reports, by: 1s, for: 5s, fraction: 0.5}]\n", []string{"faults[0].fraction"}, "takes no fraction"},
		{"overlapping partitions", base + "faults: [{at: 10s, kind: partition, dc: dc-a, for: 5s}, {at: 12s, kind: partition, dc: dc-a, for: 5s}]\n", []string{"faults[1].at"}, "overlaps faults[0]"},
		{"start-broker while running", base + "faults: [{at: 10s, kind: start-broker}]\n", []string{"faults[0].at"}, "the broker is running at 10s"},
		{"stop-broker twice", base + "faults: [{at: 10s, kind: stop-broker}, {at: 12s, kind: stop-broker, for: 1s}]\n", []string{"faults[1].at"}, "already stopped at 12s (by faults[0])"},
		{"start-broker after a stop with for", base + "faults: [{at: 10s, kind: stop-broker, for: 10s}, {at: 12s, kind: start-broker}]\n", []string{"faults[1].at"}, "restarts by itself"},
		{"goal out of range", base + "goals: {min_utilisation: 1.5}\n", []string{"goals.min_utilisation"}, "from 0 to 1"},
		{"goal not whole", base + "goals: {max_oscillation: 1.5}\n", []string{"goals.max_oscillation"}, "want an integer, got 1.5"},
		{"goal warm-up too long", base + "goals: {warm_up: 60s}\n", []string{"goals.warm_up"}, "shorter than the run"},
		{"goals not an object", base + "goals: [1]\n", []string{"goals"}, "want an object, got a list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := scenario.Parse([]byte(tt.doc))
			if err == nil {
				t.Fatalf("Parse: got %+v, want an error", s)
			}
			if !errors.Is(err, scenario.ErrInvalid) {
				t.Fatalf("got error %v, want one matching ErrInvalid", err)
			}
			ve, ok := errors.AsType[*scenario.ValidationError](err)
			if !ok {
				t.Fatalf("got %T, want *ValidationError", err)
			}
			if len(tt.paths) > 0 && !reflect.DeepEqual(ve.Paths(), tt.paths) {
				t.Errorf("got paths %q, want %q (error: %v)", ve.Paths(), tt.paths, err)
			}
			if !strings.Contains(ve.Errors[0].Reason, tt.reason) {
				t.Errorf("got reason %q, want it to contain %q", ve.Errors[0].Reason, tt.reason)
			}
		})
	}
}

func TestParseErrorOrder(t *testing.T) {
	doc := with(t, "name: t\n", "name: \"\"\nbogus: 1\n") + "goals: {min_fairness: 2}\nfaults: [{at: 1s, kind: meteor}]\n"
	_, err := scenario.Parse([]byte(doc))
	ve, ok := errors.AsType[*scenario.ValidationError](err)
	if !ok {
		t.Fatalf("got %v, want a *ValidationError", err)
	}
	want := []string{"name", "faults[0].kind", "goals.min_fairness", "bogus"}
	if !reflect.DeepEqual(ve.Paths(), want) {
		t.Errorf("got paths %q, want %q", ve.Paths(), want)
	}
	if got := err.Error(); !strings.HasPrefix(got, "name: required\n") {
		t.Errorf("got %q, want it to start with one line per problem", got)
	}
}

func TestParseSyntaxErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want error
	}{
		{"two documents", base + "---\nname: u\n", scenario.ErrSyntax},
		{"not YAML", "name: [\n", scenario.ErrSyntax},
		{"empty", "", scenario.ErrSyntax},
		{"too large", "name: " + strings.Repeat("x", scenario.MaxDocumentSize), scenario.ErrTooLarge},
		{"not an object", "[1, 2]", scenario.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := scenario.Parse([]byte(tt.doc))
			if !errors.Is(err, tt.want) {
				t.Errorf("got %v, want an error matching %v", err, tt.want)
			}
		})
	}
}

func TestParseRuleErrorsAreRuleFileErrors(t *testing.T) {
	// The same mistake gives the same reason in a scenario and in a rule
	// file, under "rules".
	_, err := scenario.Parse([]byte(with(t, "algorithm: SlidingWindowLog\n", "algorithm: Sliding\n")))
	ve, ok := errors.AsType[*scenario.ValidationError](err)
	if !ok || len(ve.Errors) != 1 {
		t.Fatalf("got %v, want one problem", err)
	}
	_, rerr := rule.ParseSet([]byte(`{"domain":"api","rules":[{"rule_id":"total","limit":300,"window_seconds":1,"algorithm":"Sliding"}]}`))
	rve, ok := errors.AsType[*rule.ValidationError](rerr)
	if !ok {
		t.Fatalf("rule.ParseSet: got %v", rerr)
	}
	got, want := ve.Errors[0], scenario.FieldError{Path: "rules." + rve.Errors[0].Path, Reason: rve.Errors[0].Reason}
	if got != want {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestValidateBuiltInGo(t *testing.T) {
	s := scenario.Scenario{
		Name:     "go",
		Duration: 20 * time.Second,
		DCs:      []string{"a", "b"},
		Rules:    rule.Set{Domain: "d", Rules: []rule.Rule{{ID: "r", Limit: 10, WindowSeconds: 1, Enabled: true}}},
		Traffic:  []scenario.Flow{{DC: "a", Rule: "r", Base: scenario.Constant(5)}},
		Goals:    scenario.DefaultGoals(0),
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	s.Traffic[0].Base = scenario.Steps{{At: 2 * time.Second, Rate: 1}, {At: time.Second, Rate: 2}}
	s.Traffic[0].Noise = "bursty"
	err := s.Validate()
	ve, ok := errors.AsType[*scenario.ValidationError](err)
	if want := []string{"traffic[0].noise", "traffic[0].steps[1].at"}; !ok || !reflect.DeepEqual(ve.Paths(), want) {
		t.Errorf("got %v, want problems at %q", err, want)
	}
}

func TestLoad(t *testing.T) {
	s, err := scenario.Load(filepath.Join("testdata", "moving.yaml"))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if s.Name != "moving" || len(s.Traffic) != 3 || len(s.Faults) != 1 {
		t.Errorf("got %s with %d flows and %d faults, want moving with 3 and 1", s.Name, len(s.Traffic), len(s.Faults))
	}
	_, err = scenario.Load(filepath.Join("testdata", "missing.yaml"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "load scenario from testdata") {
		t.Errorf("got %v, want a wrapped not-exist error naming the file", err)
	}
}

// TestShippedScenarios loads the scenarios of deploy/multidc/scenarios and
// checks that they fit the machine they run on: at most a minute, at most
// 1,000 requests per second in all — but for scale-x10, which plays the
// default scenario at ten times its rates (about one core here) and may
// offer up to 7,000, and long-window, which needs three windows of 300
// planning intervals: three minutes.
func TestShippedScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "deploy", "multidc", "scenarios", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 6 {
		t.Fatalf("got %d scenarios, want at least 6", len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			s, err := scenario.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.TrimSuffix(filepath.Base(file), ".yaml"); s.Name != want {
				t.Errorf("got name %q, want the file's, %q", s.Name, want)
			}
			longest := 60 * time.Second
			if s.Name == "long-window" {
				longest = 3 * time.Minute
			}
			if s.Duration > longest {
				t.Errorf("got duration %v, want at most %v", s.Duration, longest)
			}
			budget := 1000.0
			if s.Name == "scale-x10" {
				budget = 7000
			}
			for at := time.Duration(0); at < s.Duration; at += 100 * time.Millisecond {
				total := 0.0
				for _, f := range s.Traffic {
					total += f.Rate(at)
				}
				if total > budget {
					t.Fatalf("at %v: got %.0f requests/s in all, want at most %.0f", at, total, budget)
				}
			}
		})
	}
}
