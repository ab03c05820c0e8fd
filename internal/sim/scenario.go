package sim

import (
	"github.com/weirhq/weir/internal/sim/scenario"
)

// FromScenario returns the run of a scenario (validated by the caller).
func FromScenario(sc *scenario.Scenario) Config {
	cfg := Config{
		Name: sc.Name, DCs: sc.DCs, Rules: sc.Rules, Duration: sc.Duration,
		Interval: sc.Interval, TTL: sc.TTL, Seed: sc.Seed,
	}
	for _, f := range sc.Traffic {
		cfg.Flows = append(cfg.Flows, Flow{DC: f.DC, Rule: f.Rule, Attributes: f.Attributes, Rate: f.Rate, Poisson: f.Poisson()})
	}
	for _, f := range sc.Faults {
		cfg.Faults = append(cfg.Faults, Fault{At: f.At, Kind: string(f.Kind), DC: f.DC, For: f.For, Fraction: f.Fraction, By: f.By})
	}
	return cfg
}
