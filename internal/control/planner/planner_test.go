package planner

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/rule"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

var simDCs = []string{"a", "b", "c"}

func simRule() rule.Rule {
	return rule.Rule{Domain: "api", ID: "r", Limit: 1000, WindowSeconds: 1, Scope: rule.ScopeGlobal, Enabled: true}
}

// sim plays limiters around a Planner: documents reach each DC after a
// random delay (in order, as an etcd watch delivers them), and each DC
// acknowledges what it applied. It checks after every event that the shares
// in force sum to at most 1.
type sim struct {
	t      *testing.T
	p      *Planner
	rng    *rand.Rand
	now    time.Time
	rev    int64
	seq    map[string]uint64
	inbox  map[string][]delivery
	force  map[string]map[string]int64 // DC → entry key ("" rule) → local limit in force
	maxLag time.Duration
	lost   float64 // fraction of reports lost
	dup    float64 // fraction of reports duplicated
	// reportLag delays every report's delivery (Kafka behind); lagged
	// holds those not yet delivered, oldest first.
	reportLag time.Duration
	lagged    []laggedReport
	// parts splits DC a's counts over several instances (a-1, a-2…), each
	// reporting its part partLag later than the lag; nil: one instance.
	parts   []float64
	partLag []time.Duration
	// jitter, if set, adds to the lag of DC d's report numbered seq.
	jitter func(d string, seq uint64) time.Duration
	worst  int64 // the largest sum of local limits in force seen
	// etcd: the latest document written per DC, and its revision.
	docs map[string]delivery
	// cut DCs hear nothing (no documents, no leases) and are not heard.
	cut        map[string]bool
	leaseUntil map[string]time.Time
	acked      map[string]int64
	r          rule.Rule // the one rule planned
	// lagging, if set (setLagging), gives every DC a second instance
	// sharing its store, to which each document and lease comes lagging
	// after the first: the DC acknowledges the lesser of their revisions,
	// and the second admits under the limits it had until it catches up.
	lagging time.Duration
	second  map[string]*follower
}

// follower is a DC's second instance (sim.lagging): what it has applied.
type follower struct {
	inbox []delivery
	force map[string]int64
	acked int64
}

type laggedReport struct {
	at time.Time
	r  *weirv1.UsageReport
}

type delivery struct {
	at  time.Time
	rev int64
	doc *weirv1.RuleAssignment
}

func newSim(t *testing.T, maxLag time.Duration) *sim {
	return newSimRule(t, maxLag, simRule())
}

