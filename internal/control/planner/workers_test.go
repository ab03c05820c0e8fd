package planner

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/rule"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// TestWorkersDoNotChangeTheRound plays the same reports, write outcomes
// and acknowledgements into planners with 1, 2 and 5 workers, over rules
// of every kind (keyed and not, usage-aware long windows with readings,
// buckets, short windows), with keys appearing, moving and going quiet
// until they retire. Every round's documents, in order, and every view
// must be the same: the rules of a round are independent.
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
	for round := range 60 {
		at = at.Add(time.Second)
		reports := make([]*weirv1.UsageReport, len(dcs))
		for d, dc := range dcs {
			r := &weirv1.UsageReport{Dc: dc, Instance: dc, Sequence: uint64(round + 1), IntervalStartMs: at.UnixMilli() - 1000, IntervalMs: 1000, AppliedRevision: int64(round)}
			for _, spec := range rules {
				ru := &weirv1.RuleUsage{Domain: spec.Domain, RuleId: spec.ID}
				// The demand moves from DC a to b to c, ten rounds each,
				// with noise; keys are heavy for twenty rounds, then quiet.
				hot := round / 10 % len(dcs)
				ru.Offered = uint64(rng.IntN(20))
				if d == hot {
					ru.Offered += uint64(spec.Limit / int64(1+spec.WindowSeconds) * 2)
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
					if d == (hot+k)%len(dcs) {
						offered += uint64(spec.Limit)
					}
					ru.Keys = append(ru.Keys, &weirv1.KeyUsage{Key: fmt.Sprintf("u%d", k), Offered: offered, Admitted: offered / 2, Limit: spec.Limit, Consumed: proto.Int64(int64(offered / 3))})
				}
				r.Rules = append(r.Rules, ru)
			}
			reports[d] = r
		}
		ok := rng.IntN(8) != 0 // some writes fail
		acked := rng.IntN(3) != 0
		var first []Write
		for i, p := range planners {
			for _, r := range reports {
				if err := p.Ingest(proto.Clone(r).(*weirv1.UsageReport), at); err != nil {
					t.Fatal(err)
				}
			}
			p.Tick(at)
			ws := p.Plan(at)
			if i == 0 {
				first = ws
			} else {
				sameWrites(t, round, workers[i], first, ws)
			}
			p.Written(ws, int64(round+1), ok)
			p.Settle()
			if acked {
				for _, dc := range dcs {
					p.SetAck(dc, int64(round+1), at)
				}
			}
		}
		for i, p := range planners[1:] {
			if !reflect.DeepEqual(views(planners[0]), views(p)) || p.entries != planners[0].entries {
				t.Fatalf("round %d: %d workers: the views (%d entries) differ from one worker's (%d)", round, workers[i+1], p.entries, planners[0].entries)
			}
		}
	}
	if planners[0].entries >= 12+6*8 {
		t.Fatalf("%d entries: no key retired, so the test did not play retirement", planners[0].entries)
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
			t.Fatalf("round %d: %d workers: document %d is %s/%s in %s, one worker's %s/%s in %s, or they differ", round, workers, j, g.Domain, g.RuleID, g.DC, w.Domain, w.RuleID, w.DC)
		}
	}
}
