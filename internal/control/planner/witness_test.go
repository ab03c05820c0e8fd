package planner

import (
	"testing"
	"time"

	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// TestWitnessedRelease follows a release through the planner's calls: a
// lease written in a hand-out before the release is no witness of it; a
// pruned write of a read entry makes WitnessLeases hand out its DC's
// lease, once; written, that lease witnesses the release, and a reading
// taken within the skew at its revision releases the carry, where one at
// the revision pruned to did not. A DC past its lease gets none.
func TestWitnessedRelease(t *testing.T) {
	w := newWorld(t, logRule(600, 60), "", 0)
	w.run(5, 10, func(int) map[string]float64 { return map[string]float64{"a": 40} })
	p, rs := w.p, w.p.rules[ruleRef{w.r.Domain, w.r.ID}]
	e := rs.entry
	const a = 0
	if !e.used[a].ok {
		t.Fatal("a has sent no reading")
	}
	since := func() time.Time { return w.now.Add(-3 * time.Second) }
	if ls := p.WitnessLeases(w.now, since(), "test"); len(ls) != 0 {
		t.Fatalf("witness leases %v before any release", ls)
	}
	written := func(ls []*weirv1.AssignmentLease) int64 {
		t.Helper()
		w.rev++
		for _, l := range ls {
			p.LeaseWritten(l, w.rev)
		}
		return w.rev
	}
	// The tick's leases, written before the release, at a revision no
	// document of a has reached yet.
	before := written(p.Leases(w.now, since(), "test"))
	// prune has a apply a smaller write and acknowledge it: the larger one
	// it replaces is pruned, and carried until a reading surely younger.
	prune := func() {
		t.Helper()
		w.rev++
		e.hist[a] = append(e.hist[a], write{rev: w.rev, limit: 1})
		p.SetAck("a", w.rev, w.now)
		p.held(rs, e, a)
		if len(e.carry[a]) == 0 {
			t.Fatal("nothing carried after the pruning")
		}
	}
	prune()
	reading := func(rev int64) {
		t.Helper()
		w.seq["a"]++
		consumed := e.used[a].v
		start := w.now.UnixMilli() / 1000 * 1000
		r := &weirv1.UsageReport{Dc: "a", Instance: "a-1", Sequence: w.seq["a"], IntervalStartMs: start,
			IntervalMs: w.now.UnixMilli() - start + 1, AppliedRevision: rev, ReadingsOnly: true,
			Rules: []*weirv1.RuleUsage{{Domain: w.r.Domain, RuleId: w.r.ID, Consumed: &consumed}}}
		if err := p.Ingest(r, w.now); err != nil {
			t.Fatal(err)
		}
		w.now = w.now.Add(time.Millisecond)
	}
	// Read within the skew at the revision pruned to, which is above the
	// lease written before: only the clocks could tell, and not yet.
	reading(w.rev)
	if len(e.carry[a]) == 0 {
		t.Fatalf("a reading within the skew at %d released the carry (lease before the release at %d)", w.rev, before)
	}
	ls := p.WitnessLeases(w.now, since(), "test")
	if len(ls) != 1 || ls[0].GetDc() != "a" {
		t.Fatalf("witness leases %v after a's pruning, want a's", ls)
	}
	if again := p.WitnessLeases(w.now, since(), "test"); len(again) != 0 {
		t.Fatalf("witness leases %v asked twice, want none the second time", again)
	}
	after := written(ls)
	reading(after)
	if n := len(e.carry[a]); n != 0 {
		t.Fatalf("%d carries left after a reading at the witness's revision %d", n, after)
	}

	// A DC past its lease is renewed by the tick alone.
	p.dc[a].expired = true
	prune()
	if ls := p.WitnessLeases(w.now, since(), "test"); len(ls) != 0 {
		t.Errorf("witness leases %v for a DC past its lease", ls)
	}
}