// newSimRule returns a sim planning r instead of simRule().
func newSimRule(t *testing.T, maxLag time.Duration, r rule.Rule, opts ...func(*Config)) *sim {
	cfg := Config{DCs: simDCs, Interval: time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.SetRules([]rule.Rule{r})
	s := &sim{t: t, p: p, rng: rand.New(rand.NewPCG(7, 9)), now: time.UnixMilli(1_700_000_000_000),
		seq: map[string]uint64{}, inbox: map[string][]delivery{}, force: map[string]map[string]int64{}, maxLag: maxLag,
		docs: map[string]delivery{}, cut: map[string]bool{}, leaseUntil: map[string]time.Time{}, acked: map[string]int64{}, r: r}
	for _, d := range simDCs {
		s.force[d] = map[string]int64{"": r.StaticLimit(d, simDCs, r.Limit)}
	}
	p.Load(s.now, nil, nil, nil)
	return s
}

// local returns the local limit DC d enforces for key: its own, or the
// rule's; past its lease, no more than its static limit. With a second
// instance, the larger of the two.
func (s *sim) local(d, key string) int64 {
	v := s.localOf(d, key, 0)
	if s.lagging > 0 {
		v = max(v, s.localOf(d, key, 1))
	}
	return v
}

// localOf is local for instance i of DC d: 0 the first, 1 the second.
func (s *sim) localOf(d, key string, i int) int64 {
	force := s.force[d]
	if i == 1 {
		force = s.second[d].force
	}
	v, ok := force[key]
	if !ok {
		v = force[""]
	}
	if until, ok := s.leaseUntil[d]; ok && !s.now.Before(until) {
		v = min(v, s.r.StaticLimit(d, simDCs, s.r.Limit))
	}
	return v
}

// setLagging gives every DC a second instance that applies each write lag
// after the first does.
func (s *sim) setLagging(lag time.Duration) {
	s.lagging, s.second = lag, map[string]*follower{}
	for _, d := range simDCs {
		s.second[d] = &follower{force: maps.Clone(s.force[d]), acked: s.acked[d]}
	}
}

// appliedBy returns the revision instance i of DC d has applied.
func (s *sim) appliedBy(d string, i int) int64 {
	if i == 1 {
		return s.second[d].acked
	}
	return s.acked[d]
}

// share returns DC d's local limit for key as a fraction of the limit.
func (s *sim) share(d, key string) float64 {
	return float64(s.local(d, key)) / float64(s.r.Limit)
}

// check fails the test unless the local limits in force of every entry
// sum to at most the limit, in integers.
func (s *sim) check(keys []string) {
	for _, k := range append([]string{""}, keys...) {
		sum := int64(0)
		for _, d := range simDCs {
			sum += s.local(d, k)
		}
		s.worst = max(s.worst, sum)
		if limit := s.r.Limit; sum > limit {
			s.t.Fatalf("at %v: local limits in force for %q sum to %d > %d: %v", s.now, k, sum, limit, s.force)
		}
	}
}

// report sends each DC's offered counts for the interval that just ended.
func (s *sim) report(offered map[string]map[string]uint64) {
	start := s.now.Add(-time.Second).UnixMilli() / 1000 * 1000
	for _, d := range simDCs {
		if s.rng.Float64() < s.lost || s.cut[d] {
			continue
		}
		s.seq[d]++
		ru := &weirv1.RuleUsage{Domain: "api", RuleId: "r"}
		for k, n := range offered[d] {
			if k == "" {
				ru.Offered, ru.Admitted = n, n
				continue
			}
			ru.Keys = append(ru.Keys, &weirv1.KeyUsage{Key: k, Offered: n, Admitted: n, Limit: 1000})
		}
		lag := s.reportLag
		if s.jitter != nil {
			lag += s.jitter(d, s.seq[d])
		}
		if d == "a" && s.parts != nil {
			for i, part := range s.parts {
				pr := &weirv1.RuleUsage{Domain: "api", RuleId: "r", Offered: uint64(float64(ru.Offered) * part)}
				pr.Admitted = pr.Offered
				r := &weirv1.UsageReport{Dc: d, Instance: fmt.Sprintf("a-%d", i+1), Sequence: s.seq[d], IntervalStartMs: start, IntervalMs: 1000, Rules: []*weirv1.RuleUsage{pr}}
				s.lagged = append(s.lagged, laggedReport{at: s.now.Add(lag + s.partLag[i]), r: r})
			}
			continue
		}
		r := &weirv1.UsageReport{Dc: d, Instance: d + "-1", Sequence: s.seq[d], IntervalStartMs: start, IntervalMs: 1000, Rules: []*weirv1.RuleUsage{ru}}
		for range 1 + boolInt(s.rng.Float64() < s.dup) {
			s.lagged = append(s.lagged, laggedReport{at: s.now.Add(lag), r: r})
		}
	}
	s.deliverReports()
}

// deliverReports ingests the reports due by now.
func (s *sim) deliverReports() {
	slices.SortStableFunc(s.lagged, func(a, b laggedReport) int { return a.at.Compare(b.at) })
	for len(s.lagged) > 0 && !s.lagged[0].at.After(s.now) {
		if err := s.p.Ingest(s.lagged[0].r, s.now); err != nil {
			s.t.Fatalf("ingest: %v", err)
		}
		s.lagged = s.lagged[1:]
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// plan writes what the planner asks, to arrive later.
func (s *sim) plan() {
	ws := s.p.Plan(s.now)
	if len(ws) > 0 {
		s.rev++
		for _, w := range ws {
			s.send(w.DC, delivery{rev: s.rev, doc: w.Doc})
			s.docs[w.DC] = delivery{rev: s.rev, doc: w.Doc}
		}
		s.p.Written(ws, s.rev, true)
	}
	s.p.Settle()
	s.writeLeases(s.p.WitnessLeases(s.now, s.now.Add(-3*time.Second), "test"))
}

// writeLeases writes leases the planner handed out as the coordinator
// does: in force at once, and at one revision that reaches each DC as its
// documents do; a DC acknowledges it once applied.
func (s *sim) writeLeases(ls []Lease) {
	if len(ls) == 0 {
		return
	}
	s.rev++
	for _, l := range ls {
		d := l.Doc.GetDc()
		s.p.LeaseWritten(l, s.rev)
		if !s.cut[d] {
			s.leaseUntil[d] = time.UnixMilli(l.Doc.GetValidUntilMs())
		}
		s.send(d, delivery{rev: s.rev})
	}
}

// send queues a write to DC d's documents, to arrive within maxLag and
// after those before it.
func (s *sim) send(d string, w delivery) {
	q := s.inbox[d]
	w.at = s.now.Add(time.Duration(s.rng.Int64N(int64(s.maxLag) + 1)))
	if n := len(q); n > 0 && q[n-1].at.After(w.at) {
		w.at = q[n-1].at
	}
	s.inbox[d] = append(q, w)
	if s.lagging > 0 {
		f := s.second[d]
		w.at = w.at.Add(s.lagging)
		if n := len(f.inbox); n > 0 && f.inbox[n-1].at.After(w.at) {
			w.at = f.inbox[n-1].at
		}
		f.inbox = append(f.inbox, w)
	}
}

// ack tells the planner what every instance of DC d has applied.
func (s *sim) ack(d string) {
	rev := s.acked[d]
	if s.lagging > 0 {
		rev = min(rev, s.second[d].acked)
	}
	s.p.SetAck(d, rev, s.now)
}

// applied returns the limits doc sets.
func (s *sim) applied(doc *weirv1.RuleAssignment) map[string]int64 {
	limit := s.r.Limit
	f := map[string]int64{"": rule.LocalLimit(doc.GetLimit(), doc.GetGlobalLimit(), doc.GetShare(), limit)}
	for _, k := range doc.GetKeys() {
		f[k.GetKey()] = rule.LocalLimit(k.GetLimit(), k.GetGlobalLimit(), k.GetShare(), limit)
	}
	return f
}

// deliver applies the documents due by now, DC by DC, checking after each.
func (s *sim) deliver(keys []string) {
	for _, d := range simDCs {
		q := s.inbox[d]
		for len(q) > 0 && !q[0].at.After(s.now) && !s.cut[d] {
			if q[0].doc != nil { // else a lease: no assignment changes
				s.force[d] = s.applied(q[0].doc)
			}
			s.acked[d] = q[0].rev
			s.ack(d)
			q = q[1:]
			s.check(keys)
		}
		s.inbox[d] = q
		if s.lagging == 0 {
			continue
		}
		f := s.second[d]
		for len(f.inbox) > 0 && !f.inbox[0].at.After(s.now) && !s.cut[d] {
			if f.inbox[0].doc != nil {
				f.force = s.applied(f.inbox[0].doc)
			}
			f.acked = f.inbox[0].rev
			s.ack(d)
			f.inbox = f.inbox[1:]
			s.check(keys)
		}
	}
}

// run plays demand(second) for n seconds in steps of 100 ms.
func (s *sim) run(n int, keys []string, demand func(sec int) map[string]map[string]uint64) {
	for sec := range n {
		for step := range 10 {
			s.now = s.now.Add(100 * time.Millisecond)
			s.deliverReports()
			if step == 4 {
				s.report(demand(sec))
				s.p.Tick(s.now)
				s.writeLeases(s.p.Leases(s.now, s.now.Add(-3*time.Second), "test"))
			}
			s.deliver(keys)
			s.check(keys)
			s.plan()
		}
	}
}

func TestPlannerTwoPhaseSafety(t *testing.T) {
	// Uneven watch delays up to lag; each phase lasts secs seconds.
	for _, tc := range []struct {
		lag  time.Duration
		secs int
	}{{0, 15}, {300 * time.Millisecond, 15}, {2500 * time.Millisecond, 30}} {
		t.Run(tc.lag.String(), func(t *testing.T) {
			s := newSim(t, tc.lag)
			s.lost, s.dup = 0.2, 0.2
			s.run(tc.secs, nil, phase(900, 50, 50))
			s.run(tc.secs, nil, phase(50, 900, 50))
			s.run(tc.secs, nil, phase(50, 50, 900))
			if s.worst > simRule().Limit {
				t.Fatalf("worst sum %v", s.worst)
			}
			// Demand 50/50/900 of 1000: c gets nearly all of it.
			if got := s.share("c", ""); got < 0.85 {
				t.Errorf("c's share in force = %v, want ≥ 0.85 (force %v)", got, s.force)
			}
			t.Logf("worst sum of local limits in force %d; final %v", s.worst, s.force)
		})
	}
}

func TestPlannerHotKeyInOneDC(t *testing.T) {
	s := newSim(t, 200*time.Millisecond)
	keys := []string{"user-1"}
	s.run(12, keys, func(int) map[string]map[string]uint64 {
		return map[string]map[string]uint64{"a": {"": 100}, "b": {"": 100}, "c": {"": 1200, "user-1": 1100}}
	})
	if got := s.share("c", "user-1"); got < 0.95 {
		t.Errorf("c's share of user-1 = %v, want ≥ 0.95 (force %v)", got, s.force)
	}
	if s.share("a", "user-1")+s.share("b", "user-1") > 0.05 {
		t.Errorf("a and b keep %v of user-1", s.share("a", "user-1")+s.share("b", "user-1"))
	}
}

func TestPlannerRefusesHostileReports(t *testing.T) {
	p, err := New(Config{DCs: simDCs})
	if err != nil {
		t.Fatal(err)
	}
	p.SetRules([]rule.Rule{simRule()})
	now := time.UnixMilli(1_700_000_000_000)
	ok := func() *weirv1.UsageReport {
		return &weirv1.UsageReport{Dc: "a", Instance: "i", Sequence: 1, IntervalStartMs: now.UnixMilli() - 1000, IntervalMs: 1000}
	}
	tests := []struct {
		name   string
		mutate func(r *weirv1.UsageReport)
	}{
		{"unknown DC", func(r *weirv1.UsageReport) { r.Dc = "zz" }},
		{"no instance", func(r *weirv1.UsageReport) { r.Instance = "" }},
		{"sequence 0", func(r *weirv1.UsageReport) { r.Sequence = 0 }},
		{"interval 0", func(r *weirv1.UsageReport) { r.IntervalMs = 0 }},
		{"interval in the future", func(r *weirv1.UsageReport) { r.IntervalStartMs = now.Add(time.Hour).UnixMilli() }},
		// Before the first Tick (a new leader), a negative interval index
		// indexed the rings out of range: the coordinator crashed.
		{"interval before 1970", func(r *weirv1.UsageReport) { r.IntervalStartMs = -5000 }},
		// Readings said to be taken past their interval would release
		// carried writes early and overtake the readings to come.
		{"readings past their interval", func(r *weirv1.UsageReport) { r.ReadingsOnly, r.IntervalMs = true, 1001 }},
	}
	for _, tt := range tests {
		r := ok()
		tt.mutate(r)
		if err := p.Ingest(r, now); !errors.Is(err, ErrReport) {
			t.Errorf("%s: Ingest = %v, want ErrReport", tt.name, err)
		}
	}
	// Absurd counts inside a good report are skipped, not fatal.
	r := ok()
	r.Rules = []*weirv1.RuleUsage{
		{Domain: "api", RuleId: "r", Offered: 1, Admitted: 5},
		{Domain: "api", RuleId: "r", Offered: math.MaxUint64},
		{Domain: "api", RuleId: "nope", Offered: 1},
		{Domain: "api", RuleId: "r", Offered: 10, Keys: []*weirv1.KeyUsage{{Key: "", Offered: 1, Limit: 1}, {Key: "k", Offered: 1, Limit: -1}}},
	}
	if err := p.Ingest(r, now); err != nil {
		t.Fatalf("Ingest = %v", err)
	}
	st := p.Stats()
	if st.Refused != uint64(len(tests))+4 || st.UnknownRules != 1 {
		t.Errorf("stats %+v: want %d refused, 1 unknown rule", st, len(tests)+4)
	}
	if err := p.Ingest(r, now); err != nil || p.Stats().Duplicates != 1 {
		t.Errorf("duplicate: err %v, stats %+v", err, p.Stats())
	}
}

func phase(a, b, c uint64) func(int) map[string]map[string]uint64 {
	return func(int) map[string]map[string]uint64 {
		return map[string]map[string]uint64{"a": {"": a}, "b": {"": b}, "c": {"": c}}
	}
}

// A new leader starts from the documents in etcd and the DCs'
// acknowledgements, and stays safe while it learns the demand.
func TestPlannerTakeover(t *testing.T) {
	s := newSim(t, time.Second)
	s.run(10, nil, phase(900, 50, 50))
	p2, err := New(Config{DCs: simDCs, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p2.SetRules([]rule.Rule{simRule()})
	var docs []*weirv1.RuleAssignment
	var revs []int64
	for _, d := range simDCs {
		if w, ok := s.docs[d]; ok {
			docs, revs = append(docs, w.doc), append(revs, w.rev)
		}
	}
	p2.Load(s.now, docs, revs, nil)
	for d, rev := range s.acked {
		p2.SetAck(d, rev, s.now)
	}
	s.p = p2
	s.run(15, nil, phase(50, 50, 900))
	if got := s.share("c", ""); got < 0.85 {
		t.Errorf("after takeover, c's share = %v, want ≥ 0.85 (force %v)", got, s.force)
	}
}

// A DC cut off keeps its last share until its lease runs out, then at most
// its static share; the others grow into the rest only then.
func TestPlannerPartition(t *testing.T) {
	s := newSim(t, 200*time.Millisecond)
	s.run(10, nil, phase(50, 50, 900))
	before := s.share("c", "")
	s.cut["c"] = true
	s.run(4, nil, phase(900, 900, 900))
	if got := s.share("a", "") + s.share("b", ""); got > 1-before+1e-9 {
		t.Errorf("a and b grew to %v while c's lease (share %v) was in force", got, before)
	}
	s.run(15, nil, phase(900, 900, 900))
	static := 1.0 / 3
	if got := s.share("a", "") + s.share("b", ""); got < 1-static-0.02 {
		t.Errorf("after c's lease ran out, a and b hold %v, want ≈ %v", got, 1-static)
	}
	// c comes back: it is renewed once it fits, and the shares rebalance.
	delete(s.cut, "c")
	s.run(15, nil, phase(50, 50, 900))
	if got := s.share("c", ""); got < 0.85 {
		t.Errorf("c back: share %v, want ≥ 0.85 (force %v)", got, s.force)
	}
}

// Quota a DC released is reusable only once the release has been in force
// for the rule's memory: until then the DC may have admitted up to its old
// limit within it — the window, two for the sliding window counter, whose
// previous window still weighs, a full bucket's drain. (The quarantine was
// the window: a sliding window counter reached weighted counts of 602 of
// 601 summed over DCs, TestLongWindowPropertyReplays' seed 472.)
func TestPlannerQuarantine(t *testing.T) {
	for _, tc := range []struct {
		alg    algorithm.Algorithm
		burst  int64
		memory time.Duration
	}{
		{algorithm.SlidingWindowLog, 0, 3 * time.Second},
		{algorithm.FixedWindow, 0, 3 * time.Second},
		{algorithm.SlidingWindowCounter, 0, 6 * time.Second},
		{algorithm.TokenBucket, 2000, 6 * time.Second}, // 2,000 drained at 1,000 per 3 s
	} {
		t.Run(tc.alg.String(), func(t *testing.T) {
			p, err := New(Config{DCs: simDCs, Interval: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			r := simRule()
			r.WindowSeconds, r.Algorithm, r.Burst = 3, tc.alg, tc.burst
			p.SetRules([]rule.Rule{r})
			t0 := time.UnixMilli(1_700_000_000_000)
			docs := []*weirv1.RuleAssignment{
				{Dc: "a", Domain: "api", RuleId: "r", Share: 0.9}, {Dc: "b", Domain: "api", RuleId: "r", Share: 0.05}, {Dc: "c", Domain: "api", RuleId: "r", Share: 0.05},
			}
			p.Load(t0, docs, []int64{1, 1, 1}, nil)
			for _, d := range simDCs {
				p.SetAck(d, 1, t0.Add(-time.Hour))
			}
			e := p.rules[ruleRef{"api", "r"}].entry
			copy(e.target, []int64{50, 50, 900})
			plan := func(at time.Time) map[string]float64 {
				ws := p.Plan(at)
				got := map[string]float64{}
				for _, w := range ws {
					got[w.DC] = w.Doc.GetShare()
				}
				p.Written(ws, 2, true)
				p.Settle()
				return got
			}
			if got := plan(t0); got["a"] != 0.05 || got["c"] != 0 {
				t.Fatalf("first round wrote %v: want a shrunk to 0.05 and c untouched", got)
			}
			released := t0.Add(100 * time.Millisecond)
			p.SetAck("a", 2, released)
			if got := plan(released.Add(tc.memory - 100*time.Millisecond)); got["c"] != 0 {
				t.Fatalf("c grew to %v %v after a's release (memory %v)", got["c"], tc.memory-100*time.Millisecond, tc.memory)
			}
			if got := plan(released.Add(tc.memory + 100*time.Millisecond)); got["c"] < 0.89 {
				t.Fatalf("%v after a's release c's write is %v, want 0.9", tc.memory+100*time.Millisecond, got)
			}
		})
	}
}

func TestPlannerRuleStats(t *testing.T) {
	p, err := New(Config{DCs: simDCs, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p.SetRules([]rule.Rule{simRule()})
	now := time.UnixMilli(1_700_000_000_000)
	p.Load(now, nil, nil, nil)
	if _, ok := p.RuleStats("api", "r", 10); ok {
		t.Fatal("stats before any report")
	}
	seq := uint64(0)
	for i := range 3 {
		at := now.Add(time.Duration(i) * time.Second)
		for _, dc := range []string{"a", "b"} {
			seq++
			r := &weirv1.UsageReport{Dc: dc, Instance: dc, Sequence: seq, IntervalStartMs: at.UnixMilli() - 1000, IntervalMs: 1000,
				Rules: []*weirv1.RuleUsage{{Domain: "api", RuleId: "r", Offered: 100, Admitted: 90, Rejected: 10,
					Keys: []*weirv1.KeyUsage{{Key: "hot", Offered: 50, Rejected: 10, Limit: 100}, {Key: "warm-" + dc, Offered: 20, Limit: 100}}}}}
			if err := p.Ingest(r, at); err != nil {
				t.Fatal(err)
			}
		}
		p.Tick(at)
	}
	st, ok := p.RuleStats("api", "r", 2)
	if !ok {
		t.Fatal("no stats")
	}
	if got := st.DCs["a"]; got != (DCStats{Offered: 300, Admitted: 270, Rejected: 30}) {
		t.Errorf("a: %+v", got)
	}
	if len(st.HotKeys) != 2 || st.HotKeys[0].Key != "hot" || st.HotKeys[0].Requests < 250 || st.HotKeys[0].Rejections < 50 {
		t.Errorf("hot keys %+v: want hot first with ≈300 requests, 60 rejections, and 2 keys at most", st.HotKeys)
	}
}

// When no DC's report arrives — Kafka is down, not everyone's demand — the
// estimates hold: the shares neither drift toward the DC that happened to
// have most demand nor shrink, and nothing moves when reports return.
func TestPlannerBlindIntervals(t *testing.T) {
	s := newSim(t, 100*time.Millisecond)
	s.run(12, nil, phase(900, 300, 300))
	before := map[string]float64{}
	for _, d := range simDCs {
		before[d] = s.share(d, "")
	}
	s.lost = 1
	s.run(4, nil, phase(900, 300, 300))
	if got := s.p.Stats().BlindIntervals; got < 3 {
		t.Errorf("BlindIntervals = %d after 4 s without reports, want ≥ 3", got)
	}
	for _, d := range simDCs {
		if got := s.share(d, ""); math.Abs(got-before[d]) > 0.01 {
			t.Errorf("without reports, %s's share moved from %.3f to %.3f", d, before[d], got)
		}
	}
	s.lost = 0
	s.run(6, nil, phase(900, 300, 300))
	for _, d := range simDCs {
		if got := s.share(d, ""); math.Abs(got-before[d]) > 0.01 {
			t.Errorf("reports back: %s's share moved from %.3f to %.3f", d, before[d], got)
		}
	}
}

// laggingSim returns a sim whose every report is lag late, after 15 s of
// demand: long enough for the estimates to settle on late reports.
func laggingSim(t *testing.T, lag time.Duration, demand func(int) map[string]map[string]uint64) *sim {
	s := newSim(t, 100*time.Millisecond)
	s.reportLag = lag
	s.run(15, nil, demand)
	return s
}

// Reports that all come late — Kafka lagging by more than the planner's
// grace — still move the shares, a few intervals behind the demand,
// instead of leaving every interval blind and the shares frozen.
func TestPlannerLaggingReports(t *testing.T) {
	for _, lag := range []time.Duration{1500 * time.Millisecond, 3 * time.Second} {
		t.Run(lag.String(), func(t *testing.T) {
			s := laggingSim(t, lag, phase(900, 300, 300))
			for d, want := range map[string]float64{"a": 0.4, "b": 0.3, "c": 0.3} {
				if got := s.share(d, ""); math.Abs(got-want) > 0.03 {
					t.Errorf("after 15 s, %s's share = %.3f, want %.2f ± 0.03", d, got, want)
				}
			}
			// Only the intervals before the first report came were blind.
			blind := s.p.Stats().BlindIntervals
			if max := int64(lag/time.Second) + 2; int64(blind) > max {
				t.Errorf("BlindIntervals = %d after 15 s, want at most %d (before the first report)", blind, max)
			}
			// The demand moves; it is followed within 3 intervals, the lag,
			// and an interval for the late reports to gather (lateSettle).
			s.run(4+int(lag.Seconds()+0.999), nil, phase(300, 900, 300))
			for d, want := range map[string]float64{"a": 0.3, "b": 0.4, "c": 0.3} {
				if got := s.share(d, ""); math.Abs(got-want) > 0.05 {
					t.Errorf("after the move, %s's share = %.3f, want %.2f ± 0.05", d, got, want)
				}
			}
			st := s.p.Stats()
			if st.LateReports == 0 {
				t.Errorf("LateReports = 0 with every report %v late", lag)
			}
			if st.BlindIntervals != blind {
				t.Errorf("BlindIntervals went from %d to %d with reports flowing late", blind, st.BlindIntervals)
			}
		})
	}
}

// A DC of several instances whose late reports come at different times —
// one just before a planning round, one just after, one idle — is counted
// whole: its late reports gather for lateSettle before they stand in for
// it, so an interval is not judged on the first instance to arrive.
func TestPlannerLaggingInstances(t *testing.T) {
	tests := []struct {
		name string
		// per instance of DC a: its part of a's demand, and its extra lag
		parts []float64
		extra []time.Duration
	}{
		{"two halves, one 100 ms behind the other", []float64{0.5, 0.5}, []time.Duration{0, 100 * time.Millisecond}},
		{"an idle instance first, the busy one 200 ms later", []float64{0, 1}, []time.Duration{0, 200 * time.Millisecond}},
		{"three parts over 200 ms", []float64{0.2, 0.3, 0.5}, []time.Duration{200 * time.Millisecond, 0, 100 * time.Millisecond}},
	}
	for _, tt := range tests {
		for _, lag := range []time.Duration{1400 * time.Millisecond, 1500 * time.Millisecond, 1900 * time.Millisecond} {
			t.Run(fmt.Sprintf("%s/%v", tt.name, lag), func(t *testing.T) {
				s := newSim(t, 100*time.Millisecond)
				s.reportLag = lag
				s.parts, s.partLag = tt.parts, tt.extra
				s.run(20, nil, phase(900, 300, 300))
				for d, want := range map[string]float64{"a": 0.4, "b": 0.3, "c": 0.3} {
					if got := s.share(d, ""); math.Abs(got-want) > 0.03 {
						t.Errorf("%s's share = %.3f, want %.2f ± 0.03", d, got, want)
					}
				}
			})
		}
	}
}

// A DC whose late reports sometimes miss a planning round (Kafka's lag
// jitters) is lagging, not missing: its estimate holds through the round
// without a report instead of decaying, and its share — below the fair
// level, so following its demand — stays.
func TestPlannerJitteryLateReports(t *testing.T) {
	s := laggingSim(t, 1500*time.Millisecond, phase(300, 900, 900))
	before := s.share("a", "")
	// Every third report of DC a comes a second later than the others,
	// so that some rounds find no new late report of a (while b and c's
	// come: the round is not blind).
	s.jitter = func(d string, seq uint64) time.Duration {
		if d == "a" && seq%3 == 0 {
			return time.Second
		}
		return 0
	}
	s.run(15, nil, phase(300, 900, 900))
	if got := s.share("a", ""); math.Abs(got-before) > 0.02 {
		t.Errorf("with jittery lag, a's share moved from %.3f to %.3f", before, got)
	}
}

// A straggler — a late report of an interval older than one the
// estimates have already seen — is counted, not fed to them: with every
// report lagging, it must neither stand in for the DC's newer late report
// nor read as a DC without demand.
func TestPlannerStaleLateReportIgnored(t *testing.T) {
	s := laggingSim(t, 1500*time.Millisecond, phase(900, 300, 300))
	before := s.share("a", "")
	for i := range 3 {
		late := s.p.Stats().LateReports
		start := s.now.Add(-6*time.Second).UnixMilli() / 1000 * 1000
		r := &weirv1.UsageReport{Dc: "a", Instance: "a-straggler", Sequence: uint64(i + 1), IntervalStartMs: start, IntervalMs: 1000,
			Rules: []*weirv1.RuleUsage{{Domain: "api", RuleId: "r", Offered: 1, Admitted: 1}}}
		if err := s.p.Ingest(r, s.now); err != nil {
			t.Fatal(err)
		}
		if got := s.p.Stats().LateReports; got != late+1 {
			t.Errorf("LateReports = %d, want %d", got, late+1)
		}
		s.run(1, nil, phase(900, 300, 300))
	}
	if got := s.share("a", ""); math.Abs(got-before) > 0.01 {
		t.Errorf("stale reports moved a's share from %.3f to %.3f", before, got)
	}
}

// A DC that falls silent while every report lags is missing once its last
// late report has been used: its estimate decays as a silent DC's does,
// and that report does not stand in for it again and again.
func TestPlannerSilentAfterLateReports(t *testing.T) {
	s := laggingSim(t, 1500*time.Millisecond, phase(300, 300, 900))
	c := s.p.rules[ruleRef{"api", "r"}].entry
	before := c.est[2].Estimate()
	s.cut["c"] = true
	s.run(10, nil, phase(300, 300, 900))
	if got := c.est[2].Estimate(); got > before*0.7 {
		t.Errorf("c silent for 10 s: its estimate went from %.3f to %.3f, want it decaying", before, got)
	}
}

// Randomly lost reports leave the estimates unbiased: a DC heard an
// interval or two ago is unseen, not idle, for the one it missed, so the
// shares of DCs below their fair level do not shrink under loss.
func TestPlannerLostReportsUnbiased(t *testing.T) {
	s := newSim(t, 100*time.Millisecond)
	s.lost = 0.3
	s.run(40, nil, phase(900, 300, 300))
	for d, want := range map[string]float64{"a": 0.4, "b": 0.3, "c": 0.3} {
		if got := s.share(d, ""); math.Abs(got-want) > 0.03 {
			t.Errorf("with 30%% of reports lost, %s's share = %.3f, want %.2f ± 0.03", d, got, want)
		}
	}
}

// A run of four lost reports holds a DC's estimate (lostGrace): with a
// fifth of the reports lost, runs of three come about once a minute
// among three DCs. A longer silence decays it.
func TestPlannerLostRunHolds(t *testing.T) {
	for _, tc := range []struct {
		silent int
		decays bool
	}{{4, false}, {7, true}} {
		s := newSim(t, 100*time.Millisecond)
		s.run(30, nil, phase(300, 300, 900))
		c := s.p.rules[ruleRef{"api", "r"}].entry
		before := c.est[2].Estimate()
		s.cut["c"] = true
		s.run(tc.silent, nil, phase(300, 300, 900))
		after := c.est[2].Estimate()
		if decayed := after < before*0.95; decayed != tc.decays {
			t.Errorf("c silent for %d intervals: estimate %.3f → %.3f, want decayed = %v", tc.silent, before, after, tc.decays)
		}
	}
}

// After a blind spell — the broker down, every report lost — the DCs'
// writers reconnect one by one: a DC whose reports resume an interval or
// two after the others' is unseen, not missing, and its estimate holds.
// (Its estimate used to decay, and once its reports resumed the gap was
// under the estimator's step threshold: the DC stayed underserved while
// the slow mean climbed back, and the DC taking the rest of the limit
// changed direction when it was corrected: broker-outage's oscillation.)
func TestPlannerBlindThenStaggered(t *testing.T) {
	for _, tc := range []struct {
		silent int // intervals a stays silent after the others are heard again
		held   bool
	}{
		{1, true}, {2, true}, {4, true},
		// Longer than lostGrace intervals in which others are heard: a
		// is missing, and decays.
		{7, false},
	} {
		s := newSim(t, 100*time.Millisecond)
		s.run(30, nil, phase(300, 300, 900))
		c := s.p.rules[ruleRef{"api", "r"}].entry
		before := c.est[0].Estimate()
		s.lost = 1
		s.run(10, nil, phase(300, 300, 900))
		s.lost = 0
		s.cut["a"] = true
		s.run(tc.silent, nil, phase(300, 300, 900))
		if after := c.est[0].Estimate(); (after >= before*0.95) != tc.held {
			t.Errorf("a silent %d intervals after a blind spell: estimate %.3f → %.3f, want held = %v", tc.silent, before, after, tc.held)
		}
	}
}

// Without blind intervals, a silent DC's report counts as lost exactly
// when the DC was heard in one of the lostGrace intervals before: the
// rule that held before blind intervals stopped counting (random heard
// patterns, DC 0 always heard so that no interval is blind).
func TestLostGraceWithoutBlindIntervals(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for run := range 200 {
		p, err := New(Config{DCs: simDCs, Interval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		heardAt := map[[2]int64]bool{}
		silence := 0.2 + 0.7*rng.Float64() // each DC's chance of a silent interval
		for idx := int64(100); idx < 160; idx++ {
			for d := range simDCs {
				if d == 0 || rng.Float64() >= silence {
					p.dc[d].heard[idx%heardLen] = idx
					heardAt[[2]int64{int64(d), idx}] = true
				}
			}
			c := p.prepareClose(idx)
			if c.blind {
				t.Fatalf("run %d, interval %d: blind with DC 0 heard", run, idx)
			}
			for d := range simDCs {
				if heardAt[[2]int64{int64(d), idx}] {
					continue
				}
				want := false
				for i := idx - lostGrace; i < idx; i++ {
					want = want || heardAt[[2]int64{int64(d), i}]
				}
				if c.lost[d] != want {
					t.Fatalf("run %d, interval %d, DC %d: lost %v, want %v (heard in one of the %d before)", run, idx, d, c.lost[d], want, lostGrace)
				}
			}
		}
	}
}
