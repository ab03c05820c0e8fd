package planner

import (
	"slices"
	"testing"
	"time"

	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// TestWitnessedRelease follows a release through the planner's calls: a
// pruned write of a read entry makes its DC unwitnessed (once); a lease
// written in a hand-out before the release is no witness of it, one
// written after is; and a reading taken within the skew is released by
// the second, not the first.
func TestWitnessedRelease(t *testing.T) {
	w := newWorld(t, logRule(600, 60), "", 0)
	w.run(5, 10, func(int) map[string]float64 { return map[string]float64{"a": 40} })
	p, rs := w.p, w.p.rules[ruleRef{w.r.Domain, w.r.ID}]
	e := rs.entry
	const a = 0
	if !e.used[a].ok {
		t.Fatal("a has sent no reading")
	}
	if got := p.Unwitnessed(); got != nil {
		t.Fatalf("unwitnessed %v before any release", got)
	}
	lease := func(rev int64) {
		t.Helper()
		ls := p.Leases(w.now, w.now.Add(-3*time.Second), "test")
		i := slices.IndexFunc(ls, func(l *weirv1.AssignmentLease) bool { return l.GetDc() == "a" })
		if i < 0 {
			t.Fatal("no lease for a")
		}
		p.LeaseWritten(ls[i], rev)
	}
	// A lease written before the release, at a revision no document of a
	// has reached yet.
	w.rev++
	before := w.rev
	lease(before)
	// a applies a smaller write and acknowledges it: the larger one it
	// replaces is pruned, and carried until a reading surely younger.
	w.rev++
	e.hist[a] = append(e.hist[a], write{rev: w.rev, limit: 1})
	p.SetAck("a", w.rev, w.now)
	p.held(rs, e, a)
	if len(e.carry[a]) == 0 {
		t.Fatal("nothing carried after the pruning")
	}
	if got := p.Unwitnessed(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("unwitnessed %v after a's pruning, want [a]", got)
	}
	if got := p.Unwitnessed(); got != nil {
		t.Fatalf("unwitnessed %v asked twice, want nothing the second time", got)
	}
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
	// Read within the skew at the pruned-to revision: only the clocks
	// could tell, and they cannot yet.
	reading(w.rev)
	if len(e.carry[a]) == 0 {
		t.Fatal("a reading within the skew released the carry")
	}
	// A lease of the next hand-out witnesses the release.
	w.rev++
	after := w.rev
	lease(after)
	if got := witnessRev(p.dc[a].witnesses, e.carry[a][len(e.carry[a])-1].after); got != after {
		t.Fatalf("witness revision %d, want the lease's %d (lease before the release: %d)", got, after, before)
	}
	reading(after)
	if n := len(e.carry[a]); n != 0 {
		t.Fatalf("%d carries left after a reading at the witness's revision", n)
	}
	if p.dc[a].wanted.Load() != 0 {
		t.Error("a still wants a witness")
	}
}
