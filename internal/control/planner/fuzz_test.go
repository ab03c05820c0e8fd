package planner

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/rule"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// Whatever a Kafka message holds, the coordinator neither crashes nor plans
// local limits that sum above the limit, for a rule or a key. (What the
// DCs may hold can: a hostile reading may claim more than a DC could have
// consumed.)
func FuzzReports(f *testing.F) {
	now := time.UnixMilli(1_700_000_000_000)
	good, _ := proto.Marshal(&weirv1.UsageReport{Dc: "a", Instance: "i", Sequence: 1, IntervalStartMs: now.UnixMilli() - 1000, IntervalMs: 1000,
		Rules: []*weirv1.RuleUsage{{Domain: "api", RuleId: "r", Offered: 5000, Admitted: 900, Rejected: 4100,
			Keys: []*weirv1.KeyUsage{{Key: "k", Offered: 4000, Rejected: 3000, Limit: 1000}}}}})
	monthly, _ := proto.Marshal(&weirv1.UsageReport{Dc: "b", Instance: "j", Sequence: 1, IntervalStartMs: now.UnixMilli() - 1000, IntervalMs: 1000,
		Rules: []*weirv1.RuleUsage{{Domain: "api", RuleId: "m", Offered: 50, Admitted: 50, Consumed: proto.Int64(70_000),
			Keys: []*weirv1.KeyUsage{{Key: "t", Offered: 40, Limit: 100_000, Consumed: proto.Int64(90_000)}}}}})
	before1970, _ := proto.Marshal(&weirv1.UsageReport{Dc: "a", Instance: "i", Sequence: 1, IntervalStartMs: -5000, IntervalMs: 1000})
	f.Add(good, good)
	f.Add(good, monthly)
	f.Add(good, before1970)
	f.Add([]byte{0x0a, 0x01, 'a'}, []byte{0xff})
	f.Fuzz(func(t *testing.T, m1, m2 []byte) {
		p, err := New(Config{DCs: simDCs, Interval: time.Second, Warmup: 1})
		if err != nil {
			t.Fatal(err)
		}
		// A second rule, keyed and monthly, so that two rules share a round.
		month := rule.Rule{Domain: "api", ID: "m", KeyType: rule.Dimensions{"tenant"}, Limit: 100_000, Calendar: rule.CalendarMonth, Algorithm: algorithm.FixedWindow, Scope: rule.ScopeGlobal, Enabled: true}
		month.SetDefaults()
		p.SetRules([]rule.Rule{simRule(), month})
		p.Load(now, nil, nil, nil)
		// A new leader ingests what comes before its first Tick.
		var first weirv1.UsageReport
		if proto.Unmarshal(m2, &first) == nil {
			_ = p.Ingest(&first, now)
		}
		p.Tick(now)
		at := now
		for i, m := range [][]byte{m1, m2, m1, m2, m1, m2} {
			var r weirv1.UsageReport
			if proto.Unmarshal(m, &r) == nil {
				_ = p.Ingest(&r, at)
			}
			at = at.Add(time.Second)
			p.Tick(at)
			ws := p.Plan(at)
			p.Written(ws, int64(i+1), true)
			p.Settle()
			for _, d := range simDCs {
				p.SetAck(d, int64(i+1), at)
			}
			for _, v := range p.Snapshot() {
				localLimitsFit(t, v.Limit, v.DCs)
				for _, k := range p.Keys(v.Domain, v.RuleID) {
					localLimitsFit(t, k.Limit, k.DCs)
				}
			}
		}
	})
}

// localLimitsFit fails t when the DCs' local limits of an entry sum above
// its limit, or a share leaves [0, 1].
func localLimitsFit(t *testing.T, limit int64, dcs []DCView) {
	t.Helper()
	sum := int64(0)
	for _, d := range dcs {
		if !(d.Share >= 0 && d.Share <= 1) {
			t.Fatalf("share %v", d.Share)
		}
		sum += d.LocalLimit
	}
	if sum > limit {
		t.Fatalf("local limits %v sum to %d, above the limit %d", dcs, sum, limit)
	}
}
