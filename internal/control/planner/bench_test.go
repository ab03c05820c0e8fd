package planner

import (
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/pkg/rule"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// BenchmarkPlannerRound100k is one planning round — intervals closed,
// estimates, allocation, two-phase step — over 100 rules with 1,000 keys
// with shares of their own each (100,100 entries), 5 DCs.
func BenchmarkPlannerRound100k(b *testing.B) {
	dcs := []string{"a", "b", "c", "d", "e"}
	p, err := New(Config{DCs: dcs, Interval: time.Second, Warmup: 1})
	if err != nil {
		b.Fatal(err)
	}
	var rules []rule.Rule
	for i := range 100 {
		rules = append(rules, rule.Rule{Domain: "api", ID: fmt.Sprintf("r%d", i), KeyType: rule.Dimensions{"user"}, Limit: 1000, WindowSeconds: 1, Scope: rule.ScopeGlobal, Enabled: true})
	}
	p.SetRules(rules)
	now := time.UnixMilli(1_700_000_000_000)
	p.Load(now, nil, nil, nil)
	p.Tick(now)
	seq := uint64(0)
	report := func(at time.Time) {
		start := at.UnixMilli()/1000*1000 - 1000
		for d, dc := range dcs {
			seq++
			r := &weirv1.UsageReport{Dc: dc, Instance: dc, Sequence: seq, IntervalStartMs: start, IntervalMs: 1000}
			for i := range 100 {
				ru := &weirv1.RuleUsage{Domain: "api", RuleId: fmt.Sprintf("r%d", i), Offered: 100000, Admitted: 50000, Rejected: 50000}
				for k := range 1000 {
					ru.Keys = append(ru.Keys, &weirv1.KeyUsage{Key: fmt.Sprintf("u%d", k), Offered: uint64(100 + 300*d + k%200), Rejected: 1, Limit: 1000})
				}
				r.Rules = append(r.Rules, ru)
			}
			if err := p.Ingest(r, at); err != nil {
				b.Fatal(err)
			}
		}
	}
	at := now
	for range 3 {
		at = at.Add(time.Second)
		report(at)
		p.Tick(at)
	}
	if n := p.entries; n < 100_000 {
		b.Fatalf("%d entries", n)
	}
	rev := int64(0)
	b.ResetTimer()
	for range b.N {
		at = at.Add(time.Second)
		p.Tick(at)
		ws := p.Plan(at)
		rev++
		p.Written(ws, rev, true)
		p.Settle()
		for _, dc := range dcs {
			p.SetAck(dc, rev, at)
		}
	}
	b.ReportMetric(float64(p.entries), "entries")
}
