package planner

import (
	"testing"

	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// TestReadingsBetweenIntervals: a readings-only report (sent between
// interval reports by a DC holding quota while quiet) records its
// readings and nothing else — its counts change no estimate, and it does
// not count as the DC's report of the interval — and a reading that frees
// quota the DC held beyond its limits raises the other DCs' targets at the
// next Plan, by the entry's shares, before any tick. A reading that frees
// nothing queues nothing.
func TestReadingsBetweenIntervals(t *testing.T) {
	w := newWorld(t, logRule(600, 60), "", 0)
	w.run(70, 10, func(int) map[string]float64 { return map[string]float64{"a": 40} })
	w.run(8, 10, func(int) map[string]float64 { return map[string]float64{"b": 40} })
	rs := w.p.rules[ruleRef{w.r.Domain, w.r.ID}]
	e := rs.entry
	const a, b = 0, 1
	if !e.aware || !e.congested || !e.movedAway(a) {
		t.Fatalf("after the move: aware %v, congested %v, a moved away %v; want all", e.aware, e.congested, e.movedAway(a))
	}
	read := e.used[a].v
	if read <= e.grant[a]+100 {
		t.Fatalf("a reads %d with a limit of %d: it should hold far more than its limit", read, e.grant[a])
	}
	idx := w.now.UnixMilli() / 1000
	heard, est := w.p.heard(a, idx), e.est[a].Estimate()
	targets := append([]int64(nil), e.target...)
	// between sends a's reading consumed, taken ms after now.
	between := func(consumed, ms int64) {
		t.Helper()
		w.seq["a"]++
		start := idx * 1000
		r := &weirv1.UsageReport{Dc: "a", Instance: "a-1", Sequence: w.seq["a"], IntervalStartMs: start,
			IntervalMs: w.now.UnixMilli() - start + ms, AppliedRevision: w.acked["a"], ReadingsOnly: true,
			Rules: []*weirv1.RuleUsage{{Domain: w.r.Domain, RuleId: w.r.ID, Offered: 5000, Admitted: 5000, Consumed: &consumed}}}
		if err := w.p.Ingest(r, w.now); err != nil {
			t.Fatal(err)
		}
	}
	between(read+10, 1)
	if w.p.Rereads() {
		t.Error("a reading above the last one asks for a round")
	}
	between(read-100, 2)
	if e.used[a].v != read-100 {
		t.Errorf("a's reading %d, want %d", e.used[a].v, read-100)
	}
	if w.p.heard(a, idx) != heard || e.est[a].Estimate() != est {
		t.Errorf("the readings-only report counted: heard %v → %v, estimate %v → %v", heard, w.p.heard(a, idx), est, e.est[a].Estimate())
	}
	if !w.p.Rereads() {
		t.Fatal("a reading that freed 110 queued nothing")
	}
	ws := w.p.Plan(w.now)
	defer w.p.Settle()
	if w.p.Rereads() {
		t.Error("Plan left the queue")
	}
	// The two readings freed 100 together: the first was 10 higher.
	grown := e.target[b] - targets[b]
	if want := int64(e.share[b] * 100); grown < want-1 || grown > want+1 {
		t.Errorf("b's target grew by %d (%d → %d), want its share %.3f of 100", grown, targets[b], e.target[b], e.share[b])
	}
	for d := range e.target {
		if e.target[d] < targets[d] {
			t.Errorf("DC %d's target fell from %d to %d between ticks", d, targets[d], e.target[d])
		}
	}
	if len(ws) == 0 {
		t.Error("no document written for the quota freed")
	}
}
