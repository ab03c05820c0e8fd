package planner

import (
	"math"
	"testing"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/rule"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// TestMonthlyDemandIsAFractionOfItsMonth plays a DC that asks, every
// interval, exactly what a monthly quota (a rule's, and a key's with a
// share of its own) renews per interval in February, in February, March
// and April, and checks the demand the planner estimates as a fraction of
// what the quota renews in that month: all of it in February (28 days),
// 31/28 in March, 30/28 in April. Against 31-day months, February would
// ask for 31/28 of its quota: congested while under it.
func TestMonthlyDemandIsAFractionOfItsMonth(t *testing.T) {
	const limit = 2_419_200_000 // 1,000 per second over 28 days
	monthly := rule.Rule{Domain: "api", ID: "monthly", Limit: limit, Calendar: rule.CalendarMonth, Algorithm: algorithm.FixedWindow, Scope: rule.ScopeGlobal, Enabled: true}
	perTenant := monthly
	perTenant.ID, perTenant.KeyType = "tenant", rule.Dimensions{"tenant"}
	for _, r := range []*rule.Rule{&monthly, &perTenant} {
		r.SetDefaults()
		if err := r.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		start time.Time
		want  float64
	}{
		{"february", time.Date(2027, time.February, 10, 0, 0, 0, 0, time.UTC), 1},
		{"march", time.Date(2027, time.March, 10, 0, 0, 0, 0, time.UTC), 31.0 / 28},
		{"april", time.Date(2027, time.April, 10, 0, 0, 0, 0, time.UTC), 30.0 / 28},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(Config{DCs: []string{"a", "b"}, Interval: time.Second, Warmup: 1})
			if err != nil {
				t.Fatal(err)
			}
			p.SetRules([]rule.Rule{monthly, perTenant})
			p.Load(tc.start, nil, nil, nil)
			p.Tick(tc.start)
			at := tc.start
			for i := range 40 {
				at = at.Add(time.Second)
				for _, dc := range []string{"a", "b"} {
					offered := uint64(0)
					if dc == "a" {
						offered = 1000 // the February rate, per one-second interval
					}
					// The tenant's key is rejected once, to earn a share of
					// its own.
					r := &weirv1.UsageReport{Dc: dc, Instance: dc, Sequence: uint64(i + 1), IntervalStartMs: at.UnixMilli() - 1000, IntervalMs: 1000,
						Rules: []*weirv1.RuleUsage{{Domain: "api", RuleId: "monthly", Offered: offered, Admitted: offered},
							{Domain: "api", RuleId: "tenant", Offered: offered, Admitted: offered,
								Keys: []*weirv1.KeyUsage{{Key: "t1", Offered: offered, Admitted: offered, Rejected: min(1, offered), Limit: limit}}}}}
					if err := p.Ingest(r, at); err != nil {
						t.Fatal(err)
					}
				}
				p.Tick(at)
			}
			view := p.Snapshot()[0]
			if got := view.DCs[0].Demand; math.Abs(got-tc.want) > 1e-6 {
				t.Fatalf("DC a's demand %v of the monthly quota's rate, want %v", got, tc.want)
			}
			days := math.Round(28 * tc.want)
			if got, want := view.Renewal, time.Duration(days*24)*time.Hour; got != want {
				t.Errorf("the view's renewal window %v, want %v (its demand's)", got, want)
			}
			keys := p.Keys("api", "tenant")
			if len(keys) != 1 {
				t.Fatalf("%d keys with shares of their own, want the tenant's", len(keys))
			}
			if got := keys[0].DCs[0].Demand; math.Abs(got-tc.want) > 1e-6 {
				t.Fatalf("DC a's demand %v of the tenant's monthly quota's rate, want %v", got, tc.want)
			}
		})
	}
}
