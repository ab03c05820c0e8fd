package planner

import (
	"math"
	"testing"

	"github.com/weirhq/weir/internal/control/demand"
)

// awareTargets' rule for grants a DC's latest reading has not seen: while
// the entry is congested, a DC with a fresh reading and a live lease keeps
// of them at most what its demand uses in an interval, and no more than
// the largest such grant; nothing otherwise. Two DCs share a limit of
// 1,000 half and half; b read 400 and holds nothing unseen; a read 100 at
// revision 5, and asks 2 (in units of perInterval = 10: 20 an interval).
// What a keeps it counts as holding, so what is free (apportioned half and
// half) shrinks by as much.
func TestAwareTargetsKeepUnseenGrants(t *testing.T) {
	const (
		limit       = 1000
		perInterval = 10.0
		since       = 1000 // readings taken at or before have aged out
	)
	est, err := demand.New(demand.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		writes    []write // a's writes it may not have applied
		congested bool
		expired   bool  // a's lease
		readAt    int64 // when a's reading was taken
		wantA     int64
	}{
		// keep 120 = 100 + 20 (of 300 unseen); free 1000-120-400 = 480
		{"congested, a grant above the reading", []write{{rev: 7, limit: 300}}, true, false, 2000, 120 + 240},
		// the reading has seen revision 5: nothing kept beyond it
		{"a grant the reading has seen", []write{{rev: 5, limit: 300}}, true, false, 2000, 100 + 250},
		// keep 110: at most the largest unseen grant
		{"an unseen grant below reading + use", []write{{rev: 6, limit: 90}, {rev: 7, limit: 110}}, true, false, 2000, 110 + 245},
		// a write of unknown outcome may be in force
		{"a write of unknown outcome", []write{{rev: math.MaxInt64, limit: 300}}, true, false, 2000, 120 + 240},
		{"not congested", []write{{rev: 7, limit: 300}}, false, false, 2000, 100 + 250},
		{"a's lease expired", []write{{rev: 7, limit: 300}}, true, true, 2000, 100 + 250},
		// an aged-out reading keeps nothing: a's target is its half of
		// what b leaves
		{"a's reading aged out", []write{{rev: 7, limit: 300}}, true, false, since, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &entry{
				limit: limit, share: []float64{0.5, 0.5},
				est: make([]demand.State, 2), hist: [][]write{tc.writes, nil},
				used:   []reading{{v: 100, rev: 5, at: tc.readAt, ok: true}, {v: 400, rev: 9, at: 2000, ok: true}},
				carry:  make([][]carried, 2),
				target: make([]int64, 2), grant: []int64{100, 400},
				floor: []int64{-1, -1}, stoppedAt: []int64{-1, -1}, startedAt: []int64{-1, -1}, underservedSince: -1,
			}
			est.Observe(&e.est[0], 1, 2)
			if got := e.est[0].Estimate(); got != 2 {
				t.Fatalf("a's estimate %v after one observation of 2, want 2", got)
			}
			dcs := []dcState{{expired: tc.expired}, {}}
			e.awareTargets(false, since, tc.congested, dcs, perInterval, 10)
			if e.target[0] != tc.wantA {
				t.Errorf("a's target %d, want %d (b's %d)", e.target[0], tc.wantA, e.target[1])
			}
		})
	}
}
