package planner

import (
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/pkg/rule"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// BenchmarkPlannerRound100k is one planning round — the interval closed,
// estimates, allocation, two-phase step, documents, their outcomes and
// the acknowledgements — over 100 rules with 1,000 keys with shares of
// their own each (100,100 entries), 5 DCs. Each DC's report of the
// interval is ingested before the round, untimed: reports are ingested as
// they arrive, not in the round.
//
//   - steady: the demand stays put. Once the grants have settled, no
//     document changes: the round is the estimates and the allocation.
//   - moving: one DC's demand for every key grows by 5 a round, a ramp the
//     estimates follow (the keys stay below their limits for about 150
//     rounds), so nearly every entry's targets move and nearly every
//     document is rewritten: in most rounds all 500 documents (100 rules
//     × 5 DCs), 1,000 key shares each, the most a round does.
//
// The rules are spread over GOMAXPROCS workers; the -one-worker cases run
// on one.
func BenchmarkPlannerRound100k(b *testing.B) {
	b.Run("steady", func(b *testing.B) { benchmarkRound(b, 0, 0) })
	b.Run("moving", func(b *testing.B) { benchmarkRound(b, 5, 0) })
	b.Run("steady-one-worker", func(b *testing.B) { benchmarkRound(b, 0, 1) })
	b.Run("moving-one-worker", func(b *testing.B) { benchmarkRound(b, 5, 1) })
}

// benchmarkRound runs rounds in which DC a's demand for every key grows by
// growth requests a round, on workers (0: the default).
func benchmarkRound(b *testing.B, growth uint64, workers int) {
	dcs := []string{"a", "b", "c", "d", "e"}
	p, err := New(Config{DCs: dcs, Interval: time.Second, Warmup: 1, Workers: workers})
	if err != nil {
		b.Fatal(err)
	}
	var rules []rule.Rule
	for i := range 100 {
		rules = append(rules, rule.Rule{Domain: "api", ID: fmt.Sprintf("r%d", i), KeyType: rule.Dimensions{"user"}, Limit: 1000, WindowSeconds: 1, Scope: rule.ScopeGlobal, Enabled: true})
	}
	p.SetRules(rules)
	reports := make([]*weirv1.UsageReport, len(dcs))
	for d, dc := range dcs {
		r := &weirv1.UsageReport{Dc: dc, Instance: dc, IntervalMs: 1000}
		for i := range 100 {
			ru := &weirv1.RuleUsage{Domain: "api", RuleId: fmt.Sprintf("r%d", i), Offered: 100000, Admitted: 50000, Rejected: 50000}
			for k := range 1000 {
				ru.Keys = append(ru.Keys, &weirv1.KeyUsage{Key: fmt.Sprintf("u%d", k), Offered: uint64(20 + 10*d + k%20), Rejected: 1, Limit: 1000})
			}
			r.Rules = append(r.Rules, ru)
		}
		reports[d] = r
	}
	at := time.UnixMilli(1_700_000_000_000)
	p.Load(at, nil, nil, nil)
	p.Tick(at)
	seq, rev := uint64(0), int64(0)
	round := func() int {
		b.StopTimer()
		at = at.Add(time.Second)
		for _, r := range reports {
			seq++
			r.Sequence, r.IntervalStartMs = seq, at.UnixMilli()-1000
			if err := p.Ingest(r, at); err != nil {
				b.Fatal(err)
			}
		}
		for _, ru := range reports[0].Rules {
			for _, k := range ru.Keys {
				k.Offered += growth
			}
		}
		b.StartTimer()
		p.Tick(at)
		ws := p.Plan(at)
		rev++
		p.Written(ws, rev, true)
		p.Settle()
		for _, dc := range dcs {
			p.SetAck(dc, rev, at)
		}
		return len(ws)
	}
	for range 10 {
		round()
	}
	if n := p.entries; n < 100_000 {
		b.Fatalf("%d entries", n)
	}
	writes := 0
	b.ResetTimer()
	for range b.N {
		writes += round()
	}
	b.ReportMetric(float64(p.entries), "entries")
	b.ReportMetric(float64(writes)/float64(b.N), "documents/op")
}
