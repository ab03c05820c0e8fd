package planner

import (
	"testing"
	"time"

	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// TestWitnessedRelease follows a release through the planner's calls: a
// lease handed out before the release is no witness of it, even reported
// written after it; a pruned write of a read entry makes WitnessLeases
// hand out its DC's lease, once; written, that lease witnesses the release, and a reading
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
	written := func(ls []Lease) int64 {
		t.Helper()
		w.rev++
		for _, l := range ls {
			p.LeaseWritten(l, w.rev)
		}
		return w.rev
	}
	// The tick's leases, handed out before the release (and reported
	// written after it, below).
	tick := p.Leases(w.now, since(), "test")
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
	ls := p.WitnessLeases(w.now, since(), "test")
	if len(ls) != 1 || ls[0].Doc.GetDc() != "a" {
		t.Fatalf("witness leases %v after a's pruning, want a's", ls)
	}
	if again := p.WitnessLeases(w.now, since(), "test"); len(again) != 0 {
		t.Fatalf("witness leases %v asked twice, want none the second time", again)
	}
	// The tick's leases, written only now, after a later hand-out: they
	// were handed out before the release, so a reading at their revision,
	// within the skew, may have been taken before it.
	late := written(tick)
	reading(late)
	if len(e.carry[a]) == 0 {
		t.Fatalf("a reading within the skew at %d, the revision of a lease handed out before the release, released the carry", late)
	}
	after := written(ls)
	reading(after)
	if n := len(e.carry[a]); n != 0 {
		t.Fatalf("%d carries left after a reading at the witness's revision %d", n, after)
	}

	// A grant handed out before a release and reported written after it
	// is no witness of it either.
	rs.dirty[a] = true // a's document must be written again
	ws := p.Plan(w.now)
	if len(ws) == 0 {
		t.Fatal("Plan wrote nothing for a dirty document")
	}
	prune()
	w.rev++
	p.Written(ws, w.rev, true)
	p.Settle()
	reading(w.rev)
	if len(e.carry[a]) == 0 {
		t.Fatalf("a reading within the skew at %d, the revision of a grant handed out before the release, released the carry", w.rev)
	}

	// A DC past its lease is renewed by the tick alone.
	p.dc[a].expired = true
	prune()
	if ls := p.WitnessLeases(w.now, since(), "test"); len(ls) != 0 {
		t.Errorf("witness leases %v for a DC past its lease", ls)
	}
}
