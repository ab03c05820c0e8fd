package planner

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/allocate"
	"github.com/weirhq/weir/pkg/rule"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// TestWorkersDoNotChangeTheRound plays the same reports, write outcomes,
// leases and acknowledgements into planners with 1, 2 and 5 workers, over
// rules of every kind (keyed and not, usage-aware long windows with
// readings, buckets, short windows), with keys appearing, moving and going
// quiet until they retire; ticks that close two intervals, late reports, a
// DC silent past its lease and back, writes that fail in part, and rules
// and reports that change between Plan and Settle. Every round's
// documents, in order, the views, the leases and the statistics must be
// the same: the rules of a round are independent.
func TestWorkersDoNotChangeTheRound(t *testing.T) {
	dcs := []string{"a", "b", "c"}
	algs := []algorithm.Algorithm{algorithm.SlidingWindowLog, algorithm.FixedWindow, algorithm.TokenBucket, algorithm.SlidingWindowCounter, algorithm.LeakyBucket}
	var rules []rule.Rule
	for i := range 12 {
		r := rule.Rule{Domain: "api", ID: fmt.Sprintf("r%02d", i), Limit: int64(200 + 50*i), WindowSeconds: int64(1 + 20*(i%3)), Algorithm: algs[i%len(algs)], Scope: rule.ScopeGlobal, Enabled: true}
		if i%2 == 0 {
			r.KeyType = rule.Dimensions{"user"}
		}
		rules = append(rules, r)
	}
	workers := []int{1, 2, 5}
	planners := make([]*Planner, len(workers))
	start := time.UnixMilli(1_700_000_000_000)
	for i, w := range workers {
		p, err := New(Config{DCs: dcs, Interval: time.Second, Warmup: 1, Retire: 5, Workers: w})
		if err != nil {
			t.Fatal(err)
		}
		p.SetRules(rules)
		p.Load(start, nil, nil, nil)
		p.Tick(start)
		planners[i] = p
	}
	rng := rand.New(rand.NewPCG(7, 7))
	at := start
	var held []*weirv1.UsageReport // DC b's reports, delivered two rounds late
	sawExpired, sawLate := false, false
	for round := range 90 {
		at = at.Add(time.Second)
		var reports []*weirv1.UsageReport
		for d, dc := range dcs {
			if dc == "c" && round >= 30 && round < 45 {
				continue // silent past its lease, then back
			}
			reports = append(reports, usageReport(rng, rules, d, dc, round, at))
		}
		if len(held) > 0 && round%5 == 3 {
			reports = append(reports, held[0]) // its interval has closed: late
			held = held[1:]
		}
		if round%5 == 1 {
			held, reports = append(held, reports[1]), append(reports[:1], reports[2:]...)
		}
		var later *weirv1.UsageReport // ingested between Plan and Settle
		if round%9 == 4 {
			later, reports = reports[0], reports[1:]
		}
		tick := round%7 != 3 // else the next Tick closes two intervals
		split := rng.IntN(3)
		okFirst, okRest := rng.IntN(8) != 0, rng.IntN(4) != 0
		acked := rng.IntN(3) != 0
		changed := slices.Clone(rules)
		changed[3].Limit += int64(round % 2) // a limit that moves between Plan and Settle
		var first []Write
		for i, p := range planners {
			for _, r := range reports {
				if err := p.Ingest(proto.Clone(r).(*weirv1.UsageReport), at); err != nil {
					t.Fatal(err)
				}
			}
			if !tick {
				continue
			}
			p.Tick(at)
			if i == 0 && round >= 2 {
				targetsFollowEstimates(t, round, p)
			}
			ws := p.Plan(at)
			if i == 0 {
				first = ws
			} else {
				sameWrites(t, round, workers[i], first, ws)
			}
			if later != nil {
				if err := p.Ingest(proto.Clone(later).(*weirv1.UsageReport), at); err != nil {
					t.Fatal(err)
				}
			}
			if round%11 == 6 {
				p.SetRules(changed)
			}
			cut := min(split, len(ws))
			p.Written(ws[:cut], int64(2*round+1), okFirst)
			p.Written(ws[cut:], int64(2*round+2), okRest)
			p.Settle()
			if acked {
				for _, dc := range dcs {
					if dc != "c" || round < 30 || round >= 45 {
						p.SetAck(dc, int64(2*round+2), at)
					}
				}
			}
			for _, l := range p.Leases(at, at.Add(-3*time.Second), "leader") {
				p.LeaseWritten(l, 0)
			}
		}
		for _, v := range planners[0].Snapshot() {
			for _, dc := range v.DCs {
				sawExpired = sawExpired || dc.Expired
			}
		}
		sawLate = sawLate || planners[0].Stats().LateReports > 0
		for i, p := range planners[1:] {
			if got, want := views(p), views(planners[0]); !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d: %d workers: views\n%+v\none worker's\n%+v", round, workers[i+1], got, want)
			}
			if got, want := p.entries, planners[0].entries; got != want {
				t.Fatalf("round %d: %d workers: %d entries, one worker %d", round, workers[i+1], got, want)
			}
			if got, want := p.Stats(), planners[0].Stats(); got != want {
				t.Fatalf("round %d: %d workers: stats %+v, one worker's %+v", round, workers[i+1], got, want)
			}
			if got, want := p.Epoch(), planners[0].Epoch(); got != want {
				t.Fatalf("round %d: %d workers: epoch %d, one worker's %d", round, workers[i+1], got, want)
			}
		}
	}
	if planners[0].entries >= 12+6*8 {
		t.Fatalf("%d entries: no key retired, so the test did not play retirement", planners[0].entries)
	}
	if !sawExpired || !sawLate {
		t.Fatalf("expired lease seen %v, late report seen %v: the test did not play both", sawExpired, sawLate)
	}
}

