package simreport_test

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/sim/scenario"
	"github.com/weirhq/weir/internal/sim/simreport"
)

// poisson draws a Poisson count of mean m (normal approximation above 30).
func poisson(rng *rand.Rand, m float64) int {
	if m > 30 {
		return max(0, int(math.Round(m+math.Sqrt(m)*rng.NormFloat64())))
	}
	l, k, p := math.Exp(-m), 0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// idealTrace plays s with an idealised Weir: the DCs admit what an exact
// central limiter would, and the shares are the max-min fair shares of the
// flows' rates lag earlier.
func idealTrace(s *scenario.Scenario, lag time.Duration) *simreport.Trace {
	rng := rand.New(rand.NewPCG(s.Seed, 1))
	n := int(s.Duration / time.Second)
	tr := &simreport.Trace{Scenario: s.Name, DCs: s.DCs, Interval: s.Interval}
	for _, f := range s.Faults {
		tr.Faults = append(tr.Faults, simreport.FaultMark{At: f.At, Kind: string(f.Kind), DC: f.DC, For: f.For})
	}
	for _, r := range s.Rules.Rules {
		var flows []scenario.Flow
		for _, f := range s.Traffic {
			if f.Rule == r.ID {
				flows = append(flows, f)
			}
		}
		if len(flows) == 0 {
			continue
		}
		rates := func(at time.Duration) map[string]float64 {
			m := map[string]float64{}
			for _, f := range flows {
				m[f.DC] += f.Rate(at)
			}
			return m
		}
		rt := simreport.RuleTrace{RuleID: r.ID, Limit: r.Limit, Window: r.Window()}
		for i := 0; i < n; i++ {
			offered := map[string]int{}
			for _, f := range flows {
				mean := 0.0
				for k := 0; k < 100; k++ {
					mean += f.Rate(time.Duration(i)*time.Second+time.Duration(k)*10*time.Millisecond+5*time.Millisecond) / 100
				}
				if f.Poisson() {
					offered[f.DC] += poisson(rng, mean)
				} else {
					offered[f.DC] += int(math.Round(mean))
				}
			}
			rt.Seconds = append(rt.Seconds, simreport.Second{At: time.Duration(i) * time.Second, Offered: offered, Admitted: map[string]int{}})
		}
		rt.Seconds = simreport.Centralized(rt, s.DCs).Seconds
		lps := float64(r.Limit) / r.Window().Seconds()
		for at := time.Duration(0); at < s.Duration; at += 100 * time.Millisecond {
			demand := map[string]float64{}
			for _, d := range s.DCs {
				demand[d] = rates(max(at-lag, 0))[d] / lps
			}
			rt.Shares = append(rt.Shares, simreport.ShareSample{At: at, Share: simreport.MaxMinFair(demand, 1)})
		}
		tr.Rules = append(tr.Rules, rt)
	}
	return tr
}

// TestShippedScenarios plays every scenario of deploy/multidc/scenarios
// with an idealised limiter whose shares follow demand 3 s late: it must
// pass every goal, and find the changes of demand the scenario makes; the
// static split must fall short where demand is uneven.
func TestShippedScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "deploy", "multidc", "scenarios", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	wantChanges := map[string][]time.Duration{
		"default":       {0, 25 * time.Second, 45 * time.Second},
		"leader-kill":   {0, 32 * time.Second},
		"broker-outage": {0, 25 * time.Second},
		"redis-pause":   {0},
		"partition":     {0, 38 * time.Second},
		"lossy-reports": {0, 25 * time.Second, 40 * time.Second},
	}
	for _, file := range files {
		s, err := scenario.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(s.Name, func(t *testing.T) {
			rep := simreport.Analyze(idealTrace(s, 3*time.Second), s.Goals)
			for _, rr := range rep.Rules {
				for _, r := range rr.Results {
					if !r.Passed {
						t.Errorf("rule %s: %s failed: %s", rr.RuleID, r.Goal, r.Reason)
					}
				}
			}
			got := []time.Duration{}
			for _, c := range rep.Rules[0].Changes {
				got = append(got, c.At)
			}
			if want, ok := wantChanges[s.Name]; ok && !equalDurations(got, want) {
				t.Errorf("got changes at %v, want %v", got, want)
			}
			if u := rep.Rules[0].Static.Utilisation; u.Seconds > 0 && u.Ratio > 0.95 {
				t.Errorf("static split: got utilisation %v, want it visibly short of L", u.Ratio)
			}
		})
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