// usageReport is DC d's report of the interval before at: the demand moves
// from DC a to b to c, ten rounds each, with noise; keys (of keyed rules)
// are heavy for twenty rounds or more, then quiet until they retire.
func usageReport(rng *rand.Rand, rules []rule.Rule, d int, dc string, round int, at time.Time) *weirv1.UsageReport {
	r := &weirv1.UsageReport{Dc: dc, Instance: dc, Sequence: uint64(round + 1), IntervalStartMs: at.UnixMilli() - 1000, IntervalMs: 1000, AppliedRevision: int64(2 * round)}
	hot := round / 10 % 3
	for _, spec := range rules {
		ru := &weirv1.RuleUsage{Domain: spec.Domain, RuleId: spec.ID, Offered: uint64(rng.IntN(20))}
		if d == hot {
			ru.Offered += uint64(spec.Limit / (1 + spec.WindowSeconds) * 2)
		}
		ru.Admitted = ru.Offered / 2
		if len(spec.KeyType) == 0 {
			ru.Consumed = proto.Int64(min(spec.Limit, int64(ru.Admitted)*spec.WindowSeconds/2))
		}
		for k := range 8 {
			if len(spec.KeyType) == 0 || round > 20+5*k {
				continue // none, or quiet: the key's own share retires
			}
			offered := uint64(rng.IntN(10))
			if d == (hot+k)%3 {
				offered += uint64(spec.Limit)
			}
			ru.Keys = append(ru.Keys, &weirv1.KeyUsage{Key: fmt.Sprintf("u%d", k), Offered: offered, Admitted: offered / 2, Limit: spec.Limit, Consumed: proto.Int64(int64(offered / 3))})
		}
		r.Rules = append(r.Rules, ru)
	}
	return r
}

// targetsFollowEstimates checks that every entry's target shares (but a
// keyed rule's own, and retiring keys') are the allocation of its
// estimates as they stand after a Tick: each entry is closed before its
// targets are computed, in the same pass.
func targetsFollowEstimates(t *testing.T, round int, p *Planner) {
	t.Helper()
	in, out := make([]allocate.DC, len(p.dcs)), make([]float64, len(p.dcs))
	check := func(rs *ruleState, e *entry) {
		copy(in, rs.policy)
		for d := range in {
			in[d].Demand = e.est[d].Estimate()
		}
		allocate.Allocate(in, out)
		if !slices.Equal(out, e.share) {
			t.Fatalf("round %d: %s key %q: target shares %v, the allocation of its estimates %v", round, rs.ref.id, e.key, e.share, out)
		}
	}
	for _, rs := range p.rules {
		if len(rs.spec.KeyType) == 0 {
			check(rs, rs.entry)
		}
		for _, e := range rs.keys {
			if !e.retiring {
				check(rs, e)
			}
		}
	}
}

// views is what the planner shows of every rule and key.
func views(p *Planner) []any {
	var out []any
	for _, v := range p.Snapshot() {
		out = append(out, v, p.Keys(v.Domain, v.RuleID))
	}
	return out
}

func sameWrites(t *testing.T, round, workers int, want, got []Write) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("round %d: %d workers wrote %d documents, one worker %d", round, workers, len(got), len(want))
	}
	for j := range want {
		w, g := want[j], got[j]
		if w.DC != g.DC || w.Domain != g.Domain || w.RuleID != g.RuleID || !proto.Equal(w.Doc, g.Doc) {
			t.Fatalf("round %d: %d workers: document %d is %s/%s in %s: %v; one worker's %s/%s in %s: %v", round, workers, j, g.Domain, g.RuleID, g.DC, g.Doc, w.Domain, w.RuleID, w.DC, w.Doc)
		}
	}
}
